package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock file-system rights, by the ABI that introduced them.
const (
	llRead    = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	llABI1    = 1<<13 - 1 // EXECUTE … MAKE_SYM
	llFile    = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	llDevices = unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK
)

// LandlockABI returns the Landlock ABI version the kernel offers, 0 when
// Landlock is not available (not built in, or not enabled at boot).
func LandlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// handledFS is every file-system right the ABI knows: what the ruleset
// restricts.
func handledFS(abi int) uint64 {
	h := uint64(llABI1)
	if abi >= 2 {
		h |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		h |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		h |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return h
}

type ruleset struct {
	fd      int
	handled uint64
}

func applyLandlock(c Config, r *Report) error {
	abi := LandlockABI()
	r.LandlockABI = abi
	if abi == 0 {
		r.Warnings = append(r.Warnings, "Landlock is not available in this kernel: writes outside the workspace and the state directory are not confined")
		return nil
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handledFS(abi)}
	size := unsafe.Sizeof(attr.Handled_access_fs)
	if abi >= 4 {
		size += unsafe.Sizeof(attr.Handled_access_net) // network stays open: nothing handled
	}
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		size += unsafe.Sizeof(attr.Scoped)
		r.Scoped = []string{"signal", "abstract_unix_socket"}
	}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return fmt.Errorf("create ruleset (ABI %d): %w", abi, e)
	}
	rs := &ruleset{fd: int(fd), handled: attr.Handled_access_fs}
	defer unix.Close(rs.fd)

	hidden := make([]string, 0, len(c.Hidden))
	for _, h := range c.Hidden {
		if rh, err := filepath.EvalSymlinks(h); err == nil {
			h = rh
		}
		hidden = append(hidden, filepath.Clean(h))
	}
	write := rs.handled &^ llDevices

	// Reads: every directory may be listed; files may be read and run
	// everywhere except beneath the hidden paths.
	if err := rs.add("/", unix.LANDLOCK_ACCESS_FS_READ_DIR, true); err != nil {
		return err
	}
	if err := rs.split("/", llRead, hidden); err != nil {
		return err
	}
	r.Hidden = hidden

	ws, err := filepath.EvalSymlinks(c.Workspace)
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if err := rs.add(ws, write, true); err != nil {
		return err
	}
	r.Writable = append(r.Writable, ws)
	for _, w := range c.Writable {
		rw, err := filepath.EvalSymlinks(w)
		if err != nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("writable %s skipped: %v", w, err))
			continue
		}
		if i := slices.IndexFunc(hidden, func(h string) bool { return within(h, rw) }); i >= 0 {
			r.Warnings = append(r.Warnings, fmt.Sprintf("the hidden %s is beneath the writable %s: it stays writable and readable by the session", hidden[i], rw))
		}
		if err := rs.add(rw, write, true); err != nil {
			return err
		}
		r.Writable = append(r.Writable, rw)
	}
	for _, d := range DeviceFiles {
		if err := rs.add(d, write, false); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rs.fd), 0, 0); e != 0 {
		return fmt.Errorf("restrict self: %w", e)
	}
	r.Landlock = true
	return nil
}

// add grants access beneath path (a file gets only the rights that apply
// to files). follow resolves a symbolic link at path; without it the rule
// is on the link itself, whose target is reached under its own rule.
func (rs *ruleset) add(path string, access uint64, follow bool) error {
	flags := unix.O_PATH | unix.O_CLOEXEC
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Open(path, flags, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", path, err)
	}
	access &= rs.handled
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= llFile
	}
	if access == 0 {
		return nil
	}
	attr := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	_, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rs.fd), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&attr)), 0, 0, 0)
	if e != 0 {
		return fmt.Errorf("rule for %s: %w", path, e)
	}
	return nil
}

// split grants access beneath dir except beneath the hidden paths: a
// directory above a hidden path gets no rule of its own; each of its
// entries gets one, recursively, except the hidden path itself. Entries
// created later in such a directory are not covered.
func (rs *ruleset) split(dir string, access uint64, hidden []string) error {
	above := false
	for _, h := range hidden {
		if h == dir {
			return nil
		}
		above = above || within(h, dir)
	}
	if !above {
		err := rs.add(dir, access, dir == "/")
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EACCES) {
			return nil // vanished or unreadable entry: no rule, no access
		}
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", dir, err)
	}
	for _, e := range ents {
		if err := rs.split(filepath.Join(dir, e.Name()), access, hidden); err != nil {
			return err
		}
	}
	return nil
}

// RestrictToReading confines the calling process for good: it may read
// files and list directories beneath readable, except beneath hidden, and
// nothing else: no writes, no execution, no device nodes, no signals or
// abstract sockets outside its own domain. A root daemon's reader of its
// own state (`aerfs log` and the like, asked for by the owner) runs so.
// It fails when the kernel has no Landlock: the caller then refuses.
//
// exec are the only paths it may execute (and read): the program itself
// and its loader, for the execve that follows on this thread.
func RestrictToReading(readable, exec, hidden []string) error {
	abi := LandlockABI()
	if abi == 0 {
		return errors.New("Landlock is not available in this kernel")
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: handledFS(abi)}
	size := unsafe.Sizeof(attr.Handled_access_fs)
	if abi >= 4 {
		size += unsafe.Sizeof(attr.Handled_access_net)
	}
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
		size += unsafe.Sizeof(attr.Scoped)
	}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return fmt.Errorf("create ruleset (ABI %d): %w", abi, e)
	}
	rs := &ruleset{fd: int(fd), handled: attr.Handled_access_fs}
	defer unix.Close(rs.fd)
	clean := make([]string, 0, len(hidden))
	for _, h := range hidden {
		clean = append(clean, filepath.Clean(h))
	}
	const read = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	for _, p := range readable {
		rp, err := filepath.EvalSymlinks(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		if err := rs.split(rp, read, clean); err != nil {
			return err
		}
	}
	for _, p := range exec {
		err := rs.add(p, read|unix.LANDLOCK_ACCESS_FS_EXECUTE, true)
		if err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rs.fd), 0, 0); e != 0 {
		return fmt.Errorf("restrict self: %w", e)
	}
	return nil
}
