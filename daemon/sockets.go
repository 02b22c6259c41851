package daemon

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/internal/mountinfo"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
	"github.com/aerfs/aerfs/sandbox"
)

// # Path sockets of confined sessions
//
// Every connect() of a confined session comes here (sandbox/unotify.go):
// aerfs run hands the daemon the listener of its session's filter before
// it executes the command, and the daemon alone holds it. For each call
// the daemon takes a duplicate of the session's socket (pidfd_getfd),
// reads the address from the session's memory and carries the call out on
// that duplicate itself; the kernel never continues the session's own
// call, so nothing the session changes afterwards (the address, the
// descriptor) changes what was decided.
//
//   - A socket that is not AF_UNIX (the session's network, its proxy) is
//     connected as asked: these are not decided here.
//   - A path: resolved in the session's own view (its root, its working
//     directory, its mount namespace), with the session's credentials, to
//     the socket file itself. Allowed: the workspace's control socket
//     (connected to the daemon as the session's process: see behalf), and
//     sockets on a file system of the session's own mount namespace (its
//     private /tmp and /run/user/<uid>: what the session itself made).
//     Everything else is refused with EACCES and recorded (RU-socket): the
//     owner's tmux, screen, ssh-agent, gpg-agent, editors, container
//     runtimes, anywhere.
//   - A path the policy lists (sandbox.sockets): connected likewise, with
//     the session's permissions.
//   - An abstract address: in a network namespace of the session's own,
//     only the session's sockets are there, and it is connected; in the
//     host's it is refused (EPERM), as Landlock's scoping would.
//
// # The control socket, on the session's behalf
//
// The daemon authenticates control connections by their peer (SO_PEERPIDFD)
// and the peer of a connection the daemon makes is the daemon. So it
// connects the session's socket to a listener of its own (behalf.sock,
// beside the control socket, the daemon's alone), writes a random nonce
// into it, accepts the connection that starts with that nonce, and serves
// it as a control connection of the session's process, bound to it by a
// pidfd.

// RuleSocket is the rule id of a refused connect() of a confined session.
var RuleSocket = policy.RuleSocket.ID()

// socketGate decides the connect() calls of the daemon's supervised
// sessions.
type socketGate struct {
	s          *controlServer
	control    devIno // the control socket's file
	behalfPath string
	behalf     *net.UnixListener
	mu         sync.Mutex // one connection on a session's behalf at a time
	hostNet    uint64     // the daemon's network namespace (its inode)
	done       chan struct{}
}

type devIno struct{ dev, ino uint64 }

func statDevIno(p string) (devIno, error) {
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		return devIno{}, err
	}
	return devIno{st.Dev, st.Ino}, nil
}

