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
// foldWindow are recorded one by one; the rest of that window are
// counted, and the count is recorded as one summary record of the kind
// (meta.folded: how many refusals it stands for) when the window ends,
// when the gate is flushed (at unmount) or when the folder must forget
// its kinds. Every refusal is in the log, one by one or in a count. The
// burst limit counts every refusal, folded or not.
const (
	foldWindow = time.Minute
	foldFirst  = 3
	// foldKeys bounds the kinds followed at once; past it every count is
	// recorded and the kinds start again.
	foldKeys = 1 << 14
)

type foldKey struct {
	who, op, path, rule string
}

type foldCount struct {
	since  time.Time        // start of the window
	n      int              // refusals in the window
	folded int              // of them, not recorded one by one
	first  time.Time        // time of the first of them
	lastAt time.Time        // time of the latest of them
	last   *evidence.Record // the latest of them
	timer  *time.Timer      // records the count at the window's end
}

// folder counts refusals by kind.
type folder struct {
	mu   sync.Mutex
	m    map[foldKey]*foldCount
	emit func(*evidence.Record) // records a summary; nil: none are kept
}

// admit decides whether the refusal r is recorded. Summaries of counts the
// folder must record first (a window that ended before its timer fired,
// kinds forgotten) are returned in front of it, to be recorded in order.
func (f *folder) admit(r *evidence.Record, now time.Time) (bool, []*evidence.Record) {
	who := r.Meta.Session
	if who == "" {
		who = "pid " + strconv.Itoa(r.Meta.Pid)
	}
	k := foldKey{who: who, op: r.Meta.Op, path: r.Meta.Path, rule: r.Meta.Rule}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*evidence.Record
	if f.m == nil || len(f.m) >= foldKeys {
		out = f.takeAll()
		f.m = map[foldKey]*foldCount{}
	}
	c := f.m[k]
	if c == nil || now.Sub(c.since) >= foldWindow {
		if c != nil {
			if s := c.take(); s != nil {
				out = append(out, s)
			}
		}
		f.m[k] = &foldCount{since: now, n: 1}
		return true, out
	}
	c.n++
	if c.n <= foldFirst {
		return true, out
	}
	if c.folded == 0 {
		c.first = now
		if f.emit != nil {
			c.timer = time.AfterFunc(time.Until(c.since.Add(foldWindow)), func() { f.flushKey(k, c) })
		}
	}
	c.folded++
	c.last, c.lastAt = r, now
	return false, out
}

// take returns the summary record of c's folded refusals (nil when none)
// and forgets them.
func (c *foldCount) take() *evidence.Record {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if c.folded == 0 {
		return nil
	}
	s := *c.last
	s.Meta.Time = ""
	s.Meta.Folded = c.folded
	s.Meta.Reason += fmt.Sprintf(" (%d refusals like it from %s to %s, not recorded one by one)", c.folded,
		c.first.UTC().Format(time.RFC3339Nano), c.lastAt.UTC().Format(time.RFC3339Nano))
	c.folded, c.last = 0, nil
	return &s
}

// takeAll takes the summaries of every kind. f.mu is held.
func (f *folder) takeAll() []*evidence.Record {
	var out []*evidence.Record
	for _, c := range f.m {
		if s := c.take(); s != nil {
			out = append(out, s)
		}
	}
	return out
}

// flushKey records the count of kind k at the end of its window, unless
// the window was taken since.
func (f *folder) flushKey(k foldKey, c *foldCount) {
	f.mu.Lock()
	var s *evidence.Record
	if f.m[k] == c {
		s = c.take()
	}
	f.mu.Unlock()
	if s != nil {
		f.emit(s)
	}
}

// flush records every count now (the mount is ending).
func (f *folder) flush() {
	f.mu.Lock()
	out := f.takeAll()
	f.mu.Unlock()
	for _, s := range out {
		f.emit(s)
	}
}
