package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aerfs/aerfs/guard/draft"
)

// stagedFile is the handle of a guarded file opened for writing: every
// write lands in the guard's draft, and the file changes only when a
// commit (at close, fsync or release) replaces it whole, after a second
// decision. It implements no PassthroughFd, so the kernel sends every read
// and write here.
type stagedFile struct {
	node *Node
	d    *draft.Draft
}

var (
	_ gofs.FileReader    = (*stagedFile)(nil)
	_ gofs.FileWriter    = (*stagedFile)(nil)
	_ gofs.FileFlusher   = (*stagedFile)(nil)
	_ gofs.FileReleaser  = (*stagedFile)(nil)
	_ gofs.FileFsyncer   = (*stagedFile)(nil)
	_ gofs.FileGetattrer = (*stagedFile)(nil)
	_ gofs.FileSetattrer = (*stagedFile)(nil)
	_ gofs.FileAllocater = (*stagedFile)(nil)
	_ gofs.FileLseeker   = (*stagedFile)(nil)
)

func (f *stagedFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if pageFill(ctx) {
		// A map's page: never the staged content (pagefill.go).
		return f.readCommitted(dest, off)
	}
	b, errno := f.d.ReadAt(dest, off)
	if errno != 0 {
		return nil, errno
	}
	return fuse.ReadResultData(b), 0
}

func (f *stagedFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	defer f.node.attrs.written()
	return f.d.Write(f.node.door.Writer(caller(ctx)), data, off)
}

func (f *stagedFile) Lseek(ctx context.Context, off uint64, whence uint32) (uint64, syscall.Errno) {
	n, errno := f.d.Lseek(int64(off), int(whence))
	return uint64(n), errno
}

// Allocate leaves the note that the kernel may hold the file's
// attributes (attrcache.go): with FALLOC_FL_KEEP_SIZE the kernel keeps
// the size it holds, so the commit invalidates it.
func (f *stagedFile) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	return f.d.Allocate(f.node.door.Writer(caller(ctx)), int64(off), int64(size), mode)
}

func (f *stagedFile) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	st, err := f.node.dir.Lstat(f.node.rel())
	if err != nil {
		return gofs.ToErrno(err)
	}
	out.FromStat(st)
	if size, err := f.d.Size(); err == nil {
		out.Size = uint64(size)
		out.Blocks = (out.Size + 511) / 512
	}
	return 0
}

// Setattr through the handle (ftruncate, fchmod …). Only the size is
// staged; mode, owner and times are decided by the node's Setattr.
func (f *stagedFile) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok {
		defer f.node.attrs.written()
		if errno := f.d.Truncate(f.node.door.Writer(caller(ctx)), int64(sz)); errno != 0 {
			return errno
		}
	}
	return f.Getattr(ctx, out)
}

func (f *stagedFile) Flush(ctx context.Context) syscall.Errno { return f.commit(ctx) }

func (f *stagedFile) Fsync(ctx context.Context, flags uint32) syscall.Errno { return f.commit(ctx) }

// commit commits what the handle staged, if anything: a close with
// nothing to commit (a shell's first close of a redirection, before it
// writes) changes nothing the kernel holds.
func (f *stagedFile) commit(ctx context.Context) syscall.Errno {
	if _, due := f.d.Due(false); !due {
		return 0
	}
	return f.settle(f.node.door.Commit(caller(ctx), f.node.rel(), f.d, false))
}

func (f *stagedFile) Release(ctx context.Context) syscall.Errno {
	return f.settle(f.node.door.Release(f.node.rel(), f.d))
}
