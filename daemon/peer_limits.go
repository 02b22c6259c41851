package daemon

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The control socket is open to every local process (mode 0666), so what
// it may hold is bounded, far below the daemon's descriptor limit: guarded
// writes, the evidence log and FUSE never compete with it for descriptors.
// A connection holds two (the socket and its peer's pidfd).
const (
	// idleTimeout: a connection must start its request line within it.
	idleTimeout = 10 * time.Second
	// lineTimeout: once started, the request line must be complete within it.
	lineTimeout = 5 * time.Second
	// writeTimeout bounds the answer.
	writeTimeout = 10 * time.Second
	// admitting bounds connections accepted but not yet admitted or refused.
	admitting = 16
)

// connLimits counts open connections per key (a session tree, or a uid
// outside sessions), per uid, and in all.
type connLimits struct {
	perKey, perUID, total int

	mu     sync.Mutex
	n      int
	byUID  map[uint32]int
	byKey  map[any]int
	warned time.Time
}

// newConnLimits sizes the limits from the daemon's descriptor limit: at
// most a sixteenth of it in connections (an eighth in descriptors, each
// connection holding two), and at most 512; a quarter of that for one uid;
// a quarter of that for one session tree (a session and those started from
// within it) or for the processes of one uid outside sessions, so that an
// agent's session cannot take the owner's share.
func newConnLimits() *connLimits {
	total := 512
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil && int(rl.Cur/16) < total {
		total = max(int(rl.Cur/16), 16)
	}
	perUID := max(total/4, 8)
	return &connLimits{perKey: max(perUID/4, 4), perUID: perUID, total: total,
		byUID: map[uint32]int{}, byKey: map[any]int{}}
}

// acquire admits one more connection for (uid, key), or says which limit
// it is over.
func (l *connLimits) acquire(uid uint32, key any, keyName string) (release func(), over string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.byKey[key] >= l.perKey:
		return nil, fmt.Sprintf("too many control connections from %s (limit %d)", keyName, l.perKey)
	case l.byUID[uid] >= l.perUID:
		return nil, fmt.Sprintf("too many control connections from uid %d (limit %d)", uid, l.perUID)
	case l.n >= l.total:
		return nil, fmt.Sprintf("too many control connections (limit %d)", l.total)
	}
	l.n++
	l.byUID[uid]++
	l.byKey[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.n--
			if l.byUID[uid]--; l.byUID[uid] == 0 {
				delete(l.byUID, uid)
			}
			if l.byKey[key]--; l.byKey[key] == 0 {
				delete(l.byKey, key)
			}
		})
	}, ""
}

// shouldWarn reports whether a refusal should go to the daemon log: at most
// once a minute.
func (l *connLimits) shouldWarn() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.warned) < time.Minute {
		return false
	}
	l.warned = time.Now()
	return true
}
