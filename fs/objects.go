package fs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aerfs/aerfs/policy"
)

// Taint through the objects that are not regular files: symlinks, FIFOs,
// sockets and device nodes. Content reaches a reader through them without a
// READ that aerfs decides — a symlink's target may lie outside the mount, and
// a FIFO's data goes through the kernel's pipe code — so aerfs labels the
// object itself and taints whoever uses it at the request FUSE does see:
//
//   - a symlink made by an untrusted or tainted caller carries that caller's
//     label; READLINK (sent on every follow: symlink caching stays off) taints
//     the reader as reading a labelled file does;
//   - a FIFO or socket carries the label of whoever made it and of every
//     untrusted or tainted caller that has looked it up — a potential writer,
//     since its data never reaches aerfs; a LOOKUP of a labelled one taints
//     the caller. Their entries are never cached, so every path walk to one
//     reaches aerfs.
//
// The limit: a reader that looked a FIFO up before an untrusted writer did
// is not tainted afterwards (it may already hold the FIFO open).

// isSpecial reports whether mode is of a symlink, FIFO, socket or device.
func isSpecial(mode uint32) bool {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFLNK, syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR, syscall.S_IFBLK:
		return true
	}
	return false
}

// isChannel reports whether mode is of an object data flows through
// without a read aerfs decides: a FIFO or a socket.
func isChannel(mode uint32) bool {
	t := mode & syscall.S_IFMT
	return t == syscall.S_IFIFO || t == syscall.S_IFSOCK
}

// labelObject adds the caller's label, when it has one, to the special
// object at rel (just made by the caller, or looked up as a potential
// writer). Clean callers change nothing.
func (m *Monitor) labelObject(ctx context.Context, rel string) {
	st, err := m.lstatRel(rel)
	if err != nil || !isSpecial(st.Mode) {
		return
	}
	res := m.caller(ctx)
	nw := labelForWriter(res.Subject())
	if nw == nil {
		return
	}
	k := keyOf(st)
	old := m.Labels.Get(k)
	if old != nil && old.Kind != st.Mode&syscall.S_IFMT {
		old = nil // an earlier object whose inode number was reused
	}
	l := mergeLabels(old, nw)
	l.Kind = st.Mode & syscall.S_IFMT
	if old != nil && *old == *l {
		return
	}
	if err := m.Labels.Set(k, l); err != nil {
		m.log.Error().Err(err).Str("path", rel).Msg("cannot store the label of a special file")
	}
}

// objectLabel is the label of the special object with stat st, if any.
func (m *Monitor) objectLabel(st *syscall.Stat_t) *Label {
	l := m.Labels.Get(keyOf(st))
	if l == nil || l.Kind == 0 || l.Kind != st.Mode&syscall.S_IFMT {
		return nil
	}
	return l
}

// useObject taints the caller as a read of the special object at rel
// would: through the gate, so the verdict and the taint are recorded.
func (m *Monitor) useObject(ctx context.Context, rel string, st *syscall.Stat_t) syscall.Errno {
	l := m.objectLabel(st)
	if l.Clean() {
		return 0
	}
	t, _ := m.target(rel, nil)
	t.LabelTaint = l.Taint
	if !l.Origin.Trusted() {
		t.LabelTaint |= policy.OriginTaint(l.Origin)
	}
	_, errno := m.gate(ctx, nil, policy.OpRead, rel, t, l)
	return errno
}

// lookupObject is Lookup's part for special objects: a FIFO or socket
// entry is never cached, its looker-up labels it if untrusted or tainted,
// and a labelled one taints the caller.
func (m *Monitor) lookupObject(ctx context.Context, rel string, out *fuse.EntryOut) syscall.Errno {
	if !isChannel(out.Attr.Mode) {
		return 0
	}
	out.SetEntryTimeout(0)
	out.SetAttrTimeout(0)
	m.labelObject(ctx, rel)
	st, err := m.lstatRel(rel)
	if err != nil {
		return 0
	}
	return m.useObject(ctx, rel, st)
}
