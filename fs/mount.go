package fs

import (
	"fmt"
	"os"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aerfs/aerfs/guard"
)

// MountOptions are the knobs of a mount.
type MountOptions struct {
	Debug bool
	// NoPassthrough serves plain file data through the daemon, as a
	// mount without CAP_SYS_ADMIN must: for comparison, and for kernels
	// whose passthrough misbehaves.
	NoPassthrough bool
	// FUSE over io_uring (Linux 6.14+, the fuse module's enable_uring)
	// keeps each request on its caller's CPU; the opt-in belongs here
	// once go-fuse serves it (docs/performance.md, "FUSE over io_uring").
}

// Mount serves the guard's backing directory at mountpoint (usually the
// very same path: the backing directory was opened before it was covered).
func Mount(mountpoint string, door *guard.Door, o MountOptions) (*fuse.Server, error) {
	dir := door.Dir()
	var st syscall.Stat_t
	if err := syscall.Fstat(dir.Fd(), &st); err != nil {
		return nil, err
	}
	ids := newAliases(dir)
	door.SetIdentities(ids)
	lr := &gofs.LoopbackRoot{Path: dir.Path(), Dev: uint64(st.Dev)}
	root := &Node{LoopbackNode: &gofs.LoopbackNode{RootData: lr}, door: door, dir: dir, ids: ids}
	lr.RootNode = root
	ids.root.Store(root)

	// No default entry or attribute timeout: every lookup, create and
	// getattr sets its own (setEntryTimeouts), so that the zero of a
	// guarded file or a session namespace is not replaced by a default.
	// Failed lookups of plain names are cached like plain entries;
	// sensitive names opt out (noNegativeCache).
	neg := plainTimeout
	opts := &gofs.Options{
		NegativeTimeout: &neg,
		MountOptions: fuse.MountOptions{
			// Other users' processes (and root's) may use a mount made
			// by root. An unprivileged mount serves only its owner's
			// processes, which is all an agent's sessions are, and so
			// needs no user_allow_other in /etc/fuse.conf.
			AllowOther:  os.Geteuid() == 0,
			Options:     []string{"default_permissions"},
			FsName:      door.StateDir(),
			Name:        "aerfs",
			DirectMount: true,
			Debug:       o.Debug,
			// Extended attributes pass through: security.capability
			// must reach the backing directory for plain files.
			DisableXAttrs: false,
			// O_TRUNC arrives with the open that asked for it. Without
			// this the kernel first sends a separate truncate, which for
			// a guarded file would commit an empty version before the
			// writer has written anything.
			ExtraCapabilities: fuse.CAP_ATOMIC_O_TRUNC | killprivV2,
			// The kernel enforces POSIX ACLs of the backing files (with
			// default_permissions, mode bits alone otherwise) and caches
			// them per inode: one round trip per file, not one per ls -l.
			EnableAcl: true,
		},
		NullPermissions: true,
	}
	if o.NoPassthrough {
		// Without the capability the kernel refuses to register backing
		// files, and go-fuse falls back to serving reads and writes
		// itself: exactly what happens on an unprivileged mount.
		opts.DisabledCapabilities = fuse.CAP_PASSTHROUGH
	}
	server, err := fuse.NewServer(rawFS{gofs.NewNodeFS(root, opts)}, mountpoint, &opts.MountOptions)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	return server, nil
}
