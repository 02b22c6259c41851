package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// SessionMarker is the source of the tmpfs that covers the state
// directory in a confined session's mount namespace. Every daemon on the
// host reads it in a caller's mount table: a process in such a namespace
// that is in none of that daemon's own sessions is unidentified to it
// (principal/foreign.go). The session can neither unmount it nor leave
// the namespace.
const SessionMarker = "aerfs-session"

// Mounts is the private view of the file system a session gets in its own
// mount namespace (entered by `aerfs run` through a new user namespace, so
// the owner needs no privilege).
type Mounts struct {
	Workspace string // the aerfs mount, kept at its path
	StateDir  string // covered by an empty directory ...
	Socket    string // ... that holds only the control socket (or a link to it when it is outside StateDir)
	UID       int    // the owner: /run/user/<uid> is replaced by an empty one
	// PrivateTmp replaces the whole of /tmp by an empty tmpfs. Without
	// it /tmp stays shared, and only the directories there that belong to
	// the owner and hold sockets (tmux-<uid>, ssh-XXXX …) are covered.
	PrivateTmp bool
	// Private are directories covered by an empty tmpfs of the session's
	// own, which it may write (sandbox.private): a client's cache that
	// the owner's own processes also use gets nothing from a session.
	// One that does not exist is made first (in the owner's home).
	Private []string
}

