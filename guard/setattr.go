package guard

import (
	"syscall"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/guard/draft"
	"github.com/aerfs/aerfs/guard/flow"
	"github.com/aerfs/aerfs/guard/gate"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Attrs is what a setattr asks for.
type Attrs struct {
	Size *uint64 // truncate to
	Mode *uint32 // chmod to
	// Meta: anything else besides the size (mode, owner, times).
	Meta bool
	// Draft: the request came through a guarded handle; its size is
	// staged and decided at commit.
	Draft *draft.Draft
}

// Setattr decides a truncate as a write and chmod, chown and utimes as a
// metadata change; adding an execute bit asks the act gate. A truncate of
// a guarded file without a staging handle is committed like any other
// write; with one, it is staged. do is the node's own setattr of what
// remains (mode, owner, times; a plain file's size).
func (d *Door) Setattr(c Caller, rel string, a Attrs, do func(sizeDone bool) syscall.Errno) syscall.Errno {
	h := d.h
	st, err := h.dir.Lstat(rel)
	if err != nil {
		return backing.Errno(err)
	}
	if a.Size != nil {
		if errno := h.refuseHeld(c, rel); errno != 0 {
			return errno
		}
	}
	held := d.bound(st)
	t, l := h.gate.Target(rel, st)
	var checks []gate.Check
	if a.Size != nil && a.Draft == nil {
		// Through a staging handle the size was decided at open, and is
		// decided at commit.
		checks = append(checks, gate.Check{Op: policy.OpWrite, Rel: rel, T: t, L: l})
	}
	if a.Meta {
		checks = append(checks, gate.Check{Op: policy.OpSetattr, Rel: rel, T: t, L: l, Durable: true})
	}
	res, errno := h.gate.All(c, checks)
	if errno != 0 {
		return errno
	}
	if a.Mode != nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && l != nil && *a.Mode&0o111&^(st.Mode&0o111) != 0 {
		if res == nil {
			res = h.gate.Resolve(c)
		}
		if errno := h.gate.Exec(res, "chmod", rel, st, l); errno != 0 {
			return errno
		}
	}
	if !t.Class.Guarded() && a.Size != nil {
		// A plain file truncated by a labelled writer carries its label,
		// stored before the change: a label that cannot be kept would be
		// lost taint.
		if res == nil {
			res = h.gate.Resolve(c)
		}
		stored, errno := d.changed(res, rel, st, l)
		if errno != 0 {
			return errno
		}
		held = held || stored
	}
	sizeDone := false
	if a.Size != nil && (a.Draft != nil || t.Class.Guarded()) {
		if a.Draft != nil {
			errno = a.Draft.Truncate(d.Writer(c), int64(*a.Size))
		} else {
			errno = d.truncate(res, rel, *a.Size)
		}
		if errno != 0 {
			return errno
		}
		sizeDone = true
	}
	errno = do(sizeDone)
	if held {
		d.rebind(rel)
	}
	return errno
}

// truncate commits rel cut (or extended) to size by res as a write: a
// handle of its own, truncated and committed.
func (d *Door) truncate(res *principal.Resolved, rel string, size uint64) syscall.Errno {
	h := d.h
	st, err := h.dir.Lstat(rel)
	if err != nil {
		return backing.Errno(err)
	}
	dr, errno := draft.Open(h.dir, h.staging, rel, res, syscall.O_RDWR, false, label.KeyOf(st))
	if errno != 0 {
		return errno
	}
	defer dr.Close()
	if errno := dr.Truncate(res, int64(size)); errno != 0 {
		return errno
	}
	return d.Commit(Caller{}, rel, dr, true)
}

// changed lets the label of a labelled writer res flow into the plain
// file rel (stat st, label l) it changes in place, stored before the
// change: a label that cannot be kept would be lost taint. stored: a new
// label was stored, to be bound to the file as the change leaves it.
func (d *Door) changed(res *principal.Resolved, rel string, st *syscall.Stat_t, l *label.Label) (stored bool, errno syscall.Errno) {
	nl, _ := d.h.flow.Next(flow.Move{Op: flow.Change, Subjects: []*principal.Resolved{res}, Sources: []*label.Label{l},
		To: flow.Dest{Path: rel, Stat: st}})
	if nl == nil || label.Same(nl, l) {
		return false, 0
	}
	if err := d.h.labels.Set(label.KeyOf(st), nl); err != nil {
		d.h.led.Log.Error().Err(err).Str("path", rel).Msg("label not stored: change refused")
		return false, syscall.EIO
	}
	return true, 0
}

// bound reports whether the plain label of the file with stat st (nil:
// absent) is bound to st: a change made through the mount carries that
// binding to the file as it leaves it (rebind); a binding already broken
// (content changed behind aerfs's back) stays broken, so that the drift
// is still seen.
func (d *Door) bound(st *syscall.Stat_t) bool {
	if st == nil {
		return false
	}
	k := label.KeyOf(st)
	defer d.h.opens.Binding(k)()
	l := d.h.labels.Get(k)
	return l != nil && l.Kind == 0 && l.Matches(st)
}

// Xattr decides a change of rel's extended attributes; do is the node's
// own setxattr or removexattr. A labelled writer's label flows into a
// plain file's.
func (d *Door) Xattr(c Caller, rel string, do func() syscall.Errno) syscall.Errno {
	h := d.h
	st, _ := h.dir.Lstat(rel)
	held := d.bound(st)
	t, l := h.gate.Target(rel, st)
	res, errno := h.gate.All(c, []gate.Check{{Op: policy.OpXattr, Rel: rel, T: t, L: l, Durable: true}})
	if errno != 0 {
		return errno
	}
	if st != nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		// A directory carries no label: what a tainted or untrusted
		// session would write in its attributes would reach their
		// readers clean.
		if res == nil {
			res = h.gate.Resolve(c)
		}
		if subj := res.Subject(); subj.Taint != 0 || !subj.Principal.Trusted() || !res.Identified {
			return h.gate.Deny(res, policy.OpXattr, rel, RuleDirXattr,
				"a session that read untrusted content, or below USER, may not change a directory's extended attributes: directories carry no label, so their readers would get its bytes clean")
		}
	}
	if st != nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && !t.Class.Guarded() {
		if res == nil {
			res = h.gate.Resolve(c)
		}
		stored, errno := d.changed(res, rel, st, l)
		if errno != 0 {
			return errno
		}
		held = held || stored
	}
	errno = do()
	if held {
		d.rebind(rel)
	}
	return errno
}

// RuleDirXattr is the rule id of a directory's extended attribute change
// refused to a tainted or untrusted session.
const RuleDirXattr = "RX-dir-xattr"

// rebind re-binds a label's fingerprint after a change made through the
// mount (chmod, utimes, xattr change the ctime).
func (d *Door) rebind(rel string) {
	st, err := d.h.dir.Lstat(rel)
	if err != nil {
		return
	}
	k := label.KeyOf(st)
	defer d.h.opens.Binding(k)()
	if l := d.h.labels.Get(k); l != nil && !l.Matches(st) {
		l.Bind(st)
		d.h.labels.Set(k, l)
	}
}
