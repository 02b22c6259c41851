package principal

import (
	"time"

	"github.com/aerfs/aerfs/policy"
)

// # Retired sessions
//
// A session that has ended (its root exited, or the owner ended it), none
// of whose processes is left, none of whose descendants is still known and
// that is not quarantined (a quarantine lasts until the owner lifts it),
// is retired: the registry forgets it, and what the log says of it stays
// in the archive (the log's index). The registry's memory is then bounded
// by the sessions that are live, not by every session ever registered.
//
// Retirement never breaks a session id's binding to the registration that
// made it. The archive is asked whenever the registry does not know an id
// or a cgroup: a registration of a retired id is decided as for a session
// known from an earlier mount (only from inside it, or by the owner with
// --resume), and a process found in a retired session's cgroup brings the
// session back with its principal, parent and taint. A session is never
// retired while a session started from it is known, so that every live
// session reaches, through its parents, the very sessions whose taint it
// carries.

// Archive is where the registry finds the sessions it does not hold.
type Archive interface {
	// ArchivedSession is what the log says of session id.
	ArchivedSession(id string) (ArchivedSession, bool)
	// ArchivedCgroup is the session whose registration made cgroup rel
	// (relative to the mount's subtree).
	ArchivedCgroup(rel string) (ArchivedSession, bool)
}

// ArchivedSession is a session as the log says it was registered.
type ArchivedSession struct {
	ID        string
	Principal policy.Principal
	Parent    string
	Cgroups   []string
	Taint     policy.Taint
	Started   time.Time
	Ended     time.Time // zero: not ended
	Agent     string
	// ThisMount: registered during the current mount (rejoining it then
	// does not need --resume, as for a session never retired).
	ThisMount bool
}

// SetArchive gives the registry its archive. Call it before the mount
// serves.
func (r *Registry) SetArchive(a Archive) {
	r.mu.Lock()
	r.archive = a
	r.mu.Unlock()
}

// unretire brings session a back into the registry (with its ancestors),
// or returns the one the registry already holds. Called with r.mu held.
func (r *Registry) unretire(a ArchivedSession, depth int) *Session {
	if s := r.sessions[a.ID]; s != nil {
		return s
	}
	var parent *Session
	if a.Parent != "" && depth < 64 {
		parent = r.sessions[a.Parent]
		if parent == nil && r.archive != nil {
			if pa, ok := r.archive.ArchivedSession(a.Parent); ok {
				parent = r.unretire(pa, depth+1)
			}
		}
	}
	s := &Session{ID: a.ID, Principal: a.Principal, Started: a.Started, parent: parent, restored: !a.ThisMount}
	s.taint.Store(uint32(a.Taint))
	if !a.Ended.IsZero() {
		s.MarkEnded(a.Ended)
	}
	s.SetAgent(a.Agent)
	r.sessions[a.ID] = s
	for _, cg := range a.Cgroups {
		if _, taken := r.byCg[cg]; !taken {
			r.byCg[cg] = member{sess: s, principal: a.Principal}
		}
	}
	r.invalidate()
	return s
}

// lookupArchived finds session id in the registry or, retired, in the
// archive (bringing it back). Called with r.mu held.
func (r *Registry) lookupArchived(id string) *Session {
	if s := r.sessions[id]; s != nil {
		return s
	}
	if r.archive == nil {
		return nil
	}
	a, ok := r.archive.ArchivedSession(id)
	if !ok {
		return nil
	}
	return r.unretire(a, 0)
}

// OnRetire makes the registry call f with every session it retires, once
// forgotten (the guard then forgets what it holds about it: what it read,
// its refusals). Call it before the mount serves.
func (r *Registry) OnRetire(f func(*Session)) {
	r.mu.Lock()
	r.onRetire = append(r.onRetire, f)
	r.mu.Unlock()
}

// Retiree is a session that may be retired, as it was when chosen.
type Retiree struct {
	s     *Session
	taint uint32
	ended int64
}

// Retirees lists the sessions that have ended, none of whose processes is
// left. Before it retires them (Retire), the daemon makes sure the archive
// holds everything recorded of them so far: a session is retired only if
// nothing happened to it in between (its taint, its end), so that nothing
// recorded of it after the archive caught up can be lost.
func (r *Registry) Retirees() []Retiree {
	r.mu.RLock()
	if r.archive == nil {
		r.mu.RUnlock()
		return nil
	}
	var cands []*Session
	for _, s := range r.sessions {
		// A quarantined session stays until the owner releases it: the
		// quarantine is the registry's, and retiring it would lift it.
		if !s.Implicit && !s.Ended().IsZero() && !s.Quarantined() {
			cands = append(cands, s)
		}
	}
	r.mu.RUnlock()
	var out []Retiree
	for _, s := range cands {
		if r.Live(s) == 0 {
			out = append(out, Retiree{s: s, taint: s.taint.Load(), ended: s.ended.Load()})
		}
	}
	return out
}

// Retire forgets the retirees that are as they were when Retirees chose
// them, still without a live process and without a known session started
// from them, tells OnRetire's functions, and reports them.
func (r *Registry) Retire(cands []Retiree) []*Session {
	var out []*Session
	for _, c := range cands {
		s := c.s
		r.mu.Lock()
		if r.sessions[s.ID] != s || s.taint.Load() != c.taint || s.ended.Load() != c.ended || s.Quarantined() ||
			r.hasDescendant(s) || r.liveLocked(s) > 0 {
			r.mu.Unlock()
			continue
		}
		delete(r.sessions, s.ID)
		for rel, m := range r.byCg {
			if m.sess == s {
				delete(r.byCg, rel)
			}
		}
		for id, m := range r.members {
			if m.sess == s {
				delete(r.members, id)
			}
		}
		r.invalidate()
		r.mu.Unlock()
		out = append(out, s)
	}
	r.mu.RLock()
	hooks := r.onRetire
	r.mu.RUnlock()
	for _, s := range out {
		for _, f := range hooks {
			f(s)
		}
	}
	return out
}

// hasDescendant reports whether a session the registry holds was started
// from s. Called with r.mu held.
func (r *Registry) hasDescendant(s *Session) bool {
	for _, x := range r.sessions {
		for p := x.parent; p != nil; p = p.parent {
			if p == s {
				return true
			}
		}
	}
	return false
}
