package principal

import (
	"bufio"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// followed returns a registry that follows process events and has shown
// they arrive (procEvents.verify): its cached threads are vouched for by
// events, not checked through /proc.
func followed(t *testing.T) *Registry {
	t.Helper()
	r, _ := newTestRegistry(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := FollowProcessEvents(ctx, r); err != nil {
		if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
			t.Fatalf("process events unavailable as root in CI: %v", err)
		}
		t.Skipf("process events unavailable: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !r.pe.Load().trusted.Load() {
		if time.Now().After(deadline) {
			if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
				t.Fatal("process events never shown to arrive as root in CI")
			}
			t.Skip("process events do not arrive here")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return r
}

// A shell resolved (and cached) execs cat in place; once cat answers, its
// next resolution must be cat's, with no /proc check of the cached entry
// in between: the exec event dropped it.
func TestEventsDropCachedThreadAtExec(t *testing.T) {
	r := followed(t)
	cmd := exec.Command("sh", "-c", "read x; exec cat")
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	out := bufio.NewReader(outp)
	pid := cmd.Process.Pid
	first := r.Resolve(pid)
	if !first.Identified || !strings.HasSuffix(first.Proc.Exe, "sh") && !strings.Contains(first.Proc.Exe, "dash") && !strings.Contains(first.Proc.Exe, "bash") {
		t.Fatalf("before the exec: %+v", first)
	}
	if again := r.Resolve(pid); again != first {
		t.Fatal("a second resolution of a live thread was not answered from the cache")
	}
	in.Write([]byte("go\nping\n"))
	if l, err := out.ReadString('\n'); err != nil || l != "ping\n" {
		t.Fatalf("cat: %q %v", l, err)
	}
	if got := r.Resolve(pid); !strings.HasSuffix(got.Proc.Exe, "/cat") {
		t.Fatalf("after exec cat, resolved as %q", got.Proc.Exe)
	}
}

// A process resolved (and cached) exits; another is started with its pid.
// Its resolution must be its own: the exit and fork events dropped the
// entry.
func TestEventsDropCachedThreadAtPidReuse(t *testing.T) {
	r := followed(t)
	if os.Geteuid() != 0 {
		t.Skip("needs ns_last_pid")
	}
	// Any thread of the machine (one of this test's runtime among them)
	// may take the pid first: then again with another.
	var pid int
	var ra *Resolved
	var b *exec.Cmd
	for attempt := 0; attempt < 5 && b == nil; attempt++ {
		a := exec.Command("sleep", "30")
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		pid = a.Process.Pid
		ra = r.Resolve(pid)
		if !ra.Identified {
			t.Fatalf("first: %+v", ra)
		}
		a.Process.Kill()
		a.Wait()
		// Past the clock tick it started in: a process's identity is
		// its pid and its start time, counted in ticks.
		time.Sleep(30 * time.Millisecond)
		for i := 0; i < 50 && b == nil; i++ {
			os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0)
			c := exec.Command("cat")
			pr, pw, _ := os.Pipe()
			c.Stdin = pr
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			pr.Close()
			if c.Process.Pid == pid {
				b = c
				t.Cleanup(func() { pw.Close(); c.Process.Kill(); c.Wait() })
				break
			}
			pw.Close()
			c.Process.Kill()
			c.Wait()
		}
	}
	if b == nil {
		t.Fatalf("could not start a process with the pid of one that exited")
	}
	rb := r.Resolve(pid)
	if rb == ra || rb.Proc.ID == ra.Proc.ID || !strings.HasSuffix(rb.Proc.Exe, "/cat") {
		t.Fatalf("the pid's new process resolved as the old one: %+v (old %+v)", rb.Proc, ra.Proc)
	}
}

// event builds a connector message of process event what from cpu with
// sequence number seq; data is the event's own fields.
func event(what, cpu, seq uint32, data ...uint32) []byte {
	d := make([]byte, cnMsgLen+procEventHeaderLen+4*len(data))
	binary.NativeEndian.PutUint32(d[8:], seq)
	binary.NativeEndian.PutUint32(d[cnMsgLen:], what)
	binary.NativeEndian.PutUint32(d[cnMsgLen+4:], cpu)
	for i, v := range data {
		binary.NativeEndian.PutUint32(d[cnMsgLen+procEventHeaderLen+4*i:], v)
	}
	return d
}

// What each event drops from the cache, and that a gap in a CPU's
// sequence numbers (an event the kernel could not send) drops it all.
func TestEventsIntakeDropsWhatTheyMakeStale(t *testing.T) {
	r, _ := newTestRegistry(t)
	pe := &procEvents{fd: -1, seq: map[uint32]uint32{}, wake: make(chan struct{}, 1)}
	fill := func() {
		r.mu.Lock()
		for _, th := range [][2]int{{100, 100}, {101, 100}, {102, 100}, {200, 200}, {300, 300}} {
			r.setThread(th[0], threadEntry{res: &Resolved{Proc: Proc{ID: ProcID{Tgid: th[1]}}}})
		}
		r.mu.Unlock()
	}
	cached := func() []int {
		r.mu.RLock()
		defer r.mu.RUnlock()
		var out []int
		for _, tid := range []int{100, 101, 102, 200, 300} {
			if _, ok := r.threads[tid]; ok {
				out = append(out, tid)
			}
		}
		return out
	}
	want := func(what string, tids ...int) {
		t.Helper()
		r.tasksChanged(pe.stale)
		pe.stale = nil
		if got := cached(); !slices.Equal(got, tids) {
			t.Fatalf("%s: cached %v, want %v", what, got, tids)
		}
	}
	fill()
	pe.take(r, event(procEventFork, 0, 10, 1, 1, 200, 200)) // a task given pid 200
	want("fork of a new task with a cached pid", 100, 101, 102, 300)
	pe.take(r, event(procEventExit, 0, 11, 101, 100, 0, 0)) // thread 101 of 100 exits
	want("exit of one thread", 100, 102, 300)
	pe.take(r, event(procEventExec, 1, 7, 100, 100)) // process 100 execs
	want("exec of a process", 300)
	fill()
	pe.take(r, event(procEventNone, ^uint32(0), 0)) // a subscription's answer: no sequence
	pe.take(r, event(procEventExit, 1, 8, 999, 999, 0, 0))
	want("events in sequence", 100, 101, 102, 200, 300)
	pe.take(r, event(procEventExit, 1, 10, 998, 998, 0, 0)) // 9 never came
	want("a gap in a CPU's sequence")
	if !pe.lost {
		t.Fatal("a gap was not reported as lost events")
	}
	// Once trusted, the first event of a CPU never heard from (brought
	// online since): what it sent before is unknown.
	fill()
	pe.trusted.Store(true)
	pe.take(r, event(procEventExit, 0, 12, 997, 997, 0, 0))
	want("the next event of a known CPU", 100, 101, 102, 200, 300)
	pe.take(r, event(procEventExit, 7, 3, 996, 996, 0, 0))
	want("the first event of a CPU brought online")
}

// Events the socket had no room for drop every cached thread: the kernel
// says so once (ENOBUFS), and drops the rest of the burst without a word.
func TestEventsOverrunDropsTheCache(t *testing.T) {
	r := followed(t)
	pe := r.pe.Load()
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleeper.Process.Kill(); sleeper.Wait() })
	pid := sleeper.Process.Pid
	cachedNow := func() bool {
		r.mu.RLock()
		defer r.mu.RUnlock()
		_, ok := r.threads[pid]
		return ok
	}
	// A resolution that read /proc while an event came in (any process
	// of the machine) is not cached: again until it is.
	for i := 0; i < 100 && !cachedNow(); i++ {
		if res := r.Resolve(pid); !res.Identified {
			t.Fatalf("resolve: %+v", res)
		}
	}
	if !cachedNow() {
		t.Fatal("not cached")
	}
	// Hold the intake while a burst of processes overflows a socket made
	// as small as the kernel allows.
	pe.mu.Lock()
	old, _ := unix.GetsockoptInt(pe.fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	unix.SetsockoptInt(pe.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 0)
	for i := 0; i < 40; i++ {
		exec.Command("true").Run()
	}
	unix.SetsockoptInt(pe.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, old)
	pe.mu.Unlock()
	pe.intake(r)
	if cachedNow() {
		t.Fatal("a thread cached before an overrun of the events socket is still answered from the cache")
	}
}
