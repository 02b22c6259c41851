package guard

import (
	"os"
	"syscall"
	"time"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/guard/draft"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/tracking"
	"github.com/aerfs/aerfs/guard/txn"
	"github.com/aerfs/aerfs/principal"
)

// Writer resolves the caller of a write through a guarded handle (nil
// when the request names no process).
func (d *Door) Writer(c Caller) *principal.Resolved {
	if c.Pid <= 0 {
		return nil
	}
	return d.h.gate.Resolve(c)
}

// Commit commits what the handle staged for rel (last: at its release):
// decided again for every process that wrote through the handle, each as
// it is now (it may have read something, joined a session or exec'd
// since), then either published through the transaction or kept in
// quarantine. Commits of one path are serialised. This is the walk
// docs/architecture.md draws: door → draft → gate → flow → txn.
//
// c is the process whose close or fsync asks for the commit (0: none
// waits for it). It may be inside an exec that waits for this answer (a
// close-on-exec descriptor): it is not waited for, and the writers are
// resolved before any lock is taken (principal/procwait.go).
func (d *Door) Commit(c Caller, rel string, dr *draft.Draft, last bool) syscall.Errno {
	h := d.h
	ids, due := dr.Due(last)
	if !due {
		return 0
	}
	if c.Pid > 0 {
		h.gate.ResolveCaller(c)
	}
	now := tracking.Resolve(h.reg, ids)
	p := dr.Pending(last)
	if p == nil {
		return 0
	}
	start := time.Now()
	writers := p.Writers(now)
	for _, w := range writers {
		// What each writer read is decided as it is now.
		h.opens.Settle(w)
	}
	defer h.changes.Lock(rel)()
	var cur *os.File
	if p.Rebase() {
		var err error
		if cur, err = h.dir.OpenFile(rel, os.O_RDONLY); err == nil {
			defer cur.Close()
		} else if !os.IsNotExist(err) {
			p.Done(false)
			return syscall.EIO
		}
	}
	staged, errno := p.Content(cur)
	if errno != 0 {
		p.Done(false)
		return errno
	}
	data, hash, err := backing.ReadHash(staged, txn.SmallContent)
	if err != nil {
		p.Done(false)
		return syscall.EIO
	}
	cv := h.gate.Commit(writers, rel, hash, p.Created(), p.Extends())
	if cv.Refused {
		errno = h.txn.Quarantine(cv.Record, rel, staged, cv.Target.Absent)
	} else {
		errno = h.txn.Commit(txn.Commit{Rel: rel, Staged: staged, Data: data, Hash: hash, Placeholder: cv.Placeholder, Label: cv.Label, Record: cv.Record})
	}
	p.Done(errno == 0)
	if errno == 0 && h.onCommit != nil {
		h.onCommit(time.Since(start))
	}
	return errno
}

// Release ends a guarded handle: what it staged is committed, and the
// empty file it created is removed when nothing it staged was ever
// committed (its writes or its commit were refused): the log never
// recorded the name, so it is absent again. Only that very placeholder
// goes, not a file another commit has put there since.
func (d *Door) Release(rel string, dr *draft.Draft) syscall.Errno {
	errno := d.Commit(Caller{}, rel, dr, true)
	placeholder, closed := dr.Close()
	if closed {
		return errno
	}
	if placeholder {
		h := d.h
		unlock := h.changes.Lock(rel)
		st, err := h.dir.Lstat(rel)
		if err == nil && label.KeyOf(st) == dr.Key() && st.Size == 0 && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
			if err := h.dir.Unlink(rel, 0); err != nil {
				h.led.Log.Warn().Err(err).Str("path", rel).Msg("cannot remove the empty file a refused create left")
			}
		}
		unlock()
	}
	d.h.opens.WriteClosed(dr.Held())
	return errno
}
