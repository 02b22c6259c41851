package guard

import (
	"syscall"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/guard/draft"
	"github.com/aerfs/aerfs/guard/flow"
	"github.com/aerfs/aerfs/guard/label"
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
	// Cache: the kernel may keep the file's pages between opens (plain).
	Cache bool
	// Stat is the file as it was before the open (nil: created by it).
	Stat *syscall.Stat_t
}

// Open decides an open of rel (flags as the kernel sent them) and binds
// the decision to the handle. open is the node's own open of the backing
// file, called once the open is allowed (not for a guarded file opened
// for writing, whose handle stages).
func (d *Door) Open(c Caller, rel string, flags uint32, open func() syscall.Errno) (*Opened, syscall.Errno) {
	h := d.h
	st, err := h.dir.Lstat(rel)
	if err != nil {
		return nil, backing.Errno(err)
	}
	t, l := h.gate.Target(rel, st)
	op := openOp(flags)
	o := &Opened{Cache: t.Class == policy.Plain && t.Namespace == policy.NSNone, Stat: st}
	if o.Cache && l == nil && op != policy.OpWrite {
		// Unlabelled plain file read by anyone: nothing to decide, nothing
		// to propagate. Kernel passthrough serves it at native speed.
		h.readOpened(c, nil, rel, st, l, flags)
		return o, open()
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
	if op == policy.OpExec {
		if errno := h.gate.Exec(res, "exec", rel, l); errno != 0 {
			return nil, errno
		}
	}
	h.readOpened(c, res, rel, st, l, flags)
	if t.Class.Guarded() {
		if op == policy.OpWrite {
			dr, errno := draft.Open(h.dir, h.staging, rel, res, flags, false, label.KeyOf(st))
			if errno != 0 {
				return nil, errno
			}
			h.opens.WriteOpened(dr.Key())
			return &Opened{Draft: dr}, 0
		}
		if errno := open(); errno != 0 {
			return nil, errno
		}
		return &Opened{Reader: true, Key: label.KeyOf(st)}, 0
	}
	if errno := open(); errno != 0 || op != policy.OpWrite {
		return o, errno
	}
	o.Plain = d.plainWriter(res, rel, st, l, flags&syscall.O_TRUNC != 0)
	return o, 0
}

// Create decides creating rel (a guarded class, a namespace) and hands out
// a staging handle for guarded files. create is the node's own create of
// the backing file, called once allowed; a guarded file's handle from it
// is released by the node (the content arrives at commit, from the draft).
func (d *Door) Create(c Caller, rel string, flags uint32, create func() syscall.Errno) (*Opened, syscall.Errno) {
	h := d.h
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
	if errno := create(); errno != 0 {
		return nil, errno
	}
	nst, err := h.dir.Lstat(rel)
	if err != nil {
		return nil, backing.Errno(err)
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
		h.opens.WriteOpened(dr.Key())
		return &Opened{Draft: dr}, 0
	}
	return &Opened{Cache: t.Class == policy.Plain && t.Namespace == policy.NSNone, Stat: st, Plain: d.plainWriter(res, rel, nst, l, true)}, 0
}

// readOpened notes that the caller (res, resolved when nil) opened rel
// (stat st, label l) with flags that let it read: provenance.
func (h *house) readOpened(c Caller, res *principal.Resolved, rel string, st *syscall.Stat_t, l *label.Label, flags uint32) {
	if st == nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || flags&syscall.O_ACCMODE == syscall.O_WRONLY {
		return
	}
	if res == nil {
		res = h.gate.Resolve(c)
	}
	if !res.Identified {
		return // refused every change anyway
	}
	hash := ""
	if l != nil && l.Hash != "" && l.Kind == 0 && l.Matches(st) {
		hash = l.Hash
	}
	h.reads.Opened(res, rel, st, hash)
}

// Plain is a plain file opened for writing whose label follows its
// content to its close.
type Plain struct {
	h   *house
	key label.Key
	res *principal.Resolved // the opener, whose reads bound the content's class
	rel string
}

// plainWriter labels a plain file written by res (the label flow) and
// returns the writer to follow to its close: nil when a clean owner writes
// an unlabelled file (the bare loopback handle serves it).
func (d *Door) plainWriter(res *principal.Resolved, rel string, st *syscall.Stat_t, old *label.Label, truncated bool) *Plain {
	identified := res != nil && res.Identified
	nl := d.h.flow.Next(flow.Move{Op: flow.Open, Subjects: []*principal.Resolved{res}, Sources: []*label.Label{old},
		To: flow.Dest{Path: rel, Stat: st, Truncated: truncated}})
	if nl == nil && !identified {
		return nil
	}
	k := label.KeyOf(st)
	d.h.opens.WriteOpened(k)
	return &Plain{h: d.h, key: k, res: res, rel: rel}
}

// Flush is called at each close of the handle, with the file's stat: the
// class of its content is bound again (the label flow).
func (p *Plain) Flush(st *syscall.Stat_t) {
	if p.res == nil {
		return
	}
	p.h.flow.Next(flow.Move{Op: flow.Flush, Subjects: []*principal.Resolved{p.res}, To: flow.Dest{Path: p.rel, Stat: st}})
}

// Release is called when the handle goes: the label is bound to the
// content's new fingerprint.
func (p *Plain) Release(st *syscall.Stat_t) {
	if st != nil {
		if l := p.h.labels.Get(p.key); l != nil {
			l.Bind(st)
			p.h.labels.Set(p.key, l)
		}
	}
	p.h.opens.WriteClosed(p.key)
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
