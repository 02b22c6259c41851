package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/aerfs/aerfs/evidence"
)

// JournalName is the restore journal's file name in the state directory.
const JournalName = "restore.journal"

// journalVersion is the only journal format this package writes and reads.
const journalVersion = 1

// Journal is a restore in progress. The daemon writes it before changing
// the first file, marks each step done once that file is durable, and
// removes it after the restore record is in the log. A journal found at
// start means a restore was interrupted: the daemon finishes it (applies
// the steps not done) or undoes it (applies Undo), then records which.
//
// # Step contract
//
// Applying a step must be idempotent, because a crash can come after the
// file changed and before MarkDone made that durable: applying step s
// means "make s.Path have content s.To" (remove it when To is ""), and a
// file that already has content To (or is already absent for "") is left
// alone. Each file changes atomically (write a temporary file, fsync,
// rename over, fsync the directory), so a file is always wholly From or
// wholly To, never partial. Content To is a stored blob: it was a version.
type Journal struct {
	ID     string `json:"id"`     // names the restore; the daemon's choice
	Reason string `json:"reason"` // what it restores to, for the log and the user
	Steps  []Step `json:"steps"`
	Done   []bool `json:"done"` // Done[i]: Steps[i] is durable
}

type journalFile struct {
	V int `json:"v"`
	Journal
}

// Remaining lists the indexes of steps not done, in order.
func (j *Journal) Remaining() []int {
	var out []int
	for i := range j.Steps {
		if i >= len(j.Done) || !j.Done[i] {
			out = append(out, i)
		}
	}
	return out
}

// Undo lists the steps that return the files to where they were before
// the restore began, last step first. Steps not marked done are included
// too: one may have been applied just before a crash, and applying an
// undo step to a file that was never changed is a no-op by the contract.
func (j *Journal) Undo() []Step {
	out := make([]Step, 0, len(j.Steps))
	for i := len(j.Steps) - 1; i >= 0; i-- {
		s := j.Steps[i]
		out = append(out, Step{Path: s.Path, From: s.To, To: s.From})
	}
	return out
}

func (j *Journal) check() error {
	if len(j.Done) != len(j.Steps) {
		return fmt.Errorf("%d steps but %d done flags", len(j.Steps), len(j.Done))
	}
	seen := map[string]bool{}
	for i, s := range j.Steps {
		if s.Path == "" || path.IsAbs(s.Path) || path.Clean(s.Path) != s.Path || s.Path == ".." ||
			len(s.Path) >= 3 && s.Path[:3] == "../" {
			return fmt.Errorf("step %d: path %q is not a clean workspace-relative path", i, s.Path)
		}
		if seen[s.Path] {
			return fmt.Errorf("step %d: path %q appears twice", i, s.Path)
		}
		seen[s.Path] = true
		for _, h := range []string{s.From, s.To} {
			if h != "" && !evidence.IsHash(h) {
				return fmt.Errorf("step %d: %q is not a lowercase hex SHA-256", i, h)
			}
		}
		if s.From == s.To {
			return fmt.Errorf("step %d: %s changes nothing", i, s.Path)
		}
	}
	return nil
}

// WriteJournal stores j atomically and durably: a temporary file is
// written and synced, renamed over the journal, and the directory synced.
// A crash leaves the old journal or the new one, never a mix.
func WriteJournal(stateDir string, j *Journal) error {
	if j.Done == nil {
		j.Done = make([]bool, len(j.Steps))
	}
	if err := j.check(); err != nil {
		return fmt.Errorf("snapshot: journal: %w", err)
	}
	b, err := json.MarshalIndent(journalFile{V: journalVersion, Journal: *j}, "", "  ")
	if err != nil {
		return fmt.Errorf("snapshot: journal: %w", err)
	}
	b = append(b, '\n')
	tmp, err := os.CreateTemp(stateDir, ".tmp-journal-*")
	if err != nil {
		return fmt.Errorf("snapshot: journal: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := tmp.Write(b); err != nil {
		return fmt.Errorf("snapshot: journal: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("snapshot: journal: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("snapshot: journal: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(stateDir, JournalName)); err != nil {
		return fmt.Errorf("snapshot: journal: %w", err)
	}
	return syncDir(stateDir)
}

// ReadJournal returns the journal in stateDir, or nil and no error when
// there is none. A journal that does not decode strictly (unknown fields,
// trailing data, another format version, steps and flags that disagree)
// is an error naming the file: the daemon must not guess at a restore.
func ReadJournal(stateDir string) (*Journal, error) {
	name := filepath.Join(stateDir, JournalName)
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: journal %s: %w", name, err)
	}
	var jf journalFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&jf); err != nil {
		return nil, fmt.Errorf("snapshot: journal %s is corrupt: %v", name, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("snapshot: journal %s is corrupt: data after the journal", name)
	}
	if jf.V != journalVersion {
		return nil, fmt.Errorf("snapshot: journal %s: unsupported version %d", name, jf.V)
	}
	j := jf.Journal
	if j.Steps == nil || j.Done == nil {
		return nil, fmt.Errorf("snapshot: journal %s is corrupt: steps or done missing", name)
	}
	if err := j.check(); err != nil {
		return nil, fmt.Errorf("snapshot: journal %s is corrupt: %v", name, err)
	}
	return &j, nil
}

// MarkDone records durably that step i is applied.
func (j *Journal) MarkDone(stateDir string, i int) error {
	if i < 0 || i >= len(j.Steps) {
		return fmt.Errorf("snapshot: journal: no step %d", i)
	}
	if j.Done == nil {
		j.Done = make([]bool, len(j.Steps))
	}
	j.Done[i] = true
	return WriteJournal(stateDir, j)
}

// RemoveJournal deletes the journal durably. No journal is not an error.
func RemoveJournal(stateDir string) error {
	err := os.Remove(filepath.Join(stateDir, JournalName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("snapshot: journal: %w", err)
	}
	return syncDir(stateDir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("snapshot: journal: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("snapshot: journal: %w", err)
	}
	return nil
}
