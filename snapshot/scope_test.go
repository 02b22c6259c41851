package snapshot

import (
	"errors"
	"testing"

	"github.com/aerfs/aerfs/evidence"
)

// poisoned builds the log of an agent session that read a poisoned page:
// it changed MEMORY.md and a skill and created a memory note; the owner
// then edited MEMORY.md again (a later version of a contaminated file) and,
// meanwhile, AGENTS.md (unrelated: it must survive the undo).
type poisoned struct {
	tl                             *testLog
	m1, m2, m3, s1, s2, a1, n1, q1 string
	evil, wm2, ws2, wm3, wa1, wn1  string
	quar                           string
}

func newPoisoned(t *testing.T) *poisoned {
	tl := newTestLog(t)
	p := &poisoned{tl: tl}
	p.m1, p.m2, p.m3 = tl.blob("memory 1\n"), tl.blob("memory 2 (poisoned)\n"), tl.blob("memory 3\n")
	p.s1, p.s2 = tl.blob("skill 1\n"), tl.blob("skill 2 (poisoned)\n")
	p.a1, p.n1, p.q1 = tl.blob("agents (owner)\n"), tl.blob("note (poisoned)\n"), tl.blob("refused\n")
	wm1 := tl.write("MEMORY.md", "USER", "", "", p.m1)                                               // 0
	ws1 := tl.write("skills/a.md", "USER", "", "", p.s1)                                             // 1
	tl.add(&evidence.Record{Type: evidence.TypeSnapshot, Payload: &evidence.Payload{Detail: "clean", // 2
		Files: []evidence.FileState{{Path: "MEMORY.md", Hash: p.m1}, {Path: "skills/a.md", Hash: p.s1}}}})
	// The session fetches a page into a plain file: a write with no content.
	p.evil = tl.add(&evidence.Record{Type: evidence.TypeWrite, Principal: "WEB", Taint: []string{"WEB_DERIVED"}, // 3
		Meta: evidence.Meta{Path: "downloads/page.html", Session: "agent"}})
	// Allowed at the time: the page was not yet known to be bad.
	p.wm2 = tl.write("MEMORY.md", "TOOL_AUTH", "agent", p.m1, p.m2, wm1, p.evil)                                 // 4
	p.wa1 = tl.write("AGENTS.md", "USER", "", "", p.a1)                                                          // 5
	p.ws2 = tl.write("skills/a.md", "TOOL_AUTH", "agent", p.s1, p.s2, ws1, p.wm2)                                // 6
	p.wm3 = tl.write("MEMORY.md", "USER", "", p.m2, p.m3, p.wm2)                                                 // 7
	p.wn1 = tl.write("memory/note.md", "TOOL_AUTH", "agent", "", p.n1, p.evil)                                   // 8
	p.quar = tl.add(&evidence.Record{Type: evidence.TypeQuarantine, Principal: "WEB", Parents: []string{p.evil}, // 9
		Meta:    evidence.Meta{Path: "MEMORY.md", Verdict: "deny", Rule: "taint-blocks", Session: "agent"},
		Payload: &evidence.Payload{OldHash: p.m3, NewHash: p.q1}})
	tl.write("USER.md", "USER", "", "", p.a1) // 10: unrelated, after
	return p
}