// newSocketGate listens on behalf.sock beside the control socket sock.
func newSocketGate(s *controlServer, sock string) (*socketGate, error) {
	ctl, err := statDevIno(sock)
	if err != nil {
		return nil, err
	}
	g := &socketGate{s: s, control: ctl, behalfPath: filepath.Join(filepath.Dir(sock), "behalf.sock"), done: make(chan struct{})}
	os.Remove(g.behalfPath)
	old := unix.Umask(0o077)
	g.behalf, err = net.ListenUnix("unix", &net.UnixAddr{Name: g.behalfPath, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		return nil, err
	}
	g.behalf.SetUnlinkOnClose(true)
	var st unix.Stat_t
	if unix.Stat("/proc/self/ns/net", &st) == nil {
		g.hostNet = st.Ino
	}
	return g, nil
}

func (g *socketGate) close() {
	close(g.done)
	g.behalf.Close()
}

// supervised is one session's connect() listener.
type supervised struct {
	g        *socketGate
	listener int
	session  string
	private  map[uint64]bool // devices of the session's own mounts
	sem      chan struct{}

	mu      sync.Mutex
	refused map[string]time.Time // what was refused, when last recorded
}

// firstRefusal reports whether a refusal of what is to be recorded now.
func (sv *supervised) firstRefusal(what string) bool {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	now := time.Now()
	if t, ok := sv.refused[what]; ok && now.Sub(t) < time.Minute {
		return false
	}
	if sv.refused == nil || len(sv.refused) > 4096 {
		sv.refused = map[string]time.Time{}
	}
	sv.refused[what] = now
	return true
}

// superviseRequest is what aerfs run sends with its listener.
type superviseRequest struct {
	PrivateDevs []uint64 `json:"private_devs"`
}

// serveSupervise takes the connect() listener of the session of the
// process that registered it confined (once), on connection c.
func (s *controlServer) serveSupervise(c *net.UnixConn, p *peer, req Request) {
	answer := func(r *Response) {
		b, _ := json.Marshal(r)
		c.SetWriteDeadline(time.Now().Add(writeTimeout))
		c.Write(append(b, '\n'))
	}
	res := s.reg.Resolve(p.pid)
	if err := p.verify(res); err != nil {
		answer(s.refuseStale(p, req, res))
		return
	}
	if !res.Identified || res.Session == nil {
		answer(&Response{Error: "only the process that registered a confined session hands over its sockets"})
		return
	}
	var sr superviseRequest
	if err := json.Unmarshal([]byte(req.Sandbox), &sr); err != nil {
		answer(&Response{Error: "malformed supervise request: " + err.Error()})
		return
	}
	g := s.shared.gate
	if g == nil {
		answer(&Response{Error: "this daemon cannot decide sockets (see its log)"})
		return
	}
	if !s.shared.conf.claimSupervision(res.Session.ID, res.Proc.ID) {
		answer(&Response{Error: fmt.Sprintf("session %s: sockets are handed over once, by the process that registered it confined", res.Session.ID)})
		return
	}
	// The devices the session reports as its own must be file systems the
	// daemon's namespace has not got: mounts aerfs run made for it.
	host := hostDevices()
	sv := &supervised{g: g, listener: -1, session: res.Session.ID, private: map[uint64]bool{}, sem: make(chan struct{}, 64)}
	for _, d := range sr.PrivateDevs {
		if !host[d] {
			sv.private[d] = true
		}
	}
	// The daemon must be able to take the session's sockets: try it on
	// the caller's standard input.
	if err := canInspect(p.pid); err != nil {
		answer(&Response{Error: "the daemon cannot decide this session's sockets: " + err.Error(),
			Hint: "run it unconfined with --sandbox=off, or mount as root"})
		return
	}
	answer(&Response{OK: true})
	c.SetReadDeadline(time.Now().Add(lineTimeout))
	buf, oob := make([]byte, 16), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	fd := -1
	if err == nil {
		if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
			for _, m := range msgs {
				if fds, ferr := unix.ParseUnixRights(&m); ferr == nil {
					for _, x := range fds {
						if fd < 0 {
							fd = x
						} else {
							unix.Close(x)
						}
					}
				}
			}
		}
	}
	if fd < 0 || !sandbox.IsNotifyListener(fd) {
		if fd >= 0 {
			unix.Close(fd)
		}
		answer(&Response{Error: "no connect() listener came with the request"})
		return
	}
	sv.listener = fd
	go sv.serve()
	s.log.Info().Str("session", sv.session).Int("pid", p.pid).Int("private_mounts", len(sv.private)).Msg("deciding the session's sockets")
	answer(&Response{OK: true})
}

// hostDevices are the devices of the file systems in the daemon's mount
// table.
func hostDevices() map[uint64]bool {
	out := map[uint64]bool{}
	ms, _ := mountinfo.Self()
	for _, m := range ms {
		out[unix.Mkdev(m.Major, m.Minor)] = true
	}
	return out
}

// canInspect checks that the daemon may take descriptors of process pid
// (pidfd_getfd): root may, and so may the owner for a session in a user
// namespace of its own (Yama's relational scope included).
func canInspect(pid int) error {
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	defer unix.Close(pfd)
	fd, err := unix.PidfdGetfd(pfd, 0, 0)
	if errors.Is(err, unix.EBADF) {
		return nil // no standard input: the right was granted
	}
	if err != nil {
		return fmt.Errorf("pidfd_getfd: %w", err)
	}
	unix.Close(fd)
	return nil
}

// serve answers the session's notifications until every process of the
// session has exited (the listener hangs up) or the daemon stops.
func (sv *supervised) serve() {
	defer unix.Close(sv.listener)
	for {
		select {
		case <-sv.g.done:
			return
		default:
		}
		fds := []unix.PollFd{{Fd: int32(sv.listener), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 500)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if n == 0 {
			continue
		}
		if fds[0].Revents&unix.POLLIN == 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
			return // no process is left under the filter
		}
		note, err := sandbox.RecvNotification(sv.listener)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINTR) {
				continue // the caller went away meanwhile
			}
			return
		}
		sv.sem <- struct{}{}
		go func() {
			defer func() { <-sv.sem }()
			val, errno := sv.decide(note)
			sandbox.Respond(sv.listener, note.ID, val, errno)
		}()
	}
}

