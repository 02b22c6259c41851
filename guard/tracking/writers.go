package tracking

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"github.com/aerfs/aerfs/principal"
)

// WriterSet is every process that wrote through a handle (its opener
// included), each with the resolutions seen while it wrote. The zero value
// is ready to use; the handle's lock guards it. A handle has one writer
// or a few: a slice searched in order is cheaper than a map.
type WriterSet struct {
	ws []writer
}

type writer struct {
	id   principal.ProcID
	seen []*principal.Resolved
}

// Note adds res (a resolution of a process that writes through the
// handle). Resolutions are few per process: the registry hands out the
// same one until something about the process changes.
func (w *WriterSet) Note(res *principal.Resolved) {
	if res == nil || !res.Identified {
		return
	}
	id := res.Proc.ID
	i := 0
	for i < len(w.ws) && w.ws[i].id != id {
		i++
	}
	if i == len(w.ws) {
		w.ws = append(w.ws, writer{id: id})
	}
	x := &w.ws[i]
	for _, r := range x.seen {
		if r == res {
			return
		}
	}
	if len(x.seen) >= 8 {
		// Keep the first (the identity it opened or first wrote with) and
		// the latest ones.
		x.seen = append(x.seen[:1], x.seen[2:]...)
	}
	x.seen = append(x.seen, res)
}

// IDs is every writer's process, the opener first. Call it with the
// handle's lock held, resolve them with Resolve without it, and give the
// resolutions to With under it again: a writer's /proc may wait for this
// daemon's answer to a request that needs the lock (principal/procwait.go).
func (w *WriterSet) IDs() []principal.ProcID {
	ids := make([]principal.ProcID, len(w.ws))
	for i, x := range w.ws {
		ids[i] = x.id
	}
	return ids
}

// With notes the writers' resolutions as they are now (Resolve of IDs:
// nil for one that exited) and returns every resolution a decision about
// what they wrote must hold for: each writer as it is now (a live process
// is resolved again by its tgid and must still be the same process) and
// as it was when it wrote. Principals only go down and taint only goes
// up, so deciding for all of them is deciding for the worst. A writer
// that exited is decided by its last resolutions, whose session taint is
// live. The first element is the subject the change is recorded under:
// the opener as it is now.
func (w *WriterSet) With(now []*principal.Resolved) []*principal.Resolved {
	var out []*principal.Resolved
	for _, res := range now {
		if res != nil {
			w.Note(res)
			out = append(out, res)
		}
	}
	for _, x := range w.ws {
		out = append(out, x.seen...)
	}
	return out
}

// Resolve resolves the writers ids as they are now (IDs): nil for one
// that has exited. It reads /proc: call it with no lock held.
func Resolve(reg *principal.Registry, ids []principal.ProcID) []*principal.Resolved {
	now := make([]*principal.Resolved, len(ids))
	for i, id := range ids {
		now[i] = resolveNow(reg, id)
	}
	return now
}

// resolveNow resolves the process id as it is now: nil when it has
// exited, an unidentified subject when it is alive but cannot be resolved
// as itself.
//
// A process on its way out counts as exited: from the moment it starts
// to exit it writes nothing more, yet it stays in /proc (its program
// gone, then as a zombie until reaped) and cannot be resolved, which
// would make it an unidentified writer of what it wrote as itself. The
// release of a handle comes after the close that ended the write, often
// while the writer exits: that race decided the label before. So does a
// writer inside an exec that waits for this daemon's answer to its FLUSH
// (principal.CallerPending): it is not waited for, and what it wrote is
// decided by its last resolutions; a FLUSH of it notes it again once its
// exec is over.
func resolveNow(reg *principal.Registry, id principal.ProcID) *principal.Resolved {
	if principal.CallerPending(id.Tgid) {
		return nil
	}
	// Resolve first: a live writer (the common case) is answered from
	// the registry's cache, which checks the process is still the one it
	// knew; only an answer for another process, or none, asks whether the
	// writer is still there.
	res := reg.Resolve(id.Tgid)
	if res.Identified && res.Proc.ID == id {
		return res
	}
	// Exiting first: a process that could not be resolved because it is
	// exiting (its namespaces already gone) may be reaped between the two
	// reads, and a stat that cannot be read says nothing, while Alive
	// read second says it is gone.
	gone := true
	if !principal.WithinProcWait(id.Tgid, func() { gone = exiting(id.Tgid) || !principal.Alive(id) }) || gone {
		return nil // exited, or on its way out (its /proc does not answer)
	}
	reason := res.Reason
	if res.Identified {
		reason = fmt.Sprintf("pid %d is now process %s", id.Tgid, res.Proc.ID)
	}
	return &principal.Resolved{Reason: fmt.Sprintf("writer %s could not be resolved again at commit: %s", id, reason)}
}

// pfExiting is the kernel's PF_EXITING task flag (field 9 of stat).
const pfExiting = 0x4

// exiting reports whether the process tgid is exiting or a zombie (its
// main thread's state in /proc/<tgid>/stat: Z or X, or PF_EXITING set).
func exiting(tgid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tgid) + "/stat")
	if err != nil {
		return false // gone: Alive tells
	}
	return exitingStat(b)
}

// exitingStat parses a stat file: the state (field 3) and the flags
// (field 9) come after the last ')', which ends the command name.
func exitingStat(b []byte) bool {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 7 {
		return false
	}
	if s := f[0]; len(s) == 1 && (s[0] == 'Z' || s[0] == 'X' || s[0] == 'x') {
		return true
	}
	flags, err := strconv.ParseUint(string(f[6]), 10, 64)
	return err == nil && flags&pfExiting != 0
}
