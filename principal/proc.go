// Package principal turns the caller of a FUSE request into a subject: the
// process's identity, its session, its principal and its taint.
//
// # Identity
//
// The pid in a FUSE request is a thread id and pids are reused. Everything
// here is keyed by ProcID, the thread group id together with the process's
// start time (in clock ticks since boot, from /proc/<pid>/stat), so a new
// process that happens to get an old pid never inherits the old one's
// session, principal or taint.
//
// # Trust only goes down
//
// A principal is assigned from the channel a process came through: the
// control socket registration of `aerfs run` (authenticated by SO_PEERCRED),
// the process's uid, and executable rules that can only lower it. Nothing a
// process says about itself (environment, argv, file content) raises it.
//
// # Taint only goes up
//
// A session's taint is the union of everything its processes read from
// labelled files, every declaration over the control socket, and the origin
// taint of any WEB or SKILL program executed inside it. Nothing here lowers
// taint.
package principal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ProcID identifies a process for its whole life and never again after.
type ProcID struct {
	Tgid  int
	Start uint64
}

func (p ProcID) String() string { return fmt.Sprintf("%d@%d", p.Tgid, p.Start) }

// Proc is what /proc tells about a process.
type Proc struct {
	ID   ProcID
	PPid int
	UID  uint32 // real uid, or the uid a request is made as (Registry.ResolveAs)
	Exe  string // "" when unreadable (kernel thread, exited, or another user's process)
}

// ErrVanished means the process no longer exists (or never did).
var ErrVanished = errors.New("process vanished")

// procRoot is where proc is mounted; tests never change it: they run real
// processes.
const procRoot = "/proc"

// ReadProc reads the thread group, parent, uid and start time of the thread
// tid. tid may be any thread of the process.
func ReadProc(tid int) (Proc, error) {
	if tid <= 0 {
		return Proc{}, ErrVanished
	}
	status, err := os.ReadFile(procRoot + "/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return Proc{}, ErrVanished
	}
	var p Proc
	tgid, ppid, uid := -1, -1, int64(-1)
	for _, line := range bytes.Split(status, []byte{'\n'}) {
		k, v, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		switch string(k) {
		case "Tgid":
			tgid, _ = strconv.Atoi(strings.TrimSpace(string(v)))
		case "PPid":
			ppid, _ = strconv.Atoi(strings.TrimSpace(string(v)))
		case "Uid":
			f := strings.Fields(string(v))
			if len(f) > 0 {
				uid, _ = strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	if tgid <= 0 || ppid < 0 || uid < 0 {
		return Proc{}, fmt.Errorf("/proc/%d/status: unexpected format", tid)
	}
	start, err := startTime(tgid)
	if err != nil {
		return Proc{}, err
	}
	p.ID = ProcID{Tgid: tgid, Start: start}
	p.PPid = ppid
	p.UID = uint32(uid)
	p.Exe, _ = os.Readlink(procRoot + "/" + strconv.Itoa(tgid) + "/exe")
	return p, nil
}

// startTime returns field 22 of /proc/<pid>/stat. The command name (field 2)
// may contain spaces and parentheses, so parsing starts after the last ')'.
// It runs on every request of a known caller, so it reads into a stack
// buffer and parses in place.
func startTime(pid int) (uint64, error) {
	var pathBuf [32]byte
	path := append(pathBuf[:0], procRoot+"/"...)
	path = strconv.AppendInt(path, int64(pid), 10)
	path = append(path, "/stat"...)
	fd, err := unix.Open(string(path), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, ErrVanished
	}
	var buf [1024]byte
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	if err != nil || n <= 0 {
		return 0, ErrVanished
	}
	st, err := parseStartTime(buf[:n])
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return st, nil
}

var errStatFormat = errors.New("unexpected format")

// parseStartTime finds field 22 in the text of a stat file.
func parseStartTime(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errStatFormat
	}
	// After ") " come fields 3, 4, …; starttime is field 22.
	field := 2
	for j := i + 1; j < len(b); j++ {
		if b[j] != ' ' {
			continue
		}
		field++
		if field == 22 {
			var v uint64
			k := j + 1
			for ; k < len(b) && b[k] >= '0' && b[k] <= '9'; k++ {
				v = v*10 + uint64(b[k]-'0')
			}
			if k == j+1 {
				break
			}
			return v, nil
		}
	}
	return 0, errStatFormat
}

// exePath reads /proc/<pid>/exe ("" when unreadable).
func exePath(pid int) string {
	var pathBuf [32]byte
	path := append(pathBuf[:0], procRoot+"/"...)
	path = strconv.AppendInt(path, int64(pid), 10)
	path = append(path, "/exe"...)
	var buf [4096]byte
	n, err := unix.Readlink(string(path), buf[:])
	if err != nil || n <= 0 {
		return ""
	}
	return string(buf[:n])
}

// openThreadDir opens /proc/<tid> and returns it if the thread there is
// the one with start time start (nil otherwise, or when it cannot be
// opened). Checking the start time through the opened directory binds it
// to that thread for good: a reused id gets another directory.
func openThreadDir(tid int, start uint64) *os.File {
	var pathBuf [32]byte
	path := append(pathBuf[:0], procRoot+"/"...)
	path = strconv.AppendInt(path, int64(tid), 10)
	fd, err := unix.Open(string(path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	sfd, err := unix.Openat(fd, "stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(fd)
		return nil
	}
	var buf [1024]byte
	n, err := unix.Read(sfd, buf[:])
	unix.Close(sfd)
	if err != nil || n <= 0 {
		unix.Close(fd)
		return nil
	}
	if st, err := parseStartTime(buf[:n]); err != nil || st != start {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), string(path))
}

// exeAt reads the "exe" link under a thread's /proc directory; ok is false
// once the thread is gone (or the link cannot be read).
func exeAt(dir *os.File) (exe string, ok bool) {
	rc, err := dir.SyscallConn()
	if err != nil {
		return "", false
	}
	var buf [4096]byte
	n := -1
	if err := rc.Control(func(fd uintptr) {
		n, err = unix.Readlinkat(int(fd), "exe", buf[:])
	}); err != nil || n <= 0 {
		return "", false
	}
	return string(buf[:n]), true
}

// Alive reports whether the process is still the one identified by id.
func Alive(id ProcID) bool {
	st, err := startTime(id.Tgid)
	return err == nil && st == id.Start
}