func TestScopeFromPath(t *testing.T) {
	p := newPoisoned(t)
	x := p.tl.index()
	sc, err := x.Scope("./downloads/page.html")
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Roots) != 1 || sc.Roots[0].ID != p.evil {
		t.Fatalf("roots: %+v", sc.Roots)
	}
	// The tree: evil → {wm2 → {ws2, wm3}, wn1, quarantine}.
	r := sc.Roots[0]
	ids := func(ns []*ScopeNode) []string {
		var out []string
		for _, n := range ns {
			out = append(out, n.ID)
		}
		return out
	}
	if got, want := ids(r.Children), []string{p.wm2, p.wn1, p.quar}; !eqStrings(got, want) {
		t.Fatalf("children of the source: %v, want %v", got, want)
	}
	if got, want := ids(r.Children[0].Children), []string{p.ws2, p.wm3}; !eqStrings(got, want) {
		t.Fatalf("children of the poisoned memory write: %v, want %v", got, want)
	}
	if sc.Records != 6 {
		t.Errorf("%d records downstream, want 6", sc.Records)
	}
	// The page is the one plain file written downstream: restore cannot
	// take it back, and the scope says so.
	if !eqStrings(sc.Written, []string{"downloads/page.html"}) {
		t.Errorf("plain files written downstream: %q, want the page", sc.Written)
	}
	files := map[string]ScopeFile{}
	for _, f := range sc.Files {
		files[f.Path] = f
	}
	if len(files) != 3 || files["MEMORY.md"].First.Record != p.wm2 || files["MEMORY.md"].Versions != 2 ||
		files["skills/a.md"].First.Record != p.ws2 || files["memory/note.md"].First.OldHash != "" {
		t.Fatalf("files: %+v", sc.Files)
	}
	if _, ok := files["AGENTS.md"]; ok {
		t.Fatal("the owner's unrelated change is in the scope")
	}

	before := x.StateBefore(sc)
	// MEMORY.md changed twice since: back to before the first; the note
	// did not exist; AGENTS.md and USER.md keep their current versions.
	eqState(t, "before", before, State{"MEMORY.md": p.m1, "skills/a.md": p.s1, "AGENTS.md": p.a1, "USER.md": p.a1})
	steps := Plan(x.Current(), before)
	want := []Step{{"MEMORY.md", p.m3, p.m1}, {"memory/note.md", p.n1, ""}, {"skills/a.md", p.s2, p.s1}}
	if len(steps) != len(want) {
		t.Fatalf("plan %+v", steps)
	}
	for i := range want {
		if steps[i] != want[i] {
			t.Fatalf("step %d = %+v, want %+v", i, steps[i], want[i])
		}
	}
}

func TestScopeFromRecord(t *testing.T) {
	p := newPoisoned(t)
	x := p.tl.index()
	// From the skill write only: nothing else descends from it.
	sc, err := x.Scope(p.ws2[:10])
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Roots) != 1 || sc.Records != 1 || len(sc.Files) != 1 || sc.Files[0].Path != "skills/a.md" {
		t.Fatalf("scope of the skill write: %+v", sc)
	}
	eqState(t, "before", x.StateBefore(sc), State{"MEMORY.md": p.m3, "skills/a.md": p.s1, "AGENTS.md": p.a1,
		"memory/note.md": p.n1, "USER.md": p.a1})
	// From the poisoned memory write: the skill and the owner's later
	// memory edit, not the note (it came from the page directly).
	sc, err = x.Scope(p.wm2)
	if err != nil {
		t.Fatal(err)
	}
	if sc.Records != 3 || len(sc.Files) != 2 {
		t.Fatalf("scope of the memory write: %+v", sc)
	}
	if _, err := x.Scope("nothing/here.md"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown source: %v", err)
	}
}

// A later version is downstream even when its record does not name the
// contaminated one, and a restore is downstream only through its parents.
func TestScopeLaterVersionAndRestore(t *testing.T) {
	tl := newTestLog(t)
	a, b, c := tl.blob("a\n"), tl.blob("b\n"), tl.blob("c\n")
	src := tl.add(&evidence.Record{Type: evidence.TypeWrite, Principal: "WEB", Meta: evidence.Meta{Path: "inbox/mail.eml"}})
	w1 := tl.write("MEMORY.md", "USER", "x", a, b, src)
	w2 := tl.write("MEMORY.md", "USER", "", b, c) // names no parent
	tl.write("TOOLS.md", "USER", "", "", a)
	tl.add(&evidence.Record{Type: evidence.TypeRestore, Payload: &evidence.Payload{
		Files: []evidence.FileState{{Path: "MEMORY.md", OldHash: c, Hash: a}, {Path: "TOOLS.md", OldHash: a}}}})
	x := tl.index()
	sc, err := x.Scope("inbox")
	if err != nil {
		t.Fatal(err)
	}
	if sc.Records != 3 || len(sc.Roots[0].Children) != 1 || sc.Roots[0].Children[0].ID != w1 ||
		sc.Roots[0].Children[0].Children[0].ID != w2 {
		t.Fatalf("scope: %+v", sc)
	}
	if len(sc.Files) != 1 || sc.Files[0].Path != "MEMORY.md" || sc.Files[0].First.OldHash != a {
		t.Fatalf("files: %+v", sc.Files)
	}
}

func eqStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
