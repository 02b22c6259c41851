package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dgramSvcScript is an owner's service on a datagram path socket: it
// appends every datagram it receives to FILE, as a logger or a
// notification daemon would act on what it is sent.
const dgramSvcScript = `
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); s.bind(sys.argv[1])
while True:
    d = s.recv(4096)
    with open(sys.argv[2], "ab") as f:
        f.write(d + b"\n")
`

// A datagram Unix socket sends to any path without connect(), where path
// sockets are decided, so a confined session may make only the Unix
// sockets whose peers it must connect to: stream and seqpacket. SOCK_RAW
// is SOCK_DGRAM to the kernel (unix_create), and a socketpair of either
// still sends to any path it is given, with or without SOCK_NONBLOCK and
// SOCK_CLOEXEC: each is refused by the seccomp filter (EPERM), and the
// owner's datagram service hears nothing.
func TestConfineUnixSocketTypes(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"README": "hi\n"})
	home, err := os.MkdirTemp(s.home, "svc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	os.Chown(home, s.uid, s.gid)
	svc := filepath.Join(home, "dgram.sock")
	heard := filepath.Join(home, "heard")
	s.startOwnerService(t, "/usr/bin/python3", "-c", dgramSvcScript, svc, heard)
	waitFor(t, svc, func() bool { _, err := os.Stat(svc); return err == nil })
	// The service is real: the owner, outside sessions, is heard.
	expectOK(t, "owner's datagram", s.asOwner("/usr/bin/python3", "-c",
		`import socket, sys; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"owner", sys.argv[1])`, svc))
	waitFor(t, heard, func() bool { b, _ := os.ReadFile(heard); return strings.Contains(string(b), "owner") })

	attack := `
import errno, socket, sys
U, NB, CX = socket.AF_UNIX, socket.SOCK_NONBLOCK, socket.SOCK_CLOEXEC
def try_(name, make):
    try:
        s = make()
    except OSError as e:
        print(name, errno.errorcode[e.errno]); return
    if isinstance(s, tuple):
        s = s[0]
    if s.type & 0xf in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET):
        print(name, "ok"); return
    try:
        s.sendto(name.encode(), sys.argv[1]); print(name, "sent")
    except OSError as e:
        print(name, "sendto", errno.errorcode[e.errno])
try_("dgram", lambda: socket.socket(U, socket.SOCK_DGRAM))
try_("dgram-cloexec", lambda: socket.socket(U, socket.SOCK_DGRAM | CX))
try_("raw", lambda: socket.socket(U, socket.SOCK_RAW))
try_("raw-nonblock", lambda: socket.socket(U, socket.SOCK_RAW | NB))
try_("raw-cloexec", lambda: socket.socket(U, socket.SOCK_RAW | NB | CX))
try_("rawpair", lambda: socket.socketpair(U, socket.SOCK_RAW))
try_("dgrampair", lambda: socket.socketpair(U, socket.SOCK_DGRAM | NB))
try_("stream", lambda: socket.socket(U, socket.SOCK_STREAM | CX))
try_("seqpacket", lambda: socket.socket(U, socket.SOCK_SEQPACKET))
try_("streampair", lambda: socket.socketpair(U, socket.SOCK_STREAM))
try_("seqpacketpair", lambda: socket.socketpair(U, socket.SOCK_SEQPACKET | NB))
`
	r := s.session("WEB", "raw", "/usr/bin/python3 -c '"+strings.ReplaceAll(attack, "'", `'"'"'`)+"' "+svc)
	t.Logf("confined WEB session:\n%s%s", r.Stdout, r.Stderr)
	got := parseAttempts(r.Stdout)
	for _, name := range []string{"dgram", "dgram-cloexec", "raw", "raw-nonblock", "raw-cloexec", "rawpair", "dgrampair"} {
		if got[name] != "EPERM" {
			t.Errorf("socket %s from a confined session: %q, want EPERM", name, got[name])
		}
	}
	for _, name := range []string{"stream", "seqpacket", "streampair", "seqpacketpair"} {
		if got[name] != "ok" {
			t.Errorf("socket %s from a confined session: %q, want ok", name, got[name])
		}
	}
	// Give a datagram that was sent the time to arrive.
	expectOK(t, "owner's second datagram", s.asOwner("/usr/bin/python3", "-c",
		`import socket, sys; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"owner-again", sys.argv[1])`, svc))
	waitFor(t, heard, func() bool { b, _ := os.ReadFile(heard); return strings.Contains(string(b), "owner-again") })
	if b, _ := os.ReadFile(heard); string(b) != "owner\nowner-again\n" {
		t.Errorf("the owner's datagram service heard a confined session:\n%s", b)
	}
}

