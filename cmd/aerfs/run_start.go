package main

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/internal/mountinfo"
)

// Where a session starts. A shell that was in the workspace when it was
// mounted (cd ~/agent; aerfs mount ~/agent) still has the directory
// beneath the mount, the backing directory, as its working directory: what
// it opens by a relative path, and the redirections it hands its commands,
// are the backing directory's files, which aerfs never sees. A session
// started from there would change them unseen, confined or not (Landlock
// decides a path, not which of two directories with that path it is).
//
// So aerfs run enters its working directory again by its path, through the
// mount, before anything else (in every sandbox mode), and refuses to start
// a session with a descriptor of a file or directory beneath the backing
// directory of an aerfs mount: it cannot be opened again the same way.

// startPlace enters the working directory again by path and checks the
// descriptors the session would inherit.
func startPlace() error {
	mounts := daemon.Mounts()
	if len(mounts) == 0 {
		return nil
	}
	if cwd, err := os.Getwd(); err == nil {
		if err := os.Chdir(cwd); err != nil {
			if m := innermost(mounts, cwd); m != nil {
				return fail(exitRunFailed, "cd into the workspace again (cd "+shellQuote(m.Mountpoint)+") and run the command from there",
					"cannot enter the working directory %s again through the aerfs mount at %s: %v", cwd, m.Mountpoint, err)
			}
		} else if m := innermost(mounts, cwd); m != nil && !throughMount(".", m) {
			return fail(exitRunFailed, "cd into the workspace again (cd "+shellQuote(m.Mountpoint)+") and run the command from there",
				"the working directory %s is in the directory beneath the aerfs mount at %s (its backing directory), not in the mount", cwd, m.Mountpoint)
		}
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil // no /proc: nothing to tell by (the daemon reads /proc anyway)
	}
	for _, ent := range ents {
		fd, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		p, err := os.Readlink("/proc/self/fd/" + ent.Name())
		if err != nil || !strings.HasPrefix(p, "/") {
			continue // a pipe, a socket, an anonymous inode
		}
		p = strings.TrimSuffix(p, " (deleted)")
		m := innermost(mounts, p)
		if m == nil || fdThroughMount(fd, p, m) {
			continue
		}
		return fail(exitRunFailed, "the shell that started aerfs run is still in the directory beneath the mount: cd into the workspace again (cd "+shellQuote(m.Mountpoint)+"), then open what you hand the session and start it from there",
			"descriptor %d (%s) is in the directory beneath the aerfs mount at %s (its backing directory), not in the mount: the session would change it unseen", fd, p, m.Mountpoint)
	}
	return nil
}

// innermost is the aerfs mount of mounts whose mount point holds path p.
func innermost(mounts []daemon.MountInfo, p string) *daemon.MountInfo {
	var best *daemon.MountInfo
	for i, m := range mounts {
		if mountinfo.Within(p, m.Mountpoint) && (best == nil || len(m.Mountpoint) > len(best.Mountpoint)) {
			best = &mounts[i]
		}
	}
	return best
}

// throughMount reports whether path p is on the file system of mount m.
func throughMount(p string, m *daemon.MountInfo) bool {
	var st, mst unix.Stat_t
	return unix.Stat(p, &st) == nil && unix.Stat(m.Mountpoint, &mst) == nil && st.Dev == mst.Dev
}

// fdThroughMount reports whether descriptor fd, whose path is p beneath
// mount m, is reached through the mount: it is on the mount's file system,
// or p leads to it today (a file system mounted beneath the workspace).
func fdThroughMount(fd int, p string, m *daemon.MountInfo) bool {
	var st, mst, pst unix.Stat_t
	if unix.Fstat(fd, &st) != nil || unix.Stat(m.Mountpoint, &mst) != nil {
		return false
	}
	if st.Dev == mst.Dev {
		return true
	}
	return unix.Stat(p, &pst) == nil && pst.Dev == st.Dev && pst.Ino == st.Ino
}

// shellQuote quotes p for a POSIX shell, unless it needs none.
func shellQuote(p string) string {
	if p != "" && strings.Trim(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:@%") == "" {
		return p
	}
	return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
}
