package daemon

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/guard"
	"github.com/aerfs/aerfs/internal/mountinfo"
	"github.com/aerfs/aerfs/internal/procstat"
	"github.com/aerfs/aerfs/policy"
)

// # Descriptors a session starts with
//
// `aerfs run --principal WEB -- fetch >> notes.txt` opens notes.txt in the
// owner's shell: the session's command inherits the descriptor and writes
// through it, and kernel passthrough serves those writes without a request
// reaching aerfs. Likewise `aerfs run … < page.txt` gives a session a file
// to read that it never opened. As a session starts, the daemon looks at
// the descriptors of the process that starts it and takes each one open
// on one of its mounts as the session's own open (guard.Door.Inherited):
// the session reads what it holds to read, with its label, and counts among
// the writers of what it holds to write, so that the label of notes.txt is
// WEB from the start, before the command writes a byte, and a clean session
// that reads it is tainted. What was taken is in the session's start
// record ("inherited: fd 1 notes.txt (write)") and held until the session
// is retired (no process of it left).
//
// A descriptor whose name now holds another file (renamed or replaced
// since it was opened) or no file is not taken: its content is not the
// file's any more, and nothing that reads the name reads it.

// servedDoor is one of the daemon's mounts, as descriptors are matched
// with it.
type servedDoor struct {
	conn   uint32 // its FUSE connection: the device number of its mount
	point  string // where it is mounted
	door   *guard.Door
	prefix string // how records name its files: "" or "@root/"
}

// inheritance keeps what sessions took from the descriptors they started
// with, until each is retired.
type inheritance struct {
	mu   sync.Mutex
	held map[string][]func()
}

func (h *inheritance) add(session string, releases []func()) {
	if len(releases) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = map[string][]func(){}
	}
	h.held[session] = append(h.held[session], releases...)
}

// forget releases what session took.
func (h *inheritance) forget(session string) {
	h.mu.Lock()
	rs := h.held[session]
	delete(h.held, session)
	h.mu.Unlock()
	for _, r := range rs {
		r()
	}
}

// servedDoors are the workspace's mount and each mounted further root's.
func (s *controlServer) servedDoors() []servedDoor {
	var out []servedDoor
	ms, _ := mountinfo.Self()
	if x, ok := servedIn(ms, s.ws, s.stateDir); ok {
		out = append(out, servedDoor{conn: x.Major<<20 | x.Minor, point: s.ws, door: s.m.Door()})
	}
	if v, ok := mountedRoots.Load(s.m); ok {
		for _, g := range v.(*rootSet).roots {
			if g.served != nil {
				out = append(out, servedDoor{conn: g.served.conn, point: g.root.Dir, door: g.mon.Door(), prefix: policy.RootPrefix + g.root.Name + "/"})
			}
		}
	}
	return out
}

