package snapshot

import "testing"

func TestMerge3(t *testing.T) {
	for _, c := range []struct {
		name               string
		base, ours, theirs string
		want               string
		ok                 bool
	}{
		// Rebasing the owner's line onto the file without the agent's
		// line written just before it.
		{"owner line after the agent's", "m0\na1\n", "m0\n", "m0\na1\nowner\n", "m0\nowner\n", true},
		{"owner line before the agent's", "m0\na1\n", "m0\n", "owner\nm0\na1\n", "owner\nm0\n", true},
		{"far apart", "1\n2\n3\n4\n5\n", "1\n3\n4\n5\n", "1\n2\n3\n4\nfive\n", "1\n3\n4\nfive\n", true},
		{"same change on both sides", "a\nb\n", "a\nB\n", "a\nB\n", "a\nB\n", true},
		{"theirs unchanged", "a\n", "b\n", "a\n", "b\n", true},
		{"ours unchanged", "a\n", "a\n", "c\n", "c\n", true},
		{"both rewrite one line", "a\nb\nc\n", "a\nX\nc\n", "a\nY\nc\n", "", false},
		{"both insert at one place", "a\nc\n", "a\nX\nc\n", "a\nY\nc\n", "", false},
		{"insertion inside a changed range", "a\nb\nc\nd\n", "a\nd\n", "a\nb\nY\nc\nd\n", "", false},
		{"no final newline", "a", "", "a\nb", "", false},
		{"empty base", "", "x\n", "y\n", "", false},
	} {
		got, ok := Merge3([]byte(c.base), []byte(c.ours), []byte(c.theirs))
		if ok != c.ok || ok && string(got) != c.want {
			t.Errorf("%s: Merge3 = %q, %v; want %q, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// A merge takes both sides the same way round, and with no change on one
// side it is the other side exactly.
func FuzzMerge3(f *testing.F) {
	f.Add("m0\na1\n", "m0\n", "m0\na1\nowner\n")
	f.Add("a\nb\nc\n", "a\nc\n", "a\nb\nc\nd\n")
	f.Fuzz(func(t *testing.T, base, ours, theirs string) {
		if r, ok := Merge3([]byte(base), []byte(base), []byte(theirs)); !ok || string(r) != theirs {
			t.Fatalf("no change of ours: %q, want theirs %q", r, theirs)
		}
		if r, ok := Merge3([]byte(base), []byte(ours), []byte(base)); !ok || string(r) != ours {
			t.Fatalf("no change of theirs: %q, want ours %q", r, ours)
		}
		got, ok := Merge3([]byte(base), []byte(ours), []byte(theirs))
		back, ok2 := Merge3([]byte(base), []byte(theirs), []byte(ours))
		if ok != ok2 || ok && string(got) != string(back) {
			t.Fatalf("the merge depends on the order of the sides: %q %v, %q %v", got, ok, back, ok2)
		}
	})
}
