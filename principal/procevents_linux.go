package principal

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

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
	procEventNone      = 0x00000000
	procEventFork      = 0x00000001
	procEventExec      = 0x00000002
	procEventExit      = 0x80000000
	nlmsgHdrLen        = 16
	cnMsgLen           = 20
	procEventHeaderLen = 16 // what, cpu, timestamp_ns
)

// FollowProcessEvents subscribes to process events and feeds them to r until
// ctx is done. It returns an error at once when the connector is unavailable.
//
// Once the events are shown to arrive (verify), they also keep the
// registry's cache of callers current: every request drains what the
// socket holds before it trusts a cached thread (Registry.eventsCurrent),
// so an exec, exit or fork that happened before the request is applied
// before its caller is looked up.
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
	pe := &procEvents{fd: fd, buf: make([]byte, 64<<10), seq: map[uint32]uint32{}, wake: make(chan struct{}, 1)}
	r.pe.Store(pe)
	go func() {
		<-ctx.Done()
		pe.mu.Lock()
		pe.closeLocked()
		pe.mu.Unlock()
		pe.signal()
	}()
	go readProcessEvents(ctx, pe, r)
	go pe.verify(ctx, r)
	return nil
}

// procEvents is the subscribed socket. Reading it (intake) is split from
// acting on what it says: intake is cheap and runs in requests, dropping
// the cached callers an event makes stale; the rest (following forks,
// re-resolving an exec, forgetting an exit: reads of /proc) is queued for
// the reader goroutine.
type procEvents struct {
	mu  sync.Mutex // one intake at a time; fd and buf and seq under it
	fd  int
	buf []byte
	// seq is the sequence number of the last event seen from each CPU:
	// the kernel numbers the events of each CPU in order, so a gap is an
	// event lost (its buffer could not be allocated) even where the socket
	// reported no overrun.
	seq map[uint32]uint32
	// drops is the socket's count of messages dropped, as last read;
	// stale the threads the events read make stale, until applied.
	drops uint32
	stale []staleTask

	// trusted: the events were shown to arrive here, numbered as this
	// daemon sees processes (verify), and the socket is open.
	trusted atomic.Bool
	// probes are the threads whose exits verify waits for, one pinned to
	// each online CPU (under mu); cpus are those CPUs.
	probes map[int]bool
	cpus   []uint32

	qmu   sync.Mutex
	queue [][]byte // events read and not yet acted on, in order
	lost  bool     // events were lost since the queue was last taken
	wake  chan struct{}
}

// maxQueued bounds the events read and not yet acted on; past it they are
// dropped as if the socket had overflowed.
const maxQueued = 1 << 16

func (pe *procEvents) signal() {
	select {
	case pe.wake <- struct{}{}:
	default:
	}
}

// intake reads every event the socket holds, without waiting, drops the
// cached callers they make stale, and queues them. It reports whether the
// cache can be trusted to reflect every event sent before the call.
func (pe *procEvents) intake(r *Registry) bool {
	pe.mu.Lock()
	defer pe.mu.Unlock()
	read, overrun := false, false
	for pe.fd >= 0 {
		n, _, err := unix.Recvfrom(pe.fd, pe.buf, unix.MSG_DONTWAIT)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			break
		}
		if err == unix.ENOBUFS {
			pe.lose(r)
			overrun = true
			continue
		}
		if err != nil || n == 0 {
			// The socket is broken: nothing vouches for the cache any
			// more, and nothing is read from it again (a poller would
			// find it readable for ever).
			pe.closeLocked()
			r.dropThreads()
			break
		}
		msgs, err := syscall.ParseNetlinkMessage(pe.buf[:n])
		if err != nil {
			pe.lose(r)
			continue
		}
		for _, m := range msgs {
			pe.take(r, m.Data)
		}
		read = true
	}
	if pe.fd >= 0 {
		// The kernel reports an overrun once, then drops without a word
		// until the queue is empty again (which it is now): what it
		// dropped meanwhile is lost too, and a resolution may have read
		// /proc before one of those events and been cached since. The
		// socket's count of drops says the same, whether reported or
		// not.
		if drops, ok := socketDrops(pe.fd); overrun || !ok || drops != pe.drops {
			pe.drops = drops
			pe.lose(r)
		}
	}
	r.tasksChanged(pe.stale)
	pe.stale = pe.stale[:0]
	if read {
		pe.signal()
	}
	return pe.trusted.Load()
}

// closeLocked stops trusting and reading the socket and closes it, once.
// Called with pe.mu held.
func (pe *procEvents) closeLocked() {
	pe.trusted.Store(false)
	if pe.fd >= 0 {
		unix.Shutdown(pe.fd, unix.SHUT_RDWR)
		unix.Close(pe.fd)
		pe.fd = -1
	}
}

// socketDrops is how many messages the socket fd dropped for want of
// room (SO_MEMINFO).
func socketDrops(fd int) (uint32, bool) {
	var mi [16]uint32
	n := uint32(len(mi) * 4)
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&mi[0])), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 || n < (unix.SK_MEMINFO_DROPS+1)*4 {
		return 0, false
	}
	return mi[unix.SK_MEMINFO_DROPS], true
}

// lose is told that events were lost: no cached caller can be trusted.
// Called with pe.mu held.
func (pe *procEvents) lose(r *Registry) {
	r.dropThreads()
	pe.qmu.Lock()
	pe.lost = true
	pe.qmu.Unlock()
	pe.signal()
}

