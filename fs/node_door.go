package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Operations go-fuse's loopback offers that aerfs answers itself, so that
// none of them reaches the backing directory around the guard's Door (see
// TestGateIsTheOnlyDoor).

var (
	_ gofs.NodeStatxer  = (*Node)(nil)
	_ gofs.NodeTmpfiler = (*Node)(nil)
)

// Statx is answered ENOSYS: the kernel then remembers that this server has
// no STATX and asks with GETATTR, which Node.Getattr answers with aerfs's
// cache timeouts (guarded files never cached). The loopback's Statx would
// give every file the default attribute timeout.
func (n *Node) Statx(ctx context.Context, f gofs.FileHandle, flags uint32, mask uint32, out *fuse.StatxOut) syscall.Errno {
	return syscall.ENOSYS
}

// Tmpfile (open with O_TMPFILE) is not supported: an unnamed file created
// in the backing directory would be written outside every staged handle
// and could later be linked anywhere. Programs fall back to named temporary
// files, which go through Create and the gate.
func (n *Node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EOPNOTSUPP
}
