package fs

import (
	"context"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/guard"
	"github.com/aerfs/aerfs/guard/txn"
	"github.com/aerfs/aerfs/policy"
)

// Node is a loopback node whose every operation family asks the guard
// first. It embeds go-fuse's LoopbackNode and delegates once allowed.
type Node struct {
	*gofs.LoopbackNode
	door *guard.Door
	dir  *backing.Dir
	ids  *aliases // inoalias.go

	xattrs atomic.Int32 // xattrUnknown, xattrNone or xattrSome
	attrs  kernelAttrs  // the kernel's copy of a guarded file's attributes (attrcache.go)
}

const (
	xattrUnknown = iota
	xattrNone
	xattrSome
)

// Every interface Node implements, in one place: a missing override would
// silently fall through to the unguarded loopback.
var (
	_ gofs.NodeWrapChilder    = (*Node)(nil)
	_ gofs.NodeLookuper       = (*Node)(nil)
	_ gofs.NodeOpendirHandler = (*Node)(nil)
	_ gofs.NodeOpener         = (*Node)(nil)
	_ gofs.NodeCreater        = (*Node)(nil)
	_ gofs.NodeMkdirer        = (*Node)(nil)
	_ gofs.NodeMknoder        = (*Node)(nil)
	_ gofs.NodeSymlinker      = (*Node)(nil)
	_ gofs.NodeLinker         = (*Node)(nil)
	_ gofs.NodeUnlinker       = (*Node)(nil)
	_ gofs.NodeRmdirer        = (*Node)(nil)
	_ gofs.NodeRenamer        = (*Node)(nil)
	_ gofs.NodeSetattrer      = (*Node)(nil)
	_ gofs.NodeGetattrer      = (*Node)(nil)
	_ gofs.NodeSetxattrer     = (*Node)(nil)
	_ gofs.NodeRemovexattrer  = (*Node)(nil)
	_ gofs.NodeGetxattrer     = (*Node)(nil)
	_ gofs.NodeListxattrer    = (*Node)(nil)
	_ gofs.NodeCopyFileRanger = (*Node)(nil)
	_ gofs.NodeReadlinker     = (*Node)(nil)
)

// WrapChild makes every node the loopback creates one of ours.
func (n *Node) WrapChild(ctx context.Context, ops gofs.InodeEmbedder) gofs.InodeEmbedder {
	lb, ok := ops.(*gofs.LoopbackNode)
	if !ok {
		return ops // the virtual .aerfs (statusfile.go)
	}
	return &Node{LoopbackNode: lb, door: n.door, dir: n.dir, ids: n.ids}
}

// rel is the node's workspace-relative path ("" for the root).
func (n *Node) rel() string { return n.Path(n.Root()) }

func (n *Node) childRel(name string) string { return backing.Join(n.rel(), name) }

// caller is the thread id behind a request.
func caller(ctx context.Context) guard.Caller {
	c, ok := fuse.FromContext(ctx)
	if !ok {
		return guard.NoCaller
	}
	return guard.Caller{Pid: int(c.Pid), UID: c.Uid}
}

// isSensitive reports whether lookups and attributes of rel are not cached
// by the kernel like plain ones: guarded files (every byte must come from
// here, and restores change them behind the kernel's back: only a regular
// file's name and attributes are kept, for a second, and every change the
// kernel did not make itself invalidates them, attrcache.go), session
// namespaces (a dentry cached for one session must not serve another) and
// the shared namespace (promotions add to it behind the kernel's back).
func isSensitive(c policy.Class, ns policy.Namespace) bool {
	return c != policy.Plain || ns != policy.NSNone
}

// plainTimeout is how long the kernel may cache entries, attributes and
// failed lookups of plain paths. Plain files change only through this
// mount, which the kernel sees (a change made in the backing directory is
// drift, and shows up here at most this late). It is what makes stat-heavy
// work (ls -l, du, git status) cost little more than on the native
// filesystem; go-fuse's default is one second.
const plainTimeout = 60 * time.Second

// guardedEntryTimeout is how long the kernel may keep the name of a
// guarded regular file outside the session and shared namespaces
// (MEMORY.md); its attributes are kept as long, on the terms of
// attrcache.go. Every open, read and change of the file still reaches
// the daemon, which acts on the path,
// and a commit keeps the kernel's identity of the file (inoalias.go), so
// a name served from the cache leads where a lookup would. No lookup of
// such a name is decided (only session namespaces' are), and a failed one
// is never cached (noNegativeCache). It saves the LOOKUP that every open
// of a guarded file sent before: one round trip of every commit and read.
const guardedEntryTimeout = time.Second

// setEntryTimeouts sets the kernel cache lifetimes of a new entry (out's
// attributes filled). The mount sets no default (a zero here would
// otherwise be replaced by it), so a sensitive entry keeps zero: never
// cached, but for the name of a guarded regular file (guardedEntryTimeout).
func setEntryTimeouts(out *fuse.EntryOut, c policy.Class, ns policy.Namespace) {
	if isSensitive(c, ns) {
		out.SetEntryTimeout(0)
		out.SetAttrTimeout(0)
		if ns == policy.NSNone && out.Attr.Mode&syscall.S_IFMT == syscall.S_IFREG {
			out.SetEntryTimeout(guardedEntryTimeout)
		}
		return
	}
	out.SetEntryTimeout(plainTimeout)
	out.SetAttrTimeout(plainTimeout)
}

