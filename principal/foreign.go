package principal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
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
// daemon on the host takes the same lock (flock on HostLock) around
// "check where the process is, move it", so that no daemon moves a process
// that another has just put into a session. After each move it bumps a
// counter kept in HostFile, which every daemon maps: a resolution cached
// before any move on the host is resolved again at its next request (a
// process cached here as the owner that another daemon has since made the
// root of a session is not served from the cache).
//
// The lock is root's alone. HostLock has mode 0000: only a process with
// CAP_DAC_OVERRIDE opens it, and a session has no capabilities (a root
// owner's session included), so no session can take it and stall every
// daemon's moves. The counter is world-readable (rootless daemons map it)
// and locked by nobody. A daemon waits for the lock at most HostLockWait:
// past it the move is given up and the caller fails closed and says why
// (HostLockError): a registration is refused (RH-hostlock), an implicit
// session stays without its cgroup and its taint follows the process by
// identity and ancestry (implicit.go). No request waits forever.

// HostFile is the move counter of the root daemons.
const HostFile = "/run/aerfs/cgroups"

// HostLock is the lock every root daemon takes around a move.
const HostLock = "/run/aerfs/cgroups.lock"

// HostLockWait bounds a daemon's wait for HostLock: 2 s, or
// AERFS_HOST_LOCK_WAIT_MS (tests), from 10 ms to 30 s.
var HostLockWait = func() time.Duration {
	if ms, err := strconv.Atoi(os.Getenv("AERFS_HOST_LOCK_WAIT_MS")); err == nil {
		return min(max(time.Duration(ms)*time.Millisecond, 10*time.Millisecond), 30*time.Second)
	}
	return 2 * time.Second
}()

// HostLockError says why a move between cgroups was given up: HostLock
// could not be taken (not free within HostLockWait, or not usable).
type HostLockError struct{ Why string }

func (e *HostLockError) Error() string {
	return "cannot take the host's cgroup lock " + HostLock + ": " + e.Why
}

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

// The host file: a page holding the move counter, shared by every daemon;
// and the host lock.
var host struct {
	mu   sync.Mutex
	f    *os.File
	rw   bool
	gen  atomic.Pointer[atomic.Uint64]
	lock *os.File // HostLock, once opened
}

// hostMoves lets one move at a time of this daemon at the host lock: a
// flock belongs to the open file, which every goroutine shares.
var hostMoves = make(chan struct{}, 1)

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

// lockHost takes the host-wide move lock within HostLockWait; the
// returned function bumps the move counter and releases it. It fails with
// a *HostLockError, and the caller gives the move up.
func lockHost() (func(), error) {
	openHost(true)
	deadline := time.Now().Add(HostLockWait)
	t := time.NewTimer(HostLockWait)
	defer t.Stop()
	select {
	case hostMoves <- struct{}{}:
	case <-t.C:
		return nil, &HostLockError{Why: fmt.Sprintf("not free within %v (another move of this daemon holds it)", HostLockWait)}
	}
	f, err := openHostLock()
	if err != nil {
		<-hostMoves
		return nil, &HostLockError{Why: err.Error()}
	}
	fd := int(f.Fd())
	for d := time.Millisecond; ; d = min(2*d, 20*time.Millisecond) {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if err != unix.EWOULDBLOCK && err != unix.EINTR {
			<-hostMoves
			return nil, &HostLockError{Why: err.Error()}
		}
		if time.Now().After(deadline) {
			<-hostMoves
			return nil, &HostLockError{Why: fmt.Sprintf("not free within %v%s", HostLockWait, lockHolder(f))}
		}
		time.Sleep(d)
	}
	return func() {
		if g := host.gen.Load(); g != nil {
			g.Add(1)
		}
		unix.Flock(fd, unix.LOCK_UN)
		<-hostMoves
	}, nil
}

// openHostLock opens HostLock, making it (mode 0000, root's) if missing.
func openHostLock() (*os.File, error) {
	host.mu.Lock()
	defer host.mu.Unlock()
	if host.lock != nil {
		return host.lock, nil
	}
	if err := os.Mkdir(filepath.Dir(HostLock), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	f, err := os.OpenFile(HostLock, os.O_RDONLY|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Uid != 0 {
		f.Close()
		return nil, errors.New("it is not a regular file of root's")
	}
	if st.Mode&0o7777 != 0 {
		// Only root opens it: a session that could would hold it.
		if err := unix.Fchmod(int(f.Fd()), 0); err != nil {
			f.Close()
			return nil, err
		}
	}
	host.lock = f
	return f, nil
}

// lockHolder names the process /proc/locks says holds f's flock
// (" (held by pid N, EXE)"), or "" when it cannot tell.
func lockHolder(f *os.File) string {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return ""
	}
	b, err := os.ReadFile(procRoot + "/locks")
	if err != nil {
		return ""
	}
	ino := ":" + strconv.FormatUint(st.Ino, 10)
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		if len(fs) < 6 || fs[1] != "FLOCK" || !strings.HasSuffix(fs[5], ino) {
			continue
		}
		pid, err := strconv.Atoi(fs[4])
		if err != nil || pid <= 0 {
			return ""
		}
		return fmt.Sprintf(" (held by pid %d, %s)", pid, exePath(pid))
	}
	return ""
}
