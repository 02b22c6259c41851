package sandbox

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// # The session's network namespace
//
// `aerfs run` starts its confined copy in a new network namespace (next to
// the user and mount namespaces, see mountns.go): it has only a loopback
// interface, no route anywhere else and its own abstract UNIX socket names,
// so a program that ignores the proxy reaches nothing. The copy brings the
// loopback up, opens the proxy's listening socket on it (and one for each
// model endpoint on the host's loopback, at the same address, so that a
// client that never proxies loopback addresses still reaches its model)
// and hands the descriptors to the daemon, which serves them from the
// host's namespace.

// NetNS names the network namespace of the calling process
// ("net:[4026531840]"), "" when /proc does not say.
func NetNS() string {
	l, _ := os.Readlink("/proc/self/ns/net")
	return l
}

// LoopbackUp brings the loopback interface of the calling thread's network
// namespace up (127.0.0.1 and ::1 come with it). It needs CAP_NET_ADMIN in
// the namespace's owning user namespace.
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring loopback up: %w", err)
	}
	return nil
}

// ListenLoopback opens a TCP listening socket at addr (an address on the
// loopback, port 0 for any) and returns it as a file (close-on-exec) and
// the address it is bound to.
func ListenLoopback(addr string) (*os.File, string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	defer l.Close()
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		return nil, "", err
	}
	return f, l.Addr().String(), nil
}

// SocketNetNS names the network namespace a socket belongs to, in the form
// of /proc/<pid>/ns/net ("net:[4026532401]"): the daemon checks that a
// listening socket handed to it lives in the namespace of the session's
// process, not in its own.
func SocketNetNS(fd int) (string, error) {
	ns, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), uintptr(unix.SIOCGSKNS), uintptr(unsafe.Pointer(nil)))
	if errno != 0 {
		return "", fmt.Errorf("SIOCGSKNS: %w", errno)
	}
	defer unix.Close(int(ns))
	var st unix.Stat_t
	if err := unix.Fstat(int(ns), &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("net:[%d]", st.Ino), nil
}

// ListeningTCP reports whether fd is a listening TCP socket (the only kind
// the daemon accepts from `aerfs run`), and its local address.
func ListeningTCP(fd int) (string, error) {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return "", fmt.Errorf("not a socket: %w", err)
	}
	dom, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	acc, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if typ != unix.SOCK_STREAM || (dom != unix.AF_INET && dom != unix.AF_INET6) || acc != 1 {
		return "", fmt.Errorf("not a listening TCP socket")
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return "", err
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), fmt.Sprint(a.Port)), nil
	case *unix.SockaddrInet6:
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), fmt.Sprint(a.Port)), nil
	}
	return "", fmt.Errorf("not an internet socket")
}
