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

func writeIntent(flags uint32) bool {
	return flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0
}

func openOp(flags uint32) policy.Op {
	switch {
	case writeIntent(flags):
		return policy.OpWrite
	case flags&fuse.FMODE_EXEC != 0:
		return policy.OpExec
	}
	return policy.OpRead
}

// Open decides the open and binds the decision to the handle it returns.
func (n *Node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	rel := n.rel()
	st, err := n.m.lstatRel(rel)
	if err != nil {
		return nil, 0, gofs.ToErrno(err)
	}
	t, l := n.m.target(rel, st)
	op := openOp(flags)
	fast := t.Class == policy.Plain && t.Namespace == policy.NSNone && l == nil && op != policy.OpWrite
	if fast {
		// Unlabelled plain file read by anyone: nothing to decide, nothing
		// to propagate. Kernel passthrough serves it at native speed.
		fh, fl, errno := n.loopOpen(ctx, flags)
		n.m.readOpened(ctx, nil, rel, st, l, flags)
		return fh, fl | keepCache(t), errno
	}
	res := n.m.caller(ctx)
	if op == policy.OpWrite && flags&syscall.O_ACCMODE == syscall.O_RDWR {
		// A read-write open reads too: the file's taint reaches the
		// caller before anything it writes is decided.
		if _, errno := n.m.gate(ctx, res, policy.OpRead, rel, t, l); errno != 0 {
			return nil, 0, errno
		}
	}
	if _, errno := n.m.gate(ctx, res, op, rel, t, l); errno != 0 {
		return nil, 0, errno
	}
	if op == policy.OpExec {
		if errno := n.m.authExec(res, rel, l); errno != 0 {
			return nil, 0, errno
		}
	}
	n.m.readOpened(ctx, res, rel, st, l, flags)
	if t.Class.Guarded() {
		if op == policy.OpWrite {
			g, errno := n.m.openGuarded(n, res, rel, flags)
			if errno != 0 {
				return nil, 0, errno
			}
			g.key = keyOf(st)
			n.m.writeOpened(g.key)
			return g, fuse.FOPEN_DIRECT_IO, 0
		}
		fh, _, errno := n.loopOpen(ctx, flags)
		if errno != 0 {
			return nil, 0, errno
		}
		return &guardedReader{FileHandle: fh, node: n, key: keyOf(st)}, guardedReadFlags, 0
	}
	fh, fl, errno := n.loopOpen(ctx, flags)
	fl |= keepCache(t)
	if errno != 0 || op != policy.OpWrite {
		return fh, fl, errno
	}
	n.m.killSUIDGID(ctx, rel, st)
	return n.m.plainWriter(res, rel, fh, st, l, flags&syscall.O_TRUNC != 0), fl, 0
}

// keepCache lets the kernel keep a plain file's pages between opens. With
// kernel passthrough the kernel reads the backing file's own page cache and
// the flag is moot; without it (an unprivileged mount) every open would
// otherwise drop the pages and read them through the daemon again. Plain
// files change only through this mount, whose writes the kernel sees; a
// change made in the backing directory shows once the attributes expire
// (plainTimeout), when the kernel notices the new mtime and drops the pages
// (CAP_AUTO_INVAL_DATA). Guarded files are direct I/O and session
// namespaces are never cached.
func keepCache(t policy.Target) uint32 {
	if t.Class == policy.Plain && t.Namespace == policy.NSNone {
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}

// Create decides creating name (a guarded class, a namespace) and hands out
// a staging handle for guarded files.
func (n *Node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	if isReserved(name) {
		return nil, nil, 0, syscall.EACCES
	}
	rel := n.childRel(name)
	st, _ := n.m.lstatRel(rel)
	t, l := n.m.target(rel, st)
	op := policy.OpCreate
	if st != nil {
		op = policy.OpWrite
	}
	res := n.m.caller(ctx)
	if t.Class != policy.Plain || t.Namespace != policy.NSNone || l != nil || !res.Subject().Principal.Trusted() || res.Subject().Taint != 0 || res.Session.Quarantined() {
		if _, errno := n.m.gate(ctx, res, op, rel, t, l); errno != 0 {
			return nil, nil, 0, errno
		}
	}
	ch, fh, fl, errno := n.loopCreate(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	setEntryTimeouts(out, t.Class, t.Namespace)
	nst, err := n.m.lstatRel(rel)
	if err != nil {
		fh.(gofs.FileReleaser).Release(ctx)
		return nil, nil, 0, gofs.ToErrno(err)
	}
	if t.Class.Guarded() {
		// The file exists (empty, or as it was); its content arrives at
		// commit, from the staging file.
		fh.(gofs.FileReleaser).Release(ctx)
		g, errno := n.m.openGuarded(ch.Operations().(*Node), res, rel, flags|syscall.O_TRUNC*boolU32(st == nil))
		if errno != 0 {
			return nil, nil, 0, errno
		}
		g.key = keyOf(nst)
		g.created = st == nil
		n.m.writeOpened(g.key)
		return ch, g, fuse.FOPEN_DIRECT_IO, 0
	}
	n.m.killSUIDGID(ctx, rel, st)
	return ch, n.m.plainWriter(res, rel, fh, nst, l, true), fl | keepCache(t), 0
}

func boolU32(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

func isReserved(name string) bool {
	return len(name) >= len(reservedPrefix) && name[:len(reservedPrefix)] == reservedPrefix || name == StatusDir
}

// guardedReader serves reads of a guarded file without kernel passthrough
// (its page cache lives only from an open to its close: fs/mmap.go).
type guardedReader struct {
	gofs.FileHandle
	node *Node
	mu   sync.Mutex
	key  fileKey // the version whose taint the handle's readers have taken
}

func (g *guardedReader) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if pageFill(ctx) && g.node != nil {
		// Only the current version enters the page cache (pagefill.go).
		if res, errno, found := g.fill(ctx, dest, off); found {
			return res, errno
		}
	}
	return g.FileHandle.(gofs.FileReader).Read(ctx, dest, off)
}

func (g *guardedReader) Release(ctx context.Context) syscall.Errno {
	return g.FileHandle.(gofs.FileReleaser).Release(ctx)
}

func (g *guardedReader) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return g.FileHandle.(gofs.FileGetattrer).Getattr(ctx, out)
}

func (g *guardedReader) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	return g.FileHandle.(gofs.FileLseeker).Lseek(ctx, off, whence)
}

