package guard

import (
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/guard/draft"
	"github.com/aerfs/aerfs/guard/flow"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/tracking"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// FMODE_EXEC is the open flag the kernel sets on the open that executes a
// file (__FMODE_EXEC, as go-fuse's fuse.FMODE_EXEC).
const FMODE_EXEC = 0x20

func writeIntent(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
}

// WriteIntent reports whether an open with flags may change the file.
func WriteIntent(flags uint32) bool { return writeIntent(flags) }

func openOp(flags uint32) policy.Op {
	switch {
	case writeIntent(flags):
		return policy.OpWrite
	case flags&FMODE_EXEC != 0:
		return policy.OpExec
	}
	return policy.OpRead
}

// Opened is the guard's answer to an open: how the node serves the handle.
type Opened struct {
	// Draft: a guarded file opened for writing. The handle stages every
	// write (direct I/O, never kernel passthrough) and commits at close.
	Draft *draft.Draft
	// Reader: a guarded file opened for reading, through the page cache
	// from this open to its close only; Key is the version whose taint the
	// reader took.
	Reader bool
	Key    label.Key
	// Plain: a plain file written by an identified writer, followed to its
	// close (the class of what it writes can still drop while it is open).
	Plain *Plain
	// Reading: a plain file opened to read it; Close it when the handle
	// goes (content written under an open reader reaches it).
	Reading *Reading
	// Cache: the kernel may keep the file's pages between opens (plain).
	Cache bool
	// Stat is the file as it was before the open (nil: created by it).
	Stat *syscall.Stat_t
}

// Open decides an open of rel (flags as the kernel sent them) and binds
// the decision to the handle. open is the node's own open of the backing
// file, called once the open is allowed (not for a guarded file opened
// for writing, whose handle stages) with the file the decision was made
// on: when the name holds another file by then (renamed over meanwhile)
// it opens nothing and returns ESTALE, on which the kernel looks the name
// up again and opens anew, decided anew.
func (d *Door) Open(c Caller, rel string, flags uint32, open func(decided *syscall.Stat_t) syscall.Errno) (*Opened, syscall.Errno) {
	h := d.h
	if openOp(flags) == policy.OpWrite {
		// A policy edit holds the files open for writing that it would
		// class more strictly: none is opened while it looks (SetPolicy),
		// and none it holds is opened for writing again until it is in
		// force (the hold is for the descriptors open at the edit).
		h.names.RLock()
		defer h.names.RUnlock()
		if errno := h.refuseHeld(c, rel); errno != 0 {
			return nil, errno
		}
	}
	st, err := h.dir.Lstat(rel)
	if err != nil {
		return nil, backing.Errno(err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG && h.opens.SettleFile(label.KeyOf(st)) {
		// Open for writing: what is decided here (an exec, an
		// interpreter's read, the taint a reader gains) is decided on the
		// label of its writers as they are now.
		if st, err = h.dir.Lstat(rel); err != nil {
			return nil, backing.Errno(err)
		}
	}
	t, l := h.gate.Target(rel, st)
	op := openOp(flags)
	o := &Opened{Cache: t.Class == policy.Plain && t.Namespace == policy.NSNone, Stat: st}
	if o.Cache && l == nil && op != policy.OpWrite {
		// Unlabelled plain file read by anyone: nothing to decide, nothing
		// to propagate. Kernel passthrough serves it at native speed.
		o.Reading = h.readOpened(c, nil, rel, st, l, flags)
		if errno := open(st); errno != 0 {
			o.Reading.Close()
			return nil, errno
		}
		return o, 0
	}
	res := h.gate.Resolve(c)
	if op == policy.OpWrite && flags&syscall.O_ACCMODE == syscall.O_RDWR {
		// A read-write open reads too: the file's taint reaches the
		// caller before anything it writes is decided.
		if errno := d.read(res, policy.OpRead, rel, t, l); errno != 0 {
			return nil, errno
		}
	}
	if op == policy.OpWrite {
		if _, errno := h.gate.Ask(res, op, rel, t); errno != 0 {
			return nil, errno
		}
	} else if errno := d.read(res, op, rel, t, l); errno != 0 {
		return nil, errno
	}
	switch op {
	case policy.OpExec:
		if errno := h.gate.Exec(res, "exec", rel, st, l); errno != 0 {
			return nil, errno
		}
	case policy.OpRead:
		// An interpreter reading the program it runs, the loader a
		// library: the act gate decides as for an exec.
		if errno := h.gate.Interpret(c.Pid, res, rel, st, l); errno != 0 {
			return nil, errno
		}
	}
	reading := h.readOpened(c, res, rel, st, l, flags)
	if t.Class.Guarded() {
		reading.Close() // a guarded reader takes each new version's label at its page fills
		if op == policy.OpWrite {
			dr, errno := draft.Open(h.dir, h.staging, rel, res, flags, false, label.KeyOf(st))
			if errno != 0 {
				return nil, errno
			}
			dr.Hold(h.opens.WriteOpened(dr.Key(), 0, nil, nil))
			return &Opened{Draft: dr}, 0
		}
		if errno := open(st); errno != 0 {
			return nil, errno
		}
		return &Opened{Reader: true, Key: label.KeyOf(st)}, 0
	}
	if errno := open(st); errno != 0 {
		reading.Close()
		return nil, errno
	}
	o.Reading = reading
	if op == policy.OpWrite {
		var errno syscall.Errno
		if o.Plain, errno = d.plainWriter(res, rel, st, l, flags&syscall.O_TRUNC != 0); errno != 0 {
			reading.Close()
			return nil, errno
		}
	}
	return o, 0
}

// Create decides creating rel (a guarded class, a namespace) and hands out
// a staging handle for guarded files. create is the node's own create of
// the backing file, called once allowed; a guarded file's handle from it
// is released by the node (the content arrives at commit, from the draft).
func (d *Door) Create(c Caller, rel string, flags uint32, create func(flags uint32) (*syscall.Stat_t, syscall.Errno)) (*Opened, syscall.Errno) {
	h := d.h
	h.names.RLock()
	defer h.names.RUnlock()
	if errno := h.refuseHeld(c, rel); errno != 0 {
		return nil, errno
	}
	st, _ := h.dir.Lstat(rel)
	t, l := h.gate.Target(rel, st)
	op := policy.OpCreate
	if st != nil {
		op = policy.OpWrite
	}
	res := h.gate.Resolve(c)
	if t.Class != policy.Plain || t.Namespace != policy.NSNone || l != nil || !res.Subject().Principal.Trusted() || res.Subject().Taint != 0 || res.Session.Quarantined() {
		if _, errno := h.gate.Ask(res, op, rel, t); errno != 0 {
			return nil, errno
		}
	}
	bflags := flags
	if t.Class.Guarded() && st != nil {
		// A guarded file already there (made in the backing directory
		// since the kernel's lookup) changes only through its draft's
		// commit: the backing open must not truncate it.
		bflags &^= syscall.O_TRUNC
	}
	// nst: what the create opened, taken from its descriptor (not the
	// name, which another process may have replaced since).
	nst, errno := create(bflags)
	if errno != 0 {
		return nil, errno
	}
	if t.Class.Guarded() {
		// The file exists (empty, or as it was); its content arrives at
		// commit, from the draft.
		fl := flags
		if st == nil {
			fl |= syscall.O_TRUNC
		}
		dr, errno := draft.Open(h.dir, h.staging, rel, res, fl, st == nil, label.KeyOf(nst))
		if errno != 0 {
			return nil, errno
		}
		dr.Hold(h.opens.WriteOpened(dr.Key(), 0, nil, nil))
		return &Opened{Draft: dr}, 0
	}
	// A file that was there already (made in the backing directory after
	// the kernel's lookup) keeps its content unless truncated, and with it
	// what its label says of it.
	pw, errno := d.plainWriter(res, rel, nst, l, st == nil || flags&syscall.O_TRUNC != 0)
	if errno != 0 {
		return nil, errno
	}
	o := &Opened{Cache: t.Class == policy.Plain && t.Namespace == policy.NSNone, Stat: st, Plain: pw}
	if flags&syscall.O_ACCMODE == syscall.O_RDWR {
		o.Reading = h.readOpened(c, res, rel, nst, nil, flags)
	}
	return o, 0
}

// readOpened notes that the caller (res, resolved when nil) opened rel
// (stat st, label l) with flags that let it read: provenance, and the
// file's open readers. It returns the reading to close with the handle
// (nil: not a read of a regular file).
func (h *house) readOpened(c Caller, res *principal.Resolved, rel string, st *syscall.Stat_t, l *label.Label, flags uint32) *Reading {
	if st == nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		return nil
	}
	if res == nil {
		res = h.gate.Resolve(c)
	}
	if !res.Identified {
		return nil // refused every change anyway
	}
	return h.readBy(res, rel, st, l)
}

// readBy notes res as a reader of rel (stat st, label l): provenance,
// and the file's open readers until the reading is closed.
func (h *house) readBy(res *principal.Resolved, rel string, st *syscall.Stat_t, l *label.Label) *Reading {
	hash := ""
	if l != nil && l.Hash != "" && l.Kind == 0 && l.Matches(st) {
		hash = l.Hash
	}
	h.reads.Opened(res, rel, st, hash)
	return &Reading{opens: h.opens, r: h.opens.ReadOpened(label.KeyOf(st), res)}
}

// Reading is a plain file open to be read: content written into it while
// it is open reaches its reader (tracking.Opens).
type Reading struct {
	opens *tracking.Opens
	r     *tracking.Reader
}

// Close ends the reading (nil does nothing).
func (r *Reading) Close() {
	if r != nil {
		r.opens.Closed(r.r)
	}
}

// Plain is a plain file opened for writing whose label follows its
// content: kernel passthrough serves its writes, so at each close the
// label is recomputed from every process that wrote through the handle
// (each one that closed a descriptor of it), as they are then.
type Plain struct {
	h   *house
	key label.Key
	rel string
	w   *tracking.Writer
	// stat is the handle's own fstat (Follow), for a settle without a
	// close: the file may have been renamed or unlinked since its open.
	stat atomic.Pointer[func() *syscall.Stat_t]

	mu      sync.Mutex
	writers tracking.WriterSet
	// late counts the closes whose caller is noted once its /proc answers
	// (a close from inside its exec: Flush).
	late lateNotes
}

// lateWait bounds how long a decision about one of the file's readers
// waits for a close's caller to be noted (settle): the caller's exec is
// over as soon as its closes are answered, so it lands within moments.
const lateWait = 5 * principal.CallerWait

// plainWriter labels a plain file written by res (the label flow) and
// returns the writer to follow to its close: nil when an unidentified
// caller writes an unlabelled file. A label that cannot be stored (a full
// state disk) refuses the open with EIO: what the writer wrote would be
// unlabelled, clean, at the next mount.
func (d *Door) plainWriter(res *principal.Resolved, rel string, st *syscall.Stat_t, old *label.Label, truncated bool) (*Plain, syscall.Errno) {
	identified := res != nil && res.Identified
	nl, err := d.h.flow.Next(flow.Move{Op: flow.Open, Subjects: []*principal.Resolved{res}, Sources: []*label.Label{old},
		To: flow.Dest{Path: rel, Stat: st, Truncated: truncated}})
	if err != nil {
		return nil, syscall.EIO
	}
	if nl == nil && !identified {
		return nil, 0
	}
	p := &Plain{h: d.h, key: label.KeyOf(st), rel: rel}
	p.writers.Note(res)
	p.w = d.h.opens.WriteOpened(p.key, res.Proc.ID.Tgid, p.settle, p.note)
	return p, 0
}

// Follow gives the handle's own fstat to settle by: the file the handle
// has open, whatever name it has now (nil when it cannot be taken).
func (p *Plain) Follow(stat func() *syscall.Stat_t) { p.stat.Store(&stat) }

// settle recomputes the label from the writers as they are now, without a
// close (tracking.Opens.Settle: before a decision about one of the file's
// readers), once the closes whose caller is being noted are (for at most
// lateWait: such a caller may be waiting for the very decision). The file
// is the handle's own (Follow), renamed or unlinked since or not; without
// it, the one at the name it was opened by.
func (p *Plain) settle() {
	p.late.wait(lateWait)
	p.flow(func() *syscall.Stat_t {
		if stat := p.stat.Load(); stat != nil {
			if st := (*stat)(); st != nil {
				return st
			}
		}
		st, err := p.h.dir.Lstat(p.rel)
		if err != nil {
			return nil // renamed since: its next close settles it
		}
		return st
	})
}

// Flush is called at each close of a descriptor of the handle, by c, with
// the handle's fstat (stat: nil when it cannot be taken): c counts as a writer (with passthrough aerfs cannot
// tell whether it wrote), and the file's label is recomputed from every
// writer as it is now. EIO: the lower label could not be stored (it holds
// in memory until the journal takes it); the close says so.
//
// A close from inside an exec (a close-on-exec descriptor) waits for
// this answer, and the caller's /proc does not answer until the exec is
// over: the close is answered without it, and the caller is noted and
// the label recomputed once it can be resolved (the handle's release and
// its readers' decisions wait for that: principal/procwait.go).
func (p *Plain) Flush(c Caller, stat func() *syscall.Stat_t) syscall.Errno {
	if c.Pid > 0 {
		res, later := p.h.gate.ResolveCaller(c)
		if later != nil {
			p.late.add()
			go func() {
				// The handle is not released before this is done
				// (Release waits), so stat still reaches its file.
				defer p.late.done()
				if res := later(); res.Identified && !res.Stalled {
					p.note(res)
					p.flow(stat)
				}
			}()
		} else if !res.Stalled {
			// A stalled caller is on its way out: what it wrote counts as
			// it was when it opened.
			p.note(res)
		}
	}
	return p.flow(stat)
}

func (p *Plain) note(res *principal.Resolved) {
	p.mu.Lock()
	p.writers.Note(res)
	p.mu.Unlock()
}

// flow recomputes the label from the writers, resolved as they are now
// without the handle's lock (their /proc may wait for a close of this
// handle), and stores it bound to the fingerprint stat gives, taken
// under the inode's binding lock: a stat taken earlier may be older than
// a binding another handle's close made meanwhile.
func (p *Plain) flow(stat func() *syscall.Stat_t) syscall.Errno {
	return p.flowThen(stat, nil)
}

// flowThen is flow, then (when not nil) then with the fingerprint it
// bound, still under the binding lock.
func (p *Plain) flowThen(stat func() *syscall.Stat_t, then func(st *syscall.Stat_t)) syscall.Errno {
	p.mu.Lock()
	ids := p.writers.IDs()
	p.mu.Unlock()
	now := tracking.Resolve(p.h.reg, ids)
	defer p.h.opens.Binding(p.key)()
	st := stat()
	if st == nil || label.KeyOf(st) != p.key {
		return 0 // replaced since: its next close settles it
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ws := p.writers.With(now); len(ws) > 0 {
		if _, err := p.h.flow.Next(flow.Move{Op: flow.Flush, Subjects: ws, To: flow.Dest{Path: p.rel, Stat: st}}); err != nil {
			return syscall.EIO
		}
	}
	if st.Nlink == 0 {
		// Unlinked since (its readers have taken what it holds): its
		// label must not outlive it and greet the next file that gets
		// its inode number.
		p.h.txn.Forget(p.key)
		return 0
	}
	if then != nil {
		then(st)
	}
	return 0
}

// Release is called when the handle goes, with stat as Flush's: once the
// closes whose caller is being noted are, the label is recomputed once
// more and bound to the content's fingerprint as it is now, before the
// handle stops counting as a writer (gate.Target's drift check).
func (p *Plain) Release(stat func() *syscall.Stat_t) {
	p.late.wait(-1)
	p.flowThen(stat, func(st *syscall.Stat_t) {
		if l := p.h.labels.Get(p.key); l != nil && !l.Matches(st) {
			l.Bind(st)
			p.h.labels.Set(p.key, l)
		}
	})
	p.h.opens.WriteClosed(p.w)
}

// lateNotes counts a handle's closes whose caller is being noted.
type lateNotes struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

func (l *lateNotes) add() {
	l.mu.Lock()
	if l.n == 0 {
		l.idle = make(chan struct{})
	}
	l.n++
	l.mu.Unlock()
}

func (l *lateNotes) done() {
	l.mu.Lock()
	if l.n--; l.n == 0 {
		close(l.idle)
	}
	l.mu.Unlock()
}

// wait waits until no close is being noted, at most d (d < 0: as long
// as it takes, which the resolutions' own bound limits).
func (l *lateNotes) wait(d time.Duration) {
	l.mu.Lock()
	n, idle := l.n, l.idle
	l.mu.Unlock()
	if n == 0 {
		return
	}
	if d < 0 {
		<-idle
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
}

// Fill is called when a guarded reader's page fill is answered with a
// version (stat st) other than the one the handle opened: the process
// that asked for the page reads that version now, and its label's taint
// reaches it as an open of it would (R6).
func (d *Door) Fill(c Caller, rel string, st *syscall.Stat_t) syscall.Errno {
	t, l := d.h.gate.Target(rel, st)
	if t.LabelTaint == 0 {
		return 0
	}
	return d.read(d.h.gate.Resolve(c), policy.OpRead, rel, t, l)
}
