package principal

import (
	"errors"
	"syscall"
	"time"
)

// What the owner's channel does to sessions: lift a burst quarantine, end a
// session (kill every process in it), and what `aerfs session list` shows.

// Release lifts the burst quarantine of s and of every session it was
// started from (a quarantine is held by the root of the session tree). It
// reports the ids of the sessions that were quarantined.
func (s *Session) Release() []string {
	var out []string
	for x := s; x != nil; x = x.parent {
		if x.held.CompareAndSwap(true, false) {
			out = append(out, x.ID)
		}
	}
	return out
}

// SetConfinement notes the confinement the session's registration asked
// for ("" when unknown).
func (s *Session) SetConfinement(c string) {
	if c != "" {
		s.confinement.Store(&c)
	}
}

// Confinement is the confinement the session's registration asked for ("" when unknown).
func (s *Session) Confinement() string {
	if p := s.confinement.Load(); p != nil {
		return *p
	}
	return ""
}

// MarkEnded notes that the owner ended the session at t.
func (s *Session) MarkEnded(t time.Time) { s.ended.Store(t.UnixNano()) }

// Ended is when the owner ended the session (zero when it was not).
func (s *Session) Ended() time.Time {
	if n := s.ended.Load(); n != 0 {
		return time.Unix(0, n).UTC()
	}
	return time.Time{}
}

// End kills every process of session s and of the sessions started from it
// and waits (up to wait) until none is left. In cgroup mode the kernel
// kills the whole cgroup at once (cgroup.kill); in ancestry mode every
// process known to be in the session is sent SIGKILL, which a process
// forked meanwhile may escape (the weaker mode says so). It reports how
// many processes were still alive when it gave up waiting.
func (r *Registry) End(s *Session, wait time.Duration) (int, error) {
	err := r.Kill(s)
	if errors.Is(err, ErrNoCgroups) {
		err = nil
		for _, id := range r.sessionMembers(s) {
			if Alive(id) {
				syscall.Kill(id.Tgid, syscall.SIGKILL)
			}
		}
	}
	if err != nil {
		return r.Live(s), err
	}
	deadline := time.Now().Add(wait)
	for {
		n := r.Live(s)
		if n == 0 || time.Now().After(deadline) {
			return n, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sessionMembers lists the processes known to be in s or in a session started
// from it (ancestry mode).
func (r *Registry) sessionMembers(s *Session) []ProcID {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []ProcID
	for id, m := range r.members {
		for x := m.sess; x != nil; x = x.parent {
			if x == s {
				out = append(out, id)
				break
			}
		}
	}
	return out
}
