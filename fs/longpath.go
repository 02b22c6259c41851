package fs

import (
	"context"
	"os"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/backing"
)

// # Long paths
//
// The loopback node names backing files by absolute path, which a system
// call refuses past PATH_MAX (ENAMETOOLONG) although every name in it is
// legal. For a path too long (backing.Long) the loopback's calls are
// replaced by *at calls relative to a parent opened piece by piece
// (backing.Dir.ParentAt).

// preserveOwnerAt gives a new object the caller's uid and gid, as the
// loopback does, when the daemon is root.
func preserveOwnerAt(ctx context.Context, dirfd int, name string) {
	if os.Getuid() != 0 {
		return
	}
	if c, ok := fuse.FromContext(ctx); ok {
		unix.Fchownat(dirfd, name, int(c.Uid), int(c.Gid), unix.AT_SYMLINK_NOFOLLOW)
	}
}

// makeLong creates name in n with make (mkdirat, mknodat, symlinkat …)
// relative to its parent's descriptor, gives it the caller as owner and
// returns its inode.
func (n *Node) makeLong(ctx context.Context, name string, out *fuse.EntryOut, mk func(dirfd int, name string) error) (*gofs.Inode, syscall.Errno) {
	rel := n.childRel(name)
	fd, base, done, err := n.dir.ParentAt(rel)
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	defer done()
	if err := mk(fd, base); err != nil {
		return nil, gofs.ToErrno(err)
	}
	preserveOwnerAt(ctx, fd, base)
	return n.lookupAt(ctx, rel, out)
}

func (n *Node) loopMkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !backing.Long(n.childRel(name)) {
		return n.LoopbackNode.Mkdir(ctx, name, mode, out)
	}
	return n.makeLong(ctx, name, out, func(fd int, base string) error { return unix.Mkdirat(fd, base, mode) })
}

func (n *Node) loopMknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !backing.Long(n.childRel(name)) {
		return n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	}
	return n.makeLong(ctx, name, out, func(fd int, base string) error { return unix.Mknodat(fd, base, mode, int(rdev)) })
}

func (n *Node) loopSymlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !backing.Long(n.childRel(name)) {
		return n.LoopbackNode.Symlink(ctx, target, name, out)
	}
	return n.makeLong(ctx, name, out, func(fd int, base string) error { return unix.Symlinkat(target, fd, base) })
}

func (n *Node) loopLink(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	t, ok := target.(*Node)
	if !ok {
		return nil, syscall.EXDEV
	}
	src := t.rel()
	if !backing.Long(n.childRel(name)) && !backing.Long(src) {
		return n.LoopbackNode.Link(ctx, target, name, out)
	}
	sfd, sname, sdone, err := n.dir.ParentAt(src)
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	defer sdone()
	return n.makeLong(ctx, name, out, func(fd int, base string) error { return unix.Linkat(sfd, sname, fd, base, 0) })
}

func (n *Node) loopRename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*Node)
	if !ok {
		return syscall.EXDEV
	}
	if !backing.Long(n.childRel(name)) && !backing.Long(np.childRel(newName)) {
		return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	}
	sfd, sname, sdone, err := n.dir.ParentAt(n.childRel(name))
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer sdone()
	dfd, dname, ddone, err := n.dir.ParentAt(np.childRel(newName))
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer ddone()
	return gofs.ToErrno(unix.Renameat2(sfd, sname, dfd, dname, uint(flags)))
}

