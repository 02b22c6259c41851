package fs

import (
	"fmt"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// MountOptions are the knobs of a mount.
type MountOptions struct {
	Debug bool
}

// Mount serves the monitor's backing directory at mountpoint (usually the
// very same path: the backing directory was opened before it was covered).
func Mount(mountpoint string, m *Monitor, o MountOptions) (*fuse.Server, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(m.rootFd, &st); err != nil {
		return nil, err
	}
	lr := &gofs.LoopbackRoot{Path: m.rootPath, Dev: uint64(st.Dev)}
	root := &Node{LoopbackNode: &gofs.LoopbackNode{RootData: lr}, m: m}
	lr.RootNode = root

	// Plain paths: one second of kernel caching for entries and attributes,
	// the libfuse default. Nothing else changes plain files but the mount,
	// so the cache only saves round trips. Guarded paths and session
	// namespaces set their own timeouts to zero at each lookup.
	sec := time.Second
	// Failed lookups are not cached: a name that does not exist for one
	// session may exist for another, and a guarded file that was just
	// created must be found at once.
	var zero time.Duration
	opts := &gofs.Options{
		EntryTimeout:    &sec,
		AttrTimeout:     &sec,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			AllowOther:  true,
			Options:     []string{"default_permissions"},
			FsName:      m.stateDir,
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
		},
		NullPermissions: true,
	}
	server, err := gofs.Mount(mountpoint, root, opts)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	return server, nil
}
