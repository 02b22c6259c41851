package daemon

import (
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// # A daemon log that does not eat the disk it complains about
//
// When the state directory's file system fills up, every guarded change
// fails, and each failure says so in daemon.log — which lives in that same
// state directory. Logged once per failure, the complaints take back the
// space the owner frees faster than the evidence log can use it to heal
// (thousands of failed commits a second under a busy agent). RepeatLimiter
// lets the first lines of each kind through and then at most a few per
// period; the next line of that kind that gets through says how many were
// dropped ("repeated": N).

// RepeatLimiter is a zerolog hook that limits warnings and errors with the
// same level and message to Burst lines per Period.
type RepeatLimiter struct {
	Burst  int
	Period time.Duration

	mu    sync.Mutex
	kinds map[repeatKey]*repeatCount
}

type repeatKey struct {
	level zerolog.Level
	msg   string
}

type repeatCount struct {
	start   time.Time
	n       int // lines let through since start
	dropped int // lines dropped since the last one let through
}

// maxRepeatKinds bounds the limiter's memory: messages are constant
// strings in aerfs's code, so this is never reached in practice.
const maxRepeatKinds = 4096

// NewRepeatLimiter returns the limiter the daemon's log uses: 5 lines of a
// kind per 10 seconds.
func NewRepeatLimiter() *RepeatLimiter {
	return &RepeatLimiter{Burst: 5, Period: 10 * time.Second}
}

// Run implements zerolog.Hook.
func (h *RepeatLimiter) Run(e *zerolog.Event, level zerolog.Level, msg string) {
	if level < zerolog.WarnLevel || level > zerolog.PanicLevel {
		return
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.kinds == nil || len(h.kinds) >= maxRepeatKinds {
		h.kinds = map[repeatKey]*repeatCount{}
	}
	k := repeatKey{level, msg}
	c := h.kinds[k]
	if c == nil {
		c = &repeatCount{start: now}
		h.kinds[k] = c
	}
	if now.Sub(c.start) >= h.Period {
		c.start, c.n = now, 0
	}
	if c.n >= h.Burst {
		c.dropped++
		e.Discard()
		return
	}
	c.n++
	if c.dropped > 0 {
		e.Int("repeated", c.dropped)
		c.dropped = 0
	}
}
