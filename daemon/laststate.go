package daemon

import (
	"context"
	"time"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/snapshot"
)

// interrupted is a change the log recorded during a mount that ended in a
// crash: the file may still hold Before (the change was recorded, then
// the daemon died before publishing it), and the next mount completes it
// to After.
type interrupted struct {
	Before, After string // content hashes; "" = absent
	Type          string // the record's type: write, delete, rename, …
}

// lastKnownState is what the log says the guarded files held last ("" for
// a path the log knows to be absent), and the changes that may not have
// been published: the last version of each path recorded after the
// previous mount's unmount record, or, when that mount ended without one
// (a crash), recorded during it. A mount that ended cleanly published
// everything it recorded; a difference from it is drift, never something
// to complete (a file deleted while unmounted stays deleted). Both come from the same index that history and restore
// read. Called after the current mount's own record.
//
// ended is when the previous mount of this log ended (zero when there was
// none): a guarded file born since was created while unmounted.
func lastKnownState(stateDir string) (map[string]string, map[string]interrupted, time.Time, error) {
	x, err := snapshot.Load(stateDir)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	defer x.Close()
	cur := x.Current()
	st := map[string]string{}
	for p, h := range cur { // includes files only a snapshot saw
		st[p] = h
	}
	for _, p := range x.Paths() {
		st[p] = cur[p]
	}
	pending := map[string]interrupted{}
	ms := x.Mounts()
	if len(ms) < 2 {
		return st, pending, time.Time{}, nil
	}
	prevMount := ms[len(ms)-2]
	from, to := prevMount.Idx, ms[len(ms)-1].Idx
	if prevMount.Clean {
		from = prevMount.EndIdx
	}
	end := to - 1 // a crashed mount: the last record before this one
	if prevMount.Clean {
		end = prevMount.EndIdx
	}
	ended, err := recordTime(stateDir, end)
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	for _, p := range x.Paths() {
		h := x.History(p)
		if len(h) == 0 {
			continue
		}
		v := h[len(h)-1]
		if v.Idx <= from || v.Idx >= to || v.Hash == v.OldHash {
			continue
		}
		switch v.Type {
		case evidence.TypeWrite, evidence.TypeApprove, evidence.TypeDelete, evidence.TypeRename:
			pending[p] = interrupted{Before: v.OldHash, After: v.Hash, Type: v.Type}
		}
	}
	return st, pending, ended, nil
}

// recordTime is the time of the record at idx.
func recordTime(stateDir string, idx int64) (time.Time, error) {
	var t time.Time
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := evidence.Follow(ctx, stateDir, idx, func(_ int64, _ string, r *evidence.Record) error {
		if t.IsZero() {
			t, _ = evidence.ParseTime(r.Meta.Time)
			cancel()
		}
		return nil
	})
	if t.IsZero() && err != nil && ctx.Err() == nil {
		return t, err
	}
	return t, nil
}
