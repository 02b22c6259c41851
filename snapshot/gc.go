package snapshot

import (
	"sort"
	"time"
)

// Retention says which stored content aerfs gc keeps. Records are never
// pruned; content blobs outside the retention are.
type Retention struct {
	KeepLast   int           // the last N distinct versions of every file
	KeepWithin time.Duration // every version younger than this (0: none by age)
	MaxBytes   int64         // then drop the oldest retained versions until under this (0: no cap)
	Now        time.Time
}

// GCPlan is what a gc would remove.
type GCPlan struct {
	Prune []string `json:"prune"`       // blob hashes, sorted
	Bytes int64    `json:"bytes_freed"` // their size
	Kept  int      `json:"kept"`        // blobs kept
	Total int64    `json:"bytes_kept"`  // their size
}

// PlanGC chooses the blobs to remove from stored (every blob in the store,
// with its size). It never removes the current content of a file, the
// content of a pending quarantined write or the file it would replace,
// the newest snapshot's content, or anything held (a running restore's
// targets).
func (x *Index) PlanGC(ret Retention, stored map[string]int64, held []string) GCPlan {
	pinned := map[string]bool{}
	for _, h := range held {
		pinned[h] = true
	}
	for _, h := range x.Current() {
		pinned[h] = true
	}
	for _, p := range x.Pending() {
		pinned[p.Hash] = true
		pinned[p.BaseHash] = true
	}
	if snaps := x.Snapshots(); len(snaps) > 0 {
		if st, _, err := x.SnapshotState(snaps[len(snaps)-1].ID); err == nil {
			for _, h := range st {
				pinned[h] = true
			}
		}
	}
	// Retained by count and age: newest first per file.
	type cand struct {
		hash string
		t    time.Time
	}
	retained := map[string]time.Time{}
	for _, p := range x.Paths() {
		hist := x.History(p)
		seen := map[string]bool{}
		for i := len(hist) - 1; i >= 0; i-- {
			v := hist[i]
			young := ret.KeepWithin > 0 && ret.Now.Sub(v.Time) < ret.KeepWithin
			for _, h := range []string{v.Hash, v.OldHash} {
				if h == "" {
					continue
				}
				if !seen[h] && len(seen) < ret.KeepLast || young {
					if t, ok := retained[h]; !ok || v.Time.After(t) {
						retained[h] = v.Time
					}
				}
				seen[h] = true
			}
		}
	}
	var plan GCPlan
	var keep []cand
	for h, size := range stored {
		switch {
		case pinned[h]:
			plan.Kept++
			plan.Total += size
		case !retained[h].IsZero():
			keep = append(keep, cand{h, retained[h]})
			plan.Kept++
			plan.Total += size
		default:
			plan.Prune = append(plan.Prune, h)
			plan.Bytes += size
		}
	}
	if ret.MaxBytes > 0 && plan.Total > ret.MaxBytes {
		// Over the cap: the oldest retained versions go first.
		sort.Slice(keep, func(i, j int) bool { return keep[i].t.Before(keep[j].t) })
		for _, c := range keep {
			if plan.Total <= ret.MaxBytes {
				break
			}
			plan.Prune = append(plan.Prune, c.hash)
			plan.Bytes += stored[c.hash]
			plan.Total -= stored[c.hash]
			plan.Kept--
		}
	}
	sort.Strings(plan.Prune)
	return plan
}
