package evidence

import (
	"path/filepath"
	"strings"
	"testing"
)

func writeRec(path, h string) *Record {
	return &Record{Type: TypeWrite, Principal: "USER", Meta: Meta{Path: path, Op: "write", Verdict: "allow", UID: 1000},
		Payload: &Payload{NewHash: h}}
}

// A blob named by a gc manifest after its last reference is pruned: the
// state and its bundles (whole, or filtered to another path) verify. The
// same blob missing after a later record named it again is lost.
func TestGCPrunedVersusLost(t *testing.T) {
	dir := newState(t)
	l := openLog(t, dir)
	defer l.Close()
	a, _ := l.PutBlob([]byte(strings.Repeat("version a\n", 50)))
	b, _ := l.PutBlob([]byte("version b\n"))
	for _, r := range []*Record{writeRec("MEMORY.md", a), writeRec("MEMORY.md", b), writeRec("AGENTS.md", b)} {
		if _, err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	man := EncodeGCManifest(&GCManifest{KeepLast: 1, Pruned: []PrunedBlob{{Hash: a, Bytes: 1, Path: "MEMORY.md", Reason: "retention"}}})
	mh, err := l.PutBlob(man)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(&Record{Type: TypeGC, Principal: "USER", Meta: Meta{Op: "gc", Verdict: "allow", UID: 1000},
		Payload: &Payload{NewHash: mh, Detail: "gc"}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil { // the checkpoint covers the gc record
		t.Fatal(err)
	}
	if _, err := RemoveBlobs(dir, []string{a}); err != nil {
		t.Fatal(err)
	}
	if HasBlob(dir, a) {
		t.Fatal("blob not removed")
	}
	if _, err := VerifyState(dir, ""); err != nil {
		t.Fatalf("verify after gc: %v", err)
	}
	for name, f := range map[string]Filter{"all": {}, "MEMORY.md": {Path: "MEMORY.md"}, "AGENTS.md": {Path: "AGENTS.md"}} {
		out := filepath.Join(t.TempDir(), "b")
		if _, err := Export(dir, f, out); err != nil {
			t.Fatalf("export %s: %v", name, err)
		}
		if _, err := VerifyBundle(out, l.PublicKey()); err != nil {
			t.Fatalf("verify bundle %s: %v", name, err)
		}
	}
	p, err := PrunedBlobs(dir)
	if err != nil || p[a] == "" || p[b] != "" {
		t.Fatalf("PrunedBlobs: %v %v", p, err)
	}

	// The content comes back (stored again), is named, then goes missing
	// without a gc: lost.
	if _, err := l.PutBlob([]byte(strings.Repeat("version a\n", 50))); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(writeRec("MEMORY.md", a)); err != nil {
		t.Fatal(err)
	}
	l.Flush()
	if _, err := VerifyState(dir, ""); err != nil {
		t.Fatalf("verify: %v", err)
	}
	RemoveBlobs(dir, []string{a})
	if _, err := VerifyState(dir, ""); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("verify with a lost blob: %v, want missing", err)
	}
	out := filepath.Join(t.TempDir(), "b")
	if _, err := Export(dir, Filter{}, out); err != nil {
		t.Fatalf("export: %v", err)
	}
	if _, err := VerifyBundle(out, l.PublicKey()); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("verify bundle with a lost blob: %v, want missing", err)
	}
}