// inherit takes, as the session's own opens, the descriptors of the
// daemon's mounts that process pid (uid) holds as it starts or joins a
// session. It returns what to release once the session is retired and
// what was taken, for the record. An error (the process's descriptors
// cannot be read, a label cannot be stored) means the session must not
// start: what it holds would reach it unseen. The descriptors are behind
// the same access check as the program the process was identified by
// (/proc/<pid>/exe): a process the daemon may not inspect (one made
// non-dumpable, to a rootless daemon) is refused as unidentified before
// this, so what is left here is a process that exited meanwhile.
func (s *controlServer) inherit(pid int, uid uint32) (releases []func(), took []string, err error) {
	doors := s.servedDoors()
	if len(doors) == 0 {
		return nil, nil, nil
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot read the descriptors of process %d: %w", pid, err)
	}
	// A descriptor names the mount it was opened through, in the
	// namespace it was opened in: the daemon's (the owner's shell), the
	// process's own (a sandbox's), or one the daemon cannot read. The
	// file's device says whose file it is; the mount, where in it.
	mounts := map[int]mountinfo.Mount{}
	self, _ := mountinfo.Self()
	theirs, _ := mountinfo.Of(pid)
	for _, x := range append(theirs, self...) { // the daemon's table wins
		mounts[x.ID] = x
	}
	rootDev := map[uint32]uint64{}
	defer func() {
		if err != nil {
			for _, r := range releases {
				r()
			}
			releases, took = nil, nil
		}
	}()
	for _, sd := range doors {
		if root, err := sd.door.Dir().Lstat("."); err == nil {
			rootDev[sd.conn] = root.Dev
		}
	}
	for _, e := range ents {
		fd := e.Name()
		link := dir + "/" + fd
		// The file's identity as the kernel holds it, without asking the
		// mount (AT_STATX_DONT_SYNC: no request reaches the daemon).
		var x unix.Statx_t
		if unix.Statx(unix.AT_FDCWD, link, unix.AT_STATX_DONT_SYNC, unix.STATX_BASIC_STATS, &x) != nil || x.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		var sd *servedDoor
		for i := range doors {
			if doors[i].conn == x.Dev_major<<20|x.Dev_minor {
				sd = &doors[i]
			}
		}
		if sd == nil {
			continue
		}
		flags, mnt, ok := fdInfo(pid, fd)
		target, rerr := os.Readlink(link)
		if !ok || rerr != nil {
			continue // closed meanwhile
		}
		hd := guard.Held{Flags: flags}
		// Where the name the descriptor was opened by is now, if it still
		// holds this file; otherwise the file is taken by its identity
		// alone (renamed, unlinked, or linked elsewhere since).
		for _, name := range []string{target, strings.TrimSuffix(target, " (deleted)")} {
			rel, ok := relOf(name, sd, mounts[mnt])
			if !ok {
				continue
			}
			hd.Rel = rel // the last: without the kernel's " (deleted)"
			if st, err := sd.door.Dir().Lstat(rel); err == nil && st.Ino == x.Ino && st.Mode&syscall.S_IFMT == syscall.S_IFREG {
				hd.Rel, hd.Stat, hd.Named = rel, st, true
				break
			}
		}
		if !hd.Named {
			dev, known := rootDev[sd.conn]
			if !known {
				continue
			}
			hd.Stat = &syscall.Stat_t{Dev: dev, Ino: x.Ino, Mode: uint32(x.Mode), Nlink: uint64(x.Nlink), Size: int64(x.Size),
				Mtim: syscall.Timespec{Sec: x.Mtime.Sec, Nsec: int64(x.Mtime.Nsec)}, Ctim: syscall.Timespec{Sec: x.Ctime.Sec, Nsec: int64(x.Ctime.Nsec)}}
			if hd.Rel == "" {
				hd.Rel = "(descriptor " + fd + ")"
			}
		}
		release, how, errno := sd.door.Inherited(guard.Caller{Pid: pid, UID: uid}, hd)
		if errno != 0 {
			return releases, took, fmt.Errorf("the label of %s%s, which it holds open (descriptor %s), cannot be stored: %v", sd.prefix, hd.Rel, fd, errno)
		}
		if release != nil {
			name := sd.prefix + hd.Rel
			if !hd.Named {
				name += ", by its inode"
			}
			releases = append(releases, release)
			took = append(took, "fd "+fd+" "+name+" ("+how+")")
		}
	}
	return releases, took, nil
}

// relOf is the path within sd's mount of name, the target of a
// descriptor's link, opened through mount m (zero: a mount the daemon does
// not know, taken as sd's own at its mount point).
func relOf(name string, sd *servedDoor, m mountinfo.Mount) (string, bool) {
	point, root := sd.point, "/"
	if m.ID != 0 && m.Major<<20|m.Minor == sd.conn {
		point, root = m.Point, m.Root
	}
	if !mountinfo.Within(name, point) {
		return "", false
	}
	rel := strings.TrimPrefix(path.Join("/", root, strings.TrimPrefix(name, point)), "/")
	return rel, rel != ""
}

// fdInfo reads the open flags and mount id of process pid's descriptor fd
// (proc(5): /proc/pid/fdinfo).
func fdInfo(pid int, fd string) (flags uint32, mnt int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + fd)
	if err != nil {
		return 0, 0, false
	}
	f := procstat.Fields(b)
	fl, err1 := strconv.ParseUint(f["flags"], 8, 32)
	m, err2 := strconv.Atoi(f["mnt_id"])
	return uint32(fl), m, err1 == nil && err2 == nil
}
