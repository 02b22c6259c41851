package snapshot

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/aerfs/aerfs/internal/printable"
)

// Context is the number of unchanged lines Diff shows around a change.
const Context = 3

// Diff returns the unified diff (as `diff -u`, three lines of context)
// that turns a into b, or "" when they are equal. The headers are
// "--- a/aName" and "+++ b/bName"; a name "/dev/null" is printed as is (a
// file that does not exist). Content with a NUL byte is reported as
// binary, like diff does.
//
// The line matching is Myers' O(ND) algorithm in linear space, so the diff
// is minimal; among minimal diffs it may pick another than GNU diff does.
func Diff(aName, bName string, a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	hdr := func(prefix, name string) string {
		if name == "/dev/null" {
			return name
		}
		// A session names what it makes: a name never prints a line of
		// its own (a forged hunk above the real one).
		return prefix + printable.Line(name)
	}
	an, bn := hdr("a/", aName), hdr("b/", bName)
	al, bl := splitLines(a), splitLines(b)
	d := newDiffer(al, bl)
	d.compare(0, len(al), 0, len(bl))

	var out strings.Builder
	if isBinary(a) || isBinary(b) {
		// Content with a NUL is still shown line by line: "Binary files
		// differ" would let one NUL hide what the owner approves. Every
		// byte that is not printable text is escaped where it is shown
		// (internal/printable).
		out.WriteString("(not text: shown line by line, bytes that are not printable escaped as \\xNN)\n")
	}
	if d.coarse {
		// Before the headers, where patch(1) skips what it does not know.
		out.WriteString("(too large to match line by line: the changed ranges are shown replaced whole)\n")
	}
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", an, bn)
	for _, h := range d.hunks(Context) {
		writeHunk(&out, al, bl, h)
	}
	return out.String()
}

func isBinary(b []byte) bool {
	if len(b) > 8192 {
		b = b[:8192]
	}
	return bytes.IndexByte(b, 0) >= 0
}

// splitLines splits after every newline; the last line may lack one.
func splitLines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i+1]))
		b = b[i+1:]
	}
	return out
}

// maxDiffWork bounds the steps of the line matching (Myers' search costs
// up to (N+M)·D, quadratic when the two sides have little in common): a
// quarantined write of a million lines against the owner's file must not
// keep aerfs pending, diff or a burst rollback busy for minutes. Past it,
// the ranges not yet matched are shown as replaced whole: still a correct
// diff, only not a minimal one.
const maxDiffWork = 20_000_000

type differ struct {
	a, b   []int // lines as small integers: equal lines, equal numbers
	ca, cb []bool
	vf, vb []int
	work   int  // steps of the search so far
	coarse bool // the budget ran out: some ranges were not matched line by line
}

func newDiffer(al, bl []string) *differ {
	ids := map[string]int{}
	num := func(ls []string) []int {
		out := make([]int, len(ls))
		for i, l := range ls {
			id, ok := ids[l]
			if !ok {
				id = len(ids)
				ids[l] = id
			}
			out[i] = id
		}
		return out
	}
	d := &differ{a: num(al), b: num(bl), ca: make([]bool, len(al)), cb: make([]bool, len(bl))}
	n := len(al) + len(bl) + 2
	d.vf, d.vb = make([]int, 2*n+2), make([]int, 2*n+2)
	return d
}

// compare marks in ca and cb the lines of a[aLo:aHi] and b[bLo:bHi] that
// are not in a longest common subsequence.
func (d *differ) compare(aLo, aHi, bLo, bHi int) {
	for aLo < aHi && bLo < bHi && d.a[aLo] == d.b[bLo] {
		aLo++
		bLo++
	}
	for aLo < aHi && bLo < bHi && d.a[aHi-1] == d.b[bHi-1] {
		aHi--
		bHi--
	}
	if aLo == aHi || bLo == bHi {
		for i := aLo; i < aHi; i++ {
			d.ca[i] = true
		}
		for j := bLo; j < bHi; j++ {
			d.cb[j] = true
		}
		return
	}
	x, y, ok := d.split(aLo, aHi, bLo, bHi)
	if !ok || (x == aLo && y == bLo) || (x == aHi && y == bHi) {
		// Over the budget; otherwise cannot happen for a minimal split
		// (never loop).
		for i := aLo; i < aHi; i++ {
			d.ca[i] = true
		}
		for j := bLo; j < bHi; j++ {
			d.cb[j] = true
		}
		return
	}
	d.compare(aLo, x, bLo, y)
	d.compare(x, aHi, y, bHi)
}

