package fs

import "github.com/aerfs/aerfs/principal"

// # Sessions retired
//
// The registry retires a session that has ended and has no process left
// (principal/archive.go); the monitor then forgets what it holds about it,
// so that its memory follows the sessions that are live: what the session
// read (first listed in a reads record, so that nothing it read is
// missing from the log), its burst count, what .aerfs/status knew of it.
// A session that comes back (resumed, or a process of it found again)
// continues its provenance chain: its reads set starts from its newest
// reads record, which the log's index gives (SetLastReads).

// ForgetSession drops what the monitor holds about session s.
func (m *Monitor) ForgetSession(s *principal.Session) {
	k := reader{session: s.ID}
	t := &m.rt
	t.mu.Lock()
	rs := t.sets[k]
	pending := rs != nil && len(rs.pending) > 0
	t.mu.Unlock()
	if pending {
		m.listReads(rs, rs.res)
	}
	t.mu.Lock()
	if rs != nil && t.sets[k] == rs && len(rs.pending) == 0 {
		t.seen -= len(rs.seen)
		delete(t.sets, k)
	}
	t.mu.Unlock()
	m.mu.Lock()
	delete(m.burst, s.ID)
	m.mu.Unlock()
	x := m.statusIndex()
	x.mu.Lock()
	delete(x.subj, subjKey(s.ID, 0))
	delete(x.loaded, subjKey(s.ID, 0))
	x.mu.Unlock()
}

// SetLastReads gives the monitor a way to find a session's newest reads
// record when it starts a reads set for it.
func (m *Monitor) SetLastReads(f func(session string) string) {
	m.rt.mu.Lock()
	m.rt.lastReads = f
	m.rt.mu.Unlock()
}
