package principal

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/internal/mountinfo"
	"github.com/aerfs/aerfs/sandbox"
)

// # Many mounts, one host
//
// An owner often has several workspaces mounted, each served by its own
// daemon with its own cgroup subtree <cgroup2>/aerfs/<mount id>. Each
// daemon knows only its own sessions. Were a process inside another
// mount's session taken for "outside sessions" here, a WEB session of one
// mount would be the owner through every other: a nested aerfs run
// registered as USER (and moved out of its session's cgroup), a secret
// read that makes an implicit session (and moves it), the owner's requests.
// So every caller is first placed on the host, in every mode:
//
//   - By its cgroup. A cgroup beneath /aerfs that is not this mount's
//     subtree is another mount's session: the caller is unidentified here
//     (R9), whatever it asks. The one exception is another mount's
//     implicit session (…/i-<tgid>-<start>), which holds an owner process
//     that read something tainted through that mount: it is still the
//     owner here (what it read there is that mount's business, as any
//     owner process's reads there are), and it is never moved out of it.
//     Once it reads something tainted here, that cgroup is this mount's
//     implicit session for it as well (implicit.go).
//   - By its mount namespace. aerfs run covers the state directory of a
//     confined session's own mount namespace with a tmpfs whose source is
//     sandbox.SessionMarker. A caller in such a namespace that is not a
//     member of one of this mount's sessions is unidentified: a confined
//     session of a rootless mount (no cgroups) of any workspace, or one of
//     this mount's own whose ancestry a double fork cut. The session can
//     neither unmount the cover nor leave the namespace (seccomp), and its
//     children inherit both.
//
// Moving a process between cgroups is one step across daemons: every root
// daemon on the host takes the same lock (flock on HostFile) around
// "check where the process is, move it", so that no daemon moves a process
// that another has just put into a session. After each move it bumps a
// counter kept in that file, which every daemon maps: a resolution cached
// before any move on the host is resolved again at its next request (a
// process cached here as the owner that another daemon has since made the
// root of a session is not served from the cache).

// HostFile is the host-wide lock and move counter of the root daemons.
const HostFile = "/run/aerfs/cgroups"

// cgroupTop is where every mount's subtree lives in the hierarchy.
const cgroupTop = "/aerfs"

// cgPlace is where a cgroup path lies with respect to aerfs.
type cgPlace int

const (
	cgOutside         cgPlace = iota // not an aerfs cgroup
	cgOwn                            // in this mount's subtree
	cgForeignImplicit                // another mount's implicit session
	cgForeign                        // another mount's session, or an unknown aerfs cgroup
)

var implicitLeaf = regexp.MustCompile(`^/aerfs/[0-9a-f]{16}/i-[0-9]+-[0-9]+$`)

// placeCgroup says where the cgroup with hierarchy path abs lies; own is
// this mount's subtree (nil in ancestry mode).
func placeCgroup(abs string, own *Cgroups) cgPlace {
	if own != nil {
		if _, ok := own.Within(abs); ok {
			return cgOwn
		}
	}
	if abs != cgroupTop && !strings.HasPrefix(abs, cgroupTop+"/") {
		return cgOutside
	}
	if implicitLeaf.MatchString(abs) {
		return cgForeignImplicit
	}
	return cgForeign
}

// movable reports whether a process in the cgroup abs may be moved by this
// daemon: out of the root or a cgroup that is not aerfs's, or within its
// own subtree. Never out of another mount's cgroup, nor into this mount's
// from another's implicit session.
func movable(abs string, own *Cgroups) bool {
	p := placeCgroup(abs, own)
	return p == cgOutside || p == cgOwn
}

