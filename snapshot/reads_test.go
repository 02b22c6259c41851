package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/aerfs/aerfs/evidence"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// reads appends a reads record: files (path, content read; "" = unknown).
func (tl *testLog) reads(session string, parents []string, files ...[2]string) string {
	var rs []evidence.FileRead
	for i, f := range files {
		fr := evidence.FileRead{Path: f[0], Fp: evidence.Fingerprint(1, uint64(i+10), 5, 1, 1)}
		if f[1] != "" {
			fr.Hash, fr.Fp = sum(f[1]), ""
		}
		rs = append(rs, fr)
	}
	return tl.add(&evidence.Record{Type: evidence.TypeReads, Parents: parents,
		Meta: evidence.Meta{Op: "read", Session: session}, Payload: &evidence.Payload{Reads: rs}})
}

// A plain file nobody wrote through aerfs is a source through the reads
// records that list it, by path (every version) or by one version.
func TestScopeOfUnlabelledSource(t *testing.T) {
	tl := newTestLog(t)
	m0, m1, m2, a1 := tl.blob("m0\n"), tl.blob("m1\n"), tl.blob("m2\n"), tl.blob("a1\n")
	w0 := tl.write("MEMORY.md", "USER", "", "", m0)
	// s1 read v1 of the note (and another file), then wrote memory.
	r1 := tl.reads("s1", nil, [2]string{"notes/src.md", "v1\n"}, [2]string{"README", "r\n"})
	w1 := tl.write("MEMORY.md", "USER", "s1", m0, m1, w0, r1)
	// s2 read v2, then wrote AGENTS.md.
	r2 := tl.reads("s2", nil, [2]string{"notes/src.md", "v2\n"})
	wa := tl.write("AGENTS.md", "USER", "s2", "", a1, r2)
	// s3 read the note at a version aerfs could not hash, and read nothing
	// else later; its reads chain goes on; it wrote memory after.
	r3 := tl.reads("s3", nil, [2]string{"notes/src.md", ""})
	r3b := tl.reads("s3", []string{r3}, [2]string{"other.md", "o\n"})
	w3 := tl.write("MEMORY.md", "USER", "s3", m1, m2, w1, r3b)
	x := tl.index()

	files := func(sc *Scope) []string {
		var out []string
		for _, f := range sc.Files {
			out = append(out, f.Path)
		}
		return out
	}
	sc, err := x.Scope("notes/src.md")
	if err != nil {
		t.Fatal(err)
	}
	if got := files(sc); len(got) != 2 || got[0] != "AGENTS.md" || got[1] != "MEMORY.md" {
		t.Fatalf("every version: files %v", got)
	}
	if len(sc.Roots) != 3 || sc.Roots[0].ID != r1 || sc.Roots[0].Path != "notes/src.md (+1 read)" {
		t.Fatalf("roots %+v", sc.Roots)
	}
	if f := sc.Files[1]; f.First.Record != w1 || f.First.OldHash != m0 {
		t.Fatalf("MEMORY.md's first contaminated version %+v", f.First)
	}
	// v1: s1 and s3 (unknown content cannot be ruled out), not s2.
	sc, err = x.ScopeAt("notes/src.md", sum("v1\n")[:12])
	if err != nil {
		t.Fatal(err)
	}
	if got := files(sc); len(got) != 1 || got[0] != "MEMORY.md" || len(sc.Roots) != 2 {
		t.Fatalf("v1: files %v roots %d", got, len(sc.Roots))
	}
	for _, n := range sc.Roots {
		if n.ID == r2 || n.ID == wa {
			t.Fatal("s2 read v2, not v1")
		}
	}
	// The chain: what s3 wrote after its later reads record is downstream.
	found := false
	var walk func(ns []*ScopeNode)
	walk = func(ns []*ScopeNode) {
		for _, n := range ns {
			found = found || n.ID == w3
			walk(n.Children)
		}
	}
	walk(sc.Roots)
	if !found {
		t.Fatal("the write after a later reads record of the chain is not downstream")
	}
	// v2: s2 (and s3).
	sc, err = x.ScopeAt("notes/src.md", sum("v2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := files(sc); len(got) != 2 {
		t.Fatalf("v2: files %v", got)
	}
	// A version nobody read, a bad version, a path nobody read.
	if _, err := x.ScopeAt("README", sum("other\n")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unread version: %v", err)
	}
	if _, err := x.ScopeAt("README", "xyz"); err == nil {
		t.Fatal("a version that is not hex was accepted")
	}
	if _, err := x.Scope("notes/never.md"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unread path: %v", err)
	}
	// A guarded file's version: the write that made it is the root.
	sc, err = x.ScopeAt("MEMORY.md", m1)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Roots) != 1 || sc.Roots[0].ID != w1 {
		t.Fatalf("MEMORY.md at m1: roots %+v", sc.Roots)
	}
}