// SetupMounts must run in a fresh mount namespace owned by the caller's
// user namespace. It replaces /tmp and /run/user/<uid> by private, empty
// tmpfs (the owner's tmux, ssh-agent, D-Bus, systemd and gpg-agent sockets
// live there), keeps the workspace at its path when it lies beneath /tmp,
// and covers the state directory, leaving only the control socket. The
// mounts inherited from the parent namespace stay locked: the session
// cannot unmount the workspace to reach the backing directory. It returns
// the paths made private, for the report, and extra paths the session may
// write (its private /run/user/<uid>).
func SetupMounts(m Mounts) (private, writable []string, err error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return nil, nil, fmt.Errorf("make / a slave: %w", err)
	}
	var ws, sock = -1, -1
	if m.PrivateTmp && within(m.Workspace, "/tmp") {
		ws, err = unix.OpenTree(unix.AT_FDCWD, m.Workspace, unix.OPEN_TREE_CLONE|unix.AT_RECURSIVE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return nil, nil, fmt.Errorf("keep the workspace: %w", err)
		}
		defer unix.Close(ws)
	}
	if m.Socket != "" && within(m.Socket, m.StateDir) {
		sock, err = unix.OpenTree(unix.AT_FDCWD, m.Socket, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
		if err != nil {
			return nil, nil, fmt.Errorf("keep the control socket: %w", err)
		}
		defer unix.Close(sock)
	}
	tmpfs := func(dir, mode string) error {
		return unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode="+mode)
	}
	if fi, err := os.Stat("/tmp"); err == nil && fi.IsDir() && m.PrivateTmp {
		if err := tmpfs("/tmp", "1777"); err != nil {
			return nil, nil, fmt.Errorf("private /tmp: %w", err)
		}
		private = append(private, "/tmp")
	} else if err == nil {
		for _, d := range socketDirs("/tmp", m.UID) {
			if within(m.Workspace, d) || within(m.Socket, d) {
				continue
			}
			if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_RDONLY, "mode=0700"); err != nil {
				return nil, nil, fmt.Errorf("cover %s: %w", d, err)
			}
			private = append(private, d)
		}
	}
	// POSIX message queues by path: the session's own IPC namespace's.
	if isMountPoint("/dev/mqueue") {
		if err := unix.Mount("mqueue", "/dev/mqueue", "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return nil, nil, fmt.Errorf("private /dev/mqueue: %w", err)
		}
		private = append(private, "/dev/mqueue")
	}
	// POSIX shared memory (shm_open, sem_open) by path: the session's own
	// too, as its System V IPC is; a file a session leaves there is no
	// message to the owner's processes.
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if err := tmpfs("/dev/shm", "1777"); err != nil {
			return nil, nil, fmt.Errorf("private /dev/shm: %w", err)
		}
		private = append(private, "/dev/shm")
	}
	// Terminals: a devpts of the session's own, whose ptmx is the one
	// /dev/ptmx opens. The owner's other terminals are not there to open
	// by path (/dev/pts/N: type into a shell of the owner's, read what the
	// owner types); the session's own terminal comes as its descriptors,
	// and the terminals it makes (script, tmux, a pty library) are its own.
	if isMountPoint("/dev/pts") {
		if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
			return nil, nil, fmt.Errorf("private /dev/pts: %w", err)
		}
		if err := unix.Mount("/dev/pts/ptmx", "/dev/ptmx", "", unix.MS_BIND, ""); err != nil {
			return nil, nil, fmt.Errorf("private /dev/ptmx: %w", err)
		}
		private = append(private, "/dev/pts")
	}
	for _, d := range m.Private {
		if within(m.Workspace, d) || within(d, m.Workspace) || within(m.StateDir, d) {
			continue // never over the workspace or the state directory
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, nil, fmt.Errorf("private %s: %w", d, err)
		}
		if err := tmpfs(d, "0700"); err != nil {
			return nil, nil, fmt.Errorf("private %s: %w", d, err)
		}
		private = append(private, d)
		writable = append(writable, d)
	}
	run := "/run/user/" + strconv.Itoa(m.UID)
	if fi, err := os.Stat(run); err == nil && fi.IsDir() {
		if err := tmpfs(run, "0700"); err != nil {
			return nil, nil, fmt.Errorf("private %s: %w", run, err)
		}
		private = append(private, run)
		writable = append(writable, run)
	}
	if ws >= 0 {
		if err := os.MkdirAll(m.Workspace, 0o755); err != nil {
			return nil, nil, err
		}
		if err := unix.MoveMount(ws, "", unix.AT_FDCWD, m.Workspace, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return nil, nil, fmt.Errorf("put the workspace back: %w", err)
		}
	}
	if m.StateDir != "" {
		if err := os.MkdirAll(m.StateDir, 0o700); err != nil {
			return nil, nil, err
		}
		if err := unix.Mount(SessionMarker, m.StateDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
			return nil, nil, fmt.Errorf("cover the state directory: %w", err)
		}
		private = append(private, m.StateDir)
		if m.Socket != "" && !within(m.Socket, m.StateDir) {
			// A root daemon's socket lives outside the state
			// directory: leave the way to it where it was.
			if err := os.Symlink(m.Socket, filepath.Join(m.StateDir, filepath.Base(m.Socket))); err != nil {
				return nil, nil, err
			}
		} else if sock >= 0 {
			p := filepath.Join(m.StateDir, filepath.Base(m.Socket))
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				return nil, nil, err
			}
			if err := unix.MoveMount(sock, "", unix.AT_FDCWD, p, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
				return nil, nil, fmt.Errorf("put the control socket back: %w", err)
			}
		}
		if err := unix.Mount("", m.StateDir, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
			return nil, nil, fmt.Errorf("read-only state cover: %w", err)
		}
	}
	return private, writable, nil
}

// socketDirs lists the directories directly in dir that belong to uid and
// hold a socket: where owner services listen (tmux-<uid>, ssh-XXXX).
func socketDirs(dir string, uid int) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		var st unix.Stat_t
		if !e.IsDir() || unix.Lstat(p, &st) != nil || int(st.Uid) != uid {
			continue
		}
		sub, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		for _, f := range sub {
			if f.Type()&os.ModeSocket != 0 {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// isMountPoint reports whether dir is the root of a mount (its device
// differs from its parent's).
func isMountPoint(dir string) bool {
	var a, b unix.Stat_t
	if unix.Lstat(dir, &a) != nil || unix.Lstat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}
