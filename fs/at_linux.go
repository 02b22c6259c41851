package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// The loopback node names backing files by absolute path, which for aerfs
// goes through /proc/self/fd/N (the workspace path itself is covered by the
// mount). The hottest calls are done here relative to the backing
// directory's descriptor instead: one path walk, no /proc.

// statAt stats rel relative to the backing directory, as go-fuse's
// loopback does (statx, with the birth time that makes up the inode's
// generation).
func (m *Monitor) statAt(rel string, st *syscall.Stat_t) (gen uint64, err error) {
	if rel == "" {
		rel = "."
	}
	fd, name, done, err := m.parentAt(rel)
	if err != nil {
		return 0, err
	}
	defer done()
	var x unix.Statx_t
	if err := unix.Statx(fd, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS|unix.STATX_BTIME, &x); err != nil {
		return 0, err
	}
	st.Dev = unix.Mkdev(x.Dev_major, x.Dev_minor)
	st.Ino = x.Ino
	st.Nlink = uint64(x.Nlink)
	st.Mode = uint32(x.Mode)
	st.Uid = x.Uid
	st.Gid = x.Gid
	st.Rdev = unix.Mkdev(x.Rdev_major, x.Rdev_minor)
	st.Size = int64(x.Size)
	st.Blksize = int64(x.Blksize)
	st.Blocks = int64(x.Blocks)
	st.Atim = syscall.Timespec{Sec: x.Atime.Sec, Nsec: int64(x.Atime.Nsec)}
	st.Mtim = syscall.Timespec{Sec: x.Mtime.Sec, Nsec: int64(x.Mtime.Nsec)}
	st.Ctim = syscall.Timespec{Sec: x.Ctime.Sec, Nsec: int64(x.Ctime.Nsec)}
	gen = 1
	if x.Mask&unix.STATX_BTIME != 0 && (x.Btime.Sec != 0 || x.Btime.Nsec != 0) {
		gen = uint64(x.Btime.Sec)*1e9 + uint64(x.Btime.Nsec)
	}
	return gen, nil
}

// stableAttr is go-fuse's loopback inode identity for st (see
// LoopbackRoot.idFromStat): the same file must get the same identity
// whichever of the two looked it up.
func (n *Node) stableAttr(st *syscall.Stat_t, gen uint64) gofs.StableAttr {
	swapped := (uint64(st.Dev) << 32) | (uint64(st.Dev) >> 32)
	rootDev := n.RootData.Dev
	swappedRootDev := (rootDev << 32) | (rootDev >> 32)
	return n.m.kernelAttr(st, gen, gofs.StableAttr{Mode: st.Mode, Gen: gen, Ino: (swapped ^ swappedRootDev) ^ st.Ino}) // inoalias.go
}

func (n *Node) lookupAt(ctx context.Context, rel string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	var st syscall.Stat_t
	gen, err := n.m.statAt(rel, &st)
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	out.Attr.FromStat(&st)
	child := &gofs.LoopbackNode{RootData: n.RootData}
	return n.NewInode(ctx, child, n.stableAttr(&st, gen)), 0
}

func (n *Node) getattrAt(rel string, out *fuse.AttrOut) syscall.Errno {
	var st syscall.Stat_t
	if _, err := n.m.statAt(rel, &st); err != nil {
		return gofs.ToErrno(err)
	}
	out.FromStat(&st)
	return 0
}
