package fs

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// testMonitor builds a monitor over a real backing directory and a real
// evidence log, without mounting: the first tier of FUSE tests calls the
// monitor directly.
func testMonitor(t *testing.T, files map[string]string) (*Monitor, string, *evidence.Log) {
	t.Helper()
	ws, state := t.TempDir(), t.TempDir()
	for rel, c := range files {
		p := filepath.Join(ws, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(c), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	if err := evidence.Init(state, "aerfs/test"); err != nil {
		t.Fatal(err)
	}
	log, err := evidence.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	labels, err := OpenLabels(filepath.Join(state, "labels.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { labels.Close() })
	fd, err := syscall.Open(ws, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	pol := policy.Default()
	reg := principal.NewRegistry(uint32(os.Getuid()), func() *policy.Policy { return pol }, nil)
	m, err := NewMonitor(Config{RootFd: fd, StateDir: state, Policy: pol, Registry: reg, Labels: labels, Recorder: log, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return m, ws, log
}

func staged(t *testing.T, content string) *os.File {
	f, err := os.CreateTemp(t.TempDir(), "stage")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(content)
	t.Cleanup(func() { f.Close() })
	return f
}

// records reads the log as a reader does: after asking for a flush, so
// that the checkpoint covers everything appended so far.
func records(t *testing.T, m *Monitor) []*evidence.Record {
	if err := m.FlushLog(); err != nil {
		t.Fatal(err)
	}
	var out []*evidence.Record
	if err := evidence.ReadAll(m.stateDir, func(_ int64, _ string, r *evidence.Record) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCommitAllowedKeepsPreviousVersion(t *testing.T) {
	m, ws, log := testMonitor(t, map[string]string{"MEMORY.md": "old\n"})
	before, _ := os.Stat(filepath.Join(ws, "MEMORY.md"))
	me := m.Reg.Resolve(os.Getpid()) // the owner, outside sessions: USER
	if errno := m.commitFrom(context.Background(), me, "MEMORY.md", staged(t, "new\n")); errno != 0 {
		t.Fatalf("commit: %v", errno)
	}
	got, _ := os.ReadFile(filepath.Join(ws, "MEMORY.md"))
	if string(got) != "new\n" {
		t.Fatalf("MEMORY.md = %q", got)
	}
	after, _ := os.Stat(filepath.Join(ws, "MEMORY.md"))
	if after.Mode() != before.Mode() {
		t.Fatalf("mode changed: %v -> %v", before.Mode(), after.Mode())
	}
	recs := records(t, m)
	w := recs[len(recs)-1]
	if w.Type != evidence.TypeWrite || w.Meta.Path != "MEMORY.md" || w.Payload == nil {
		t.Fatalf("last record %+v", w)
	}
	old, err := log.Blob(w.Payload.OldHash)
	if err != nil || string(old) != "old\n" {
		t.Fatalf("previous version blob = %q, %v", old, err)
	}
	nw, err := log.Blob(w.Payload.NewHash)
	if err != nil || string(nw) != "new\n" {
		t.Fatalf("new version blob = %q, %v", nw, err)
	}
	// No temporary file is left next to it.
	ents, _ := os.ReadDir(ws)
	for _, e := range ents {
		if isReserved(e.Name()) {
			t.Fatalf("left behind %s", e.Name())
		}
	}
}

func TestCommitRefusedQuarantines(t *testing.T) {
	m, ws, log := testMonitor(t, map[string]string{"MEMORY.md": "old\n", "page.txt": "evil"})
	me := m.Reg.Resolve(os.Getpid())
	me.AddTaint(policy.WebDerived) // as if it had read a WEB-written file
	errno := m.commitFrom(context.Background(), me, "MEMORY.md", staged(t, "poisoned\n"))
	if errno != syscall.EACCES {
		t.Fatalf("commit by a tainted subject: %v, want EACCES", errno)
	}
	got, _ := os.ReadFile(filepath.Join(ws, "MEMORY.md"))
	if string(got) != "old\n" {
		t.Fatalf("MEMORY.md changed: %q", got)
	}
	recs := records(t, m)
	r := recs[len(recs)-1]
	if r.Type != evidence.TypeQuarantine || r.Meta.Verdict != "deny" || r.Meta.Rule != "R2-taint" || r.Payload == nil || r.Payload.OldHash == "" {
		t.Fatalf("refusal record %+v", r)
	}
	q, err := log.Blob(r.Payload.NewHash)
	if err != nil || string(q) != "poisoned\n" {
		t.Fatalf("quarantined bytes = %q, %v", q, err)
	}
}

func TestLabelsPersistAndBreakOnDrift(t *testing.T) {
	m, ws, _ := testMonitor(t, map[string]string{"page.txt": "hello"})
	st, err := m.lstatRel("page.txt")
	if err != nil {
		t.Fatal(err)
	}
	l := &Label{Origin: policy.Web, Taint: policy.WebDerived | policy.Untrusted, Session: "w"}
	l.bindFingerprint(st)
	if err := m.Labels.Set(keyOf(st), l); err != nil {
		t.Fatal(err)
	}
	tg, got := m.target("page.txt", st)
	if got == nil || tg.LabelTaint&policy.WebDerived == 0 {
		t.Fatalf("label not applied: %+v %+v", tg, got)
	}
	// Reopen the store: the label is still there.
	path := filepath.Join(m.stateDir, "labels.jsonl")
	m.Labels.Close()
	s2, err := OpenLabels(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if s2.Get(keyOf(st)) == nil {
		t.Fatal("label lost across reopen")
	}
	m.Labels = s2
	// Change the file behind the monitor's back: the label's binding
	// breaks and the file reads as EXTERNAL.
	if err := os.WriteFile(filepath.Join(ws, "page.txt"), []byte("changed behind our back"), 0o644); err != nil {
		t.Fatal(err)
	}
	st2, _ := m.lstatRel("page.txt")
	_, l2 := m.target("page.txt", st2)
	if l2 == nil || l2.Origin != policy.External || l2.Taint&policy.Untrusted == 0 {
		t.Fatalf("drifted file label = %+v, want EXTERNAL and UNTRUSTED", l2)
	}
}

func TestLabelJournalTornTail(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "labels.jsonl")
	s, err := OpenLabels(p)
	if err != nil {
		t.Fatal(err)
	}
	s.Set(fileKey{1, 2}, &Label{Origin: policy.Web, Taint: policy.WebDerived})
	s.Close()
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"k":{"dev":1,"ino":3},"l":{"orig`) // a crash mid-line
	f.Close()
	s, err = OpenLabels(p)
	if err != nil {
		t.Fatalf("torn tail refused: %v", err)
	}
	defer s.Close()
	if s.Get(fileKey{1, 2}) == nil {
		t.Fatal("complete label lost")
	}
	// Corruption in the middle is not a torn tail: refuse.
	os.WriteFile(p, []byte("garbage\n{\"k\":{\"dev\":1,\"ino\":2}}\n"), 0o600)
	if _, err := OpenLabels(p); err == nil {
		t.Fatal("corrupt label journal accepted")
	}
}

func TestWriterLabels(t *testing.T) {
	if labelForWriter(policy.Subject{Principal: policy.User, Identified: true}) != nil {
		t.Fatal("a clean USER write left a label")
	}
	l := labelForWriter(policy.Subject{Principal: policy.Web, Identified: true})
	if l == nil || l.Taint&policy.WebDerived == 0 || l.Origin != policy.Web {
		t.Fatalf("WEB write label = %+v", l)
	}
	// Appending to a WEB file as USER keeps the WEB origin and taint.
	merged := mergeLabels(l, nil)
	if merged.Origin != policy.Web || merged.Taint != l.Taint {
		t.Fatalf("merge = %+v", merged)
	}
	m2 := mergeLabels(&Label{Origin: policy.ToolAuth, Taint: policy.ToolOutput}, l)
	if m2.Origin != policy.Web || m2.Taint&policy.ToolOutput == 0 {
		t.Fatalf("merge keeps the lower origin and the union of taint: %+v", m2)
	}
}

func TestIsCommitTemp(t *testing.T) {
	for name, want := range map[string]bool{
		".aerfs-commit-1795332915994843541-3363": true,
		".aerfs-commit-1-2":                      true,
		".aerfs-commit-":                         false,
		".aerfs-commit-12":                       false,
		".aerfs-commit-12-":                      false,
		".aerfs-commit-12-x":                     false,
		".aerfs-commit-notes.md":                 false,
		"aerfs-commit-1-2":                       false,
		"MEMORY.md":                              false,
	} {
		if got := isCommitTemp(name); got != want {
			t.Errorf("isCommitTemp(%q) = %v, want %v", name, got, want)
		}
	}
}

// The temporary file of a commit that a crash interrupted is removed when
// the monitor starts; a user's file that merely starts like one is not.
func TestStaleCommitTemporariesRemovedAtStart(t *testing.T) {
	m, ws, _ := testMonitor(t, map[string]string{
		".aerfs-commit-1795332915994843541-3363":      "half a commit",
		"memory/.aerfs-commit-1795332915994843542-12": "another",
		".aerfs-commit-notes.md":                      "the user's",
		"MEMORY.md":                                   "m\n",
	})
	_ = m
	for rel, want := range map[string]bool{
		".aerfs-commit-1795332915994843541-3363":      false,
		"memory/.aerfs-commit-1795332915994843542-12": false,
		".aerfs-commit-notes.md":                      true,
		"MEMORY.md":                                   true,
	} {
		_, err := os.Stat(filepath.Join(ws, rel))
		if got := err == nil; got != want {
			t.Errorf("%s exists: %v, want %v", rel, got, want)
		}
	}
}
