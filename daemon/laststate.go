package daemon

import (
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/snapshot"
)

// lastKnownState is what the log says the guarded files held last ("" for
// a path the log knows to be absent), and, for a path whose last version
// is a write, the content that write replaced: a crash between a write's
// record and its rename leaves the file at that older content, and the
// next mount completes the write. Both come from the same index that
// history and restore read.
func lastKnownState(stateDir string) (map[string]string, map[string]string, error) {
	x, err := snapshot.Load(stateDir)
	if err != nil {
		return nil, nil, err
	}
	cur := x.Current()
	st := map[string]string{}
	before := map[string]string{}
	for p, h := range cur { // includes files only a snapshot saw
		st[p] = h
	}
	for _, p := range x.Paths() {
		st[p] = cur[p]
		if h := x.History(p); len(h) > 0 && h[len(h)-1].Type == evidence.TypeWrite {
			before[p] = h[len(h)-1].OldHash
		}
	}
	return st, before, nil
}
