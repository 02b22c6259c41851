package fs

import (
	"context"
	"encoding/json"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aerfs/aerfs/guard"
	"github.com/aerfs/aerfs/policy"
)

// # .aerfs/status: the agent's own account of itself
//
// The root of the mount answers every caller, in a read-only virtual
// directory .aerfs, about itself: its session, principal and taint and
// where the taint came from, its recent refusals with rule id and reason,
// and where refused content went (guard/explain). An agent told "read
// .aerfs/status when a file operation is refused" can relay why. The name
// is reserved: nothing in the backing directory is served under it, and
// nothing can be created, written, renamed or removed there. Reading it is
// not a read of workspace content: it neither taints nor counts as
// provenance.
//
// It is found by lookup and not listed, so that listings (git status,
// rg --files, an agent's own directory walk) neither report nor read it.

const (
	statusDirIno  = ^uint64(0) - 1 // far above any inode number a backing filesystem hands out
	statusFileIno = ^uint64(0) - 2
	statusJSONIno = ^uint64(0) - 3
)

// lookupStatus answers the lookup of guard.StatusDir at the root.
func lookupStatus(ctx context.Context, door *guard.Door, parent *gofs.Inode, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	d := &statusDirNode{door: door}
	d.fillAttr(&out.Attr)
	noNegativeCache(out)
	out.SetEntryTimeout(0)
	out.SetAttrTimeout(0)
	return parent.NewInode(ctx, d, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: statusDirIno}), 0
}

// statusDirNode is the .aerfs directory.
type statusDirNode struct {
	gofs.Inode
	door *guard.Door
}

// statusFileNode is .aerfs/status (text) or .aerfs/status.json.
type statusFileNode struct {
	gofs.Inode
	door   *guard.Door
	asJSON bool
}

var (
	_ gofs.NodeLookuper   = (*statusDirNode)(nil)
	_ gofs.NodeReaddirer  = (*statusDirNode)(nil)
	_ gofs.NodeGetattrer  = (*statusDirNode)(nil)
	_ gofs.NodeCreater    = (*statusDirNode)(nil)
	_ gofs.NodeMkdirer    = (*statusDirNode)(nil)
	_ gofs.NodeMknoder    = (*statusDirNode)(nil)
	_ gofs.NodeSymlinker  = (*statusDirNode)(nil)
	_ gofs.NodeLinker     = (*statusDirNode)(nil)
	_ gofs.NodeUnlinker   = (*statusDirNode)(nil)
	_ gofs.NodeRmdirer    = (*statusDirNode)(nil)
	_ gofs.NodeRenamer    = (*statusDirNode)(nil)
	_ gofs.NodeSetattrer  = (*statusDirNode)(nil)
	_ gofs.NodeSetxattrer = (*statusDirNode)(nil)
	_ gofs.NodeOpener     = (*statusFileNode)(nil)
	_ gofs.NodeGetattrer  = (*statusFileNode)(nil)
	_ gofs.NodeSetattrer  = (*statusFileNode)(nil)
	_ gofs.NodeSetxattrer = (*statusFileNode)(nil)
)

func (d *statusDirNode) fillAttr(a *fuse.Attr) {
	a.Mode = syscall.S_IFDIR | 0o555
	a.Ino = statusDirIno
	a.Nlink = 2
	setStatusTimes(a)
}

func setStatusTimes(a *fuse.Attr) {
	now := time.Now()
	a.SetTimes(&now, &now, &now)
}

func (d *statusDirNode) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fillAttr(&out.Attr)
	out.SetTimeout(0)
	return 0
}

var statusNames = map[string]bool{"status": false, "status.json": true}

func (d *statusDirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	asJSON, ok := statusNames[name]
	if !ok {
		noNegativeCache(out)
		return nil, syscall.ENOENT
	}
	f := &statusFileNode{door: d.door, asJSON: asJSON}
	f.fillAttr(&out.Attr, len(f.content(ctx)))
	out.SetEntryTimeout(0)
	out.SetAttrTimeout(0)
	return d.NewInode(ctx, f, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: f.ino()}), 0
}

