package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Denied are the system calls a session gets EPERM for: those that reach
// into other processes (ptrace, process_vm_*, pidfd_getfd), change or
// create mounts and namespaces (mount, umount2, the new mount API,
// pivot_root, unshare, setns), load code into the kernel (bpf, modules,
// kexec) or reach the kernel keyrings (keyctl, add_key, request_key), a
// few exploit helpers (userfaultfd, perf_event_open, open_by_handle_at),
// and io_uring.
var Denied = map[string]uintptr{
	"ptrace":            unix.SYS_PTRACE,
	"process_vm_readv":  unix.SYS_PROCESS_VM_READV,
	"process_vm_writev": unix.SYS_PROCESS_VM_WRITEV,
	"pidfd_getfd":       unix.SYS_PIDFD_GETFD,
	"mount":             unix.SYS_MOUNT,
	"umount2":           unix.SYS_UMOUNT2,
	"pivot_root":        unix.SYS_PIVOT_ROOT,
	"chroot":            unix.SYS_CHROOT,
	"open_tree":         unix.SYS_OPEN_TREE,
	"move_mount":        unix.SYS_MOVE_MOUNT,
	"fsopen":            unix.SYS_FSOPEN,
	"fsconfig":          unix.SYS_FSCONFIG,
	"fsmount":           unix.SYS_FSMOUNT,
	"fspick":            unix.SYS_FSPICK,
	"mount_setattr":     unix.SYS_MOUNT_SETATTR,
	"unshare":           unix.SYS_UNSHARE,
	"setns":             unix.SYS_SETNS,
	"bpf":               unix.SYS_BPF,
	"keyctl":            unix.SYS_KEYCTL,
	"add_key":           unix.SYS_ADD_KEY,
	"request_key":       unix.SYS_REQUEST_KEY,
	"kexec_load":        unix.SYS_KEXEC_LOAD,
	"kexec_file_load":   unix.SYS_KEXEC_FILE_LOAD,
	"init_module":       unix.SYS_INIT_MODULE,
	"finit_module":      unix.SYS_FINIT_MODULE,
	"delete_module":     unix.SYS_DELETE_MODULE,
	"userfaultfd":       unix.SYS_USERFAULTFD,
	"perf_event_open":   unix.SYS_PERF_EVENT_OPEN,
	"open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT,
	"swapon":            unix.SYS_SWAPON,
	"swapoff":           unix.SYS_SWAPOFF,
	"reboot":            unix.SYS_REBOOT,
	// io_uring issues connect(), openat() … without a system call the
	// filters see (path sockets: unotify.go).
	"io_uring_setup":    unix.SYS_IO_URING_SETUP,
	"io_uring_enter":    unix.SYS_IO_URING_ENTER,
	"io_uring_register": unix.SYS_IO_URING_REGISTER,
}

// cloneNamespaces are the clone flags that create namespaces: clone with
// any of them gets EPERM (a new user namespace would give the session
// every capability inside it).
const cloneNamespaces = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// auditArch is the AUDIT_ARCH_* value of the architecture this binary was
// built for; the filter kills a process that calls in under another one
// (whose system call numbers differ).
func auditArch() (uint32, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, true
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, true
	}
	return 0, false
}

// Offsets into struct seccomp_data (little-endian: the low half of an
// argument comes first).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
	offArg2 = 32
)

// asm builds a classic BPF program with symbolic jump targets.
type asm struct {
	ins    []unix.SockFilter
	fixups map[int][2]string // instruction index → jt, jf labels
	labels map[string]int
}

func (a *asm) stmt(code uint16, k uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: code, K: k})
}

// jump compares the accumulator with k; an empty label falls through.
func (a *asm) jump(code uint16, k uint32, jt, jf string) {
	a.fixups[len(a.ins)] = [2]string{jt, jf}
	a.ins = append(a.ins, unix.SockFilter{Code: code, K: k})
}

func (a *asm) label(name string) { a.labels[name] = len(a.ins) }

func (a *asm) link() ([]unix.SockFilter, error) {
	for i, f := range a.fixups {
		for j, l := range f {
			if l == "" {
				continue
			}
			to, ok := a.labels[l]
			if !ok || to <= i || to-i-1 > 255 {
				return nil, fmt.Errorf("bad jump to %q", l)
			}
			if j == 0 {
				a.ins[i].Jt = uint8(to - i - 1)
			} else {
				a.ins[i].Jf = uint8(to - i - 1)
			}
		}
	}
	return a.ins, nil
}

const (
	ldAbs = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jset  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	ret   = unix.BPF_RET | unix.BPF_K
)

// newProgram starts a filter for arch: a process calling in under another
// architecture is killed; the system call number is loaded.
func newProgram(arch uint32) *asm {
	a := &asm{fixups: map[int][2]string{}, labels: map[string]int{}}
	a.stmt(ldAbs, offArch)
	a.jump(jeq, arch, "nr", "")
	a.stmt(ret, unix.SECCOMP_RET_KILL_PROCESS)
	a.label("nr")
	a.stmt(ldAbs, offNr)
	return a
}

