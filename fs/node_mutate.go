package fs

import (
	"context"
	"os"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aerfs/aerfs/guard"
)

func (n *Node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return n.make(ctx, name, true, "", out, func() (*gofs.Inode, syscall.Errno) { return n.loopMkdir(ctx, name, mode, out) })
}

func (n *Node) Mknod(ctx context.Context, name string, mode, rdev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return n.make(ctx, name, false, "", out, func() (*gofs.Inode, syscall.Errno) { return n.loopMknod(ctx, name, mode, rdev, out) })
}

func (n *Node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return n.make(ctx, name, false, target, out, func() (*gofs.Inode, syscall.Errno) { return n.loopSymlink(ctx, target, name, out) })
}

// make creates name with mk once the guard allowed it; symlink is what a
// symlink names ("" for anything else).
func (n *Node) make(ctx context.Context, name string, dir bool, symlink string, out *fuse.EntryOut, mk func() (*gofs.Inode, syscall.Errno)) (*gofs.Inode, syscall.Errno) {
	rel := n.childRel(name)
	var ch *gofs.Inode
	never, errno := n.door.Make(caller(ctx), rel, name, dir, symlink, func() syscall.Errno {
		var errno syscall.Errno
		ch, errno = mk()
		return errno
	})
	if errno != 0 {
		return nil, errno
	}
	c, ns := n.door.Classify(rel)
	setEntryTimeouts(out, c, ns)
	if never {
		neverCache(out)
	}
	return ch, 0
}

// Link gives a file a second name, as the guard decides.
func (n *Node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if guard.Reserved(name) {
		return nil, syscall.EACCES
	}
	tn, ok := target.(*Node)
	if !ok {
		return nil, syscall.EXDEV // .aerfs/status (statusfile.go) is no backing file
	}
	var ch *gofs.Inode
	c, ns, errno := n.door.Link(caller(ctx), tn.rel(), n.childRel(name), func() syscall.Errno {
		var errno syscall.Errno
		ch, errno = n.loopLink(ctx, target, name, out)
		return errno
	})
	if errno != 0 {
		return nil, errno
	}
	// The file has one more name: what the kernel keeps of its attributes
	// under the old one no longer holds (attrcache.go, keepsAttrs).
	tn.attrs.forget(tn.EmbeddedInode())
	setEntryTimeouts(out, c, ns)
	return ch, 0
}

// Unlink removes a name (the guard does, through the transaction for a
// guarded one).
func (n *Node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.door.Unlink(caller(ctx), n.childRel(name))
}

func (n *Node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.door.Rmdir(caller(ctx), n.childRel(name))
}

// Rename moves name to newName in newParent once the guard allowed it.
func (n *Node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if guard.Reserved(name) || guard.Reserved(newName) {
		return syscall.EACCES
	}
	np, ok := newParent.(*Node)
	if !ok {
		return syscall.EXDEV
	}
	return n.door.Rename(caller(ctx), n.childRel(name), np.childRel(newName), flags, func() syscall.Errno {
		return n.loopRename(ctx, name, newParent, newName, flags)
	})
}

// Setattr asks the guard: a truncate is a write, chmod, chown and utimes a
// metadata change. What the guard does not carry out itself (a guarded
// file's size) the loopback does.
func (n *Node) Setattr(ctx context.Context, f gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	rel := n.rel()
	a := guard.Attrs{Meta: in.Valid&^fuse.FATTR_SIZE&^fuse.FATTR_FH&^fuse.FATTR_LOCKOWNER != 0}
	if sz, ok := in.GetSize(); ok {
		a.Size = &sz
	}
	if mode, ok := in.GetMode(); ok {
		a.Mode = &mode
	}
	sf, staged := f.(*stagedFile)
	if staged {
		a.Draft = sf.d
	}
	errno := n.door.Setattr(caller(ctx), rel, a, func(sizeDone bool) syscall.Errno {
		if in.Valid&fuse.FATTR_KILL_SUIDGID != 0 {
			// A truncate or chown by an unprivileged caller (the kernel
			// asks, having left set-ID clearing to the filesystem).
			st, _ := n.dir.Lstat(rel)
			killSUIDGID(ctx, n.door, rel, st)
		}
		rest := *in
		rest.Valid &^= fuse.FATTR_KILL_SUIDGID
		if sizeDone {
			rest.Valid &^= fuse.FATTR_SIZE
		}
		var fh gofs.FileHandle = f
		if staged {
			fh = nil
		}
		if rest.Valid&^fuse.FATTR_FH&^fuse.FATTR_LOCKOWNER != 0 {
			return n.loopSetattr(ctx, fh, &rest, out)
		}
		return 0
	})
	if errno != 0 {
		return errno
	}
	if staged {
		return sf.Getattr(ctx, out)
	}
	return n.Getattr(ctx, f, out)
}

