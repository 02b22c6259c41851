package snapshot

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aerfs/aerfs/evidence"
)

// TestHistory follows one file through every kind of version: created,
// changed, deleted, created again, renamed away, restored, changed behind
// aerfs's back, and an approved quarantined write.
func TestHistory(t *testing.T) {
	tl := newTestLog(t)
	h1, h2, h3, h4, h5 := tl.blob("one\n"), tl.blob("two\n"), tl.blob("three\n"), tl.blob("drifted\n"), tl.blob("approved\n")
	w1 := tl.write("A.md", "USER", "", "", h1)
	w2 := tl.write("A.md", "USER", "s1", h1, h2, w1)
	tl.add(&evidence.Record{Type: evidence.TypeDelete, Meta: evidence.Meta{Path: "A.md"}, Payload: &evidence.Payload{OldHash: h2}})
	tl.write("A.md", "USER", "", "", h3)
	tl.add(&evidence.Record{Type: evidence.TypeRename, Meta: evidence.Meta{Path: "A.md"}, Payload: &evidence.Payload{From: "A.md", To: "B.txt"}})
	tl.add(&evidence.Record{Type: evidence.TypeRestore, Payload: &evidence.Payload{Detail: "version 2",
		Files: []evidence.FileState{{Path: "A.md", Hash: h2}}}})
	tl.add(&evidence.Record{Type: evidence.TypeDrift, Principal: "EXTERNAL", Meta: evidence.Meta{Path: "A.md"},
		Payload: &evidence.Payload{OldHash: h2, NewHash: h4}})
	q := tl.add(&evidence.Record{Type: evidence.TypeQuarantine, Principal: "WEB", Meta: evidence.Meta{Path: "A.md", Verdict: "deny", Rule: "taint-blocks", Session: "s2"},
		Payload: &evidence.Payload{OldHash: h4, NewHash: h5}})
	tl.add(&evidence.Record{Type: evidence.TypeApprove, Parents: []string{q}, Meta: evidence.Meta{Path: "A.md"}})
	tl.write("A.md", "USER", "", h4, h5)
	// A plain file's write has no content: no version.
	tl.add(&evidence.Record{Type: evidence.TypeWrite, Principal: "WEB", Meta: evidence.Meta{Path: "A.md"}})

	x := tl.index()
	hist := x.History("A.md")
	want := []struct {
		typ, hash, old string
		idx            int64
	}{
		{"write", h1, "", 0}, {"write", h2, h1, 1}, {"delete", "", h2, 2}, {"write", h3, "", 3},
		{"rename", "", h3, 4}, {"restore", h2, "", 5}, {"drift", h4, h2, 6}, {"approve", h5, h4, 9},
	}
	if len(hist) != len(want) {
		t.Fatalf("%d versions, want %d: %+v", len(hist), len(want), hist)
	}
	for i, w := range want {
		v := hist[i]
		if v.Type != w.typ || v.Hash != w.hash || v.OldHash != w.old || v.Idx != w.idx || v.Record != tl.ids[w.idx] {
			t.Errorf("version %d = %s %.8s<-%.8s idx %d, want %s %.8s<-%.8s idx %d", i+1, v.Type, v.Hash, v.OldHash, v.Idx, w.typ, w.hash, w.old, w.idx)
		}
		if !v.Time.Equal(at(int(w.idx))) {
			t.Errorf("version %d time %v", i+1, v.Time)
		}
	}
	if hist[1].Session != "s1" || hist[1].Record != w2 {
		t.Errorf("version 2: %+v", hist[1])
	}
	if got := x.History("B.txt"); len(got) != 0 {
		t.Errorf("a rename to a plain name is no version of the destination: %+v", got)
	}
	eqState(t, "current", x.Current(), State{"A.md": h5})
	if p := x.Pending(); len(p) != 0 {
		t.Errorf("approved item still pending: %+v", p)
	}
}