// take applies an event to the cache of callers and queues it. Called
// with pe.mu held.
func (pe *procEvents) take(r *Registry, d []byte) {
	if len(d) < cnMsgLen+procEventHeaderLen {
		return
	}
	ev := d[cnMsgLen:]
	what := binary.NativeEndian.Uint32(ev[0:])
	if what == procEventNone {
		return // the answer to a subscription (its cpu is -1, its seq the subscriber's)
	}
	cpu := binary.NativeEndian.Uint32(ev[4:])
	seq := binary.NativeEndian.Uint32(d[8:])
	if last, ok := pe.seq[cpu]; ok && seq != last+1 {
		pe.lose(r)
	} else if !ok && pe.trusted.Load() {
		// A CPU brought online since verify: what it sent before this
		// is unknown.
		pe.lose(r)
	}
	pe.seq[cpu] = seq
	data := ev[procEventHeaderLen:]
	switch what {
	case procEventFork:
		if len(data) >= 16 {
			// A new task with a pid a cached thread had: that entry
			// is not this task.
			pe.stale = append(pe.stale, staleTask{pid: int(binary.NativeEndian.Uint32(data[8:]))})
		}
	case procEventExec:
		if len(data) >= 8 {
			// The whole group: a thread other than the leader that
			// execs takes the leader's pid, and its own is freed.
			pe.stale = append(pe.stale, staleTask{pid: int(binary.NativeEndian.Uint32(data[4:])), group: true})
		}
	case procEventExit:
		if len(data) >= 8 {
			pid := int(binary.NativeEndian.Uint32(data[0:]))
			if pe.probes[pid] && int(binary.NativeEndian.Uint32(data[4:])) == os.Getpid() {
				delete(pe.probes, pid)
				pe.verified(r)
			}
			pe.stale = append(pe.stale, staleTask{pid: pid})
		}
	}
	pe.qmu.Lock()
	if len(pe.queue) < maxQueued {
		pe.queue = append(pe.queue, append([]byte(nil), d...))
	} else {
		pe.lost = true
	}
	pe.qmu.Unlock()
}

// verify shows that events arrive, that none can be lost unseen, and that
// they name processes as this daemon's requests do (the connector reports
// pids as the initial pid namespace sees them, and says nothing to a
// listener without CAP_NET_ADMIN or in another namespace): on each online
// CPU a thread of this daemon exits, and each exit event must arrive with
// the thread's own id. That also gives each CPU's sequence a start, from
// which a gap is a lost event. Until then (and for good, where it fails)
// cached callers are checked through /proc (Registry.ResolveAs).
func (pe *procEvents) verify(ctx context.Context, r *Registry) {
	cpus, err := onlineCPUs()
	if err != nil || len(cpus) == 0 {
		return
	}
	type probe struct {
		tid int
		err error
	}
	tids := make(chan probe, len(cpus))
	release := make(chan struct{})
	var run func(cpu uint32)
	run = func(cpu uint32) {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread does not end with its goroutine: probe
			// from another, which cannot be this one while it is held.
			held := make(chan struct{})
			go func() {
				defer close(held)
				run(cpu)
			}()
			<-held
			runtime.UnlockOSThread()
			return
		}
		var set unix.CPUSet
		set.Set(int(cpu))
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			tids <- probe{err: err}
			return // the thread ends: its exit is not awaited
		}
		tids <- probe{tid: unix.Gettid()}
		<-release // not unlocked: the thread ends with the goroutine, on cpu
	}
	for _, c := range cpus {
		go run(c)
	}
	probes := map[int]bool{}
	for range cpus {
		p := <-tids
		if p.err != nil {
			close(release)
			return
		}
		probes[p.tid] = true
	}
	pe.mu.Lock()
	pe.probes, pe.cpus = probes, cpus
	pe.mu.Unlock()
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for ctx.Err() == nil && !pe.trusted.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		pe.intake(r)
	}
}

// verified is told that a probe's exit arrived: once every probe's has,
// and every CPU's sequence has its start, the events are trusted. Called
// with pe.mu held.
func (pe *procEvents) verified(r *Registry) {
	if len(pe.probes) > 0 || pe.trusted.Load() {
		return
	}
	for _, c := range pe.cpus {
		if _, ok := pe.seq[c]; !ok {
			return
		}
	}
	r.dropThreads() // cached before the events were shown to arrive
	pe.trusted.Store(true)
}

// onlineCPUs lists the CPUs that are online (/sys/devices/system/cpu/online:
// ranges such as "0-3,6").
func onlineCPUs() ([]uint32, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, err
	}
	var out []uint32
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(lo, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("online CPUs %q: %w", b, err)
		}
		z := a
		if isRange {
			if z, err = strconv.ParseUint(hi, 10, 32); err != nil || z < a || z-a > 1<<16 {
				return nil, fmt.Errorf("online CPUs %q", b)
			}
		}
		for c := a; c <= z; c++ {
			out = append(out, uint32(c))
		}
	}
	return out, nil
}

// readProcessEvents reads the socket whenever it has events (a request's
// intake may have taken them first), and acts on what was read, in order.
func readProcessEvents(ctx context.Context, pe *procEvents, r *Registry) {
	go func() {
		for ctx.Err() == nil {
			pe.mu.Lock()
			fd := pe.fd
			pe.mu.Unlock()
			if fd < 0 {
				return
			}
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if n, err := unix.Poll(fds, 500); err != nil && err != unix.EINTR {
				return
			} else if n > 0 {
				pe.intake(r)
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-pe.wake:
		}
		pe.qmu.Lock()
		q, lost := pe.queue, pe.lost
		pe.queue, pe.lost = nil, false
		pe.qmu.Unlock()
		if lost {
			// Events were lost; ancestry walks still resolve callers, so
			// carry on, without the departed children whose exit events
			// may be among them.
			r.lostEvents()
		}
		for _, d := range q {
			handleProcEvent(r, d)
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
			r.forkAt(parentTgid, childTgid, binary.NativeEndian.Uint64(ev[8:]))
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
