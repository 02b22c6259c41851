package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
)

// # Guarded files and mmap
//
// A guarded file opened for writing is a staging handle with direct I/O:
// every read and write reaches the daemon, and the kernel refuses a shared
// map of it (ENODEV), so nothing can change a guarded file through a map
// behind the commit's decision. A private map of it is filled with the
// committed version, never the staged one (pagefill.go). A guarded file opened read-only is served
// through the page cache instead, so that programs that map files to read
// them (MAP_SHARED, PROT_READ) work. Its pages never outlive the opens
// that read them: the open drops what an earlier one left (no
// FOPEN_KEEP_CACHE), and each close drops them again (Flush below), so a
// later reader always reads the current version through the daemon.

// guardedReadFlags are the open flags of a read-only guarded handle: the
// page cache, without keeping it between opens.
const guardedReadFlags = 0

var _ gofs.FileFlusher = (*guardedReader)(nil)

// Flush drops the file's pages from the kernel's cache when a reader
// closes it.
func (g *guardedReader) Flush(ctx context.Context) syscall.Errno {
	var errno syscall.Errno
	if f, ok := g.FileHandle.(gofs.FileFlusher); ok {
		errno = f.Flush(ctx)
	}
	if g.node != nil {
		g.node.EmbeddedInode().NotifyContent(0, 0)
	}
	return errno
}
