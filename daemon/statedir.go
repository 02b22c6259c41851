package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// SocketDir holds the control sockets of daemons that run as root: outside
// every state directory, so that the state directory can be the daemon's
// alone (root-owned, mode 0700) while the owner and the owner's sessions
// still reach the daemon.
const SocketDir = "/run/aerfs"

// RootSocketPath is where a root daemon serving stateDir listens:
// /run/aerfs/<16 hex digits of the SHA-256 of the state directory's path>/control.sock.
func RootSocketPath(stateDir string) string {
	if a, err := filepath.Abs(stateDir); err == nil {
		stateDir = a
	}
	sum := sha256.Sum256([]byte(stateDir))
	return filepath.Join(SocketDir, hex.EncodeToString(sum[:8]), SocketName)
}

// SocketPath is the control socket of the daemon serving stateDir: the one
// under /run/aerfs when a root daemon made it, else control.sock inside
// the state directory (a daemon running as the owner).
func SocketPath(stateDir string) string {
	p := RootSocketPath(stateDir)
	// Only root makes entries under /run/aerfs (it is not trusted for
	// its owner here: in a session's user namespace root shows as the
	// overflow uid).
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		return p
	}
	return filepath.Join(stateDir, SocketName)
}

// StateMode says who holds a state directory, for `aerfs status`.
const (
	StateDaemons = "daemon" // root-owned 0700, the control socket outside it
	StateOwners  = "owner"  // the owner's (rootless): sessions kept out by confinement
)

// CheckStateEntries refuses, for a daemon running as root, a state
// directory in which root would follow a symbolic link: the directory
// itself, or any entry in it or in its evidence directory (the control
// socket's link, which a root daemon makes itself, aside). The owner can
// put links there before the first root mount, or in a substitute: root
// would then read the policy from, append its log to, or take the
// evidence of wherever they point. Called before anything in the state
// directory is opened.
func CheckStateEntries(stateDir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Lstat(stateDir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("state directory %s is not a directory (a root daemon does not follow a symbolic link there)", stateDir)
	}
	for _, dir := range []string{stateDir, filepath.Join(stateDir, "evidence")} {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) && dir != stateDir {
			continue
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Type()&fs.ModeSymlink == 0 || dir == stateDir && e.Name() == SocketName {
				continue
			}
			p := filepath.Join(dir, e.Name())
			target, _ := os.Readlink(p)
			return fmt.Errorf("%s is a symbolic link (to %s); a root daemon does not follow links in its state directory: remove it, or move the real file there", p, target)
		}
	}
	return nil
}

// claimStateDir makes the state directory the root daemon's: it and
// everything in it owned by root, the directory mode 0700, and no file in
// it writable by group or others (a hard link made elsewhere earlier
// reaches the file without the directory). Symbolic links are not
// followed.
//
// A directory a root daemon claimed before (root's, mode 0700) is nobody
// else's to enter since: only its own entries are checked again, not the
// blobs and index files beneath, whose number grows with the log and
// which only root can have made.
func claimStateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("state directory %s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == 0 && st.Gid == 0 && fi.Mode().Perm() == 0o700 {
		return claimEntries(dir)
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := os.Lchown(p, 0, 0); err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if m := info.Mode().Perm(); m&0o022 != 0 {
			return os.Chmod(p, m&^0o022)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("making the state directory %s root's: %w", dir, err)
	}
	return os.Chmod(dir, 0o700)
}

// claimEntries is claimStateDir for a directory already root's and 0700:
// its own entries only.
func claimEntries(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if err := os.Lchown(p, 0, 0); err != nil {
			return fmt.Errorf("making the state directory %s root's: %w", dir, err)
		}
		if e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if m := info.Mode().Perm(); m&0o022 != 0 {
			if err := os.Chmod(p, m&^0o022); err != nil {
				return err
			}
		}
	}
	return nil
}

// listenPath prepares where the control socket of a daemon serving
// stateDir listens: for root, a fresh directory under /run/aerfs (mode
// 0755: the owner and sessions reach the socket, only root changes it) and
// a symbolic link to the socket in the state directory for root's own
// tools; for a daemon running as the owner, the state directory itself.
func listenPath(stateDir string) (string, error) {
	own := filepath.Join(stateDir, SocketName)
	if os.Geteuid() != 0 {
		return own, nil
	}
	p := RootSocketPath(stateDir)
	if err := os.Mkdir(SocketDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	if fi, err := os.Lstat(SocketDir); err != nil || !fi.IsDir() || fi.Sys().(*syscall.Stat_t).Uid != 0 {
		return "", fmt.Errorf("%s is not a root-owned directory", SocketDir)
	}
	os.RemoveAll(filepath.Dir(p))
	if err := os.Mkdir(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	os.Chmod(filepath.Dir(p), 0o755)
	os.Remove(own)
	if err := os.Symlink(p, own); err != nil {
		return "", err
	}
	return p, nil
}

// removeSocket undoes listenPath once the daemon stops listening.
func removeSocket(stateDir, path string) {
	if path == filepath.Join(stateDir, SocketName) {
		os.Remove(path)
		return
	}
	if l, err := os.Readlink(filepath.Join(stateDir, SocketName)); err == nil && l == path {
		os.Remove(filepath.Join(stateDir, SocketName))
	}
	os.RemoveAll(filepath.Dir(path))
}

// FindMountOfState returns the aerfs mount served from stateDir (the
// mount's source field), or nil: how the owner finds the workspace of a
// state directory it may not read.
func FindMountOfState(stateDir string) *MountInfo {
	for _, m := range Mounts() {
		if m.StateDir == stateDir {
			return &m
		}
	}
	return nil
}
