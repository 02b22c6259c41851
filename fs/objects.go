package fs

import (
	"context"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Taint through objects that are not regular files.
//
// What the kernel sends aerfs for each:
//   - A symlink: LOOKUP, GETATTR and, at every follow and every readlink(2),
//     READLINK (the mount does not ask for FUSE_CACHE_SYMLINKS, so the
//     kernel never keeps a target). A labelled symlink taints at READLINK.
//   - A FIFO, a socket, a device node: LOOKUP and GETATTR only. open(2) of
//     a FIFO or a device and connect(2) to a socket are served by the
//     kernel's pipe, socket and device code, and the data never reaches
//     aerfs. So the taint is applied at LOOKUP: these entries are never
//     cached by the kernel (entry and attribute timeouts of zero), so every
//     path walk to one reaches aerfs, and a labelled one taints whoever
//     looks it up, exactly as reading a labelled file does (R6).
//
// Who labels a FIFO or a socket. Its creator, when untrusted or tainted, as
// for a written file. But a clean process may create it and an untrusted
// one write into it, and that data never passes through aerfs. Every
// untrusted or tainted subject that looks one up is therefore counted as a
// potential writer: its principal and taint are merged into the object's
// label, so every later reader is tainted. A reader that looked the object
// up before such a writer arrived (it opened first and blocked, or holds
// the object open) is tainted then, retroactively: aerfs keeps the recent
// lookers of each object and adds the writer's taint to each of them.
//
// Limits. The taint is coarse: looking an object up (stat of it, ls -l of
// its directory) counts as reading it, and for an untrusted or tainted
// subject as writing it; a plain listing does not (objectDir); a clean reader that merely looked an object up
// before an untrusted process did is tainted too. A process that received
// a FIFO's descriptor by other means (inheritance, SCM_RIGHTS, /proc), or a
// socket connected through the abstract namespace, is beyond aerfs's
// sight. Only the last maxLookers lookers of an object are kept for the
// retroactive taint, and a looker outside every session is tainted only
// in the resolution aerfs kept of it. Labels of special objects are bound by inode and type
// and dropped when the last name is unlinked through the mount.

// maxLookers is how many recent lookers of one object are remembered.
const maxLookers = 64

type objectLookers struct {
	mu sync.Mutex
	m  map[fileKey][]*principal.Resolved
}

// isObject reports whether mode is a FIFO, a socket or a device node.
func isObject(mode uint32) bool {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR, syscall.S_IFBLK:
		return true
	}
	return false
}

// labelCreated labels a symlink, FIFO, socket or device node that the
// caller just created at rel, when the caller is untrusted or tainted.
func (m *Monitor) labelCreated(ctx context.Context, rel string, out *fuse.EntryOut) {
	st, err := m.lstatRel(rel)
	if err != nil {
		return
	}
	kind := st.Mode & syscall.S_IFMT
	if kind != syscall.S_IFLNK && !isObject(kind) {
		return
	}
	if isObject(kind) {
		neverCache(out)
	}
	res := m.caller(ctx)
	nl := labelForWriter(res.Subject())
	if nl == nil {
		// A label left on a reused inode number (its object removed
		// behind aerfs's back) does not belong to this new object.
		if m.Labels.Get(keyOf(st)) != nil {
			m.forgetInode(keyOf(st))
		}
		return
	}
	nl.Kind = kind
	m.setObjectLabel(res, rel, st, nl, "created by a labelled writer")
	neverCache(out)
}

func neverCache(out *fuse.EntryOut) {
	out.SetEntryTimeout(0)
	out.SetAttrTimeout(0)
}

// setObjectLabel stores nl for the object and records why.
func (m *Monitor) setObjectLabel(res *principal.Resolved, rel string, st *syscall.Stat_t, nl *Label, why string) {
	subj := res.Subject()
	nl.bindFingerprint(st)
	nl.Record = m.record(&evidence.Record{Type: evidence.TypeWrite, Principal: subj.Principal.String(),
		Taint: taintNames(nl.Taint), Parents: m.parentsFor(res, rel),
		Meta: evidence.Meta{Path: rel, Op: "label", Verdict: "allow", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe,
			UID: res.Proc.UID, Session: subj.Session, Rule: policy.RulePlain.ID(), Reason: why}})
	if err := m.Labels.Set(keyOf(st), nl); err != nil {
		m.log.Error().Err(err).Str("path", rel).Msg("label not stored")
	}
}

