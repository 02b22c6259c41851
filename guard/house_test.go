package guard

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/draft"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// testHouse builds the guard of a real backing directory with a real
// evidence log, without mounting: the first tier of FUSE tests calls the
// rooms directly.
func testHouse(t testing.TB, files map[string]string) (*house, string, *evidence.Log) {
	t.Helper()
	ws := t.TempDir()
	for rel, c := range files {
		p := filepath.Join(ws, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(c), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return testHouseIn(t, ws)
}

// testHouseIn is testHouse over the workspace ws.
func testHouseIn(t testing.TB, ws string) (*house, string, *evidence.Log) {
	t.Helper()
	state := t.TempDir()
	if err := evidence.Init(state, "aerfs/test"); err != nil {
		t.Fatal(err)
	}
	log, err := evidence.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	labels, err := label.Open(filepath.Join(state, "labels.jsonl"))
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
	g, err := New(Config{RootFd: fd, StateDir: state, Policy: pol, Registry: reg, Labels: labels, Recorder: log, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return g.h, ws, log
}

// commit commits content to rel for res as a handle opened with O_TRUNC
// does at its close (decided, then published or quarantined).
func (h *house) commit(t *testing.T, res *principal.Resolved, rel, content string) syscall.Errno {
	st, err := h.dir.Lstat(rel)
	if err != nil {
		t.Fatal(err)
	}
	dr, errno := draft.Open(h.dir, h.staging, rel, res, syscall.O_WRONLY|syscall.O_TRUNC, false, label.KeyOf(st))
	if errno != 0 {
		t.Fatal(errno)
	}
	defer dr.Close()
	if _, errno := dr.Write(res, []byte(content), 0); errno != 0 {
		t.Fatal(errno)
	}
	return (&Door{h: h}).Commit(Caller{}, rel, dr, false)
}

// records reads the log as a reader does: after asking for a flush, so
// that the checkpoint covers everything appended so far.
func records(t *testing.T, h *house) []*evidence.Record {
	if err := h.led.Flush(); err != nil {
		t.Fatal(err)
	}
	var out []*evidence.Record
	if err := evidence.ReadAll(h.stateDir, func(_ int64, _ string, r *evidence.Record) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCommitAllowedKeepsPreviousVersion(t *testing.T) {
	h, ws, log := testHouse(t, map[string]string{"MEMORY.md": "old\n"})
	before, _ := os.Stat(filepath.Join(ws, "MEMORY.md"))
	me := h.reg.Resolve(os.Getpid()) // the owner, outside sessions: USER
	if errno := h.commit(t, me, "MEMORY.md", "new\n"); errno != 0 {
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
	recs := records(t, h)
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
	h, ws, log := testHouse(t, map[string]string{"MEMORY.md": "old\n", "page.txt": "evil"})
	me := h.reg.Resolve(os.Getpid())
	me.AddTaint(policy.WebDerived) // as if it had read a WEB-written file
	errno := h.commit(t, me, "MEMORY.md", "poisoned\n")
	if errno != syscall.EACCES {
		t.Fatalf("commit by a tainted subject: %v, want EACCES", errno)
	}
	got, _ := os.ReadFile(filepath.Join(ws, "MEMORY.md"))
	if string(got) != "old\n" {
		t.Fatalf("MEMORY.md changed: %q", got)
	}
	recs := records(t, h)
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
	h, ws, _ := testHouse(t, map[string]string{"page.txt": "hello"})
	st, err := h.dir.Lstat("page.txt")
	if err != nil {
		t.Fatal(err)
	}
	l := &label.Label{Origin: policy.Web, Taint: policy.WebDerived | policy.Untrusted, Session: "w"}
	l.Bind(st)
	if err := h.labels.Set(label.KeyOf(st), l); err != nil {
		t.Fatal(err)
	}
	tg, got := h.gate.Target("page.txt", st)
	if got == nil || tg.LabelTaint&policy.WebDerived == 0 {
		t.Fatalf("label not applied: %+v %+v", tg, got)
	}
	// Reopen the store: the label is still there.
	s2, err := label.Open(filepath.Join(h.stateDir, "labels.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if s2.Get(label.KeyOf(st)) == nil {
		t.Fatal("label lost across reopen")
	}
	s2.Close()
	// Change the file behind the monitor's back: the label's binding
	// breaks and the file reads as EXTERNAL.
	if err := os.WriteFile(filepath.Join(ws, "page.txt"), []byte("changed behind our back"), 0o644); err != nil {
		t.Fatal(err)
	}
	st2, _ := h.dir.Lstat("page.txt")
	_, l2 := h.gate.Target("page.txt", st2)
	if l2 == nil || l2.Origin != policy.External || l2.Taint&policy.Untrusted == 0 {
		t.Fatalf("drifted file label = %+v, want EXTERNAL and UNTRUSTED", l2)
	}
}

// The temporary file of a commit that a crash interrupted is removed when
// the monitor starts; a user's file that merely starts like one is not.
func TestStaleCommitTemporariesRemovedAtStart(t *testing.T) {
	h, ws, _ := testHouse(t, map[string]string{
		".aerfs-commit-1795332915994843541-3363":      "half a commit",
		"memory/.aerfs-commit-1795332915994843542-12": "another",
		".aerfs-commit-notes.md":                      "the user's",
		"MEMORY.md":                                   "m\n",
	})
	_ = h
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