func (n *Node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return n.door.Xattr(caller(ctx), n.rel(), func() syscall.Errno {
		n.xattrs.Store(xattrUnknown)
		return n.LoopbackNode.Setxattr(ctx, attr, data, flags)
	})
}

func (n *Node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	return n.door.Xattr(caller(ctx), n.rel(), func() syscall.Errno {
		n.xattrs.Store(xattrUnknown)
		return n.LoopbackNode.Removexattr(ctx, attr)
	})
}

// Getxattr answers from memory for a file known to have no extended
// attributes at all. `ls -l` asks for two per entry (security.selinux,
// system.posix_acl_access); the kernel caches the ACL answer per inode
// (EnableAcl) but not the other one. The first request lists the file's
// attributes once; later ones cost no system call. Setting or removing an
// attribute through the mount forgets what was learned.
func (n *Node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	switch n.xattrs.Load() {
	case xattrNone:
		return 0, absentXattr(attr)
	case xattrUnknown:
		sz, errno := n.LoopbackNode.Listxattr(ctx, nil)
		switch {
		case errno == 0 && sz == 0:
			n.xattrs.Store(xattrNone)
			return 0, absentXattr(attr)
		case errno == 0:
			n.xattrs.Store(xattrSome)
		}
	}
	if strings.HasPrefix(attr, "user.") {
		// A user attribute is content a session may have written: its
		// label flows into the reader.
		if errno := n.door.XattrRead(caller(ctx), n.rel()); errno != 0 {
			return 0, errno
		}
	}
	return n.LoopbackNode.Getxattr(ctx, attr, dest)
}

// Listxattr lists the names of the extended attributes: names a session
// chose are content, whose label flows into the reader.
func (n *Node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	if errno := n.door.XattrRead(caller(ctx), n.rel()); errno != 0 {
		return 0, errno
	}
	return n.LoopbackNode.Listxattr(ctx, dest)
}

// selinuxLabel is the attribute that holds a file's SELinux context.
const selinuxLabel = "security.selinux"

// noSELinux: the host kernel runs without SELinux (it creates /sys/fs/selinux
// when SELinux is enabled).
var noSELinux = func() bool {
	_, err := os.Stat("/sys/fs/selinux")
	return os.IsNotExist(err)
}()

// absentXattr is the answer for attr on a file that has no extended
// attributes. It is ENODATA, except for the SELinux context on a host
// without SELinux: there the mount answers as a filesystem without security
// labels does, "not supported". Both mean "no context", but `ls -l` (which
// asks every entry for its context) stops asking for the rest of the
// filesystem after "not supported", so a long listing costs one round trip
// per entry fewer. A file that does carry attributes gets the backing
// file's own answer, so a label set through the mount is read back.
func absentXattr(attr string) syscall.Errno {
	if attr == selinuxLabel && noSELinux {
		return syscall.EOPNOTSUPP
	}
	return syscall.ENODATA
}

// CopyFileRange into a guarded file lands in its draft like any write;
// between plain files it is the loopback's server-side copy.
func (n *Node) CopyFileRange(ctx context.Context, fhIn gofs.FileHandle, offIn uint64, out *gofs.Inode, fhOut gofs.FileHandle, offOut uint64, length uint64, flags uint64) (uint32, syscall.Errno) {
	if g, ok := fhOut.(*stagedFile); ok {
		r, ok := fhIn.(gofs.FileReader)
		if !ok {
			return 0, syscall.EOPNOTSUPP
		}
		if length > 1<<20 {
			length = 1 << 20
		}
		buf := make([]byte, length)
		rr, errno := r.Read(ctx, buf, int64(offIn))
		if errno != 0 {
			return 0, errno
		}
		data, st := rr.Bytes(buf)
		if !st.Ok() {
			return 0, syscall.EIO
		}
		return g.Write(ctx, data, int64(offOut))
	}
	return n.LoopbackNode.CopyFileRange(ctx, unwrapFile(fhIn), offIn, out, unwrapFile(fhOut), offOut, length, flags)
}

func unwrapFile(f gofs.FileHandle) gofs.FileHandle {
	switch x := f.(type) {
	case *plainFile:
		return x.LoopbackFile
	case *guardedReader:
		return x.FileHandle
	}
	return f
}