// plainWriter labels a plain file written by the caller and keeps the label
// bound to the content when the handle is released. A clean USER writer of
// an unlabelled file gets the bare loopback handle.
func (m *Monitor) plainWriter(res *principal.Resolved, rel string, fh gofs.FileHandle, st *syscall.Stat_t, old *Label, truncated bool) gofs.FileHandle {
	subj := res.Subject()
	nl := labelForWriter(subj)
	if !truncated {
		nl = m.stampWrite(res, rel, "", mergeLabels(old, nl), old)
	} else {
		nl = m.stampWrite(res, rel, "", nl, nil)
	}
	if nl == nil && old == nil && !authTracked(res) {
		return fh
	}
	k := keyOf(st)
	if nl != nil {
		nl.bindFingerprint(st)
		if needsPlainRecord(subj, nl) {
			// The provenance DAG reaches plain files through this record:
			// whoever reads the file later names it as a parent.
			id := m.record(&evidence.Record{Type: evidence.TypeWrite, Principal: subj.Principal.String(),
				Taint: taintNames(nl.Taint), Parents: m.parentsFor(res, rel),
				Meta: evidence.Meta{Path: rel, Op: "open", Verdict: "allow", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe,
					UID: res.Proc.UID, Session: subj.Session, Rule: policy.RulePlain.ID(), Reason: "written by a labelled writer",
					Class: ClassOf(nl)}})
			nl.Record = id
		}
	}
	if err := m.Labels.Set(k, nl); err != nil {
		m.log.Error().Err(err).Msg("label not stored")
	}
	if nl == nil && !authTracked(res) {
		return fh
	}
	m.writeOpened(k)
	return &plainFile{LoopbackFile: fh.(*gofs.LoopbackFile), m: m, key: k, res: res, rel: rel}
}

// plainFile is a writable plain file with a label. It embeds the loopback
// file, so kernel passthrough still serves its reads and writes; on release
// the label is bound to the content's new fingerprint.
type plainFile struct {
	*gofs.LoopbackFile
	m   *Monitor
	key fileKey
	res *principal.Resolved // the writer, whose reads bound the content's class (fs/authority.go)
	rel string
}

func (p *plainFile) Release(ctx context.Context) syscall.Errno {
	var st syscall.Stat_t
	var errno syscall.Errno
	if fd, ok := p.LoopbackFile.PassthroughFd(); ok {
		if err := syscall.Fstat(fd, &st); err == nil {
			if l := p.m.Labels.Get(p.key); l != nil {
				l.bindFingerprint(&st)
				p.m.Labels.Set(p.key, l)
			}
		}
	}
	errno = p.LoopbackFile.Release(ctx)
	p.m.writeClosedKey(p.key)
	return errno
}

func (m *Monitor) writeOpened(k fileKey) {
	m.mu.Lock()
	if m.writers == nil {
		m.writers = map[fileKey]int{}
	}
	m.writers[k]++
	m.mu.Unlock()
}

func (m *Monitor) writeClosedKey(k fileKey) {
	m.mu.Lock()
	if m.writers[k] <= 1 {
		delete(m.writers, k)
	} else {
		m.writers[k]--
	}
	m.mu.Unlock()
}

func (m *Monitor) openForWrite(k fileKey) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writers[k] > 0
}
