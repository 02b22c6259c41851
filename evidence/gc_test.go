package evidence

import (
	"fmt"
	"strings"
	"testing"
)

// A gc plan is made from the records below some log size; what happens
// after is decided by the committer. A candidate that a record appended
// since names, or that was stored and is not recorded yet, stays; the
// rest goes after a gc record naming exactly it; a record naming content
// a gc removed after it was stored is refused, not acknowledged without
// its content.
func TestPruneDecidesInTheCommitter(t *testing.T) {
	d := newState(t)
	l := openLog(t, d)
	defer l.Close()
	put := func(s string) string {
		h, err := l.PutBlob([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	write := func(pid int, old, new string) {
		t.Helper()
		r := sampleRecord(pid)
		r.Type, r.Payload = TypeWrite, &Payload{OldHash: old, NewHash: new}
		if _, err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	v1, v2 := put("version 1\n"), put("version 2\n")
	write(1, "", v1)
	write(2, v1, v2)
	since := l.Size() // the plan reads this far: v1 and v2 are old versions
	// Meanwhile: a newer write names v1 again (restored content), and a
	// change has stored v3 without recording it yet.
	v3 := put("version 3\n")
	write(3, "", v1) // another file gets v1's content
	orphan := put("content nobody records\n")
	_ = orphan
	id, pruned, err := l.Prune(sampleRecord(4), []string{v1, v2, v3}, since)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(pruned) != fmt.Sprint([]string{v2}) || id == "" {
		t.Fatalf("pruned %v (record %q), want only v2: v1 is named since the plan, v3 is stored and not yet recorded", pruned, id)
	}
	if !l.HasBlob(v1) || !l.HasBlob(v3) || l.HasBlob(v2) {
		t.Fatalf("store after the prune: v1 %v v2 %v v3 %v", l.HasBlob(v1), l.HasBlob(v2), l.HasBlob(v3))
	}
	// v3's change records it now: fine.
	write(5, v1, v3)
	// A record naming v2, removed after it was stored, is refused...
	r := sampleRecord(6)
	r.Type, r.Payload = TypeWrite, &Payload{OldHash: v3, NewHash: v2}
	if _, err := l.Append(r); err == nil {
		t.Fatal("a record naming content gc removed was acknowledged")
	} else if !strings.Contains(err.Error(), "removed by aerfs gc") && !strings.Contains(err.Error(), "not stored") {
		t.Fatalf("refusal: %v", err)
	}
	// ...until the content is stored again.
	if put("version 2\n") != v2 {
		t.Fatal("hash")
	}
	write(7, v3, v2)
	l.Close()
	if _, err := VerifyState(d, ""); err != nil {
		t.Fatal(err)
	}
	var gc *Record
	ReadAll(d, func(_ int64, _ string, r *Record) error {
		if r.Type == TypeGC {
			gc = r
		}
		return nil
	})
	if gc == nil || fmt.Sprint(gc.Payload.Pruned) != fmt.Sprint([]string{v2}) {
		t.Fatalf("gc record: %+v", gc)
	}
}
