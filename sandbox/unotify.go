package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// # Path sockets
//
// Landlock (up to ABI 7) does not mediate connect() to a path socket, and
// the owner's services listen on path sockets everywhere: tmux and screen
// in /tmp or $TMUX_TMPDIR, ssh-agent and gpg-agent, an editor's IPC socket,
// ssh control masters in ~/.ssh, a container runtime in /run. One of them
// asked to run a command runs it as the owner, outside every session.
//
// So every connect() of a confined session is handed to the daemon, which
// decides it and carries it out (seccomp user notification): the session's
// filter answers SECCOMP_RET_USER_NOTIF for connect, and its listener is
// held by the daemon alone. The daemon never lets the kernel continue the
// session's own call (the address it read in the session's memory could
// be changed by another thread before the kernel read it again): it takes
// a duplicate of the session's socket (pidfd_getfd), reads the address,
// resolves a path itself in the session's view, and connects that
// duplicate, so what it decided is what happens. daemon/sockets.go decides.
//
// The rest closes the ways around it: a datagram Unix socket can send to
// any path without connect() (socket and socketpair of AF_UNIX allow only
// SOCK_STREAM and SOCK_SEQPACKET: SOCK_RAW is a datagram socket), io_uring issues connect without a system call
// (io_uring_* are refused), and a newer filter of the session's own with a
// listener would take the notifications first and could let the kernel
// continue (seccomp() asking for a listener is refused).

// Notification is one system call of a supervised session, as the kernel
// reports it (struct seccomp_notif).
type Notification struct {
	ID    uint64
	Pid   uint32 // the calling thread, in the supervisor's pid namespace
	Flags uint32
	Nr    int32
	Arch  uint32
	IP    uint64
	Args  [6]uint64
}

type notifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// InstallConnectNotify installs, on the calling thread, a filter that
// hands every connect() to the holder of the returned listener (close on
// exec). The thread must have no_new_privs.
func InstallConnectNotify() (int, error) {
	arch, ok := auditArch()
	if !ok {
		return -1, fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
	}
	a := newProgram(arch)
	a.jump(jeq, unix.SYS_CONNECT, "notify", "")
	a.stmt(ret, unix.SECCOMP_RET_ALLOW)
	a.label("notify")
	a.stmt(ret, unix.SECCOMP_RET_USER_NOTIF)
	prog, err := a.link()
	if err != nil {
		return -1, err
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	fd, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&fp)))
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

// RecvNotification waits for the next notification on listener.
func RecvNotification(listener int) (*Notification, error) {
	var n Notification
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&n)))
		if e == unix.EINTR {
			n = Notification{}
			continue
		}
		if e != 0 {
			return nil, e
		}
		return &n, nil
	}
}

// NotificationValid reports whether the notification id is still pending:
// its thread has not been interrupted or gone (checked after anything
// read from the thread's process, so that a reused pid is not taken for
// it).
func NotificationValid(listener int, id uint64) bool {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_ID_VALID, uintptr(unsafe.Pointer(&id)))
	return e == 0
}

// Respond answers notification id: the system call returns val, or fails
// with errno when it is not 0. The kernel never runs the call itself.
func Respond(listener int, id uint64, val int64, errno unix.Errno) error {
	r := notifResp{ID: id, Val: val}
	if errno != 0 {
		r.Val, r.Error = 0, -int32(errno)
	}
	for {
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&r)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		return nil
	}
}

// IsNotifyListener reports whether fd is a seccomp notification listener.
func IsNotifyListener(fd int) bool {
	var buf [64]byte
	n, err := unix.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd), buf[:])
	return err == nil && string(buf[:n]) == "anon_inode:seccomp notify"
}
