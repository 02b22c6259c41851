package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/daemon"
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
	dev, ino       uint64 // the file whose label was checked
	link           bool   // a symbolic link: set aside as a link with the same target
}

// asideItems resolves the record paths written to the files still there
// whose label the scope gave them (ids: the scope's records): a name the
// scope names may hold another file by now (the poisoned one renamed or
// removed, another session's or the owner's written there since), which
// stays (left, with why). skipped are the names that cannot be followed.
func asideItems(t *target, written []string, ids map[string]bool) (items []asideItem, left, skipped []string) {
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
		if err := statBeneath(base, sub, &st); err != nil {
			continue // gone, or behind a symbolic link
		}
		kind := st.Mode & unix.S_IFMT
		if kind == unix.S_IFDIR {
			continue
		}
		rec, err := labelRecord(t, w)
		switch {
		case err != nil:
			skipped = append(skipped, w+" (its label cannot be read: "+err.Error()+")")
			continue
		case rec == "":
			left = append(left, w+" (its content is the owner's or a clean writer's now)")
			continue
		case !ids[rec]:
			left = append(left, w+" (its label comes from record "+shortRecord(rec)+", not downstream: another file holds the name now)")
			continue
		case kind != unix.S_IFREG && kind != unix.S_IFLNK:
			left = append(left, w+" (a FIFO, socket or device the poisoned session made: review it with aerfs why and remove it yourself)")
			continue
		}
		items = append(items, asideItem{rec: w, base: base, sub: sub, dev: st.Dev, ino: st.Ino, link: kind == unix.S_IFLNK})
	}
	return items, left, skipped
}

// labelRecord asks the daemon which record gave the file at the record
// path rel its label ("" for none).
func labelRecord(t *target, rel string) (string, error) {
	resp, err := call(t, daemon.Request{Op: "why", Path: rel})
	if err != nil {
		return "", err
	}
	var e struct {
		LabelRecord string `json:"label_record"`
	}
	if err := json.Unmarshal(resp.Data, &e); err != nil {
		return "", err
	}
	return e.LabelRecord, nil
}

// checkAsideDir refuses a set-aside directory inside the workspace or a
// further root (the files would stay in the mount), or beneath a place
// confined sessions may write (sandbox.writable, /tmp, /var/tmp): a
// session could have laid symbolic links there for the owner's copies to
// follow. The directory is resolved first.
func checkAsideDir(t *target, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	hint := "give a directory outside the workspace, its further roots and the places sessions may write, e.g. --set-aside ~/aerfs-set-aside"
	if fi, err := os.Lstat(abs); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return "", fail(exitUsage, hint, "--set-aside %s is a symbolic link: give the directory itself", line(dir))
	}
	// As written and as resolved: a link on the way may lead out of, or
	// into, a place sessions write.
	cands := []string{abs}
	if r, err := absClean(abs); err == nil && r != abs {
		cands = append(cands, r)
	}
	for _, d := range append([]string{t.workspace}, rootDirs(t)...) {
		for _, c := range cands {
			if d != "" && within(c, d) {
				return "", fail(exitUsage, hint, "--set-aside %s is inside %s: the files would stay in the mount", line(dir), line(d))
			}
		}
	}
	writable, err := sessionWritable(t)
	if err != nil {
		return "", fail(exitError, hint, "--set-aside %s: %v", line(dir), err)
	}
	for _, d := range writable {
		for _, c := range cands {
			if within(c, d) {
				return "", fail(exitUsage, hint, "--set-aside %s is beneath %s, which confined sessions may write", line(dir), line(d))
			}
		}
	}
	return abs, nil
}

// sessionWritable lists the places outside the mount a confined session
// of t may write: the policy's sandbox.writable and sandbox.private, and
// /tmp and /var/tmp whatever the policy says.
func sessionWritable(t *target) ([]string, error) {
	out := []string{"/tmp", "/var/tmp", "/dev/shm"}
	if pol, err := policy.Load(filepath.Join(t.stateDir, daemon.PolicyName)); err == nil {
		home := daemon.OwnerHome(t.workspace)
		return append(append(out, pol.SandboxWritable(home)...), pol.SandboxPrivate(home)...), nil
	}
	// A root daemon's policy is its own: the daemon says.
	resp, err := daemon.Call(t.stateDir, daemon.Request{Op: "status"})
	if err != nil || !resp.OK {
		return nil, fmt.Errorf("the places sessions may write cannot be read from the policy nor the daemon")
	}
	var st daemon.Status
	if err := json.Unmarshal(resp.Data, &st); err != nil {
		return nil, err
	}
	return append(out, st.SessionWritable...), nil
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
	if it.link {
		return setAsideLink(dir, it, pfd, name)
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
	if st.Dev != it.dev || st.Ino != it.ino {
		return errors.New("another file took its name since its label was read: run the same restore again")
	}
	to := filepath.Join(dir, filepath.FromSlash(it.rec))
	dst, err := createBeneath(dir, it.rec)
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

// setAsideLink sets aside the symbolic link name in the directory pfd:
// the same link is made in dir, then the session's removed if its name
// still holds it.
func setAsideLink(dir string, it asideItem, pfd int, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK || st.Dev != it.dev || st.Ino != it.ino {
		return errors.New("another file took its name since its label was read: run the same restore again")
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(pfd, name, buf)
	if err != nil {
		return err
	}
	dfd, last, err := dirsBeneath(dir, it.rec)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	to := filepath.Join(dir, filepath.FromSlash(it.rec))
	if err := unix.Symlinkat(string(buf[:n]), dfd, last); err != nil {
		return err
	}
	var now unix.Stat_t
	if err := unix.Fstatat(pfd, name, &now, unix.AT_SYMLINK_NOFOLLOW); err != nil || now.Dev != st.Dev || now.Ino != st.Ino {
		return fmt.Errorf("link made at %s, not removed: another file took its name meanwhile", to)
	}
	if err := unix.Unlinkat(pfd, name, 0); err != nil {
		return fmt.Errorf("link made at %s, not removed: %w", to, err)
	}
	return nil
}

// createBeneath creates the new file dir/rel (mode 0600), and the
// directories to it (0700), without following a symbolic link anywhere
// beneath dir.
func createBeneath(dir, rel string) (*os.File, error) {
	fd, last, err := dirsBeneath(dir, rel)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	f, err := unix.Openat(fd, last, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(f), filepath.Join(dir, rel)), nil
}

// dirsBeneath makes the directories of dir/rel (0700) without following
// a symbolic link anywhere beneath dir, and returns the last one (open
// O_PATH) and the name to make in it.
func dirsBeneath(dir, rel string) (int, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return -1, "", err
	}
	// The directory itself: its last component is not followed either (a
	// link there could lead anywhere the owner may write).
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return -1, "", fmt.Errorf("%s is a symbolic link: give the directory itself", dir)
		}
		return -1, "", err
	}
	parts := strings.Split(rel, "/")
	for _, p := range parts[:len(parts)-1] {
		if err := unix.Mkdirat(fd, p, 0o700); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return -1, "", err
		}
		next, err := unix.Openat2(fd, p, &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS})
		unix.Close(fd)
		if err != nil {
			return -1, "", beneathErr(err)
		}
		fd = next
	}
	return fd, parts[len(parts)-1], nil
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
