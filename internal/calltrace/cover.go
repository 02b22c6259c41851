package calltrace

import (
	"bufio"
	"fmt"
	"go/token"
	"os"
	"strconv"
	"strings"
)

// # The executed walk
//
// Statically, a walk takes every branch: the refusal and the error paths
// as well as the path a commit takes. An Executed set restricts the walk
// to the calls one operation really made: a call site is followed only
// when the block it stands in ran. The blocks are those whose count in a
// coverage profile (-covermode=count) of a run that made the operation is
// higher than in a profile of the same run without it (Diff).

// Executed is the set of source blocks one run executed.
type Executed struct {
	blocks map[string][]block // by file, as the coverage profile names it (import path/base)
}

type block struct{ l0, c0, l1, c1 int }

// Diff reads two text coverage profiles (go test -coverprofile) of the
// same run, with and without one operation, and keeps the blocks the
// operation ran: counted more often with it.
func Diff(with, without string) (*Executed, error) {
	a, err := readCounts(with)
	if err != nil {
		return nil, err
	}
	b, err := readCounts(without)
	if err != nil {
		return nil, err
	}
	x := &Executed{blocks: map[string][]block{}}
	for k, n := range a {
		if n > b[k] {
			x.blocks[k.name] = append(x.blocks[k.name], k.block)
		}
	}
	return x, nil
}

type blockKey struct {
	name string
	block
}

// readCounts reads the count of every block of a text coverage profile.
func readCounts(file string) (map[blockKey]int, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[blockKey]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "mode:") || line == "" {
			continue
		}
		// name.go:l0.c0,l1.c1 statements count
		colon := strings.LastIndex(line, ":")
		fields := strings.Fields(line[colon+1:])
		if colon < 0 || len(fields) != 3 {
			return nil, fmt.Errorf("%s: bad line %q", file, line)
		}
		n, err := strconv.Atoi(fields[2])
		if err != nil {
			return nil, fmt.Errorf("%s: bad count %q", file, line)
		}
		var b block
		if _, err := fmt.Sscanf(fields[0], "%d.%d,%d.%d", &b.l0, &b.c0, &b.l1, &b.c1); err != nil {
			return nil, fmt.Errorf("%s: bad block %q", file, fields[0])
		}
		out[blockKey{line[:colon], b}] += n
	}
	return out, sc.Err()
}

// ran reports whether the position pos (in the package pkg) was executed.
func (x *Executed) ran(pkg string, pos token.Position) bool {
	name := pkg + "/" + pos.Filename[strings.LastIndex(pos.Filename, "/")+1:]
	for _, b := range x.blocks[name] {
		after := pos.Line > b.l0 || pos.Line == b.l0 && pos.Column >= b.c0
		before := pos.Line < b.l1 || pos.Line == b.l1 && pos.Column <= b.c1
		if after && before {
			return true
		}
	}
	return false
}