// Filter returns the session's seccomp program.
func Filter() ([]unix.SockFilter, error) {
	arch, ok := auditArch()
	if !ok {
		return nil, fmt.Errorf("no seccomp filter for %s", runtime.GOARCH)
	}
	a := newProgram(arch)
	if runtime.GOARCH == "amd64" {
		a.jump(jset, 0x40000000, "eperm", "") // the x32 ABI
	}
	for _, nr := range Denied {
		a.jump(jeq, uint32(nr), "eperm", "")
	}
	a.jump(jeq, unix.SYS_CLONE, "clone", "")
	// clone3 passes its flags in memory a filter cannot read: ENOSYS makes
	// the C libraries fall back to clone, whose flags are checked.
	a.jump(jeq, unix.SYS_CLONE3, "enosys", "")
	a.jump(jeq, unix.SYS_IOCTL, "ioctl", "")
	a.jump(jeq, unix.SYS_SOCKET, "socket", "")
	a.jump(jeq, unix.SYS_SOCKETPAIR, "socket", "")
	a.jump(jeq, unix.SYS_SECCOMP, "seccomp", "")
	a.stmt(ret, unix.SECCOMP_RET_ALLOW)
	// A datagram Unix socket sends to any path without connect(), which
	// is where path sockets are decided (unotify.go), and so does a
	// socketpair of them: a session gets only the Unix sockets that reach
	// a peer through connect(). SOCK_RAW is SOCK_DGRAM to the kernel, so
	// the types are a list of what is allowed, and a type with a flag
	// bit besides SOCK_NONBLOCK and SOCK_CLOEXEC is refused too.
	//
	// Of the other families only those a session's work needs: IPv4 and
	// IPv6 (the session's own network namespace, or the host's with
	// sandbox.network: open) and netlink for the routing tables
	// (getaddrinfo, ip), socket diagnostics (ss) and device events (a
	// browser's device monitor). vsock reaches the hypervisor around the
	// network namespace and the proxy; the rest is kernel attack surface.
	// The kernel reads the family and the protocol as ints: the filter
	// compares their low halves.
	a.label("socket")
	a.stmt(ldAbs, offArg0)
	a.jump(jeq, unix.AF_INET, "allow", "")
	a.jump(jeq, unix.AF_INET6, "allow", "")
	a.jump(jeq, unix.AF_NETLINK, "netlink", "")
	a.jump(jeq, unix.AF_UNIX, "", "eafnosupport")
	a.stmt(ldAbs, offArg1)
	a.stmt(unix.BPF_ALU|unix.BPF_AND|unix.BPF_K, ^uint32(unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC))
	a.jump(jeq, unix.SOCK_STREAM, "allow", "")
	a.jump(jeq, unix.SOCK_SEQPACKET, "allow", "eperm")
	a.label("netlink")
	a.stmt(ldAbs, offArg2)
	a.jump(jeq, unix.NETLINK_ROUTE, "allow", "")
	a.jump(jeq, unix.NETLINK_SOCK_DIAG, "allow", "")
	a.jump(jeq, unix.NETLINK_KOBJECT_UEVENT, "allow", "eprotonosupport")
	// A filter of the session's own with a listener would take connect()
	// notifications before the daemon's, and could let them through.
	a.label("seccomp")
	a.stmt(ldAbs, offArg1)
	a.jump(jset, unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, "eperm", "allow")
	a.label("clone")
	a.stmt(ldAbs, offArg0)
	a.jump(jset, cloneNamespaces, "eperm", "")
	a.stmt(ret, unix.SECCOMP_RET_ALLOW)
	// TIOCSTI pushes input into a terminal the session shares with the
	// owner's shell; TIOCLINUX can do the same on a virtual console.
	a.label("ioctl")
	a.stmt(ldAbs, offArg1)
	a.jump(jeq, unix.TIOCSTI, "eperm", "")
	a.jump(jeq, unix.TIOCLINUX, "eperm", "")
	a.stmt(ret, unix.SECCOMP_RET_ALLOW)
	a.label("allow")
	a.stmt(ret, unix.SECCOMP_RET_ALLOW)
	a.label("eperm")
	a.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))
	a.label("eafnosupport")
	a.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EAFNOSUPPORT))
	a.label("eprotonosupport")
	a.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.EPROTONOSUPPORT))
	a.label("enosys")
	a.stmt(ret, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	return a.link()
}

func setNoNewPrivs() error {
	return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
}

func applySeccomp(r *Report) error {
	prog, err := Filter()
	if err != nil {
		r.Warnings = append(r.Warnings, err.Error())
		return nil
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fp))); e != 0 {
		return e
	}
	r.Seccomp = true
	return nil
}
