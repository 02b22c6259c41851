package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aerfs/aerfs/guard"
)

// # FIFOs, sockets and device nodes
//
// What the kernel sends aerfs for each: LOOKUP and GETATTR only. open(2)
// of a FIFO or a device and connect(2) to a socket are served by the
// kernel's pipe, socket and device code, and the data never reaches
// aerfs. So their label flows at LOOKUP (Door.Object): these entries are
// never cached by the kernel (entry and attribute timeouts of zero), so
// every path walk to one reaches aerfs. A symlink is followed with a
// READLINK every time (the mount does not ask for FUSE_CACHE_SYMLINKS).
// The limits are in guard/flow (Lookup).

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
		st, err := d.n.dir.Lstat(d.n.childRel(name))
		if err != nil {
			return nil, gofs.ToErrno(err)
		}
		mode = st.Mode
	}
	if guard.IsObject(mode) {
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