func (d *statusDirNode) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	return gofs.NewListDirStream([]fuse.DirEntry{
		{Name: "status", Mode: syscall.S_IFREG, Ino: statusFileIno},
		{Name: "status.json", Mode: syscall.S_IFREG, Ino: statusJSONIno},
	}), 0
}

// refuse records and refuses a change inside guard.StatusDir.
func refuse(ctx context.Context, door *guard.Door, op policy.Op, name string) syscall.Errno {
	return door.Refuse(caller(ctx), op, name)
}

func (d *statusDirNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, refuse(ctx, d.door, policy.OpCreate, name)
}

func (d *statusDirNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, refuse(ctx, d.door, policy.OpCreate, name)
}

func (d *statusDirNode) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, refuse(ctx, d.door, policy.OpCreate, name)
}

func (d *statusDirNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, refuse(ctx, d.door, policy.OpCreate, name)
}

func (d *statusDirNode) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, refuse(ctx, d.door, policy.OpLink, name)
}

func (d *statusDirNode) Unlink(ctx context.Context, name string) syscall.Errno {
	return refuse(ctx, d.door, policy.OpUnlink, name)
}

func (d *statusDirNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	return refuse(ctx, d.door, policy.OpUnlink, name)
}

func (d *statusDirNode) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return refuse(ctx, d.door, policy.OpRenameFrom, name)
}

func (d *statusDirNode) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return refuse(ctx, d.door, policy.OpSetattr, "")
}

func (d *statusDirNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return refuse(ctx, d.door, policy.OpXattr, "")
}

func (f *statusFileNode) name() string {
	if f.asJSON {
		return "status.json"
	}
	return "status"
}

func (f *statusFileNode) ino() uint64 {
	if f.asJSON {
		return statusJSONIno
	}
	return statusFileIno
}

func (f *statusFileNode) fillAttr(a *fuse.Attr, size int) {
	a.Mode = syscall.S_IFREG | 0o444
	a.Ino = f.ino()
	a.Nlink = 1
	a.Size = uint64(size)
	setStatusTimes(a)
}

// content is what the caller behind ctx is told about itself.
func (f *statusFileNode) content(ctx context.Context) []byte {
	e := f.door.Explain(caller(ctx))
	if f.asJSON {
		b, _ := json.MarshalIndent(e, "", "  ")
		return append(b, '\n')
	}
	return []byte(e.Text())
}

func (f *statusFileNode) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	size := 0
	if h, ok := fh.(*statusHandle); ok && h != nil {
		size = len(h.data)
	} else {
		size = len(f.content(ctx))
	}
	f.fillAttr(&out.Attr, size)
	out.SetTimeout(0)
	return 0
}

func (f *statusFileNode) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if guard.WriteIntent(flags) {
		return nil, 0, refuse(ctx, f.door, policy.OpWrite, f.name())
	}
	// Direct I/O: every open reads this caller's own answer, never pages
	// cached from another caller's.
	return &statusHandle{data: f.content(ctx)}, fuse.FOPEN_DIRECT_IO, 0
}

func (f *statusFileNode) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return refuse(ctx, f.door, policy.OpSetattr, f.name())
}

func (f *statusFileNode) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return refuse(ctx, f.door, policy.OpXattr, f.name())
}

// statusHandle holds one caller's answer from its open to its close.
type statusHandle struct{ data []byte }

var (
	_ gofs.FileReader    = (*statusHandle)(nil)
	_ gofs.FileGetattrer = (*statusHandle)(nil)
)

func (h *statusHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(int64(len(h.data)), off+int64(len(dest)))
	return fuse.ReadResultData(h.data[off:end]), 0
}

func (h *statusHandle) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	a := &out.Attr
	a.Mode = syscall.S_IFREG | 0o444
	a.Nlink = 1
	a.Size = uint64(len(h.data))
	setStatusTimes(a)
	out.SetTimeout(0)
	return 0
}