// sessionNamespace reports whether pid lives in the mount namespace of a
// confined aerfs session, and the state directory that session's mount
// serves from (the covered path). Processes in this daemon's own mount
// namespace are not (an aerfs daemon never runs inside a session).
func sessionNamespace(pid int) (string, bool, error) {
	theirs, err := os.Readlink(procRoot + "/" + strconv.Itoa(pid) + "/ns/mnt")
	if err != nil {
		return "", false, err
	}
	if theirs == ownMountNS() {
		return "", false, nil
	}
	ms, err := mountinfo.Of(pid)
	if err != nil {
		return "", false, err
	}
	for _, m := range ms {
		if m.Source == sandbox.SessionMarker && m.FSType == "tmpfs" {
			return m.Point, true, nil
		}
	}
	return "", false, nil
}

var ownMountNS = sync.OnceValue(func() string {
	l, _ := os.Readlink(procRoot + "/self/ns/mnt")
	return l
})

// outsider checks a caller that is in none of this mount's sessions: it is
// unidentified (why is set) when it lives in a confined session's mount
// namespace, of this mount or another.
func outsider(p Proc, stateDir string) string {
	st, marked, err := sessionNamespace(p.ID.Tgid)
	if err != nil {
		return fmt.Sprintf("pid %d: mount namespace unreadable: %v", p.ID.Tgid, err)
	}
	if !marked {
		return ""
	}
	if st == stateDir {
		return fmt.Sprintf("pid %d lives in the mount namespace of a confined session of this mount but in none of its sessions", p.ID.Tgid)
	}
	return fmt.Sprintf("pid %d lives in the mount namespace of a confined session of another aerfs mount (state %s)", p.ID.Tgid, st)
}

// The host file: a page holding the move counter, shared by every daemon.
var host struct {
	mu  sync.Mutex
	f   *os.File
	rw  bool
	gen atomic.Pointer[atomic.Uint64]
}

// openHost maps HostFile: read-write (created if missing) for a daemon
// that moves processes between cgroups, read-only otherwise (and only if a
// root daemon has made it). It is called again whenever it is not mapped.
func openHost(write bool) {
	host.mu.Lock()
	defer host.mu.Unlock()
	if host.f != nil && (host.rw || !write) {
		return
	}
	var f *os.File
	var err error
	if write {
		if err = os.Mkdir("/run/aerfs", 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return
		}
		f, err = os.OpenFile(HostFile, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o644)
	} else {
		f, err = os.OpenFile(HostFile, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	}
	if err != nil {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Uid != 0 || st.Mode&0o022 != 0 {
		f.Close() // only root's counter is believed
		return
	}
	page := os.Getpagesize()
	prot := unix.PROT_READ
	if write {
		prot |= unix.PROT_WRITE
		if st.Size < int64(page) {
			if err := f.Truncate(int64(page)); err != nil {
				f.Close()
				return
			}
		}
	} else if st.Size < 8 {
		f.Close()
		return
	}
	b, err := unix.Mmap(int(f.Fd()), 0, 8, prot, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return
	}
	if host.f != nil {
		host.f.Close()
	}
	host.f, host.rw = f, write
	host.gen.Store((*atomic.Uint64)(unsafe.Pointer(&b[0])))
}

// hostGen is the host's move counter (0 when no root daemon has made one).
func hostGen() uint64 {
	if g := host.gen.Load(); g != nil {
		return g.Load()
	}
	return 0
}

// hostMapped reports whether the counter is mapped; refresh tries to map
// it when not.
func hostMapped(refresh bool) bool {
	if host.gen.Load() == nil && refresh {
		openHost(false)
	}
	return host.gen.Load() != nil
}

// lockHost takes the host-wide move lock; the returned function bumps the
// move counter and releases it. Without the host file (it cannot be made)
// moves go on unlocked: each still checks where the process is first.
func lockHost() func() {
	openHost(true)
	host.mu.Lock()
	f := host.f
	host.mu.Unlock()
	if f == nil || !host.rw {
		return func() {}
	}
	for unix.Flock(int(f.Fd()), unix.LOCK_EX) == unix.EINTR {
	}
	return func() {
		if g := host.gen.Load(); g != nil {
			g.Add(1)
		}
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
	}
}
