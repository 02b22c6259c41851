package principal

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/policy"
)

func TestReadProcSelfAndThread(t *testing.T) {
	p, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p.ID.Tgid != os.Getpid() || p.ID.Start == 0 || p.UID != uint32(os.Getuid()) || p.PPid != os.Getppid() {
		t.Fatalf("ReadProc(self) = %+v", p)
	}
	// A thread id resolves to its thread group with the same start time.
	done := make(chan Proc)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tp, err := ReadProc(unix.Gettid())
		if err != nil {
			t.Error(err)
		}
		done <- tp
	}()
	tp := <-done
	if tp.ID != p.ID {
		t.Fatalf("thread resolved to %v, process is %v", tp.ID, p.ID)
	}
}

func TestReadProcVanished(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadProc(cmd.Process.Pid); err != ErrVanished {
		t.Fatalf("ReadProc of an exited process: %v, want ErrVanished", err)
	}
	if _, err := ReadProc(0); err != ErrVanished {
		t.Fatalf("ReadProc(0): %v", err)
	}
}

type recordedEvents struct {
	mu       sync.Mutex
	tainted  []string
	unplaced []string
}

func (r *recordedEvents) SessionTainted(s *Session, added policy.Taint, why string, p Proc) {
	r.mu.Lock()
	r.tainted = append(r.tainted, s.ID+": "+why)
	r.mu.Unlock()
}
func (r *recordedEvents) SessionEnded(*Session) {}
func (r *recordedEvents) ImplicitUnplaced(s *Session, p Proc, err error) {
	r.mu.Lock()
	r.unplaced = append(r.unplaced, s.ID+": "+err.Error())
	r.mu.Unlock()
}

func newTestRegistry(t *testing.T) (*Registry, *recordedEvents) {
	pol := policy.Default()
	ev := &recordedEvents{}
	return NewRegistry(uint32(os.Getuid()), func() *policy.Policy { return pol }, ev), ev
}

