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
	// Items says, for each blob in Prune (same order), its size and the
	// versions whose content it is: what aerfs gc --dry-run lists.
	Items []GCItem `json:"items"`
}

// GCItem is one blob a gc would remove.
type GCItem struct {
	Hash     string      `json:"hash"`
	Size     int64       `json:"size"`
	Versions []GCVersion `json:"versions"` // none: content no version names (quarantine already decided, orphan)
}

// GCVersion is a version whose content a gc would remove: the file, its
// number in aerfs history and when it was recorded.
type GCVersion struct {
	Path string    `json:"path"`
	N    int       `json:"n"` // 0: the content the file had before its first recorded version
	Time time.Time `json:"time"`
}

// Only narrows the plan to the blobs actually pruned (the committer keeps
// candidates that records appended since the plan name: evidence.Log.Prune);
// the others count as kept.
func (p GCPlan) Only(pruned []string) GCPlan {
	gone := map[string]bool{}
	for _, h := range pruned {
		gone[h] = true
	}
	out := GCPlan{Prune: []string{}, Items: []GCItem{}, Kept: p.Kept, Total: p.Total}
	for _, it := range p.Items {
		if gone[it.Hash] {
			out.Prune = append(out.Prune, it.Hash)
			out.Items = append(out.Items, it)
			out.Bytes += it.Size
		} else {
			out.Kept++
			out.Total += it.Size
		}
	}
	return out
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
	versions := map[string][]GCVersion{}
	for _, p := range x.Paths() {
		hist := x.History(p)
		seen := map[string]bool{}
		for i := len(hist) - 1; i >= 0; i-- {
			v := hist[i]
			// What the plan keeps about a version is only for blobs still
			// stored: a long history is mostly versions pruned before, and
			// the plan's memory follows the store, not the log.
			if _, ok := stored[v.Hash]; ok && v.Hash != "" {
				versions[v.Hash] = append(versions[v.Hash], GCVersion{Path: p, N: i + 1, Time: v.Time})
			}
			if _, ok := stored[v.OldHash]; ok && i == 0 && v.OldHash != "" {
				// The content before the first recorded version: "0".
				versions[v.OldHash] = append(versions[v.OldHash], GCVersion{Path: p, N: 0, Time: v.Time})
			}
			young := ret.KeepWithin > 0 && ret.Now.Sub(v.Time) < ret.KeepWithin
			if !young && len(seen) >= ret.KeepLast {
				continue // older than every retention: nothing more to learn
			}
			for _, h := range []string{v.Hash, v.OldHash} {
				if h == "" {
					continue
				}
				if !seen[h] && len(seen) < ret.KeepLast || young {
					if _, ok := stored[h]; ok {
						if t, ok := retained[h]; !ok || v.Time.After(t) {
							retained[h] = v.Time
						}
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
	plan.Items = make([]GCItem, 0, len(plan.Prune))
	for _, h := range plan.Prune {
		vs := versions[h]
		sort.Slice(vs, func(i, j int) bool {
			if vs[i].Path != vs[j].Path {
				return vs[i].Path < vs[j].Path
			}
			return vs[i].N < vs[j].N
		})
		plan.Items = append(plan.Items, GCItem{Hash: h, Size: stored[h], Versions: append([]GCVersion{}, vs...)})
	}
	if plan.Prune == nil {
		plan.Prune = []string{}
	}
	return plan
}
