package gate

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aerfs/aerfs/evidence"
)

// Refusals repeated by one caller are folded: a session that retries a
// refused change in a loop must not fill the state disk with records (and
// then keep the owner's own changes, which need a durable record, from
// being made). The first foldFirst refusals of one kind in a window of
// foldWindow are recorded one by one; the rest of that window are counted,
// and the next refusal of the kind after it is recorded with the count.
// The burst limit counts every refusal, folded or not.
const (
	foldWindow = time.Minute
	foldFirst  = 3
	// foldKeys bounds the kinds followed at once; past it the counts
	// start again (a kind may then be recorded a few times more).
	foldKeys = 1 << 14
)

type foldKey struct {
	who, op, path, rule string
}

type foldCount struct {
	since  time.Time // start of the window
	n      int       // refusals in the window
	folded int       // of them, not recorded
}

// folder counts refusals by kind.
type folder struct {
	mu sync.Mutex
	m  map[foldKey]*foldCount
}

// admit decides whether the refusal r is recorded; when it is, and
// refusals of its kind were folded before it, its reason says how many.
func (f *folder) admit(r *evidence.Record, now time.Time) bool {
	who := r.Meta.Session
	if who == "" {
		who = "pid " + strconv.Itoa(r.Meta.Pid)
	}
	k := foldKey{who: who, op: r.Meta.Op, path: r.Meta.Path, rule: r.Meta.Rule}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil || len(f.m) >= foldKeys {
		f.m = map[foldKey]*foldCount{}
	}
	c := f.m[k]
	if c == nil || now.Sub(c.since) >= foldWindow {
		folded, since := 0, now
		if c != nil {
			folded, since = c.folded, c.since
		}
		f.m[k] = &foldCount{since: now, n: 1}
		if folded > 0 {
			r.Meta.Reason += fmt.Sprintf(" (and %d refusals like it since %s, not recorded one by one)", folded, since.UTC().Format(time.RFC3339))
		}
		return true
	}
	c.n++
	if c.n <= foldFirst {
		return true
	}
	c.folded++
	return false
}
