package fs

import (
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aerfs/aerfs/policy"
)

// # A guarded file's attributes in the kernel's cache
//
// The kernel may keep a guarded file's attributes (outside the session and
// shared namespaces) for guardedAttrTimeout, as it keeps its name. That
// spares every open a GETATTR: with default_permissions the kernel checks
// the mode at each open, and asks for it again whenever its copy expired.
// A guarded commit is then five round trips instead of six.
//
// The kernel's copy must never outlive a change it did not see. What the
// kernel sees itself: a write through a staging handle marks the size and
// times it holds invalid, and a truncation through one replaces them with
// attributes it does not keep, so whatever it is told after either comes
// from here. What it does not see, and how each is told:
//
//   - a commit that publishes after the kernel was given the attributes
//     since the handle's last write (a lookup after the name expired):
//     kernelAttrs notes such an answer before it is read, and the commit
//     then invalidates the kernel's copy (stagedFile.settle);
//   - every other change of a guarded path — a restore, a rename, a
//     removal, a promotion, an accepted quarantine: the transaction tells
//     the mount (aliases.Changed), which invalidates the copy;
//   - content changed in the backing directory: the drift check tells it
//     the same way, once the drift is found (within a fraction of a second
//     while mounted).
//
// A lookup that meets a node it did not know before answers attributes
// the kernel does not keep (cachedAttrs): a change racing that lookup
// would find no node to invalidate. An invalidation bumps the kernel's
// attribute version, so an answer read before the change and sent after it
// is dropped by the kernel, not cached. Attributes read through an open
// handle (fstat, and the kernel's stat of a file some handle has open) are
// never cached: a staging handle's are its draft's.

// guardedAttrTimeout is how long the kernel may keep a guarded regular
// file's attributes.
const guardedAttrTimeout = guardedEntryTimeout

// cachesAttrs reports whether the kernel may keep the attributes of a
// file of class c in namespace ns and of the given mode for
// guardedAttrTimeout (plain files have plainTimeout).
func cachesAttrs(c policy.Class, ns policy.Namespace, mode uint32) bool {
	return isSensitive(c, ns) && ns == policy.NSNone && mode&syscall.S_IFMT == syscall.S_IFREG
}

// keepsAttrs reports whether an answer with the attributes a of a file of
// class c in namespace ns may be kept by the kernel for guardedAttrTimeout:
// a guarded regular file's (cachesAttrs), but not one with several names.
// The kernel may know such a file as several inodes (each name looked up
// on its own, one of them keeping its identity across commits,
// inoalias.go), and a change made through one leaves the others' copies
// as they were; a link made through the mount invalidates the linked
// node's copy (Node.Link).
func keepsAttrs(c policy.Class, ns policy.Namespace, a *fuse.Attr) bool {
	return cachesAttrs(c, ns, a.Mode) && a.Nlink == 1
}

// kernelAttrs is what a node knows of the kernel's copy of its
// attributes: whether the kernel may hold them, given since the last
// write through a staging handle.
type kernelAttrs struct{ given atomic.Bool }

// give notes, before the node's attributes are read for an answer the
// kernel may cache, that it may hold them from now on.
func (k *kernelAttrs) give() { k.given.Store(true) }

// written: the kernel has marked its copy of the size and times invalid
// (a write through a staging handle), or replaced it with attributes it
// does not keep (a truncation through one).
func (k *kernelAttrs) written() { k.given.Store(false) }

// forget invalidates the kernel's copy of the attributes of the node in
// (its pages are left: a guarded file's readers drop them at open and
// close).
func (k *kernelAttrs) forget(in *gofs.Inode) {
	k.given.Store(false)
	in.NotifyContent(-1, 0)
}

// settle ends a commit, refused or not, through a staging handle: the
// kernel's copy of the attributes is invalidated if it may have been
// given them since the handle's last write.
func (f *stagedFile) settle(errno syscall.Errno) syscall.Errno {
	if n := f.node; n.attrs.given.Swap(false) {
		n.attrs.forget(n.EmbeddedInode())
	}
	return errno
}

// Changed invalidates the kernel's copy of the attributes of rel, which
// changed behind it (txn.Identities).
func (t *aliases) Changed(rel string) {
	root := t.root.Load()
	if root == nil {
		return
	}
	in := root.EmbeddedInode()
	for _, name := range strings.Split(rel, "/") {
		if in = in.GetChild(name); in == nil {
			return // the kernel has not looked it up
		}
	}
	if n, ok := in.Operations().(*Node); ok {
		n.attrs.forget(in)
	}
}

// cachedAttrs sets the lifetime of the attributes a lookup of the child
// prev (nil: not known before this lookup) answers with: a guarded file's
// are kept only when the node was known before and noted as given
// (kernelAttrs.give) before they were read, so that a change racing the lookup
// invalidates them.
func cachedAttrs(prev *gofs.Inode, ch *gofs.Inode, c policy.Class, ns policy.Namespace, a *fuse.Attr) time.Duration {
	if prev == nil || ch == nil || !keepsAttrs(c, ns, a) || prev.StableAttr() != ch.StableAttr() {
		return 0
	}
	return guardedAttrTimeout
}
