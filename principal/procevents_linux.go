package principal

import (
	"context"
	"encoding/binary"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// The kernel's process events connector (CONFIG_PROC_EVENTS) reports every
// fork, exec and exit as it happens. aerfs uses it so that a short-lived
// `curl` inside a session taints the session even if it never touches the
// mount, and so that a session's double-forked children stay in the session
// after they are re-parented to init. It needs CAP_NET_ADMIN; without it the
// registry still resolves every caller by walking its ancestry at the time
// of the request (see Registry.Resolve), and the gap is documented.

const (
	cnIdxProc          = 1
	cnValProc          = 1
	procCnMcastListen  = 1
	procEventFork      = 0x00000001
	procEventExec      = 0x00000002
	procEventExit      = 0x80000000
	nlmsgHdrLen        = 16
	cnMsgLen           = 20
	procEventHeaderLen = 16 // what, cpu, timestamp_ns
)

// FollowProcessEvents subscribes to process events and feeds them to r until
// ctx is done. It returns an error at once when the connector is unavailable.
func FollowProcessEvents(ctx context.Context, r *Registry) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_CONNECTOR)
	if err != nil {
		return fmt.Errorf("process events: %w", err)
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: cnIdxProc, Pid: 0}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return fmt.Errorf("process events: bind: %w", err)
	}
	// Large receive buffer: a burst of forks must not overflow it.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)

	msg := make([]byte, nlmsgHdrLen+cnMsgLen+4)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], unix.NLMSG_DONE)
	binary.NativeEndian.PutUint32(msg[12:], uint32(unix.Getpid()))
	binary.NativeEndian.PutUint32(msg[16:], cnIdxProc)
	binary.NativeEndian.PutUint32(msg[20:], cnValProc)
	binary.NativeEndian.PutUint16(msg[32:], 4)
	binary.NativeEndian.PutUint32(msg[36:], procCnMcastListen)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return fmt.Errorf("process events: subscribe: %w", err)
	}
	go func() {
		<-ctx.Done()
		unix.Shutdown(fd, unix.SHUT_RDWR)
		unix.Close(fd)
	}()
	go readProcessEvents(ctx, fd, r)
	return nil
}

func readProcessEvents(ctx context.Context, fd int, r *Registry) {
	buf := make([]byte, 64<<10)
	for ctx.Err() == nil {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ENOBUFS {
			// Events were lost; ancestry walks still resolve callers, so
			// carry on, without the departed children whose exit events
			// may be among them.
			r.lostEvents()
			continue
		}
		if err != nil || n == 0 {
			return
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			continue
		}
		for _, m := range msgs {
			handleProcEvent(r, m.Data)
		}
	}
}

func handleProcEvent(r *Registry, d []byte) {
	if len(d) < cnMsgLen+procEventHeaderLen {
		return
	}
	ev := d[cnMsgLen:]
	what := binary.NativeEndian.Uint32(ev[0:])
	data := ev[procEventHeaderLen:]
	switch what {
	case procEventFork:
		if len(data) < 16 {
			return
		}
		parentTgid := int(binary.NativeEndian.Uint32(data[4:]))
		childPid := int(binary.NativeEndian.Uint32(data[8:]))
		childTgid := int(binary.NativeEndian.Uint32(data[12:]))
		if childPid == childTgid { // a new process, not a thread
			r.Fork(parentTgid, childTgid)
		}
	case procEventExec:
		if len(data) < 8 {
			return
		}
		r.Exec(int(binary.NativeEndian.Uint32(data[4:])))
	case procEventExit:
		if len(data) < 8 {
			return
		}
		pid := int(binary.NativeEndian.Uint32(data[0:]))
		tgid := int(binary.NativeEndian.Uint32(data[4:]))
		if pid == tgid {
			r.exited(tgid)
		}
	}
}