// loopCreate creates (or opens) name as the loopback would, relative to
// the backing directory's descriptor at any length: one openat2 that
// stays beneath the workspace, a statx of the new descriptor, and a chown
// only when the caller is not already the owner. (The loopback's create
// walks /proc/self/fd/N, registers the descriptor with the runtime's
// poller and takes it out again, and chowns by path every time.) The
// stat it returns is the new descriptor's: the guard labels what was
// opened, not whatever has the name by then.
func (n *Node) loopCreate(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, *syscall.Stat_t, syscall.Errno) {
	rel := n.childRel(name)
	fd, err := n.dir.Open(rel, int(flags&^syscall.O_APPEND)|os.O_CREATE, mode)
	if err != nil {
		return nil, nil, 0, nil, gofs.ToErrno(err)
	}
	var st syscall.Stat_t
	gen, err := backing.Fstatx(fd, &st)
	if err == nil && os.Getuid() == 0 {
		if c, ok := fuse.FromContext(ctx); ok && (st.Uid != c.Uid || st.Gid != c.Gid) {
			if unix.Fchown(fd, int(c.Uid), int(c.Gid)) == nil {
				gen, err = backing.Fstatx(fd, &st)
			}
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil, nil, 0, nil, gofs.ToErrno(err)
	}
	out.Attr.FromStat(&st)
	return n.NewInode(ctx, &gofs.LoopbackNode{RootData: n.RootData}, n.stableAttr(&st, gen)), gofs.NewLoopbackFile(fd), 0, &st, 0
}

// loopOpen opens the node's file as the loopback would (no symlink on
// the way), relative to the backing directory's descriptor at any length
// (the loopback opens the root by its /proc path for every open).
func (n *Node) loopOpen(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	f, err := n.dir.Open(n.rel(), int(flags&^(syscall.O_APPEND|fuse.FMODE_EXEC)), 0)
	if err != nil {
		return nil, 0, gofs.ToErrno(err)
	}
	return gofs.NewLoopbackFile(f), 0, 0
}

func (n *Node) loopOpendir(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	rel := n.rel()
	if !backing.Long(rel) {
		return n.LoopbackNode.OpendirHandle(ctx, flags)
	}
	fd, err := n.dir.OpenDirPieces(rel, unix.O_RDONLY)
	if err != nil {
		return nil, 0, gofs.ToErrno(err)
	}
	ds, errno := gofs.NewLoopbackDirStreamFd(fd)
	if errno != 0 {
		unix.Close(fd)
		return nil, 0, errno
	}
	return ds, 0, 0
}

func (n *Node) loopReadlink(ctx context.Context) ([]byte, syscall.Errno) {
	rel := n.rel()
	if !backing.Long(rel) {
		return n.LoopbackNode.Readlink(ctx)
	}
	b, err := n.dir.Readlink(rel)
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	return b, 0
}

// loopSetattr is the loopback's Setattr for a node without a handle whose
// path is too long: chmod, chown, truncate and times through *at calls.
func (n *Node) loopSetattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	rel := n.rel()
	if _, ok := f.(gofs.FileSetattrer); ok || !backing.Long(rel) {
		return n.LoopbackNode.Setattr(ctx, f, in, out)
	}
	fd, base, done, err := n.dir.ParentAt(rel)
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer done()
	if mode, ok := in.GetMode(); ok {
		if err := unix.Fchmodat(fd, base, mode, 0); err != nil {
			return gofs.ToErrno(err)
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		su, sg := -1, -1
		if uok {
			su = int(uid)
		}
		if gok {
			sg = int(gid)
		}
		if err := unix.Fchownat(fd, base, su, sg, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return gofs.ToErrno(err)
		}
	}
	if sz, ok := in.GetSize(); ok {
		t, err := unix.Openat(fd, base, unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			return gofs.ToErrno(err)
		}
		err = unix.Ftruncate(t, int64(sz))
		unix.Close(t)
		if err != nil {
			return gofs.ToErrno(err)
		}
	}
	mtime, mok := in.GetMTime()
	atime, aok := in.GetATime()
	if mok || aok {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		if aok {
			ts[0] = unix.NsecToTimespec(atime.UnixNano())
		}
		if mok {
			ts[1] = unix.NsecToTimespec(mtime.UnixNano())
		}
		if err := unix.UtimesNanoAt(fd, base, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return gofs.ToErrno(err)
		}
	}
	return n.getattrAt(rel, out)
}
