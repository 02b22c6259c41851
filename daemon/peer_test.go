package daemon

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listen returns a listener's path and a function accepting one
// connection from it.
func listen(t *testing.T) (string, func() *net.UnixConn) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return path, func() *net.UnixConn {
		ln.SetDeadline(time.Now().Add(10 * time.Second))
		c, err := ln.AcceptUnix()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

func testPeerBinding(t *testing.T, pidfd bool) {
	usePeerPidfd = pidfd
	defer func() { usePeerPidfd = true }()
	var logged []string
	logf := func(m string) { logged = append(logged, m) }

	// This process connects: bound to itself, and it stays valid.
	path, accept := listen(t)
	keep, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	p, err := bindPeer(accept(), logf)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	if p.pid != os.Getpid() || p.start == 0 || (p.pidfd >= 0) != pidfd {
		t.Fatalf("bound to %+v", p)
	}
	if err := p.check(); err != nil {
		t.Fatalf("a live connector: %v", err)
	}

	// A child connects and exits: the binding fails its check.
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	cmd := exec.Command(py, "-c", "import socket,sys,time; c=socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); time.sleep(1)", path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	q, err := bindPeer(accept(), logf)
	if err != nil {
		t.Fatal(err)
	}
	defer q.close()
	if err := q.check(); err != nil {
		t.Fatalf("the child before it exits: %v", err)
	}
	cmd.Wait()
	if err := q.check(); err != errPeerGone {
		t.Fatalf("the child after it exited: %v", err)
	}
	if !pidfd && (len(logged) != 1 || !strings.Contains(logged[0], "SO_PEERPIDFD unavailable")) {
		t.Fatalf("the fallback was not logged: %q", logged)
	}
}

func TestPeerBindingPidfd(t *testing.T)    { testPeerBinding(t, true) }
func TestPeerBindingFallback(t *testing.T) { testPeerBinding(t, false) }

func TestConnLimits(t *testing.T) {
	l := &connLimits{perKey: 2, perUID: 3, total: 4, byUID: map[uint32]int{}, byKey: map[any]int{}}
	var rel []func()
	take := func(uid uint32, key any) string {
		r, over := l.acquire(uid, key, "k")
		if r != nil {
			rel = append(rel, r)
		}
		return over
	}
	if take(1, "a") != "" || take(1, "a") != "" {
		t.Fatal("under the key limit")
	}
	if over := take(1, "a"); !strings.Contains(over, "from k") {
		t.Fatalf("over the key limit: %q", over)
	}
	if take(1, "b") != "" {
		t.Fatal("another key")
	}
	if over := take(1, "c"); !strings.Contains(over, "uid 1") {
		t.Fatalf("over the uid limit: %q", over)
	}
	if take(2, "d") != "" {
		t.Fatal("another uid")
	}
	if over := take(3, "e"); !strings.Contains(over, "limit 4") {
		t.Fatalf("over the total: %q", over)
	}
	for _, r := range rel {
		r()
		r() // twice is once
	}
	if l.n != 0 || len(l.byUID) != 0 || len(l.byKey) != 0 {
		t.Fatalf("after release: %d %v %v", l.n, l.byUID, l.byKey)
	}
}