// call is one connect() of the session being decided.
type call struct {
	sv    *supervised
	note  *sandbox.Notification
	tid   int
	pidfd int
	sock  int
	addr  []byte
}

// decide carries out the connect() of note and returns its result.
func (sv *supervised) decide(note *sandbox.Notification) (int64, unix.Errno) {
	if note.Nr != unix.SYS_CONNECT {
		return 0, unix.ENOSYS
	}
	c := &call{sv: sv, note: note, tid: int(note.Pid), pidfd: -1, sock: -1}
	defer c.close()
	if errno := c.take(); errno != 0 {
		return 0, errno
	}
	domain, err := unix.GetsockoptInt(c.sock, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return 0, unix.ENOTSOCK
	}
	family := binary.NativeEndian.Uint16(c.addr)
	if domain != unix.AF_UNIX || family != unix.AF_UNIX {
		// Not a path or an abstract name: the network, or a call the
		// kernel refuses by itself (a family that does not match).
		return 0, connectRaw(c.sock, c.addr)
	}
	name := c.addr[2:]
	if len(name) == 0 {
		return 0, unix.EINVAL
	}
	if name[0] == 0 {
		return 0, c.abstract()
	}
	if i := strings.IndexByte(string(name), 0); i >= 0 {
		name = name[:i]
	}
	return 0, c.path(string(name))
}

// take duplicates the caller's socket and reads its address.
func (c *call) take() unix.Errno {
	// The calling thread itself where the kernel can name one (it may
	// have a descriptor table of its own), else its process.
	pfd, err := unix.PidfdOpen(c.tid, pidfdThread)
	if err != nil {
		if p, perr := principal.ReadProc(c.tid); perr == nil {
			pfd, err = unix.PidfdOpen(p.ID.Tgid, 0)
		}
	}
	if err != nil {
		return unix.ESRCH
	}
	c.pidfd = pfd
	if !sandbox.NotificationValid(c.sv.listener, c.note.ID) {
		return unix.EINTR // answered to nobody: the thread is gone
	}
	sock, err := unix.PidfdGetfd(pfd, int(int32(c.note.Args[0])), 0) // always close-on-exec
	if err != nil {
		if errors.Is(err, unix.EBADF) {
			return unix.EBADF
		}
		return unix.EPERM
	}
	c.sock = sock
	var st unix.Stat_t
	if unix.Fstat(sock, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return unix.ENOTSOCK
	}
	n := c.note.Args[2]
	if n < 2 || n > sizeofSockaddrStorage {
		return unix.EINVAL
	}
	c.addr = make([]byte, n)
	local := []unix.Iovec{{Base: &c.addr[0], Len: n}}
	remote := []unix.RemoteIovec{{Base: uintptr(c.note.Args[1]), Len: int(n)}}
	if got, err := unix.ProcessVMReadv(c.tid, local, remote, 0); err != nil || uint64(got) != n {
		return unix.EFAULT
	}
	// What was read was the caller's, unless it went away meanwhile and
	// its pid was reused.
	if !sandbox.NotificationValid(c.sv.listener, c.note.ID) {
		return unix.EINTR
	}
	return 0
}

func (c *call) close() {
	if c.sock >= 0 {
		unix.Close(c.sock)
	}
	if c.pidfd >= 0 {
		unix.Close(c.pidfd)
	}
}

// sizeofSockaddrStorage bounds an address, as the kernel does.
const sizeofSockaddrStorage = 128

// pidfdThread is PIDFD_THREAD: a pidfd for one thread.
const pidfdThread = unix.O_EXCL

// connectRaw connects sock to the address as the caller gave it.
func connectRaw(sock int, addr []byte) unix.Errno {
	_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(sock), uintptr(unsafe.Pointer(&addr[0])), uintptr(len(addr)))
	return e
}