// split finds a point on a shortest edit path by searching from both ends
// at once (Myers 1986, section 4b) and returns it in absolute coordinates.
func (d *differ) split(aLo, aHi, bLo, bHi int) (int, int, bool) {
	n, m := aHi-aLo, bHi-bLo
	maxD := (n + m + 1) / 2
	off := maxD + 1
	vf, vb := d.vf[:2*off+2], d.vb[:2*off+2]
	for i := range vf {
		vf[i], vb[i] = -1, -1
	}
	vf[off+1], vb[off+1] = 0, 0
	delta := n - m
	front := delta%2 != 0
	// Diagonals that ran off the grid are skipped from then on.
	k1start, k1end, k2start, k2end := 0, 0, 0, 0
	for D := 0; D < maxD+1; D++ {
		if d.work += 2*D + 2 + n/64 + m/64; d.work > maxDiffWork {
			d.coarse = true
			return 0, 0, false
		}
		for k1 := -D + k1start; k1 <= D-k1end; k1 += 2 {
			i := off + k1
			var x int
			if k1 == -D || (k1 != D && vf[i-1] < vf[i+1]) {
				x = vf[i+1]
			} else {
				x = vf[i-1] + 1
			}
			y := x - k1
			for x < n && y < m && d.a[aLo+x] == d.b[bLo+y] {
				x++
				y++
			}
			vf[i] = x
			switch {
			case x > n:
				k1end += 2
			case y > m:
				k1start += 2
			case front:
				j := off + delta - k1
				if j >= 0 && j < len(vb) && vb[j] != -1 && x >= n-vb[j] {
					return aLo + x, bLo + y, true
				}
			}
		}
		for k2 := -D + k2start; k2 <= D-k2end; k2 += 2 {
			i := off + k2
			var x int
			if k2 == -D || (k2 != D && vb[i-1] < vb[i+1]) {
				x = vb[i+1]
			} else {
				x = vb[i-1] + 1
			}
			y := x - k2
			for x < n && y < m && d.a[aHi-1-x] == d.b[bHi-1-y] {
				x++
				y++
			}
			vb[i] = x
			switch {
			case x > n:
				k2end += 2
			case y > m:
				k2start += 2
			case !front:
				j := off + delta - k2
				if j >= 0 && j < len(vf) && vf[j] != -1 {
					x1 := vf[j]
					y1 := x1 - (j - off)
					if x1 >= n-x {
						return aLo + x1, bLo + y1, true
					}
				}
			}
		}
	}
	return 0, 0, false
}

// change is a run of changed lines: a[a:a+da] replaced by b[b:b+db].
type change struct{ a, da, b, db int }

// hunks groups the changes into hunks: changes with at most 2*ctx
// unchanged lines between them share one, as in diff -u.
func (d *differ) hunks(ctx int) [][]change {
	var cs []change
	i, j := 0, 0
	for i < len(d.ca) || j < len(d.cb) {
		if i < len(d.ca) && j < len(d.cb) && !d.ca[i] && !d.cb[j] {
			i++
			j++
			continue
		}
		c := change{a: i, b: j}
		for i < len(d.ca) && d.ca[i] {
			i++
		}
		for j < len(d.cb) && d.cb[j] {
			j++
		}
		c.da, c.db = i-c.a, j-c.b
		cs = append(cs, c)
	}
	var hs [][]change
	for _, c := range cs {
		if n := len(hs); n > 0 {
			last := hs[n-1][len(hs[n-1])-1]
			if c.a-(last.a+last.da) <= 2*ctx {
				hs[n-1] = append(hs[n-1], c)
				continue
			}
		}
		hs = append(hs, []change{c})
	}
	return hs
}

func writeHunk(out *strings.Builder, al, bl []string, h []change) {
	first, last := h[0], h[len(h)-1]
	pre := min(Context, first.a)
	aStart, bStart := first.a-pre, first.b-pre
	post := min(Context, len(al)-(last.a+last.da))
	aEnd, bEnd := last.a+last.da+post, last.b+last.db+post
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(aStart, aEnd-aStart), hunkRange(bStart, bEnd-bStart))
	line := func(mark byte, s string) {
		out.WriteByte(mark)
		out.WriteString(s)
		if !strings.HasSuffix(s, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
	i := aStart
	for _, c := range h {
		for ; i < c.a; i++ {
			line(' ', al[i])
		}
		for k := c.a; k < c.a+c.da; k++ {
			line('-', al[k])
		}
		for k := c.b; k < c.b+c.db; k++ {
			line('+', bl[k])
		}
		i = c.a + c.da
	}
	for ; i < aEnd; i++ {
		line(' ', al[i])
	}
}

// hunkRange formats a line range as diff -u does: "start,count", "start"
// for one line, and the line before the range for an empty one.
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}
