package fs

import (
	"context"
	"io"
	"os"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/guard/label"
)

// # Page-cache fills
//
// The kernel keeps one page cache per inode, shared by every open of it.
// A guarded file's staging handle is direct I/O, so its read(2)s never
// touch that cache — but the kernel still lets a program map such a file
// MAP_PRIVATE, and fills the cache for that map through the very handle
// that mapped it. If the daemon answered those reads with the handle's
// staged content, the staged, undecided bytes would sit in the cache that
// every other reader of the file reads from: a tainted session could write
// its line, map the file and keep touching the map, and the owner's cat
// (or the agent's next start) would read a line the commit will refuse
// (integration TestMmapStagedContentNeverReachesReaders saw it in half of
// the owner's reads).
//
// So a read that fills the page cache is answered, on a staging handle,
// with the file's committed content: what every reader is served. The
// kernel marks the reads a process makes with read(2) on a direct-I/O file
// with its lock owner (FUSE_READ_LOCKOWNER); the reads that fill pages
// (faults, readahead) carry none. rawFS passes that distinction to the
// handle. Should a kernel ever mark none, a writer would read the
// committed version through its own handle too: less convenient, never a
// leak.
//
// The same holds the other way round for a reader's handle, which reads
// the version that was current when it was opened: its page fills would
// put that version back into the cache after a commit replaced it, and a
// process that opened MEMORY.md before the owner cleaned it could keep
// serving the poisoned lines to every later reader by touching a map of
// its old descriptor (integration TestMmapStaleVersionNeverReachesReaders
// saw it in 3% of the owner's reads). A guarded reader's page fills are
// answered from the file now at the path, so the cache only ever holds
// the current version; a reader that opened before a commit reads the new
// version's pages after it, as with any file rewritten in place. Its
// O_DIRECT reads (marked with the lock owner) keep reading the version it
// opened. A process that reads a newer version through a fill takes its
// taint (guardedReader.fill).

// rawFS is go-fuse's node bridge with the page-fill mark on reads.
type rawFS struct{ fuse.RawFileSystem }

// pageFillMark replaces the cancel channel of a read that fills the page
// cache; it is never closed (a page fill is not interrupted by a signal of
// the process that faulted).
var pageFillMark = make(chan struct{})

func (r rawFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	if in.ReadFlags&fuse.READ_LOCKOWNER == 0 {
		cancel = pageFillMark
	}
	return r.RawFileSystem.Read(cancel, in, buf)
}

// pageFill says whether the read of ctx fills the kernel's page cache.
func pageFill(ctx context.Context) bool {
	c, ok := ctx.(*fuse.Context)
	return ok && c.Cancel == (<-chan struct{})(pageFillMark)
}

// readCommitted answers a page fill on a staging handle from the file's
// committed content.
func (f *stagedFile) readCommitted(dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	res, errno, _, found := readCurrent(f.node.dir, f.node.rel(), dest, off)
	if !found {
		return fuse.ReadResultData(nil), 0
	}
	return res, errno
}

// readCurrent reads the file now at rel: the version a commit published
// last, and its identity. found is false when nothing is there.
func readCurrent(dir *backing.Dir, rel string, dest []byte, off int64) (res fuse.ReadResult, errno syscall.Errno, st *syscall.Stat_t, found bool) {
	f, err := dir.OpenFile(rel, os.O_RDONLY)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, 0, nil, false
		}
		return nil, gofs.ToErrno(err), nil, true
	}
	defer f.Close()
	var fst syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &fst); err != nil {
		return nil, gofs.ToErrno(err), nil, true
	}
	n, err := f.ReadAt(dest, off)
	if err != nil && err != io.EOF {
		return nil, gofs.ToErrno(err), nil, true
	}
	return fuse.ReadResultData(dest[:n]), 0, &fst, true
}

// fill answers a page fill on a guarded reader's handle from the current
// version. When that is not the version the handle opened (a commit
// replaced it since), the process that asked for the page reads that
// version now: the guard lets its label flow into the process as an open
// of it would (R6), once per version and handle.
func (g *guardedReader) fill(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno, bool) {
	n, rel := g.node, g.node.rel()
	res, errno, st, found := readCurrent(n.dir, rel, dest, off)
	if !found || st == nil {
		return res, errno, found
	}
	k := label.KeyOf(st)
	g.mu.Lock()
	seen := g.key == k
	g.mu.Unlock()
	if seen {
		return res, errno, true
	}
	if gerr := n.door.Fill(caller(ctx), rel, st); gerr != 0 {
		return nil, gerr, true
	}
	g.mu.Lock()
	g.key = k
	g.mu.Unlock()
	return res, errno, true
}
