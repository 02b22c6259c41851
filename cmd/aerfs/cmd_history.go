package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/snapshot"
)

// The recovery commands (history, diff, scope, pending, snapshot list)
// only read: the evidence log and blobs in the state directory, and the
// workspace for a file's current content. They work with the daemon
// stopped.

type historyOptions struct {
	asJSON bool
}

func newHistoryCommand() *cobra.Command {
	var o historyOptions
	c := &cobra.Command{
		Use:   "history FILE",
		Short: "List the recorded versions of a guarded file",
		Long: `List every recorded version of a guarded file, oldest first: writes,
deletes, renames away, restores, approved writes and drift (changes made
behind aerfs's back). The numbers are what 'aerfs diff --from/--to' and
'aerfs restore FILE --to' take.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := findTarget(false)
			if err != nil {
				return err
			}
			return runHistory(cmd.OutOrStdout(), t, o, args[0])
		},
	}
	c.Flags().BoolVar(&o.asJSON, "json", false, "print a JSON array of versions")
	return c
}

// historyEntry is one line of `aerfs history`.
type historyEntry struct {
	N int `json:"n"`
	snapshot.Version
	Size *int64 `json:"size,omitempty"` // nil: absent, or its blob is missing
	// ContentPruned: aerfs gc removed this version's content (the record
	// stays; the version cannot be restored).
	ContentPruned bool `json:"content_pruned,omitempty"`
}

// fileHistory resolves FILE and reads its versions from the log.
func fileHistory(t *target, file string) (string, []snapshot.Version, error) {
	rel, _, vs, err := fileHistoryIndex(t, file)
	return rel, vs, err
}

func fileHistoryIndex(t *target, file string) (string, *snapshot.Index, []snapshot.Version, error) {
	rel, err := workspaceRel(t, file)
	if err != nil {
		return "", nil, nil, err
	}
	x, err := recoveryIndex(t.stateDir)
	if err != nil {
		return "", nil, nil, err
	}
	return rel, x, x.History(rel), nil
}

func runHistory(out io.Writer, t *target, o historyOptions, file string) error {
	rel, x, vs, err := fileHistoryIndex(t, file)
	if err != nil {
		return err
	}
	entries := make([]historyEntry, len(vs))
	// The index knows the size of what it indexed: the blob is only looked
	// for, not read (two at a time: a stat is a system call each).
	stored := make([]bool, len(vs))
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(vs); i += 2 {
				stored[i] = vs[i].Hash != "" && vs[i].ContentSize >= 0 && evidence.BlobStored(t.stateDir, vs[i].Hash)
			}
		}()
	}
	wg.Wait()
	for i, v := range vs {
		entries[i] = historyEntry{N: i + 1, Version: v}
		if v.Hash != "" {
			if stored[i] {
				n := v.ContentSize
				entries[i].Size = &n
			} else if b, err := evidence.ReadBlob(t.stateDir, v.Hash); err == nil {
				n := int64(len(b))
				entries[i].Size = &n
			} else if x.Pruned(v.Hash) {
				entries[i].ContentPruned = true
			}
		}
	}
	if o.asJSON {
		return writeJSON(out, entries)
	}
	if len(vs) == 0 {
		return fail(exitError, "aerfs keeps versions of guarded files changed while mounted; see 'aerfs log --path "+rel+"'",
			"no recorded versions of %s", rel)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tTIME\tPRINCIPAL\tSESSION\tSIZE\tRECORD\tTYPE")
	for _, e := range entries {
		size := "-"
		if e.Size != nil {
			size = fmt.Sprint(*e.Size)
		} else if e.ContentPruned {
			size = "content pruned"
		} else if e.Hash != "" {
			size = "?" // the blob is gone
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.N, formatWhen(e.Time), line(e.Principal), line(orDash(e.Session)),
			size, shortRecord(e.Record), line(e.Type))
	}
	return tw.Flush()
}

// recoveryIndex reads the log's index (and the records past it) for the
// recovery commands.
func recoveryIndex(stateDir string) (*snapshot.Index, error) {
	syncLog(stateDir)
	x, err := snapshot.Load(stateDir)
	if err != nil {
		return nil, fail(exitError, "check it with: aerfs verify --state "+stateDir,
			"cannot read the evidence log: %v", err)
	}
	warnIndexSetAside(x.Rebuilt())
	return x, nil
}

// workspaceRel turns a FILE argument into a workspace-relative path: an
// absolute path or one relative to a current directory inside the
// workspace is taken as such, anything else as relative to the workspace.
func workspaceRel(t *target, arg string) (string, error) {
	if arg == "" {
		return "", fail(exitUsage, "", "empty file name")
	}
	if r, ok := rootRel(t, arg); ok {
		return r, nil
	}
	p := arg
	if t.workspace != "" {
		cwd, _ := os.Getwd()
		if c, err := absClean(cwd); err == nil {
			cwd = c
		}
		switch {
		case filepath.IsAbs(p):
		case cwd != "" && within(cwd, t.workspace):
			p = filepath.Join(cwd, p)
		default:
			p = filepath.Join(t.workspace, p)
		}
		p = filepath.Clean(p)
		if !within(p, t.workspace) {
			return "", fail(exitUsage, "name a file inside "+t.workspace, "%s is outside the workspace", arg)
		}
		p = strings.TrimPrefix(strings.TrimPrefix(p, t.workspace), "/")
	} else if filepath.IsAbs(p) {
		return "", fail(exitUsage, "pass --workspace DIR, or give the path relative to the workspace",
			"cannot place %s without a workspace", arg)
	}
	p = path.Clean(filepath.ToSlash(p))
	if p == "." || p == ".." || strings.HasPrefix(p, "../") || strings.HasPrefix(p, "/") {
		return "", fail(exitUsage, "name a file inside the workspace", "%s is not a file in the workspace", arg)
	}
	return p, nil
}

// blobOrAbsent returns the content of a version ("" = the file did not
// exist, which reads as empty).
func blobOrAbsent(stateDir, hash string) ([]byte, error) {
	if hash == "" {
		return nil, nil
	}
	b, err := evidence.ReadBlob(stateDir, hash)
	if err != nil {
		return nil, fail(exitError, "the blob store in "+stateDir+" is incomplete; see 'aerfs verify'",
			"content %.12s is not available: %v", hash, err)
	}
	return b, nil
}

// readWorkspaceFile returns a file's content on disk, and false when it
// does not exist.
func readWorkspaceFile(t *target, rel string) ([]byte, bool, error) {
	if t.workspace == "" {
		return nil, false, fail(exitUsage, "pass --workspace DIR", "the current content of %s needs the workspace", rel)
	}
	base, sub := t.workspace, filepath.FromSlash(rel)
	if name, rsub, ok := policy.SplitRootPath(rel); ok {
		for _, r := range policyRoots(t) {
			if r.Name == name {
				base, sub = r.Dir, filepath.FromSlash(rsub)
			}
		}
	}
	b, exists, err := readBeneath(base, sub)
	if err != nil {
		return nil, false, &unreadableError{fail(exitError, "", "cannot read %s: %v", rel, err)}
	}
	return b, exists, nil
}

// unreadableError is a current file that could not be read: a per-item
// state for the commands that list many (pending), an error for the
// others.
type unreadableError struct{ error }

func (e *unreadableError) Unwrap() error { return e.error }

// readBeneath reads the regular file sub beneath the directory base without
// following a symbolic link anywhere in sub (a session can put one in the
// path of a file the owner reviews, to show another file or none) and
// without waiting on a FIFO.
func readBeneath(base, sub string) ([]byte, bool, error) {
	dfd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat2(dfd, sub, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOFOLLOW,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, false, nil
	case errors.Is(err, unix.ELOOP):
		return nil, false, errors.New("a symbolic link in its path (not followed)")
	case err != nil:
		return nil, false, err
	}
	f := os.NewFile(uintptr(fd), sub)
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, false, err
	} else if !fi.Mode().IsRegular() {
		return nil, false, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	b, err := io.ReadAll(f)
	return b, true, err
}

func shortRecord(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func formatWhen(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// lookupErr gives index lookup failures the usage exit code and a hint.
func lookupErr(err error, hint string) error {
	if errors.Is(err, snapshot.ErrNotFound) || errors.Is(err, snapshot.ErrAmbiguous) {
		return fail(exitUsage, hint, "%v", err)
	}
	return err
}
