package fs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/guard"
)

// killprivV2 asks the kernel to leave clearing set-user-ID, set-group-ID
// and file capabilities on write to the filesystem. Without it the kernel
// asks for security.capability before every single write to a file (a
// round trip to the daemon even when kernel passthrough serves the data),
// because a FUSE superblock cannot otherwise be marked SB_NOSEC. With it,
// an inode is checked once and then marked S_NOSEC. What the kernel no
// longer does, aerfs does: see killSUIDGID.
const killprivV2 = fuse.CAP_HANDLE_KILLPRIV_V2

// needsKill reports whether a write by uid to a file of mode mode must
// clear its set-user-ID / set-group-ID bits, as the kernel does for an
// unprivileged writer (a set-group-ID bit without group execute marks
// mandatory locking and stays).
func needsKill(mode uint32, uid uint32) bool {
	if uid == 0 {
		return false
	}
	return mode&syscall.S_ISUID != 0 || mode&(syscall.S_ISGID|syscall.S_IXGRP) == syscall.S_ISGID|syscall.S_IXGRP
}

// killSUIDGID clears the set-ID bits of the backing file rel when an
// unprivileged caller opens it for writing or truncates it. The kernel
// would clear them at the first write; with kernel passthrough the daemon
// never sees that write, so it clears them here, at the open.
func killSUIDGID(ctx context.Context, door *guard.Door, rel string, st *syscall.Stat_t) {
	c, ok := fuse.FromContext(ctx)
	if !ok || st == nil || !needsKill(st.Mode, c.Uid) {
		return
	}
	mode := st.Mode & 0o7777 &^ syscall.S_ISUID
	if mode&syscall.S_IXGRP != 0 {
		mode &^= syscall.S_ISGID
	}
	fd, name, done, err := door.Dir().ParentAt(rel)
	if err != nil {
		return
	}
	defer done()
	if err := unix.Fchmodat(fd, name, mode, 0); err != nil {
		door.Log().Warn().Err(err).Str("path", rel).Msg("cannot clear set-ID bits")
	}
}
