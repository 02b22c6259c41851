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
	locks pathLocks

	mu       sync.Mutex
	expected map[string]string // path → content aerfs last gave it ("" = absent)
	inflight map[string]int
	onKnown  func(rel string)
}

// Lock serialises changes of the given paths: it takes their locks in one
// order (so that two changes of the same paths cannot deadlock) and
// returns the function that releases them.
func (c *Changes) Lock(paths ...string) func() {
	if len(paths) == 1 {
		return c.locks.lock(paths[0])
	}
	ps := append([]string(nil), paths...)
	sort.Strings(ps)
	var unlocks []func()
	for i, p := range ps {
		if i > 0 && ps[i-1] == p {
			continue
		}
		unlocks = append(unlocks, c.locks.lock(p))
	}
	return func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}
}

// Locked reports whether a change of rel holds or awaits its lock: a stat
// taken now may belong to the version being replaced, and the label it is
// checked against to the one being published.
func (c *Changes) Locked(rel string) bool { return c.locks.busy(rel) }

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
	onKnown := c.onKnown
	c.mu.Unlock()
	if !known && onKnown != nil {
		onKnown(rel)
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

// pathLocks serialises the changes of one guarded path, so that each
// record names the version it really replaced and nobody sees a version
// whose label and expected content are still those of another commit.
// The zero value is ready to use.
type pathLocks struct {
	mu sync.Mutex
	m  map[string]*pathLock
}

type pathLock struct {
	sync.Mutex
	users int // holders and waiters; the entry goes when it drops to 0
}

// lock takes rel's lock and returns the function that releases it.
func (p *pathLocks) lock(rel string) func() {
	p.mu.Lock()
	if p.m == nil {
		p.m = map[string]*pathLock{}
	}
	l := p.m[rel]
	if l == nil {
		l = &pathLock{}
		p.m[rel] = l
	}
	l.users++
	p.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		p.mu.Lock()
		if l.users--; l.users == 0 {
			delete(p.m, rel)
		}
		p.mu.Unlock()
	}
}

// busy reports whether a change of rel holds or awaits its lock.
func (p *pathLocks) busy(rel string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[rel] != nil
}
