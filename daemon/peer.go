package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/principal"
)

// A control connection is bound, when it is accepted, to the process that
// called connect(): SO_PEERPIDFD gives a pidfd for it, and the pid and the
// start time (field 22 of /proc/<pid>/stat) are read and then confirmed by
// the pidfd being still alive. A connection can outlive that process (it
// may hand the socket to another process and exit), and its pid can then
// be reused: every request resolves the caller by pid and then checks that
// the pidfd's process is still alive and the pid still has the recorded
// start time. A pid cannot be reused while its process lives, so a process
// alive after the resolution proves the resolution was of the connecting
// process.
//
// Without SO_PEERPIDFD (kernels before 6.5) the pid comes from SO_PEERCRED
// and only the start time is compared: the connector may have exited and
// its pid been reused between connect() and accept(), which this cannot
// see.
type peer struct {
	pid   int
	start uint64
	uid   uint32
	pidfd int // -1 without SO_PEERPIDFD

	// What the connector was resolved as at accept, for the records of
	// refused requests.
	principal, session, exe string
}

var errPeerGone = errors.New("the process that connected has exited")

var noPidfdOnce sync.Once

// usePeerPidfd is false only in tests of the fallback.
var usePeerPidfd = true

// bindPeer identifies the process at the other end of c.
func bindPeer(c *net.UnixConn, log func(string)) (*peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr, perr error
	pidfd := -1
	err = raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if cerr == nil && usePeerPidfd {
			pidfd, perr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_PEERPIDFD)
		} else if cerr == nil {
			perr = unix.ENOPROTOOPT
		}
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	p := &peer{uid: cred.Uid, pidfd: -1}
	switch {
	case perr == nil:
		p.pidfd = pidfd
		if p.pid, err = pidfdPid(pidfd); err != nil {
			p.close()
			return nil, err
		}
	case errors.Is(perr, unix.ENOPROTOOPT):
		noPidfdOnce.Do(func() {
			log("SO_PEERPIDFD unavailable (" + perr.Error() + "): control connections are bound by SO_PEERCRED pid and start time only; a connector that exits before accept can be mistaken for a process that reuses its pid")
		})
		p.pid = int(cred.Pid)
	case errors.Is(perr, unix.ESRCH) || errors.Is(perr, unix.EINVAL) || errors.Is(perr, unix.ENODATA):
		// The connector has exited already (the kernel has no process
		// to give a pidfd for).
		return nil, errPeerGone
	default:
		return nil, fmt.Errorf("SO_PEERPIDFD: %w", perr)
	}
	if p.pid <= 0 {
		p.close()
		return nil, errPeerGone
	}
	if p.start, err = procStart(p.pid); err != nil {
		p.close()
		return nil, errPeerGone
	}
	// The start time read above is the connector's only if the pid still
	// named it afterwards.
	if err := p.check(); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// pidfdPid is the pid of the process a pidfd refers to.
func pidfdPid(fd int) (int, error) {
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_PID}
	if err := unix.IoctlPidfdInfo(fd, &info); err == nil {
		return int(info.Tgid), nil
	} else if errors.Is(err, unix.ESRCH) {
		return 0, errPeerGone
	}
	// Before PIDFD_GET_INFO (6.13): the "Pid:" line of the fd's fdinfo,
	// -1 once the process is gone.
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || pid <= 0 {
				return 0, errPeerGone
			}
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no pid in the pidfd's fdinfo")
}

// procStart is field 22 of /proc/<pid>/stat.
func procStart(pid int) (uint64, error) {
	p, err := principal.ReadProc(pid)
	if err != nil {
		return 0, err
	}
	return p.ID.Start, nil
}

// check reports whether the connecting process is still alive and still
// has its pid: with a pidfd, that it has not exited (a pidfd polls
// readable once its process has exited, zombie included); without, that
// the pid still has the start time recorded.
func (p *peer) check() error {
	if p.pidfd >= 0 {
		fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		if n > 0 && fds[0].Revents != 0 {
			return errPeerGone
		}
	}
	st, err := procStart(p.pid)
	if err != nil || st != p.start {
		return errPeerGone
	}
	return nil
}

// verify checks, after res was resolved from p's pid, that it is the
// connecting process.
func (p *peer) verify(res *principal.Resolved) error {
	// An unidentified resolution of the connector itself (another
	// mount's session) is still the connector: the request is served, and
	// refused for what it is (R9-unidentified).
	if res == nil || res.Proc.ID.Tgid != p.pid || res.Proc.ID.Start != p.start {
		return errPeerGone
	}
	return p.check()
}

func (p *peer) close() {
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
		p.pidfd = -1
	}
}
