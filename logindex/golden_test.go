package logindex

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden index in testdata/index-v1")

// goldenFiles are the files of a state directory an index reader needs:
// the log (to check the binding and read the tail), the index itself (and
// the blobs, whose sizes the index keeps).
var goldenFiles = []string{"evidence/key.pub", "evidence/checkpoint", "evidence/log", "evidence/index", "evidence/hashes"}

// The index format of version 1 (docs/evidence-format.md §11), as written
// by the first aerfs that wrote it: every later version must read it (or
// set it aside and say why, never misread it). go test -run TestGoldenIndex
// -update rewrites it; the log it indexes is a random walk with a fixed
// seed and clock, signed with the test vectors' key.
func TestGoldenIndexV1(t *testing.T) {
	dir := filepath.Join("testdata", "index-v1")
	if *update {
		smallIndex(t)
		tl := newTestLog(t, t.TempDir(), 2026)
		keep(t, tl, 12).Close()
		tl.steps(9) // a tail past the index
		os.RemoveAll(dir)
		for _, f := range goldenFiles {
			copyFile(t, filepath.Join(tl.dir, f), filepath.Join(dir, f))
		}
		copyDir(t, filepath.Join(tl.dir, "evidence", "ix"), filepath.Join(dir, "evidence", "ix"))
		for _, d := range []string{"blobs", "packs"} { // content: blob files and packs
			if _, err := os.Stat(filepath.Join(tl.dir, "evidence", d)); err == nil {
				copyDir(t, filepath.Join(tl.dir, "evidence", d), filepath.Join(dir, "evidence", d))
			}
		}
		want := collect(t, whole(t, tl.dir), tl)
		b, _ := json.MarshalIndent(summary(want), "", " ")
		os.WriteFile(filepath.Join(dir, "expected.json"), append(b, '\n'), 0o644)
	}
	state := t.TempDir()
	copyDir(t, filepath.Join(dir, "evidence"), filepath.Join(state, "evidence"))
	x := open(t, state)
	if x.Rebuilt() != "" {
		t.Fatalf("the golden index was set aside: %s", x.Rebuilt())
	}
	if len(x.segs) < 2 || x.hd.size >= x.Through() {
		t.Fatalf("the golden index has %d segments and no tail (%d of %d records)", len(x.segs), x.hd.size, x.Through())
	}
	tl := &testLog{sess: []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}}
	got := collect(t, x, tl)
	sameAnswers(t, "golden vs its log", got, collect(t, whole(t, state), tl))
	var want map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &want)
	var have map[string]any
	b, _ = json.Marshal(summary(got))
	json.Unmarshal(b, &have)
	gb, _ := json.Marshal(have)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Fatalf("the golden index answers\n %s\nwant\n %s", gb, wb)
	}
}

// summary is what expected.json keeps of the answers.
func summary(a answers) map[string]any {
	hist := map[string]int{}
	var last []string
	for p, vs := range a.History {
		hist[p] = len(vs)
		if len(vs) > 0 {
			last = append(last, p+" "+vs[len(vs)-1].Type+" "+vs[len(vs)-1].Hash.Hex())
		}
	}
	sess := map[string]string{}
	for _, s := range a.Sessions {
		sess[s.ID] = s.Principal + " " + s.Parent + " " + jsonText(s.Taint) + " " + jsonText(s.Cgroups)
	}
	return map[string]any{"through": a.Through, "versions": hist, "current": len(a.Current), "pending": len(a.Pending),
		"mounts": len(a.Mounts), "snapshots": len(a.Snapshots), "sessions": sess, "attests": a.Attests,
		"children": len(a.Children), "last": sortedStrings(last)}
}

func jsonText(v any) string { b, _ := json.Marshal(v); return string(b) }

func sortedStrings(l []string) []string {
	m := map[string]bool{}
	for _, s := range l {
		m[s] = true
	}
	return sortedKeys(m)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(to), 0o755)
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