// TestStateAt checks the boundaries: a record at exactly t counts, one a
// nanosecond later does not; a file first seen after t is taken as it was
// before; a snapshot decides every file, including those it leaves out.
func TestStateAt(t *testing.T) {
	tl := newTestLog(t)
	pre, m1, m2, s1 := tl.blob("before aerfs\n"), tl.blob("m1\n"), tl.blob("m2\n"), tl.blob("s1\n")
	tl.write("MEMORY.md", "USER", "", pre, m1)                                                   // 0
	tl.write("skills/x.md", "USER", "", "", s1)                                                  // 1
	tl.add(&evidence.Record{Type: evidence.TypeSessionStart, Meta: evidence.Meta{Session: "a"}}) // 2, not a version
	tl.write("MEMORY.md", "USER", "", m1, m2)                                                    // 3
	tl.add(&evidence.Record{Type: evidence.TypeSnapshot, Payload: &evidence.Payload{Detail: "only memory",
		Files: []evidence.FileState{{Path: "MEMORY.md", Hash: m2}, {Path: "USER.md", Hash: pre}}}}) // 4
	tl.add(&evidence.Record{Type: evidence.TypeDelete, Meta: evidence.Meta{Path: "MEMORY.md"}, Payload: &evidence.Payload{OldHash: m2}}) // 5
	x := tl.index()

	ns := time.Nanosecond
	eqState(t, "before everything", x.StateAt(at(0).Add(-ns)), State{"MEMORY.md": pre, "USER.md": pre})
	eqState(t, "at 0", x.StateAt(at(0)), State{"MEMORY.md": m1, "USER.md": pre})
	eqState(t, "just before 1", x.StateAt(at(1).Add(-ns)), State{"MEMORY.md": m1, "USER.md": pre})
	eqState(t, "at 1", x.StateAt(at(1)), State{"MEMORY.md": m1, "skills/x.md": s1, "USER.md": pre})
	eqState(t, "at 3", x.StateAt(at(3)), State{"MEMORY.md": m2, "skills/x.md": s1, "USER.md": pre})
	// The snapshot found no skills/x.md: absent from then on.
	eqState(t, "at 4", x.StateAt(at(4)), State{"MEMORY.md": m2, "USER.md": pre})
	eqState(t, "at 5", x.StateAt(at(5)), State{"USER.md": pre})
	eqState(t, "far future", x.StateAt(at(1000)), x.Current())
	eqState(t, "current", x.Current(), State{"USER.md": pre})
}

func TestSnapshots(t *testing.T) {
	tl := newTestLog(t)
	m1, m2 := tl.blob("m1\n"), tl.blob("m2\n")
	tl.write("MEMORY.md", "USER", "", "", m1)
	s1 := tl.add(&evidence.Record{Type: evidence.TypeSnapshot, Payload: &evidence.Payload{Detail: "first",
		Files: []evidence.FileState{{Path: "MEMORY.md", Hash: m1}}}})
	tl.write("MEMORY.md", "USER", "", m1, m2)
	tl.write("AGENTS.md", "USER", "", "", m2)
	s2 := tl.add(&evidence.Record{Type: evidence.TypeSnapshot, Payload: &evidence.Payload{
		Files: []evidence.FileState{{Path: "MEMORY.md", Hash: m2}, {Path: "AGENTS.md", Hash: m2}}}})
	x := tl.index()

	ss := x.Snapshots()
	if len(ss) != 2 || ss[0].ID != s1 || ss[0].Label != "first" || ss[0].Files != 1 || !ss[0].Time.Equal(at(1)) ||
		ss[1].ID != s2 || ss[1].Files != 2 {
		t.Fatalf("snapshots: %+v", ss)
	}
	st, s, err := x.SnapshotState(s1[:8])
	if err != nil || s.ID != s1 {
		t.Fatalf("prefix lookup: %v %+v", err, s)
	}
	eqState(t, "snapshot 1", st, State{"MEMORY.md": m1})
	st, _, err = x.SnapshotState(strings.ToUpper(s2))
	if err != nil {
		t.Fatal(err)
	}
	eqState(t, "snapshot 2", st, State{"MEMORY.md": m2, "AGENTS.md": m2})
	// Plan from now back to snapshot 1 removes the file created since.
	steps := Plan(x.Current(), mustState(x.SnapshotState(s1)))
	want := []Step{{Path: "AGENTS.md", From: m2}, {Path: "MEMORY.md", From: m2, To: m1}}
	if len(steps) != 2 || steps[0] != want[0] || steps[1] != want[1] {
		t.Fatalf("plan %+v", steps)
	}

	if _, _, err := x.SnapshotState(s1[:7]); err == nil || !strings.Contains(err.Error(), "at least 8") {
		t.Errorf("short prefix: %v", err)
	}
	if _, _, err := x.SnapshotState(strings.Repeat("0", 64)); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown: %v", err)
	}
	// A write record's id is no snapshot id.
	if _, _, err := x.SnapshotState(tl.ids[0]); !errors.Is(err, ErrNotFound) {
		t.Errorf("write id as snapshot: %v", err)
	}
	// Two snapshot ids sharing 8 characters cannot be made on purpose:
	// add synthetic ones to the loaded index.
	for _, id := range []string{"abcdef01" + strings.Repeat("1", 56), "abcdef01" + strings.Repeat("2", 56)} {
		x.Add(int64(x.Len()), id, &evidence.Record{Type: evidence.TypeSnapshot, Meta: evidence.Meta{Time: evidence.FormatTime(at(9))},
			Payload: &evidence.Payload{}})
	}
	if _, _, err := x.SnapshotState("abcdef01"); !errors.Is(err, ErrAmbiguous) {
		t.Errorf("ambiguous: %v", err)
	}
	if _, _, err := x.SnapshotState("abcdef011"); err != nil {
		t.Errorf("longer prefix: %v", err)
	}
}

