package fs

import (
	"context"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aerfs/aerfs/guard"
	"github.com/aerfs/aerfs/guard/label"
)

// Open asks the guard, which binds its decision to the handle it returns.
func (n *Node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	rel := n.rel()
	var fh gofs.FileHandle
	var fl uint32
	var o *guard.Opened
	var errno syscall.Errno
	// The file decided on is the file opened: when the name holds another
	// file by the open (a guarded commit replaced it in between), the open
	// is decided again on the new one — a few times, under a storm of
	// commits, before the caller is told ESTALE.
	for attempt := 0; attempt < staleRetries; attempt++ {
		o, errno = n.door.Open(caller(ctx), rel, flags, func(decided *syscall.Stat_t) syscall.Errno {
			var errno syscall.Errno
			if fh, fl, errno = n.loopOpen(ctx, flags); errno == 0 && !sameFile(ctx, fh, decided) {
				fh.(gofs.FileReleaser).Release(ctx)
				fh, errno = nil, syscall.ESTALE
			}
			return errno
		})
		if errno != syscall.ESTALE {
			break
		}
	}
	if errno != 0 {
		if fh != nil {
			// Opened, then refused (the writer's label could not be kept).
			fh.(gofs.FileReleaser).Release(ctx)
		}
		return nil, 0, n.staleName(errno)
	}
	switch {
	case o.Draft != nil:
		return &stagedFile{node: n, d: o.Draft}, fuse.FOPEN_DIRECT_IO, 0
	case o.Reader:
		return &guardedReader{FileHandle: fh, node: n, key: o.Key}, guardedReadFlags, 0
	}
	if guard.WriteIntent(flags) {
		killSUIDGID(ctx, n.door, rel, o.Stat)
	}
	return plainHandle(fh, o), fl | keepCache(o) | noFlush(o), 0
}

// staleRetries bounds how often an open is decided again because the
// name was given another file between the decision and the open.
const staleRetries = 16

// noFlush spares the kernel a FLUSH at every close of a plain handle
// whose flush has nothing to do: one whose writers the guard does not
// follow (a read-only open, an unidentified writer of an unlabelled file).
// The loopback's own flush only closes a duplicate of the backing
// descriptor, which matters for locks held in the server, and this mount
// leaves locks to the kernel. A followed writer keeps its FLUSH: it is
// how the guard learns which process closed (and so wrote through) a
// handle that passthrough writes never show it.
func noFlush(o *guard.Opened) uint32 {
	if o.Plain == nil {
		return fuse.FOPEN_NOFLUSH
	}
	return 0
}

// sameFile reports whether the handle fh opened the file decided
// describes: the guard decided on the file its name held then, and the
// backing open goes by name again.
func sameFile(ctx context.Context, fh gofs.FileHandle, decided *syscall.Stat_t) bool {
	var out fuse.AttrOut
	ga, ok := fh.(gofs.FileGetattrer)
	return ok && ga.Getattr(ctx, &out) == 0 && out.Ino == decided.Ino
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
func keepCache(o *guard.Opened) uint32 {
	if o.Cache {
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}

// Create asks the guard to decide creating name (a guarded class, a
// namespace); a guarded file gets a staging handle.
func (n *Node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	if guard.Reserved(name) {
		return nil, nil, 0, syscall.EACCES
	}
	rel := n.childRel(name)
	var ch *gofs.Inode
	var fh gofs.FileHandle
	var fl uint32
	o, errno := n.door.Create(caller(ctx), rel, flags, func(flags uint32) (*syscall.Stat_t, syscall.Errno) {
		var st *syscall.Stat_t
		var errno syscall.Errno
		ch, fh, fl, st, errno = n.loopCreate(ctx, name, flags, mode, out)
		return st, errno
	})
	if errno != 0 {
		if fh != nil {
			fh.(gofs.FileReleaser).Release(ctx)
		}
		return nil, nil, 0, errno
	}
	c, ns := n.door.Classify(rel)
	setEntryTimeouts(out, c, ns)
	if o.Draft != nil {
		// The content arrives at commit, from the draft.
		fh.(gofs.FileReleaser).Release(ctx)
		return ch, &stagedFile{node: ch.Operations().(*Node), d: o.Draft}, fuse.FOPEN_DIRECT_IO, 0
	}
	killSUIDGID(ctx, n.door, rel, o.Stat)
	return ch, plainHandle(fh, o), fl | keepCache(o) | noFlush(o), 0
}

// plainHandle is the handle of a plain file: the bare loopback handle, or
// one that tells the guard of each close when it follows the handle's
// writers or its reader.
func plainHandle(fh gofs.FileHandle, o *guard.Opened) gofs.FileHandle {
	if o.Plain == nil && o.Reading == nil {
		return fh
	}
	pf := &plainFile{LoopbackFile: fh.(*gofs.LoopbackFile), p: o.Plain, r: o.Reading}
	if pf.p != nil {
		pf.p.Follow(pf.stat)
	}
	return pf
}

// guardedReader serves reads of a guarded file without kernel passthrough
// (its page cache lives only from an open to its close: mmap.go).
type guardedReader struct {
	gofs.FileHandle
	node *Node
	mu   sync.Mutex
	key  label.Key // the version whose taint the handle's readers have taken
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

// plainFile is a plain file whose label the guard follows: written (p: at
// each close the guard recomputes the label from the handle's writers, at
// release it binds it to the content) or read (r: content written under
// it reaches its reader). It embeds the loopback file, so kernel
// passthrough still serves its reads and writes.
type plainFile struct {
	*gofs.LoopbackFile
	p *guard.Plain
	r *guard.Reading
}

func (p *plainFile) stat() *syscall.Stat_t {
	if fd, ok := p.LoopbackFile.PassthroughFd(); ok {
		var st syscall.Stat_t
		if syscall.Fstat(fd, &st) == nil {
			return &st
		}
	}
	return nil
}

func (p *plainFile) Flush(ctx context.Context) syscall.Errno {
	errno := p.LoopbackFile.Flush(ctx)
	if p.p != nil {
		if e := p.p.Flush(caller(ctx), p.stat); errno == 0 {
			errno = e
		}
	}
	return errno
}

func (p *plainFile) Release(ctx context.Context) syscall.Errno {
	p.r.Close()
	if p.p != nil {
		p.p.Release(p.stat)
	}
	return p.LoopbackFile.Release(ctx)
}