// start runs a command that lives until the test ends.
func start(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func childPids(t *testing.T, pid int) []int {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

func waitChildren(t *testing.T, pid, n int) []int {
	t.Helper()
	for i := 0; i < 200; i++ {
		if c := childPids(t, pid); len(c) >= n {
			return c
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pid %d: children did not appear", pid)
	return nil
}

func TestOwnerOutsideSessionsIsUser(t *testing.T) {
	r, _ := newTestRegistry(t)
	res := r.Resolve(os.Getpid())
	s := res.Subject()
	if !s.Identified || s.Principal != policy.User || s.Session != "" || s.Taint != 0 {
		t.Fatalf("owner process: %+v", s)
	}
	if r.Resolve(0).Subject().Identified {
		t.Fatal("pid 0 identified")
	}
}

func TestRegisterSessionAndDescendants(t *testing.T) {
	r, _ := newTestRegistry(t)
	sh := start(t, "sh", "-c", "sleep 30 & wait")
	sess, peer, v, err := r.Register(sh.Process.Pid, policy.Web, "w1")
	if err != nil || sess == nil || !v.Allow {
		t.Fatalf("Register: %v %v %v", sess, v, err)
	}
	if peer.Proc.ID.Tgid != sh.Process.Pid {
		t.Fatalf("peer = %v", peer.Proc.ID)
	}
	kids := waitChildren(t, sh.Process.Pid, 1)
	s := r.Resolve(kids[0]).Subject()
	if s.Principal != policy.Web || s.Session != "w1" {
		t.Fatalf("descendant of a WEB session root: %+v", s)
	}
	if s.Taint&policy.WebDerived == 0 {
		t.Fatalf("WEB session not WEB_DERIVED: %v", s.Taint)
	}
	// The test process itself is untouched.
	if me := r.Resolve(os.Getpid()).Subject(); me.Session != "" || me.Principal != policy.User {
		t.Fatalf("registering a child changed the owner: %+v", me)
	}
}

func TestGrantOnlyLowers(t *testing.T) {
	r, _ := newTestRegistry(t)
	root := start(t, "sh", "-c", "sleep 30 & wait")
	if _, _, v, _ := r.Register(root.Process.Pid, policy.Web, "w"); !v.Allow {
		t.Fatal("owner could not start a WEB session")
	}
	kid := waitChildren(t, root.Process.Pid, 1)[0]
	// The WEB session's process asks for USER: refused.
	sess, _, v, _ := r.Register(kid, policy.User, "escape")
	if sess != nil || v.Allow {
		t.Fatalf("WEB process was granted USER: %v", v)
	}
	if v.Rule.ID() != "RG-grant" {
		t.Fatalf("rule %s", v.Rule.ID())
	}
	// Asking for WEB again (not higher) is fine, and the new session
	// inherits the old one's taint.
	sess, _, v, _ = r.Register(kid, policy.Web, "nested")
	if sess == nil || !v.Allow || sess.Taint()&policy.WebDerived == 0 {
		t.Fatalf("nested WEB session: %v %v", sess, v)
	}
}

func TestTaintedSessionCannotWashByNesting(t *testing.T) {
	r, _ := newTestRegistry(t)
	root := start(t, "sh", "-c", "sleep 30 & wait")
	s1, _, _, _ := r.Register(root.Process.Pid, policy.User, "u1")
	s1.AddTaint(policy.WebDerived)
	kid := waitChildren(t, root.Process.Pid, 1)[0]
	s2, _, v, _ := r.Register(kid, policy.User, "fresh")
	if s2 == nil || !v.Allow {
		t.Fatalf("nested USER session refused: %v", v)
	}
	if s2.Taint()&policy.WebDerived == 0 {
		t.Fatal("nested session lost its parent's taint")
	}
	// Taint that reaches the parent later reaches the child too.
	s1.AddTaint(policy.InjectionSuspect)
	if s2.Taint()&policy.InjectionSuspect == 0 {
		t.Fatal("nested session does not follow its parent's taint")
	}
}

func TestJoiningAnotherSessionRefused(t *testing.T) {
	r, _ := newTestRegistry(t)
	a := start(t, "sh", "-c", "sleep 30 & wait")
	b := start(t, "sh", "-c", "sleep 30 & wait")
	r.Register(a.Process.Pid, policy.User, "victim")
	r.Register(b.Process.Pid, policy.User, "other")
	kid := waitChildren(t, b.Process.Pid, 1)[0]
	if s, _, v, _ := r.Register(kid, policy.User, "victim"); s != nil || v.Allow {
		t.Fatal("a process of session other joined session victim")
	}
}

func TestVanishedCallerUnidentified(t *testing.T) {
	r, _ := newTestRegistry(t)
	cmd := exec.Command("true")
	cmd.Run()
	if s := r.Resolve(cmd.Process.Pid).Subject(); s.Identified {
		t.Fatalf("vanished process identified: %+v", s)
	}
}

// A program matching an executable rule (here a copy of sleep named curl)
// lowers the process and taints its session.
func TestExecRuleTaintsSession(t *testing.T) {
	r, ev := newTestRegistry(t)
	dir := t.TempDir()
	curl := filepath.Join(dir, "curl")
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Skip("no /bin/sleep")
	}
	if err := os.WriteFile(curl, b, 0o755); err != nil {
		t.Fatal(err)
	}
	root := start(t, "sh", "-c", curl+" 30 & wait")
	sess, _, _, _ := r.Register(root.Process.Pid, policy.User, "agent")
	kid := waitChildren(t, root.Process.Pid, 1)[0]
	for i := 0; i < 100; i++ { // the child may not have exec'd yet
		if exe, _ := os.Readlink("/proc/" + strconv.Itoa(kid) + "/exe"); exe == curl {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	s := r.Resolve(kid).Subject()
	if s.Principal != policy.Web {
		t.Fatalf("curl in a USER session: principal %v, want WEB", s.Principal)
	}
	if sess.Taint()&policy.WebDerived == 0 {
		t.Fatalf("session not tainted by curl: %v", sess.Taint())
	}
	if len(ev.tainted) == 0 {
		t.Fatal("taint not reported")
	}
	// The session root (sh) is still USER by principal, but tainted.
	rs := r.Resolve(root.Process.Pid).Subject()
	if rs.Principal != policy.User || rs.Taint&policy.WebDerived == 0 {
		t.Fatalf("session root: %+v", rs)
	}
}

// With the process-events connector, a child that double-forks and is
// re-parented to init stays in its session.
func TestDoubleForkStaysInSession(t *testing.T) {
	r, _ := newTestRegistry(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := FollowProcessEvents(ctx, r); err != nil {
		if os.Getenv("CI") == "true" && os.Geteuid() == 0 {
			t.Fatalf("process events unavailable as root in CI: %v", err)
		}
		t.Skipf("process events unavailable: %v", err)
	}
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	// The root waits for a go-ahead so that it is registered before it forks.
	gate := filepath.Join(dir, "go")
	script := "while [ ! -e " + gate + " ]; do sleep 0.01; done; setsid sh -c 'echo $$ > " + pidFile + "; exec sleep 30' & exit 0"
	root := start(t, "sh", "-c", script)
	if _, _, v, _ := r.Register(root.Process.Pid, policy.Web, "w"); !v.Allow {
		t.Fatal("register")
	}
	os.WriteFile(gate, nil, 0o644)
	root.Wait()
	var pid int
	for i := 0; i < 300 && pid == 0; i++ {
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(10 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatal("grandchild did not start")
	}
	defer unix.Kill(pid, unix.SIGKILL)
	time.Sleep(50 * time.Millisecond)
	p, err := ReadProc(pid)
	if err != nil {
		t.Fatal(err)
	}
	if p.PPid == root.Process.Pid {
		t.Fatalf("grandchild was not re-parented (ppid %d)", p.PPid)
	}
	if s := r.Resolve(pid).Subject(); s.Session != "w" || s.Principal != policy.Web {
		t.Fatalf("re-parented grandchild of a WEB session: %+v", s)
	}
}

func TestValidSessionID(t *testing.T) {
	for _, ok := range []string{"a", "agent-1", "s_2.x"} {
		if !ValidSessionID(ok) {
			t.Errorf("%q rejected", ok)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a b", strings.Repeat("x", 65), "ü"} {
		if ValidSessionID(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A cached thread is checked through its /proc directory: an exec in place
// is seen at the next request, and once the process is gone the cache
// answers nothing.
func TestCachedThreadFollowsExecAndExit(t *testing.T) {
	r, _ := newTestRegistry(t)
	cmd := exec.Command("sh", "-c", "read x; exec sleep 30")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	first := r.Resolve(pid)
	if !first.Identified || !strings.HasSuffix(first.Proc.Exe, "sh") {
		t.Fatalf("before exec: %+v", first.Proc)
	}
	r.mu.RLock()
	e := r.threads[pid]
	r.mu.RUnlock()
	if e.dir == nil {
		t.Fatal("no /proc directory kept for the cached thread")
	}
	if again := r.Resolve(pid); again != first {
		t.Fatal("a cached thread was resolved again")
	}
	in.Write([]byte("go\n"))
	for i := 0; i < 200; i++ {
		if exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); strings.HasSuffix(exe, "sleep") {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	after := r.Resolve(pid)
	if !strings.HasSuffix(after.Proc.Exe, "sleep") || after.Proc.ID != first.Proc.ID {
		t.Fatalf("after exec: %+v (before %+v)", after.Proc, first.Proc)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if gone := r.Resolve(pid); gone.Identified {
		t.Fatalf("a process that exited is still identified: %+v", gone.Proc)
	}
}
