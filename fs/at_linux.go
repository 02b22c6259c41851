package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The loopback node names backing files by absolute path, which for aerfs
// goes through /proc/self/fd/N (the workspace path itself is covered by the
// mount). The hottest calls are done here relative to the backing
// directory's descriptor instead: one path walk, no /proc.

// stableAttr is go-fuse's loopback inode identity for st (see
// LoopbackRoot.idFromStat): the same file must get the same identity
// whichever of the two looked it up.
func (n *Node) stableAttr(st *syscall.Stat_t, gen uint64) gofs.StableAttr {
	swapped := (uint64(st.Dev) << 32) | (uint64(st.Dev) >> 32)
	rootDev := n.RootData.Dev
	swappedRootDev := (rootDev << 32) | (rootDev >> 32)
	return n.ids.kernelAttr(st, gen, gofs.StableAttr{Mode: st.Mode, Gen: gen, Ino: (swapped ^ swappedRootDev) ^ st.Ino}) // inoalias.go
}

func (n *Node) lookupAt(ctx context.Context, rel string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	var st syscall.Stat_t
	gen, err := n.dir.Statx(rel, &st)
	if err != nil {
		return nil, gofs.ToErrno(err)
	}
	out.Attr.FromStat(&st)
	child := &gofs.LoopbackNode{RootData: n.RootData}
	return n.NewInode(ctx, child, n.stableAttr(&st, gen)), 0
}

func (n *Node) getattrAt(rel string, out *fuse.AttrOut) syscall.Errno {
	var st syscall.Stat_t
	if _, err := n.dir.Statx(rel, &st); err != nil {
		return gofs.ToErrno(err)
	}
	out.FromStat(&st)
	return 0
}
