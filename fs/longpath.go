package fs

import (
	"context"
	"os"
	"path"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// # Long paths
//
// The kernel hands the file system one name at a time, so a directory
// chain may be far deeper than PATH_MAX (4,096 bytes) below the mount. The
// daemon names backing files by their path below the backing directory,
// and a system call refuses a path that long (ENAMETOOLONG) although every
// name in it is legal. Below longRel bytes a path goes to one *at call
// relative to the backing directory's descriptor, as always; above it, the
// parent directory is opened piece by piece (each piece a whole number of
// names, at most longRel bytes, resolved beneath the directory before it
// and never through a symlink) and the call is made relative to it. The
// loopback node's calls, which build absolute paths, are replaced by *at
// calls for such paths.

// longRel is the longest relative path handed to one system call. The
// loopback's absolute paths add /proc/self/fd/N/ to it.
const longRel = 3800

// long reports whether rel is too long for one system call.
func long(rel string) bool { return len(rel) > longRel }

// openDirPieces opens the backing directory rel piece by piece; the last
// piece is opened with flags (O_PATH for a parent used only as a dirfd).
func (m *Monitor) openDirPieces(rel string, flags int) (int, error) {
	fd := m.rootFd
	owned := false
	for rel != "" {
		piece := rel
		if len(piece) > longRel {
			i := strings.LastIndexByte(rel[:longRel], '/')
			if i <= 0 {
				return -1, syscall.ENAMETOOLONG
			}
			piece = rel[:i]
		}
		rest := strings.TrimPrefix(rel[len(piece):], "/")
		fl := unix.O_PATH | unix.O_DIRECTORY
		if rest == "" {
			fl = flags | unix.O_DIRECTORY
		}
		nfd, err := unix.Openat2(fd, piece, &unix.OpenHow{
			Flags:   uint64(fl | unix.O_CLOEXEC | unix.O_NOFOLLOW),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		})
		if owned {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd, owned = nfd, true
		rel = rest
	}
	if !owned {
		return unix.Openat(m.rootFd, ".", flags|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	return fd, nil
}

// parentAt returns a directory descriptor and a name through which rel can
// be reached by one *at call, and the function that releases the
// descriptor. For a short rel that is the backing directory and rel itself.
func (m *Monitor) parentAt(rel string) (int, string, func(), error) {
	if !long(rel) {
		return m.rootFd, rel, func() {}, nil
	}
	dir, name := path.Split(rel)
	fd, err := m.openDirPieces(strings.TrimSuffix(dir, "/"), unix.O_PATH)
	if err != nil {
		return -1, "", nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return fd, name, func() { unix.Close(fd) }, nil
}

// unlinkRel removes rel (a directory with AT_REMOVEDIR).
func (m *Monitor) unlinkRel(rel string, flags int) error {
	fd, name, done, err := m.parentAt(rel)
	if err != nil {
		return err
	}
	defer done()
	return unix.Unlinkat(fd, name, flags)
}

// childLong reports whether the loopback cannot reach name in n by path.
func (n *Node) childLong(name string) bool { return long(n.childRel(name)) }

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

// newChild makes the inode of rel, just created or found, as lookupAt does.
func (n *Node) newChild(ctx context.Context, rel string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return n.lookupAt(ctx, rel, out)
}

// makeLong creates name in n with make (mkdirat, mknodat, symlinkat …)
// relative to its parent's descriptor, gives it the caller as owner and
// returns its inode.
func (n *Node) makeLong(ctx context.Context, name string, out *fuse.EntryOut, mk func(dirfd int, name string) error) (*gofs.Inode, syscall.Errno) {
	rel := n.childRel(name)
	fd, base, done, err := n.m.parentAt(rel)
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	defer done()
	if err := mk(fd, base); err != nil {
		return nil, gofs.ToErrno(err)
	}
	preserveOwnerAt(ctx, fd, base)
	return n.newChild(ctx, rel, out)
}

func (n *Node) loopMkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !n.childLong(name) {
		return n.LoopbackNode.Mkdir(ctx, name, mode, out)
	}
	return n.makeLong(ctx, name, out, func(fd int, base string) error { return unix.Mkdirat(fd, base, mode) })
}

func (n *Node) loopMknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !n.childLong(name) {
		return n.LoopbackNode.Mknod(ctx, name, mode, rdev, out)
	}
	return n.makeLong(ctx, name, out, func(fd int, base string) error { return unix.Mknodat(fd, base, mode, int(rdev)) })
}

func (n *Node) loopSymlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if !n.childLong(name) {
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
	if !n.childLong(name) && !long(src) {
		return n.LoopbackNode.Link(ctx, target, name, out)
	}
	sfd, sname, sdone, err := n.m.parentAt(src)
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
	if !n.childLong(name) && !np.childLong(newName) {
		return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
	}
	sfd, sname, sdone, err := n.m.parentAt(n.childRel(name))
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer sdone()
	dfd, dname, ddone, err := n.m.parentAt(np.childRel(newName))
	if err != nil {
		return gofs.ToErrno(err)
	}
	defer ddone()
	return gofs.ToErrno(unix.Renameat2(sfd, sname, dfd, dname, uint(flags)))
}

func (n *Node) loopCreate(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	if !n.childLong(name) {
		return n.LoopbackNode.Create(ctx, name, flags, mode, out)
	}
	rel := n.childRel(name)
	fd, base, done, err := n.m.parentAt(rel)
	if err != nil {
		return nil, nil, 0, gofs.ToErrno(err)
	}
	defer done()
	f, err := unix.Openat(fd, base, int(flags&^syscall.O_APPEND)|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, mode)
	if err != nil {
		return nil, nil, 0, gofs.ToErrno(err)
	}
	preserveOwnerAt(ctx, fd, base)
	ch, errno := n.newChild(ctx, rel, out)
	if errno != 0 {
		unix.Close(f)
		return nil, nil, 0, errno
	}
	return ch, gofs.NewLoopbackFile(f), 0, 0
}

func (n *Node) loopOpen(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	rel := n.rel()
	if !long(rel) {
		return n.LoopbackNode.Open(ctx, flags)
	}
	fd, base, done, err := n.m.parentAt(rel)
	if err != nil {
		return nil, 0, gofs.ToErrno(err)
	}
	defer done()
	f, err := unix.Openat(fd, base, int(flags&^(syscall.O_APPEND|fuse.FMODE_EXEC))|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, 0, gofs.ToErrno(err)
	}
	return gofs.NewLoopbackFile(f), 0, 0
}

func (n *Node) loopOpendir(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	rel := n.rel()
	if !long(rel) {
		return n.LoopbackNode.OpendirHandle(ctx, flags)
	}
	fd, err := n.m.openDirPieces(rel, unix.O_RDONLY)
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
	if !long(rel) {
		return n.LoopbackNode.Readlink(ctx)
	}
	fd, base, done, err := n.m.parentAt(rel)
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	defer done()
	for l := 256; ; l *= 2 {
		buf := make([]byte, l)
		sz, err := unix.Readlinkat(fd, base, buf)
		if err != nil {
			return nil, gofs.ToErrno(err)
		}
		if sz < len(buf) {
			return buf[:sz], 0
		}
	}
}

// loopSetattr is the loopback's Setattr for a node without a handle whose
// path is too long: chmod, chown, truncate and times through *at calls.
func (n *Node) loopSetattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	rel := n.rel()
	if _, ok := f.(gofs.FileSetattrer); ok || !long(rel) {
		return n.LoopbackNode.Setattr(ctx, f, in, out)
	}
	fd, base, done, err := n.m.parentAt(rel)
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
