package label

import (
	"syscall"

	"github.com/aerfs/aerfs/authority"
	"github.com/aerfs/aerfs/policy"
)

// Label is what aerfs knows of a file's content: who wrote it, what that
// writer had seen, and a binding to the content so that a change made
// behind aerfs's back is noticed.
type Label struct {
	Origin  policy.Principal `json:"origin"`
	Taint   policy.Taint     `json:"taint"`
	Session string           `json:"session,omitempty"`
	Record  string           `json:"record,omitempty"` // evidence record that set it
	// Kind is the file type (S_IFMT) of a labelled symlink, FIFO, socket
	// or device node; zero for a regular file. Such an object is bound by
	// its inode and type, not by a fingerprint: a FIFO's times change with
	// every write that passes through it.
	Kind uint32 `json:"kind,omitempty"`
	// Stamp is the authority class bound to the content when it was
	// written; nil: derived from origin and taint (StampOf).
	Stamp *authority.Stamp `json:"stamp,omitempty"`

	// Binding. Guarded files are bound by content hash; every label also
	// keeps the cheap fingerprint, checked first.
	Hash    string `json:"hash,omitempty"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtime_ns"`
	CtimeNs int64  `json:"ctime_ns"`
}

// Clean reports whether the label says nothing a reader needs to inherit.
func (l *Label) Clean() bool {
	return l == nil || (l.Taint == 0 && l.Origin.Trusted())
}

// Matches reports whether st has the fingerprint the label is bound to.
func (l *Label) Matches(st *syscall.Stat_t) bool {
	return l.Size == st.Size && l.MtimeNs == st.Mtim.Nano() && l.CtimeNs == st.Ctim.Nano()
}

// Bind binds the label to the fingerprint of st.
func (l *Label) Bind(st *syscall.Stat_t) {
	l.Size = st.Size
	l.MtimeNs = st.Mtim.Nano()
	l.CtimeNs = st.Ctim.Nano()
}

// ReadTaint is the taint a reader of the content inherits: the label's,
// and its origin's when that is untrusted.
func (l *Label) ReadTaint() policy.Taint {
	if l == nil {
		return 0
	}
	t := l.Taint
	if !l.Origin.Trusted() {
		t |= policy.OriginTaint(l.Origin)
	}
	return t
}

// Broken is how a label whose binding broke reads: the content changed
// outside the mount, so it is EXTERNAL, and whoever reads it is
// UNTRUSTED. The label is not changed: the drift check at mount and the
// drift watcher record and relabel (guard/flow, OpDrift).
func (l *Label) Broken() *Label {
	return &Label{Origin: policy.External, Taint: l.Taint | policy.Untrusted, Record: l.Record}
}

// Same reports whether a and b say the same of their content: origin,
// taint and class (nil is the owner's clean act content).
func Same(a, b *Label) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Origin == b.Origin && a.Taint == b.Taint && StampOf(a).Class == StampOf(b).Class
}

// Key names a backing inode. Labels follow the inode, so a rename keeps a
// file's label and a hard link shares it.
type Key struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"ino"`
}

// KeyOf is the key of the inode st describes.
func KeyOf(st *syscall.Stat_t) Key { return Key{Dev: uint64(st.Dev), Ino: st.Ino} }

var actStamp = authority.Stamp{Class: authority.Act, Rule: authority.RuleWriteOwner, Origin: policy.User}

// StampOf is the authority stamp of the content a label describes. A
// file without a label was written by the owner (or never through the
// mount) and is act; a label without a stamp (an older label, or one
// whose binding broke) gets its class from its origin and taint.
func StampOf(l *Label) *authority.Stamp {
	if l == nil {
		st := actStamp
		return &st
	}
	if l.Stamp != nil {
		return l.Stamp
	}
	st := authority.Stamp{Class: authority.Act, Rule: authority.RuleWriteOwner, Origin: l.Origin, Session: l.Session}
	switch {
	case !l.Origin.Valid():
		st.Class, st.Rule = authority.None, authority.RuleWriteUnidentified
	case !l.Origin.Trusted() && l.Origin != policy.ToolAuth:
		st.Class, st.Rule = authority.None, authority.RuleWriteUntrusted
	case l.Taint&authority.DefaultNoneTaint != 0:
		st.Class, st.Rule = authority.None, authority.RuleWriteTainted
	case l.Origin == policy.ToolAuth:
		st.Rule = authority.RuleWriteTool
	}
	if l.Hash != "" {
		st.Hash, _ = authority.ParseHash(l.Hash)
	}
	return &st
}

// ClassOf names the class of a label's content ("act" for no label).
func ClassOf(l *Label) string { return StampOf(l).Class.String() }