// staleName turns ENOENT into ESTALE for a node whose name the kernel may
// have served from its cache (a guarded regular file, guardedEntryTimeout):
// the file went behind the kernel's back (a restore removed it). ESTALE
// makes the kernel walk the path again with a fresh lookup (the VFS
// retries once with LOOKUP_REVAL), which finds the name gone: a stat then
// fails with ENOENT, and an open with O_CREAT creates the file, instead of
// failing on the name the kernel still held.
func (n *Node) staleName(errno syscall.Errno) syscall.Errno {
	if errno != syscall.ENOENT || n.StableAttr().Mode&syscall.S_IFMT != syscall.S_IFREG {
		return errno
	}
	if c, ns := n.door.Classify(n.rel()); isSensitive(c, ns) && ns == policy.NSNone {
		return syscall.ESTALE
	}
	return errno
}

// noNegativeCache keeps a failed lookup of a sensitive name out of the
// kernel's negative dentry cache: the mount's negative timeout applies only
// to entries whose timeout is still zero.
func noNegativeCache(out *fuse.EntryOut) { out.SetEntryTimeout(time.Nanosecond) }

func neverCache(out *fuse.EntryOut) {
	out.SetEntryTimeout(0)
	out.SetAttrTimeout(0)
}

func (n *Node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if strings.HasPrefix(name, txn.ReservedPrefix) {
		return nil, syscall.ENOENT
	}
	if name == guard.StatusDir && n.IsRoot() {
		return lookupStatus(ctx, n.door, n.EmbeddedInode(), out) // statusfile.go
	}
	rel := n.childRel(name)
	c, ns := n.door.Classify(rel)
	if errno := n.door.Lookup(caller(ctx), rel); errno != 0 {
		noNegativeCache(out)
		return nil, errno
	}
	prev := n.GetChild(name)
	if prev != nil && cachesAttrs(c, ns, prev.StableAttr().Mode) {
		if pn, ok := prev.Operations().(*Node); ok {
			pn.attrs.give()
		} else {
			prev = nil
		}
	}
	ch, errno := n.lookupAt(ctx, rel, out)
	switch {
	case errno == 0:
		setEntryTimeouts(out, c, ns)
		if d := cachedAttrs(prev, ch, c, ns, &out.Attr); d > 0 {
			out.SetAttrTimeout(d)
		}
		if guard.IsObject(out.Attr.Mode) {
			// Never cached: every path walk to one reaches the guard.
			neverCache(out)
			if errno := n.door.Object(caller(ctx), rel); errno != 0 {
				return nil, errno
			}
		}
	case isSensitive(c, ns):
		noNegativeCache(out)
	}
	return ch, errno
}

func (n *Node) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	var errno syscall.Errno
	rel := n.rel()
	c, ns := n.door.Classify(rel)
	// Attributes read through a handle are never cached (attrcache.go).
	give := false
	if fga, ok := f.(gofs.FileGetattrer); ok && f != nil {
		errno = fga.Getattr(ctx, out)
	} else {
		if give = cachesAttrs(c, ns, n.StableAttr().Mode); give {
			n.attrs.give()
		}
		errno = n.staleName(n.getattrAt(rel, out))
	}
	if errno == 0 {
		switch {
		case !isSensitive(c, ns) && !guard.IsObject(out.Attr.Mode):
			out.SetTimeout(plainTimeout)
		case give && keepsAttrs(c, ns, &out.Attr):
			out.SetTimeout(guardedAttrTimeout)
		}
	}
	return errno
}

// Readlink is sent on every follow of a symlink (symlink caching is off):
// a labelled symlink taints the caller like reading a labelled file.
func (n *Node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if errno := n.door.Readlink(caller(ctx), n.rel()); errno != 0 {
		return nil, errno
	}
	return n.loopReadlink(ctx)
}

// OpendirHandle lists a directory; the sessions root shows a session only
// its own directory.
func (n *Node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	ls, errno := n.door.Opendir(caller(ctx), n.rel())
	if errno != 0 {
		return nil, 0, errno
	}
	fh, fl, errno := n.loopOpendir(ctx, flags)
	if errno != 0 {
		return fh, fl, errno
	}
	switch {
	case ls.Cache:
		// The kernel may keep a plain directory's listing: it changes only
		// through this mount, and the kernel drops the cache when it does.
		return &objectDir{FileHandle: fh, n: n}, fl | fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
	case ls.Keep != nil:
		return &filteredDir{FileHandle: fh, keep: ls.Keep}, fl &^ (fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE), 0
	}
	return &objectDir{FileHandle: fh, n: n}, fl, 0
}

// filteredDir hides directory entries the caller may not see.
type filteredDir struct {
	gofs.FileHandle
	keep func(name string) bool
}

func (d *filteredDir) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	r := d.FileHandle.(gofs.FileReaddirenter)
	for {
		e, errno := r.Readdirent(ctx)
		if errno != 0 || e == nil || d.keep(e.Name) {
			return e, errno
		}
	}
}

func (d *filteredDir) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	if s, ok := d.FileHandle.(gofs.FileSeekdirer); ok {
		return s.Seekdir(ctx, off)
	}
	return syscall.ENOTSUP
}

func (d *filteredDir) Releasedir(ctx context.Context, flags uint32) {
	if r, ok := d.FileHandle.(gofs.FileReleasedirer); ok {
		r.Releasedir(ctx, flags)
	}
}

func (d *filteredDir) Fsyncdir(ctx context.Context, flags uint32) syscall.Errno {
	if r, ok := d.FileHandle.(gofs.FileFsyncdirer); ok {
		return r.Fsyncdir(ctx, flags)
	}
	return 0
}
