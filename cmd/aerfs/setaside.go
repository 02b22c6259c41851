package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/policy"
)

// # Setting aside what restore cannot take back
//
// aerfs keeps versions of guarded files only. A plain file written
// downstream of a poisoned source (snapshot.Scope.Written) — an agent
// client's own databases and transcripts among them, which the client loads
// at its next start — cannot be restored; restore --contaminated-by
// --set-aside DIR moves each one still there out of the mount into DIR,
// as the owner, so that the client starts that part afresh and nothing is
// lost. Each file is reached beneath its root without following a symbolic
// link (a session may have put one in its path), copied to a new file in
// DIR and synced, and only then unlinked, if its name still holds the
// inode that was copied.

// asideItem is one plain file to set aside: its record path, the directory
// it lies beneath and its path there.
type asideItem struct {
	rec, base, sub string
}

// asideItems resolves the record paths written to the files still there.
func asideItems(t *target, written []string) (items []asideItem, skipped []string) {
	roots := map[string]string{}
	for _, r := range policyRoots(t) {
		roots[r.Name] = r.Dir
	}
	for _, w := range written {
		base, sub := t.workspace, w
		if rest, ok := strings.CutPrefix(w, policy.RootPrefix); ok {
			name, rel, _ := strings.Cut(rest, "/")
			if base, ok = roots[name]; !ok || rel == "" {
				skipped = append(skipped, w+" (its root is not in the policy)")
				continue
			}
			sub = rel
		}
		if sub == "" || path.IsAbs(sub) || path.Clean(sub) != sub || strings.HasPrefix(sub, "../") || sub == ".." {
			skipped = append(skipped, w+" (not a path beneath its root)")
			continue
		}
		var st unix.Stat_t
		if err := statBeneath(base, sub, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue // gone, not a regular file, or behind a symbolic link
		}
		items = append(items, asideItem{rec: w, base: base, sub: sub})
	}
	return items, skipped
}

// checkAsideDir refuses a set-aside directory inside the workspace or a
// further root: the files would stay in the mount.
func checkAsideDir(t *target, dir string) (string, error) {
	abs, err := absClean(dir)
	if err != nil {
		return "", err
	}
	dirs := append([]string{t.workspace}, rootDirs(t)...)
	for _, d := range dirs {
		if d != "" && within(abs, d) {
			return "", fail(exitUsage, "give a directory outside the workspace and its further roots, e.g. --set-aside ~/aerfs-set-aside",
				"--set-aside %s is inside %s: the files would stay in the mount", line(dir), line(d))
		}
	}
	return abs, nil
}

// setAside moves each item into dir (its record path below dir). It
// returns the record paths moved and the failures.
func setAside(dir string, items []asideItem) (moved, failed []string) {
	for _, it := range items {
		if err := setAsideOne(dir, it); err != nil {
			failed = append(failed, it.rec+": "+err.Error())
			continue
		}
		moved = append(moved, it.rec)
	}
	return moved, failed
}

func setAsideOne(dir string, it asideItem) error {
	bfd, err := unix.Open(it.base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(bfd)
	how := func(flags uint64) *unix.OpenHow {
		return &unix.OpenHow{Flags: flags | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	}
	parent, name := path.Split(it.sub)
	pfd := bfd
	if parent != "" {
		if pfd, err = unix.Openat2(bfd, strings.TrimSuffix(parent, "/"), how(unix.O_PATH|unix.O_DIRECTORY)); err != nil {
			return beneathErr(err)
		}
		defer unix.Close(pfd)
	}
	fd, err := unix.Openat2(pfd, name, how(unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW))
	if err != nil {
		return beneathErr(err)
	}
	src := os.NewFile(uintptr(fd), it.rec)
	defer src.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return errors.New("not a regular file")
	}
	to := filepath.Join(dir, filepath.FromSlash(it.rec))
	if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
		return err
	}
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(to)
		return err
	}
	// The name must still hold the inode copied: a session may have
	// renamed another file over it meanwhile.
	var now unix.Stat_t
	if err := unix.Fstatat(pfd, name, &now, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("copied to %s, not removed: %w", to, err)
	}
	if now.Dev != st.Dev || now.Ino != st.Ino {
		return fmt.Errorf("copied to %s, not removed: another file took its name meanwhile", to)
	}
	if err := unix.Unlinkat(pfd, name, 0); err != nil {
		return fmt.Errorf("copied to %s, not removed: %w", to, err)
	}
	return nil
}

// statBeneath stats base/sub without following a symbolic link anywhere
// in sub.
func statBeneath(base, sub string, st *unix.Stat_t) error {
	bfd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(bfd)
	fd, err := unix.Openat2(bfd, sub, &unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return beneathErr(err)
	}
	defer unix.Close(fd)
	return unix.Fstat(fd, st)
}

func beneathErr(err error) error {
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return errors.New("a symbolic link in its path (not followed)")
	}
	return err
}