func mustState(s State, _ *Snapshot, err error) State {
	if err != nil {
		panic(err)
	}
	return s
}

func TestPlan(t *testing.T) {
	cur := State{"a": "1", "b": "2", "c": "3"}
	target := State{"b": "2", "c": "4", "d": "5"}
	got := Plan(cur, target)
	want := []Step{{"a", "1", ""}, {"c", "3", "4"}, {"d", "", "5"}}
	if len(got) != len(want) {
		t.Fatalf("%+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("step %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if p := Plan(cur, cur.Clone()); len(p) != 0 {
		t.Fatalf("no-op plan: %+v", p)
	}
}

func TestPending(t *testing.T) {
	tl := newTestLog(t)
	base, q1h, q2h, q3h := tl.blob("base\n"), tl.blob("q1\n"), tl.blob("q2\n"), tl.blob("q3\n")
	tl.write("MEMORY.md", "USER", "", "", base)
	quar := func(path, h string) string {
		return tl.add(&evidence.Record{Type: evidence.TypeQuarantine, Principal: "WEB",
			Meta:    evidence.Meta{Path: path, Verdict: "deny", Rule: "taint-blocks", Session: "agent"},
			Payload: &evidence.Payload{OldHash: base, NewHash: h}})
	}
	q1, q2, q3 := quar("MEMORY.md", q1h), quar("MEMORY.md", q2h), quar("AGENTS.md", q3h)
	x := New()
	load := func() {
		if err := tl.log.Flush(); err != nil {
			t.Fatal(err)
		}
		evidence.ReadAll(tl.dir, func(idx int64, id string, r *evidence.Record) error { x.Add(idx, id, r); return nil })
	}
	load()
	if p := x.Pending(); len(p) != 3 || p[0].ID != q1 || p[0].Hash != q1h || p[0].BaseHash != base ||
		p[0].Rule != "taint-blocks" || p[0].Principal != "WEB" || p[0].Session != "agent" || p[0].Path != "MEMORY.md" || p[2].ID != q3 {
		t.Fatalf("pending: %+v", p)
	}
	tl.add(&evidence.Record{Type: evidence.TypeReject, Parents: []string{q2}})
	tl.add(&evidence.Record{Type: evidence.TypeApprove, Parents: []string{q1}})
	w := tl.write("MEMORY.md", "USER", "", base, q1h)
	load() // records already indexed are skipped, new ones added
	p := x.Pending()
	if len(p) != 1 || p[0].ID != q3 {
		t.Fatalf("pending after approve and reject: %+v", p)
	}
	h := x.History("MEMORY.md")
	if last := h[len(h)-1]; last.Type != "approve" || last.Record != w || last.Hash != q1h {
		t.Fatalf("approved write: %+v", last)
	}
}

// TestConcurrentAdd runs readers beside the daemon-style writer (for -race).
func TestConcurrentAdd(t *testing.T) {
	x := New()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			id := strings.Repeat("0", 56) + hex8(i)
			x.Add(int64(i), id, &evidence.Record{Type: evidence.TypeWrite, Meta: evidence.Meta{Path: "MEMORY.md", Time: evidence.FormatTime(at(i))},
				Payload: &evidence.Payload{NewHash: strings.Repeat("a", 63) + "b"}})
		}
	}()
	for i := 0; i < 50; i++ {
		x.History("MEMORY.md")
		x.Current()
		x.StateAt(at(i))
		x.Pending()
	}
	wg.Wait()
	if n := len(x.History("MEMORY.md")); n != 200 {
		t.Fatalf("%d versions", n)
	}
}

func hex8(i int) string {
	const d = "0123456789abcdef"
	b := make([]byte, 8)
	for k := 7; k >= 0; k-- {
		b[k] = d[i&15]
		i >>= 4
	}
	return string(b)
}