// lookupObject is called for every successful lookup of a FIFO, socket or
// device node: it taints the caller with the object's label, counts an
// untrusted or tainted caller as a writer, and keeps the entry uncached.
func (m *Monitor) lookupObject(ctx context.Context, rel string, out *fuse.EntryOut) syscall.Errno {
	neverCache(out)
	st, err := m.lstatRel(rel)
	if err != nil || !isObject(st.Mode) {
		return 0
	}
	k := keyOf(st)
	res := m.caller(ctx)
	t, l := m.target(rel, st)
	if l != nil {
		if _, errno := m.gate(ctx, res, policy.OpRead, rel, t, l); errno != 0 {
			return errno
		}
	}
	var added policy.Taint
	if wl := labelForWriter(res.Subject()); wl != nil {
		nl := mergeLabels(l, wl)
		nl.Kind = st.Mode & syscall.S_IFMT
		if l == nil || nl.Taint != l.Taint || nl.Origin != l.Origin {
			m.setObjectLabel(res, rel, st, nl, "looked up by a labelled subject: a potential writer")
		}
		added = nl.Taint
	}
	m.objs.mu.Lock()
	if m.objs.m == nil {
		m.objs.m = map[fileKey][]*principal.Resolved{}
	}
	prev := m.objs.m[k]
	ls := append(prev, res)
	if len(ls) > maxLookers {
		ls = ls[len(ls)-maxLookers:]
	}
	m.objs.m[k] = ls
	m.objs.mu.Unlock()
	if added != 0 {
		// Whoever looked the object up before this writer may be reading
		// what it writes.
		for _, p := range prev {
			if p != res && p.AddTaint(added) {
				m.noteTaint(p, added, rel)
			}
		}
	}
	return 0
}

// readlinkTaint taints the caller that reads a labelled symlink's target.
func (n *Node) readlinkTaint(ctx context.Context) syscall.Errno {
	rel := n.rel()
	st, err := n.m.lstatRel(rel)
	if err != nil {
		return 0
	}
	t, l := n.m.target(rel, st)
	if l == nil {
		return 0
	}
	_, errno := n.m.gate(ctx, nil, policy.OpRead, rel, t, l)
	return errno
}

func (m *Monitor) forgetLookers(k fileKey) {
	m.objs.mu.Lock()
	delete(m.objs.m, k)
	m.objs.mu.Unlock()
}

// objectDir is a directory handle whose READDIRPLUS answers carry no entry
// for a FIFO, socket or device node: listing a directory is not looking one
// up, so it neither taints the lister nor counts it as a writer. The kernel
// gets the name alone and sends a LOOKUP when the object is used. Every
// other entry is looked up as usual.
type objectDir struct {
	gofs.FileHandle
	n        *Node
	lastName string
	lastMode uint32
}

var _ gofs.FileLookuper = (*objectDir)(nil)

func (d *objectDir) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	e, errno := d.FileHandle.(gofs.FileReaddirenter).Readdirent(ctx)
	if e != nil {
		d.lastName, d.lastMode = e.Name, e.Mode
	}
	return e, errno
}

func (d *objectDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	mode := d.lastMode
	if name != d.lastName {
		// A replayed entry after an interrupted listing.
		st, err := d.n.m.lstatRel(d.n.childRel(name))
		if err != nil {
			return nil, gofs.ToErrno(err)
		}
		mode = st.Mode
	}
	if isObject(mode) {
		return nil, syscall.ENOENT
	}
	return d.n.Lookup(ctx, name, out)
}

func (d *objectDir) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if s, ok := d.FileHandle.(gofs.FileSeekdirer); ok {
		return s.Seekdir(ctx, off)
	}
	return syscall.ENOTSUP
}

func (d *objectDir) Releasedir(ctx context.Context, flags uint32) {
	if r, ok := d.FileHandle.(gofs.FileReleasedirer); ok {
		r.Releasedir(ctx, flags)
	}
}

func (d *objectDir) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if r, ok := d.FileHandle.(gofs.FileFsyncdirer); ok {
		return r.Fsyncdir(ctx, flags)
	}
	return 0
}

func (d *objectDir) Ioctl(ctx context.Context, cmd uint32, arg uint64, input []byte, output []byte) (int32, syscall.Errno) {
	if r, ok := d.FileHandle.(gofs.FileIoctler); ok {
		return r.Ioctl(ctx, cmd, arg, input, output)
	}
	return 0, syscall.ENOTTY
}
