package snapshot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestJournalCrashResume(t *testing.T) {
	dir := t.TempDir()
	if j, err := ReadJournal(dir); j != nil || err != nil {
		t.Fatalf("no journal: %v %v", j, err)
	}
	h := func(c string) string { return strings.Repeat(c, 64) }
	j := &Journal{ID: "r1", Reason: "contaminated-by downloads/page.html", Steps: []Step{
		{"MEMORY.md", h("a"), h("b")}, {"memory/note.md", h("c"), ""}, {"skills/a.md", "", h("d")},
	}}
	if err := WriteJournal(dir, j); err != nil {
		t.Fatal(err)
	}
	if err := j.MarkDone(dir, 0); err != nil {
		t.Fatal(err)
	}
	// The process dies here; the next start reads the journal back.
	got, err := ReadJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "r1" || got.Reason != j.Reason || len(got.Steps) != 3 || got.Steps[2] != j.Steps[2] {
		t.Fatalf("read back %+v", got)
	}
	if r := got.Remaining(); !eqInts(r, []int{1, 2}) {
		t.Fatalf("remaining %v", r)
	}
	undo := got.Undo()
	if undo[0] != (Step{"skills/a.md", h("d"), ""}) || undo[2] != (Step{"MEMORY.md", h("b"), h("a")}) {
		t.Fatalf("undo %+v", undo)
	}
	for _, i := range got.Remaining() {
		if err := got.MarkDone(dir, i); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := ReadJournal(dir); len(got.Remaining()) != 0 {
		t.Fatalf("all done: %+v", got)
	}
	if err := got.MarkDone(dir, 3); err == nil {
		t.Fatal("step out of range accepted")
	}
	if err := RemoveJournal(dir); err != nil {
		t.Fatal(err)
	}
	if err := RemoveJournal(dir); err != nil {
		t.Fatalf("removing no journal: %v", err)
	}
	if j, err := ReadJournal(dir); j != nil || err != nil {
		t.Fatalf("after remove: %v %v", j, err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	if len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

func TestJournalCorrupt(t *testing.T) {
	h := strings.Repeat("a", 64)
	good := `{"v":1,"id":"r","reason":"x","steps":[{"path":"MEMORY.md","to":"` + h + `"}],"done":[false]}`
	cases := map[string]string{
		"good":          good,
		"truncated":     good[:len(good)-10],
		"unknown field": strings.Replace(good, `"id"`, `"extra":1,"id"`, 1),
		"trailing":      good + `{}`,
		"version":       strings.Replace(good, `"v":1`, `"v":2`, 1),
		"flags":         strings.Replace(good, `[false]`, `[false,true]`, 1),
		"no done":       strings.Replace(good, `,"done":[false]`, ``, 1),
		"bad hash":      strings.Replace(good, h, "nothex", 1),
		"escape":        strings.Replace(good, "MEMORY.md", "../etc/passwd", 1),
		"absolute":      strings.Replace(good, "MEMORY.md", "/etc/passwd", 1),
		"empty":         ``,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, JournalName), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			j, err := ReadJournal(dir)
			if name == "good" {
				if err != nil || j == nil || len(j.Steps) != 1 {
					t.Fatalf("good journal: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", j)
			}
			if !strings.Contains(err.Error(), filepath.Join(dir, JournalName)) {
				t.Fatalf("error does not name the file: %v", err)
			}
		})
	}
	// WriteJournal refuses a plan it could not read back.
	if err := WriteJournal(t.TempDir(), &Journal{Steps: []Step{{Path: "a"}}}); err == nil {
		t.Fatal("no-op step accepted")
	}
}

func eqInts(a, b []int) bool {
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
