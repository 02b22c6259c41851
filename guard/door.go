package guard

import (
	"syscall"

	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/guard/explain"
	"github.com/aerfs/aerfs/guard/flow"
	"github.com/aerfs/aerfs/guard/gate"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/txn"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Door is the FUSE nodes' door into the guard: one method per operation
// family. Each decides through the gate, lets labels flow, and calls back
// the node's *at system call (do) where the operation happens — inside
// the one transaction when a guarded path changes.
type Door struct{ h *house }

// Caller is the thread id of a request (gate.NoCaller when it names none).
type Caller = gate.Caller

// NoCaller is the Caller of a request that names no process.
var NoCaller = gate.NoCaller

// Dir is the backing directory, for the nodes' own *at calls.
func (d *Door) Dir() *backing.Dir { return d.h.dir }

// Log is the daemon's log.
func (d *Door) Log() *zerolog.Logger { return &d.h.led.Log }

// StateDir names the state directory (the mount's source).
func (d *Door) StateDir() string { return d.h.stateDir }

// SetIdentities sets what keeps the kernel's identities of guarded files
// across the renames that publish their versions (before the mount
// serves).
func (d *Door) SetIdentities(i txn.Identities) { d.h.txn.SetIdentities(i) }

// Classify is the class and namespace of rel (what the kernel may cache).
func (d *Door) Classify(rel string) (policy.Class, policy.Namespace) {
	c, ns, _ := d.h.gate.Policy().Classify(rel)
	return c, ns
}

// Reserved reports whether name is one of aerfs's own names, which
// cannot be created, renamed or linked through the mount.
func Reserved(name string) bool { return isReserved(name) }

// Lookup decides a lookup of rel before it happens: another session's
// namespace is invisible (ENOENT).
func (d *Door) Lookup(c Caller, rel string) syscall.Errno {
	pol := d.h.gate.Policy()
	cl, ns, sess := pol.Classify(rel)
	if ns != policy.NSSession {
		return 0
	}
	t := policy.Target{Class: cl, Namespace: ns, Session: sess}
	if _, errno := d.h.gate.Ask(d.h.gate.Resolve(c), policy.OpLookup, rel, t); errno != 0 {
		return syscall.ENOENT
	}
	return 0
}

// Object is called for every successful lookup of a FIFO, socket or
// device node: the data that passes through one never reaches aerfs, so
// a lookup is where its label flows (a labelled one taints whoever looks
// it up; an untrusted or tainted looker counts as a writer).
func (d *Door) Object(c Caller, rel string) syscall.Errno {
	st, err := d.h.dir.Lstat(rel)
	if err != nil || !IsObject(st.Mode) {
		return 0
	}
	res := d.h.gate.Resolve(c)
	t, l := d.h.gate.Target(rel, st)
	if l != nil {
		if errno := d.read(res, policy.OpRead, rel, t, l); errno != 0 {
			return errno
		}
	}
	if _, err := d.h.flow.Next(flow.Move{Op: flow.Lookup, Subjects: []*principal.Resolved{res}, Sources: []*label.Label{l},
		To: flow.Dest{Path: rel, Stat: st}}); err != nil {
		return syscall.EIO
	}
	return 0
}

// IsObject reports whether mode is a FIFO, a socket or a device node.
func IsObject(mode uint32) bool {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR, syscall.S_IFBLK:
		return true
	}
	return false
}

// Readlink is decided at every follow of a symlink: a labelled symlink
// taints the caller like reading a labelled file. One that an untrusted
// or tainted session made is not followed where it leads out of the
// policy's sight — outside the mount, or into an excluded directory from
// a name below which the policy guards names (RX-symlink-escape): the
// file the follower reaches there is not one the gate sees.
//
// A symlink at a guarded name (or at a name below which the policy guards
// names) that leads into the workspace where the policy does not guard the
// same way is followed by nobody, whoever made it and whenever
// (RX-guarded-symlink): the owner's, one there before the mount, one a
// repository brought. Whoever may write its target would write what the
// name serves (.claude -> tools/claude: a WEB session writes
// tools/claude/settings.json, Claude Code runs its hooks). The owner
// classes the target in the policy, or points the link at a name of the
// same class. Links out of the workspace (a dotfiles manager's) are
// followed.
func (d *Door) Readlink(c Caller, rel string) syscall.Errno {
	if target, ok := d.h.linkTarget(rel); ok {
		if unguards, inside := d.h.gate.LinkUnguards(rel, target); unguards && inside {
			return d.h.gate.Deny(d.h.gate.Resolve(c), policy.OpRead, rel, gate.RuleGuardedLink,
				"not followed: the symlink leads to "+target+", which the policy does not guard as it guards this name; class it in the policy (aerfs.yaml) or link to a name of the same class")
		}
	}
	return d.labelledRead(c, rel)
}