// abstract connects to an abstract name only inside a network namespace
// of the session's own, where only its own sockets have names.
func (c *call) abstract() unix.Errno {
	nsfd, err := unix.IoctlRetInt(c.sock, unix.SIOCGSKNS)
	if err == nil {
		var st unix.Stat_t
		ferr := unix.Fstat(nsfd, &st)
		unix.Close(nsfd)
		if ferr == nil && st.Ino != c.sv.g.hostNet {
			return connectRaw(c.sock, c.addr)
		}
	}
	c.refuse("an abstract name "+strconv.Quote(string(c.addr[3:])), "abstract Unix sockets outside a network namespace of the session's own belong to the host")
	return unix.EPERM
}

// path resolves name in the caller's view with its credentials and
// connects to the socket there when it is the control socket or the
// session's own.
func (c *call) path(name string) unix.Errno {
	creds, err := readCreds(c.tid)
	if err != nil {
		return unix.ESRCH
	}
	var (
		errno  unix.Errno
		target devIno
		opath  = -1
	)
	asCaller(creds, func() {
		opath, errno = openInView(c.tid, name)
		if errno != 0 {
			return
		}
		var st unix.Stat_t
		if unix.Fstat(opath, &st) != nil {
			errno = unix.ECONNREFUSED
			return
		}
		if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			errno = unix.ECONNREFUSED // what connect() says of a file that is not a socket
			return
		}
		target = devIno{st.Dev, st.Ino}
		if target == c.sv.g.control || !c.sv.private[st.Dev] && !c.sv.g.policyAllows(target) {
			return // decided below, outside the caller's credentials
		}
		// The session's own: connect through the descriptor opened, so
		// that it is this file, with the caller's permissions.
		errno = connectRaw(c.sock, sockaddrUnix("/proc/self/fd/"+strconv.Itoa(opath)))
		target = devIno{}
	})
	if opath >= 0 {
		defer unix.Close(opath)
	}
	switch {
	case errno != 0 || target == (devIno{}):
		return errno
	case target == c.sv.g.control:
		return c.sv.g.onBehalf(c)
	}
	c.refuse(name, "a path socket outside the session: the owner's services (tmux, ssh-agent, editors, container runtimes …) are out of a confined session's reach")
	return unix.EACCES
}

func sockaddrUnix(p string) []byte {
	b := make([]byte, 2+len(p)+1)
	binary.NativeEndian.PutUint16(b, unix.AF_UNIX)
	copy(b[2:], p)
	return b
}

// openInView opens name (O_PATH) as process tid sees it: from its root, a
// relative name from its working directory, never through a magic link.
func openInView(tid int, name string) (int, unix.Errno) {
	base := "/proc/" + strconv.Itoa(tid)
	if !strings.HasPrefix(name, "/") {
		cwd, err := os.Readlink(base + "/cwd")
		if err != nil || !strings.HasPrefix(cwd, "/") {
			return -1, unix.ENOENT
		}
		name = cwd + "/" + name
	}
	root, err := unix.Open(base+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, unix.ESRCH
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, name, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		if e, ok := err.(unix.Errno); ok {
			return -1, e
		}
		return -1, unix.ENOENT
	}
	return fd, 0
}

// creds are a process's file-system credentials.
type creds struct {
	fsuid, fsgid uint32
	groups       []uint32
}

func readCreds(tid int) (creds, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return creds{}, err
	}
	var c creds
	var seen int
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		switch k {
		case "Uid", "Gid":
			if len(f) != 4 {
				return creds{}, fmt.Errorf("/proc/%d/status: %s", tid, line)
			}
			x, err := strconv.ParseUint(f[3], 10, 32)
			if err != nil {
				return creds{}, err
			}
			if k == "Uid" {
				c.fsuid = uint32(x)
			} else {
				c.fsgid = uint32(x)
			}
			seen++
		case "Groups":
			for _, g := range f {
				x, err := strconv.ParseUint(g, 10, 32)
				if err != nil {
					return creds{}, err
				}
				c.groups = append(c.groups, uint32(x))
			}
		}
	}
	if seen != 2 {
		return creds{}, fmt.Errorf("/proc/%d/status: no uid or gid", tid)
	}
	return c, nil
}

// asCaller runs f on a thread of its own that has the caller's file-system
// credentials (a root daemon; one running as the owner has them already):
// its uid, gid and groups, and no capability that bypasses file
// permissions. The thread is never given back to the runtime.
func asCaller(c creds, f func()) {
	if os.Geteuid() != 0 {
		f()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := setThreadCreds(c); err != nil {
			return
		}
		f()
	}()
	<-done
}

