package principal

import (
	"sync"
	"time"
)

// # Reading /proc of a process that waits for this daemon
//
// The /proc entries that tell a process's start time (stat) and its
// namespaces wait for its exec lock, which an exec holds while it closes
// the process's close-on-exec descriptors (what Node, Python and Go open
// files with): each descriptor of this mount sends a FLUSH from inside
// that exec, and the exec goes on only once the daemon answered. A daemon
// that reads the caller's stat to answer that FLUSH waits for an exec that
// waits for it; so does one that holds a lock while reading the /proc of
// any process, when that process's FLUSH needs the lock. The entries of a
// process on its way out may block their reader too.
//
// Hence three rules. Every resolution reads /proc under a bound: past
// ProcWait the process is taken as one whose entries do not answer, and
// while that read is still blocked, later resolutions of the same process
// do not wait again. A request whose caller waits for its answer in the
// kernel (a FLUSH) waits for the caller's /proc at most CallerWait, then
// answers without it and takes the caller into account once its /proc
// answers (ResolveCaller); while it does not, nobody waits for that
// process (CallerPending). And no lock that other requests take is held
// across a read of /proc: what a read needs is collected under the lock,
// read without it, and applied under it again.

// ProcWait bounds a resolution's reads of /proc.
const ProcWait = time.Second

// CallerWait bounds how long the answer to a request whose caller waits
// for it in the kernel waits for the caller's /proc: a resolution takes
// microseconds, an exec waits for the answer.
const CallerWait = 20 * time.Millisecond

var stalled sync.Map // tid → chan struct{} closed when its blocked read returns

// WithinProcWait runs f, which reads /proc entries of process tid, and
// reports whether it returned within ProcWait. When it did not, f goes on
// in the background, and until it returns further calls for tid report
// false at once without running their f.
func WithinProcWait(tid int, f func()) bool {
	if _, ok := stalled.Load(tid); ok {
		return false
	}
	done := make(chan struct{})
	go func() {
		f()
		close(done)
	}()
	t := time.NewTimer(ProcWait)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
	}
	if _, loaded := stalled.LoadOrStore(tid, done); !loaded {
		go func() {
			<-done
			stalled.Delete(tid)
		}()
	}
	return false
}

// callerResolution is a resolution of a caller that did not answer within
// CallerWait: done is closed once it is there.
type callerResolution struct {
	done chan struct{}
	res  *Resolved
}

var pendingCallers sync.Map // tid → *callerResolution

// ResolveCaller is Resolve for the caller of a request that waits for the
// answer in the kernel, possibly holding the lock its /proc entries wait
// for (the FLUSH of a close-on-exec descriptor, sent from inside its
// exec). It waits at most CallerWait: when the caller did not answer by
// then, res is nil and later returns the resolution once its /proc
// answers (the exec over; the caller is then the same process, running
// its new program), waiting for it. Until then CallerPending(tid) holds,
// and a further request of the same caller does not wait at all.
func (r *Registry) ResolveCaller(tid int, fsuid int64) (res *Resolved, later func() *Resolved) {
	if v, ok := pendingCallers.Load(tid); ok {
		return nil, v.(*callerResolution).wait
	}
	if res := r.cachedCurrent(tid, fsuid, hostGen()); res != nil {
		return res, nil // answered without reading its /proc
	}
	c := &callerResolution{done: make(chan struct{})}
	go func() {
		c.res = r.ResolveAs(tid, fsuid)
		close(c.done)
	}()
	t := time.NewTimer(CallerWait)
	defer t.Stop()
	select {
	case <-c.done:
		return c.res, nil
	case <-t.C:
	}
	if v, loaded := pendingCallers.LoadOrStore(tid, c); loaded {
		return nil, v.(*callerResolution).wait
	}
	go func() {
		<-c.done
		pendingCallers.CompareAndDelete(tid, c)
	}()
	return nil, c.wait
}

func (c *callerResolution) wait() *Resolved {
	<-c.done
	return c.res
}

// CallerPending reports whether the thread tid is a caller whose /proc
// did not answer while a request of it waits for this daemon's answer
// (ResolveCaller): reading its /proc now would wait for that very answer.
func CallerPending(tid int) bool {
	_, ok := pendingCallers.Load(tid)
	return ok
}

// AliveOrSilent reports whether the process id may still be there: alive,
// or its /proc entries do not answer (a process inside an exec, or on its
// way out: not known to be gone), which is never waited for past
// ProcWait, nor at all for a caller that waits for this daemon. For
// sweeps that forget what exited: a process kept one sweep too long costs
// nothing.
func AliveOrSilent(id ProcID) bool {
	if CallerPending(id.Tgid) {
		return true
	}
	alive := true
	if WithinProcWait(id.Tgid, func() { alive = Alive(id) }) {
		return alive
	}
	return true
}