// XattrRead is decided at every read of rel's extended attributes (a
// user attribute's value, the list of names): what a labelled writer put
// there (Xattr) flows into the reader as reading the file would.
func (d *Door) XattrRead(c Caller, rel string) syscall.Errno { return d.labelledRead(c, rel) }

// labelledRead lets the label of rel, when it has one, flow into the
// caller; a labelled symlink that escapes is refused.
func (d *Door) labelledRead(c Caller, rel string) syscall.Errno {
	st, err := d.h.dir.Lstat(rel)
	if err != nil {
		return 0
	}
	t, l := d.h.gate.Target(rel, st)
	if l == nil {
		return 0
	}
	res := d.h.gate.Resolve(c)
	if st.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		if target, ok := d.h.linkTarget(rel); ok && d.h.gate.Policy().SymlinkEscapes(rel, target) {
			r := policy.RuleSymlinkEscape
			return d.h.gate.Deny(res, policy.OpRead, rel, r.ID(), r.Reason()+" (it names "+target+")")
		}
	}
	return d.read(res, policy.OpRead, rel, t, l)
}

// linkTarget is what the symlink rel names.
func (h *house) linkTarget(rel string) (string, bool) {
	b, err := h.dir.Readlink(rel)
	return string(b), err == nil
}

// read decides a read (or exec) of rel and lets what it brings flow into
// the reader.
func (d *Door) read(res *principal.Resolved, op policy.Op, rel string, t policy.Target, l *label.Label) syscall.Errno {
	v, errno := d.h.gate.Ask(res, op, rel, t)
	if errno != 0 {
		return errno
	}
	fop := flow.Read
	if op == policy.OpExec {
		fop = flow.Exec
	}
	d.h.flow.Next(flow.Move{Op: fop, Subjects: []*principal.Resolved{res}, Sources: []*label.Label{l}, To: flow.Dest{Path: rel}, Add: v.AddTaint})
	return 0
}

// Listing is how a directory's entries are listed.
type Listing struct {
	// Cache: the kernel may keep the listing (a plain directory: it
	// changes only through this mount).
	Cache bool
	// Keep, when set, says which entries the caller may see (the sessions
	// root shows a session its own directory only).
	Keep func(name string) bool
}

// Opendir decides listing the directory rel.
func (d *Door) Opendir(c Caller, rel string) (Listing, syscall.Errno) {
	pol := d.h.gate.Policy()
	cl, ns, sess := pol.Classify(rel)
	if ns == policy.NSSession {
		t := policy.Target{Class: cl, Namespace: ns, Session: sess}
		if errno := d.read(d.h.gate.Resolve(c), policy.OpRead, rel, t, nil); errno != 0 {
			return Listing{}, errno
		}
	}
	if ns == policy.NSNone && cl == policy.Plain {
		return Listing{Cache: true}, 0
	}
	if ns != policy.NSSessionsRoot {
		return Listing{}, 0
	}
	subj := d.h.gate.Resolve(c).Subject()
	return Listing{Keep: func(name string) bool {
		if name == "." || name == ".." {
			return true
		}
		return d.h.gate.Visible(subj, policy.Target{Namespace: policy.NSSession, Session: name})
	}}, 0
}

// Explain is what .aerfs/status tells the caller about itself.
func (d *Door) Explain(c Caller) *explain.Explanation {
	return d.h.status.Process(d.h.gate.Resolve(c), d.h.gate.Policy())
}

// Refuse records and refuses a change of name inside StatusDir.
func (d *Door) Refuse(c Caller, op policy.Op, name string) syscall.Errno {
	return d.h.gate.Refuse(c, op, StatusDir+"/"+name, RuleReserved,
		StatusDir+" is aerfs's own read-only directory: nothing in it can be created, written, renamed or removed")
}
