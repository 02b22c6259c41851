package tracking

import (
	"sort"
	"sync"
)

// Changes follows the guard's own changes of guarded paths: one lock per
// path being changed (the whole decide → keep → store → record → publish
// → label sequence of a change runs under it), the paths being changed
// right now, and the content the guard last gave each path, which the
// drift watcher compares the files with.
type Changes struct {
	lmu   sync.Mutex
	locks map[string]*pathLock // the paths being changed (held or awaited)

	mu       sync.Mutex
	expected map[string]string // path → content aerfs last gave it ("" = absent)
	inflight map[string]int
	onKnown  func(rel string)
	onChange func(rel string)
}

// pathLock serialises the changes of one path, so that each record names
// the version it really replaced and nobody sees a version whose label
// and expected content are still those of another change.
type pathLock struct {
	sync.Mutex
	users int // holders and waiters; the entry goes when it drops to 0
}

// Lock serialises changes of the given paths: it takes their locks in one
// order (so that two changes of the same paths cannot deadlock) and
// returns the function that releases them.
func (c *Changes) Lock(paths ...string) func() {
	ps := append([]string(nil), paths...)
	sort.Strings(ps)
	var held []string
	for i, p := range ps {
		if i > 0 && ps[i-1] == p {
			continue
		}
		c.lmu.Lock()
		if c.locks == nil {
			c.locks = map[string]*pathLock{}
		}
		l := c.locks[p]
		if l == nil {
			l = &pathLock{}
			c.locks[p] = l
		}
		l.users++
		c.lmu.Unlock()
		l.Lock()
		held = append(held, p)
	}
	return func() {
		c.lmu.Lock()
		defer c.lmu.Unlock()
		for i := len(held) - 1; i >= 0; i-- {
			l := c.locks[held[i]]
			l.Unlock()
			if l.users--; l.users == 0 {
				delete(c.locks, held[i])
			}
		}
	}
}

// Locked reports whether a change of rel holds or awaits its lock: a stat
// taken now may belong to the version being replaced, and the label it is
// checked against to the one being published.
func (c *Changes) Locked(rel string) bool {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	return c.locks[rel] != nil
}

// Expect notes the content aerfs itself is about to give rel ("" =
// absent), before it does: the drift watcher sees aerfs's own changes
// too, and must not mistake them for drift.
func (c *Changes) Expect(rel, hash string) {
	c.mu.Lock()
	if c.expected == nil {
		c.expected = map[string]string{}
	}
	_, known := c.expected[rel]
	c.expected[rel] = hash
	onKnown, onChange := c.onKnown, c.onChange
	c.mu.Unlock()
	if !known && onKnown != nil {
		onKnown(rel)
	}
	if onChange != nil {
		onChange(rel)
	}
}

// Expected returns the content aerfs last gave rel, and whether it knows.
func (c *Changes) Expected(rel string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.expected[rel]
	return h, ok
}

// SetExpected replaces what aerfs believes the guarded files hold (from
// the evidence log, at mount).
func (c *Changes) SetExpected(state map[string]string) {
	c.mu.Lock()
	c.expected = make(map[string]string, len(state))
	for p, h := range state {
		c.expected[p] = h
	}
	c.mu.Unlock()
}

// OnKnown sets a function called with each guarded path aerfs starts to
// know the content of while mounted (its first commit, a rename onto it),
// before aerfs changes the file: the drift watcher watches the path's
// directory from then on.
func (c *Changes) OnKnown(f func(rel string)) {
	c.mu.Lock()
	c.onKnown = f
	c.mu.Unlock()
}

// OnChange sets a function called with each guarded path aerfs is about
// to change (a commit, a rename, a restore): what the flush at unmount
// makes durable.
func (c *Changes) OnChange(f func(rel string)) {
	c.mu.Lock()
	c.onChange = f
	c.mu.Unlock()
}

// Begin announces a change of aerfs's own: each path of after is being
// changed (the drift watcher leaves it alone until end is called) and
// will hold the content after says ("" = absent). undo, called when the
// change does not happen, takes the announcement back.
func (c *Changes) Begin(after map[string]string) (undo, end func()) {
	type was struct {
		hash  string
		known bool
	}
	prev := make(map[string]was, len(after))
	var fresh []string
	c.mu.Lock()
	if c.expected == nil {
		c.expected = map[string]string{}
	}
	if c.inflight == nil {
		c.inflight = map[string]int{}
	}
	for p, h := range after {
		c.inflight[p]++
		old, known := c.expected[p]
		prev[p] = was{old, known}
		c.expected[p] = h
		if !known {
			fresh = append(fresh, p)
		}
	}
	onKnown, onChange := c.onKnown, c.onChange
	c.mu.Unlock()
	if onKnown != nil {
		for _, p := range fresh {
			onKnown(p)
		}
	}
	if onChange != nil {
		for p := range after {
			onChange(p)
		}
	}
	undo = func() {
		c.mu.Lock()
		for p, w := range prev {
			if w.known {
				c.expected[p] = w.hash
			} else {
				c.expected[p] = ""
			}
		}
		c.mu.Unlock()
	}
	end = func() {
		c.mu.Lock()
		for p := range after {
			if c.inflight[p]--; c.inflight[p] <= 0 {
				delete(c.inflight, p)
			}
		}
		c.mu.Unlock()
	}
	return undo, end
}

// Changing marks rel as being changed by aerfs until the returned func is
// called: the drift watcher must not compare a file with its expected
// content in the middle of aerfs's own change (the rename that publishes
// it will wake the watcher again).
func (c *Changes) Changing(rel string) func() {
	c.mu.Lock()
	if c.inflight == nil {
		c.inflight = map[string]int{}
	}
	c.inflight[rel]++
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		if c.inflight[rel]--; c.inflight[rel] <= 0 {
			delete(c.inflight, rel)
		}
		c.mu.Unlock()
	}
}

// InFlight reports whether aerfs is changing rel right now.
func (c *Changes) InFlight(rel string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight[rel] > 0
}
