package daemon

import "sync"

// taintRecords keeps, by session, the records of what tainted it other
// than a file it read (an exec of a web client, a web host through the
// proxy, a taint declared over the control socket). Every guard asks it
// for the parents of a session's changes (guard.Config.TaintRecords), so
// that the scope of such a record is what the session wrote after it.
type taintRecords struct {
	mu sync.Mutex
	m  map[string][]string
}

const (
	// maxTaintedSessions bounds the sessions kept; past it they are
	// forgotten and kept afresh.
	maxTaintedSessions = 4096
	// maxTaintRecords bounds the records kept of one session.
	maxTaintRecords = 256
)

func (t *taintRecords) add(session, id string) {
	if t == nil || session == "" || id == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil || len(t.m) >= maxTaintedSessions {
		t.m = map[string][]string{}
	}
	ids := t.m[session]
	for _, x := range ids {
		if x == id {
			return
		}
	}
	if len(ids) < maxTaintRecords {
		t.m[session] = append(ids, id)
	}
}

func (t *taintRecords) of(session string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.m[session]...)
}