func setThreadCreds(c creds) error {
	var gp unsafe.Pointer
	if len(c.groups) > 0 {
		gp = unsafe.Pointer(&c.groups[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(c.groups)), uintptr(gp), 0); e != 0 {
		return e
	}
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(c.fsgid), 0, 0)
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(c.fsuid), 0, 0)
	// setfs* answer the previous id: asking again says whether it took.
	if r, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0); uint32(r) != c.fsuid {
		return fmt.Errorf("setfsuid %d did not take", c.fsuid)
	}
	if r, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0); uint32(r) != c.fsgid {
		return fmt.Errorf("setfsgid %d did not take", c.fsgid)
	}
	// A uid other than 0 has lost the file capabilities by now; uid 0
	// (a root owner's session, which has none) drops them here.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return err
	}
	for _, cp := range []uint{unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER} {
		data[cp/32].Effective &^= 1 << (cp % 32)
	}
	return unix.Capset(&hdr, &data[0])
}

// policyAllows reports whether the socket file t is one the policy lets
// sessions reach (sandbox.sockets, "~" the workspace owner's home).
func (g *socketGate) policyAllows(t devIno) bool {
	var home string
	var st unix.Stat_t
	if unix.Stat(g.s.status().Workspace, &st) == nil {
		if u, err := user.LookupId(strconv.Itoa(int(st.Uid))); err == nil {
			home = u.HomeDir
		}
	}
	for _, p := range g.s.m.Policy().SandboxSockets(home) {
		if d, err := statDevIno(p); err == nil && d == t {
			return true
		}
	}
	return false
}

// refuse records a refused connect(): once a minute for the same address
// and session, so that a program that retries (or a C library that tries
// each of its services in turn at every lookup) does not flood the log.
func (c *call) refuse(what, why string) {
	if !c.sv.firstRefusal(what) {
		return
	}
	s := c.sv.g.s
	res := s.reg.Resolve(c.tid)
	subj := res.Subject()
	who := subj.Principal.String()
	s.m.Record(&evidence.Record{Type: evidence.TypeVerdict, Principal: who, Taint: nonNil(subj.Taint.Names()),
		Meta: evidence.Meta{Op: "connect", Verdict: "deny", Session: c.sv.session, Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe,
			UID: res.Proc.UID, Rule: RuleSocket, Reason: "connect to " + what + ": " + why}})
}

// onBehalf connects the caller's socket to the daemon's own behalf
// listener, takes the connection at once and serves it as a control
// connection of the caller's process.
func (g *socketGate) onBehalf(c *call) unix.Errno {
	p, err := principal.ReadProc(c.tid)
	if err != nil {
		return unix.ESRCH
	}
	pfd, err := unix.PidfdOpen(p.ID.Tgid, 0)
	if err != nil {
		return unix.ESRCH
	}
	owned := false
	defer func() {
		if !owned {
			unix.Close(pfd)
		}
	}()
	g.mu.Lock()
	defer g.mu.Unlock()
	if errno := connectRaw(c.sock, sockaddrUnix(g.behalfPath)); errno != 0 {
		return errno
	}
	// The connection is known by what the daemon writes into it first,
	// through the session's socket, before the session's connect()
	// returns: a random nonce. A connection that does not start with it
	// (someone else's, one the session wrote into first, a stale one) is
	// closed.
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return unix.ECONNREFUSED
	}
	if _, err := unix.Write(c.sock, nonce[:]); err != nil {
		return unix.ECONNREFUSED
	}
	deadline := time.Now().Add(2 * time.Second)
	var conn *net.UnixConn
	for conn == nil {
		g.behalf.SetDeadline(deadline)
		x, err := g.behalf.AcceptUnix()
		if err != nil {
			return unix.ECONNREFUSED
		}
		var got [16]byte
		x.SetReadDeadline(deadline)
		if _, err := io.ReadFull(x, got[:]); err != nil || got != nonce {
			x.Close()
			continue
		}
		x.SetReadDeadline(time.Time{})
		conn = x
	}
	pr := &peer{pid: p.ID.Tgid, start: p.ID.Start, uid: p.UID, pidfd: pfd}
	if err := pr.check(); err != nil {
		conn.Close()
		return unix.ESRCH
	}
	owned = true
	g.s.adoptConn(conn, pr)
	return 0
}