// A confined session makes sockets of the families its work needs — Unix,
// IPv4, IPv6 and netlink's routing, socket diagnostics and device events
// (getaddrinfo, ip, ss, a browser's device monitor) — and no other: vsock
// reaches the hypervisor around the session's network namespace and its
// proxy, and the rest (packet, XDP, the kernel's crypto API, Bluetooth,
// CAN, …) is kernel attack surface no agent needs. The seccomp filter
// refuses another family with EAFNOSUPPORT and another netlink protocol
// with EPROTONOSUPPORT, as a kernel built without them would.
func TestConfineSocketFamilies(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"README": "hi\n"})
	probe := `
import errno, socket
def try_(name, f, t, p=0, pair=False):
    try:
        s = socket.socketpair(f, t, p) if pair else socket.socket(f, t, p)
        print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
try_("vsock", 40, socket.SOCK_STREAM)
try_("vsock-dgram", 40, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
try_("vsockpair", 40, socket.SOCK_STREAM, 0, True)
try_("packet", 17, socket.SOCK_DGRAM)
try_("xdp", 44, socket.SOCK_RAW)
try_("alg", 38, socket.SOCK_SEQPACKET)
try_("bluetooth", 31, socket.SOCK_STREAM, 3)
try_("can", 29, socket.SOCK_RAW, 1)
try_("tipc", 30, socket.SOCK_RDM)
try_("key", 15, socket.SOCK_RAW, 2)
# The kernel reads the family as an int: AF_INET with a high bit set.
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 41, "aarch64": 198}[platform.machine()]
fd = libc.syscall(nr, ctypes.c_long(0x100000000 | 40), ctypes.c_long(socket.SOCK_STREAM), ctypes.c_long(0))
print("vsock-high", "ok" if fd >= 0 else errno.errorcode[ctypes.get_errno()])
try_("netlink-generic", 16, socket.SOCK_RAW, 16)
try_("netlink-audit", 16, socket.SOCK_RAW, 9)
try_("netlink-netfilter", 16, socket.SOCK_RAW, 12)
try_("netlink-connector", 16, socket.SOCK_DGRAM, 11)
try_("netlink-route", 16, socket.SOCK_RAW, 0)
try_("netlink-diag", 16, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, 4)
try_("netlink-uevent", 16, socket.SOCK_DGRAM, 15)
try_("inet", socket.AF_INET, socket.SOCK_STREAM)
try_("inet6", socket.AF_INET6, socket.SOCK_DGRAM)
try_("unix", socket.AF_UNIX, socket.SOCK_STREAM)
print("getaddrinfo", "ok" if socket.getaddrinfo("localhost", 80) else "empty")
`
	script := "/usr/bin/python3 -c '" + strings.ReplaceAll(probe, "'", `'"'"'`) + "'\n" +
		"ip -o link show lo >/dev/null && echo ip ok || echo ip failed\n" +
		"ss -lnx >/dev/null && echo ss ok || echo ss failed\n"
	r := s.session("WEB", "families", script)
	t.Logf("confined WEB session:\n%s%s", r.Stdout, r.Stderr)
	got := parseAttempts(r.Stdout)
	for _, name := range []string{"vsock", "vsock-dgram", "vsockpair", "vsock-high", "packet", "xdp", "alg", "bluetooth", "can", "tipc", "key"} {
		if got[name] != "EAFNOSUPPORT" {
			t.Errorf("socket of family %s from a confined session: %q, want EAFNOSUPPORT", name, got[name])
		}
	}
	for _, name := range []string{"netlink-generic", "netlink-audit", "netlink-netfilter", "netlink-connector"} {
		if got[name] != "EPROTONOSUPPORT" {
			t.Errorf("socket %s from a confined session: %q, want EPROTONOSUPPORT", name, got[name])
		}
	}
	for _, name := range []string{"netlink-route", "netlink-diag", "netlink-uevent", "inet", "inet6", "unix", "getaddrinfo", "ip", "ss"} {
		if got[name] != "ok" {
			t.Errorf("%s from a confined session: %q, want ok", name, got[name])
		}
	}
}

// A socket the owner's shell leaves open is not the confined session's: a
// UDP socket of the host's network namespace, re-aimed with connect(),
// would reach the host's services around the proxy with no taint and no
// record. aerfs run closes inherited sockets; a pipe is passed as it is.
func TestConfineInheritedSocketsClosed(t *testing.T) {
	e := newEnv(t, map[string]string{"README": "hi\n"}).Mount()
	probe := "import os\nfor fd in (5, 6):\n    try:\n        os.fstat(fd); print(fd, 'open')\n    except OSError:\n        print(fd, 'closed')\n"
	r := runCmd(e.WS, toolEnv(t), "/usr/bin/python3", "-c", `
import os, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
os.dup2(s.fileno(), 5)
os.dup2(os.open("/dev/null", os.O_RDONLY), 6)
os.execv(sys.argv[1], [sys.argv[1], "run", "--workspace", sys.argv[2], "--principal", "WEB", "--session", "s", "--", "/usr/bin/python3", "-c", sys.argv[3]])
`, aerfsBin, e.WS, probe)
	if !strings.Contains(r.Stdout, "5 closed") || !strings.Contains(r.Stdout, "6 open") {
		t.Errorf("inherited descriptors in the confined session: %s (want the socket 5 closed, the file 6 open)", r)
	}
}
