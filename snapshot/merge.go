package snapshot

import (
	"bytes"
	"sort"
)

// # Taking one writer's changes out of a file
//
// A burst rollback must undo what one session wrote and keep what others
// wrote after it — including a line the owner added between two of the
// session's writes. Rebase does it version by version: starting from the
// content before the session's first change, each later change by someone
// else is replayed onto it with a three-way merge, and the session's own
// changes are left out. Merge3 merges line by line: two changes conflict
// when they touch overlapping lines, or insert different lines at the
// same place; a change next to another (a line added right after one the
// session wrote) is not a conflict. A conflict is never resolved by
// guessing: the caller leaves the file alone and asks the owner.

// edit replaces base lines [lo, hi) with lines.
type edit struct {
	lo, hi int
	lines  []string
	side   int
}

// edits lists the changes that turn a into b, in order.
func edits(al, bl []string, side int) []edit {
	d := newDiffer(al, bl)
	d.compare(0, len(al), 0, len(bl))
	var out []edit
	i, j := 0, 0
	for i < len(al) || j < len(bl) {
		if i < len(al) && j < len(bl) && !d.ca[i] && !d.cb[j] {
			i++
			j++
			continue
		}
		e := edit{lo: i, side: side}
		for i < len(al) && d.ca[i] {
			i++
		}
		for j < len(bl) && d.cb[j] {
			e.lines = append(e.lines, bl[j])
			j++
		}
		e.hi = i
		out = append(out, e)
	}
	return out
}

func sameEdit(a, b edit) bool {
	if a.lo != b.lo || a.hi != b.hi || len(a.lines) != len(b.lines) {
		return false
	}
	for i := range a.lines {
		if a.lines[i] != b.lines[i] {
			return false
		}
	}
	return true
}

// Merge3 applies to ours (base with changes of its own) the changes that
// turn base into theirs. It reports false, and no content, when a change
// of theirs conflicts with one of ours.
func Merge3(base, ours, theirs []byte) ([]byte, bool) {
	switch {
	case bytes.Equal(base, theirs):
		return ours, true
	case bytes.Equal(base, ours), bytes.Equal(ours, theirs):
		return theirs, true
	}
	bl := splitLines(base)
	all := append(edits(bl, splitLines(ours), 0), edits(bl, splitLines(theirs), 1)...)
	// By position; at one position an insertion comes before a change of
	// the lines there.
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].lo != all[j].lo {
			return all[i].lo < all[j].lo
		}
		return all[i].hi-all[i].lo < all[j].hi-all[j].lo
	})
	var kept []edit
	for _, e := range all {
		if n := len(kept); n > 0 {
			p := kept[n-1]
			if sameEdit(p, e) {
				continue // both made the same change
			}
			if p.side != e.side && (e.lo < p.hi || p.lo == p.hi && e.lo == e.hi && p.lo == e.lo) {
				return nil, false
			}
		}
		kept = append(kept, e)
	}
	var out bytes.Buffer
	pos := 0
	for _, e := range kept {
		for _, l := range bl[pos:e.lo] {
			out.WriteString(l)
		}
		for _, l := range e.lines {
			out.WriteString(l)
		}
		pos = e.hi
	}
	for _, l := range bl[pos:] {
		out.WriteString(l)
	}
	return out.Bytes(), true
}
