package principal

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/internal/mountinfo"
)

// # Sessions as cgroups
//
// Where the daemon may write the cgroup v2 hierarchy (root), every session
// is a cgroup under a subtree the daemon owns:
//
//	<cgroup2>/aerfs/<mount id>/s_<session>[/s_<nested session>…]
//	<cgroup2>/aerfs/<mount id>/i_<tgid>_<start>   (implicit sessions)
//
// The registering process is moved into its session's cgroup before the
// registration is answered, and the kernel moves every child it forks
// into the same cgroup atomically, at fork. A caller's session is read
// from the "0::" line of /proc/<tgid>/cgroup when it is resolved: it is
// never reconstructed from fork events, so there is no race with a parent
// that exits before aerfs sees its child. An unprivileged process cannot
// move itself out: the subtree belongs to root.

// Cgroups is the daemon's subtree of the cgroup v2 hierarchy.
type Cgroups struct {
	mount string // where cgroup2 is mounted, e.g. /sys/fs/cgroup/unified
	rel   string // the subtree as /proc/<pid>/cgroup names it, e.g. /aerfs/<id>
}

// Cgroup2Mount finds the cgroup v2 hierarchy in /proc/self/mountinfo: it is
// /sys/fs/cgroup on a unified host and /sys/fs/cgroup/unified on a hybrid
// one.
func Cgroup2Mount() (string, error) {
	ms, err := mountinfo.Self()
	if err != nil {
		return "", err
	}
	for _, m := range ms {
		if m.FSType == "cgroup2" {
			return m.Point, nil
		}
	}
	return "", errors.New("no cgroup2 hierarchy is mounted")
}

// NewCgroups creates the daemon's subtree for the mount whose state
// directory is stateDir. It fails when cgroup v2 is not mounted, is not
// writable, or a process cannot be moved within it; the caller then falls
// back to following sessions by ancestry.
func NewCgroups(stateDir string) (*Cgroups, error) {
	mnt, err := Cgroup2Mount()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(abs))
	c := &Cgroups{mount: mnt, rel: "/aerfs/" + hex.EncodeToString(sum[:8])}
	// The daemon's own cgroup must be the root of the hierarchy's view
	// from here, or paths in /proc/<pid>/cgroup would be relative to it.
	if own, err := cgroupOf(os.Getpid()); err != nil || own == "" {
		return nil, fmt.Errorf("cannot read the daemon's own cgroup: %v", err)
	}
	// Another mount's teardown may remove <cgroup2>/aerfs between the
	// two levels of MkdirAll: try again.
	for i := 0; ; i++ {
		err = os.MkdirAll(c.dir(""), 0o755)
		if err == nil {
			break
		}
		if i == 5 || !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("cgroup subtree: %w", err)
		}
	}
	if err := unix.Access(filepath.Join(c.dir(""), "cgroup.procs"), unix.W_OK); err != nil {
		return nil, fmt.Errorf("cgroup subtree not writable: %w", err)
	}
	return c, nil
}

// dir is the directory of the cgroup at rel (relative to the subtree).
func (c *Cgroups) dir(rel string) string {
	return filepath.Join(c.mount, c.rel, rel)
}

// Root names the subtree as /proc/<pid>/cgroup does.
func (c *Cgroups) Root() string { return c.rel }

// Dir is the directory of cgroup rel (relative to the subtree).
func (c *Cgroups) Dir(rel string) string { return c.dir(rel) }

// Make creates the cgroup at rel (and its parents).
func (c *Cgroups) Make(rel string) error { return os.MkdirAll(c.dir(rel), 0o755) }

// Move moves the process pid into the cgroup at rel ("" is outside the
// subtree: back where it came from is the caller's business, see MoveTo).
func (c *Cgroups) Move(pid int, rel string) error {
	return writeFile(filepath.Join(c.dir(rel), "cgroup.procs"), strconv.Itoa(pid))
}

// MoveTo moves pid into the cgroup with the hierarchy path abs (as read
// from /proc/<pid>/cgroup).
func (c *Cgroups) MoveTo(pid int, abs string) error {
	return writeFile(filepath.Join(c.mount, abs, "cgroup.procs"), strconv.Itoa(pid))
}

// Set writes a cgroup interface file (cgroup.freeze, cgroup.kill) of the
// cgroup at rel.
func (c *Cgroups) Set(rel, file, value string) error {
	return writeFile(filepath.Join(c.dir(rel), file), value)
}

func writeFile(p, v string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Within returns the part of the hierarchy path abs below the subtree, and
// whether abs is inside it ("" for the subtree's root itself).
func (c *Cgroups) Within(abs string) (string, bool) {
	if abs == c.rel {
		return "", true
	}
	rest, ok := strings.CutPrefix(abs, c.rel+"/")
	return rest, ok
}

// RemoveEmpty removes every cgroup of the subtree that holds no process,
// deepest first, and the subtree itself when it is left empty. Processes
// are never killed: a populated cgroup stays.
func (c *Cgroups) RemoveEmpty() {
	var dirs []string
	filepath.WalkDir(c.dir(""), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		unix.Rmdir(d)
	}
	unix.Rmdir(filepath.Dir(c.dir(""))) // <cgroup2>/aerfs, if no other mount uses it
}

// cgroupOf reads the cgroup v2 path of the process pid (the "0::" line of
// /proc/<pid>/cgroup).
func cgroupOf(pid int) (string, error) {
	var pathBuf [32]byte
	path := append(pathBuf[:0], procRoot+"/"...)
	path = strconv.AppendInt(path, int64(pid), 10)
	path = append(path, "/cgroup"...)
	fd, err := unix.Open(string(path), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", ErrVanished
	}
	defer unix.Close(fd)
	var buf [4096]byte
	n, err := unix.Read(fd, buf[:])
	if err != nil || n <= 0 {
		return "", ErrVanished
	}
	for _, line := range bytes.Split(buf[:n], []byte{'\n'}) {
		if rest, ok := bytes.CutPrefix(line, []byte("0::")); ok {
			return string(rest), nil
		}
	}
	return "", errors.New("no cgroup v2 line in " + string(path))
}

// ErrNoCgroups is returned by what needs cgroup mode when it is not in force.
var ErrNoCgroups = errors.New("sessions are not cgroups here (aerfs status says why)")

// sessionCgroups lists the registration cgroups of s. Freezing or killing
// one covers the sessions nested in it: they are its child cgroups.
func (r *Registry) sessionCgroups(s *Session) (*Cgroups, []string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for rel, m := range r.byCg {
		if m.sess == s {
			out = append(out, rel)
		}
	}
	return r.cg, out
}

// Freeze freezes (on) or thaws every process of session s and of the
// sessions started from it, through cgroup.freeze.
func (r *Registry) Freeze(s *Session, on bool) error {
	cg, rels := r.sessionCgroups(s)
	if cg == nil {
		return ErrNoCgroups
	}
	v := "0"
	if on {
		v = "1"
	}
	for _, rel := range rels {
		if err := cg.Set(rel, "cgroup.freeze", v); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Kill kills every process of session s and of the sessions started from
// it, through cgroup.kill.
func (r *Registry) Kill(s *Session) error {
	cg, rels := r.sessionCgroups(s)
	if cg == nil {
		return ErrNoCgroups
	}
	for _, rel := range rels {
		if err := cg.Set(rel, "cgroup.kill", "1"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
