package principal

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/policy"
)

// cgroupRegistry is a test registry in cgroup mode, or skips the test
// where cgroup v2 cannot be written (not root).
func cgroupRegistry(t *testing.T) (*Registry, *Cgroups) {
	t.Helper()
	cg, err := NewCgroups(t.TempDir())
	if err != nil {
		t.Skipf("cgroup mode unavailable: %v", err)
	}
	t.Cleanup(func() {
		// cgroup.kill is asynchronous: wait for the cgroups to empty.
		for i := 0; i < 200; i++ {
			cg.RemoveEmpty()
			if _, err := os.Stat(cg.dir("")); os.IsNotExist(err) {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Errorf("cgroups left behind under %s", cg.dir(""))
	})
	r, _ := newTestRegistry(t)
	r.UseCgroups(cg, nil)
	return r, cg
}

// A grandchild whose parent exits at once is in the session: the kernel
// put it there at fork.
func TestCgroupMembershipInheritedAtFork(t *testing.T) {
	r, cg := cgroupRegistry(t)
	if r.Tracking() != "cgroup" {
		t.Fatalf("tracking %q", r.Tracking())
	}
	cmd := exec.Command("sh", "-c", "read x; (sleep 30 &); sleep 30")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	reg, _, v, err := r.RegisterWith(cmd.Process.Pid, policy.Web, "cg1", false)
	if err != nil || reg == nil || !v.Allow || reg.Cgroup == "" {
		t.Fatalf("register: %+v %v %v", reg, v, err)
	}
	defer cg.Set(reg.Cgroup, "cgroup.kill", "1")
	in.Write([]byte("go\n"))
	var others []int
	for i := 0; i < 200 && len(others) < 2; i++ {
		time.Sleep(10 * time.Millisecond)
		b, _ := os.ReadFile(cg.dir(reg.Cgroup) + "/cgroup.procs")
		others = others[:0]
		for _, f := range strings.Fields(string(b)) {
			if pid, _ := strconv.Atoi(f); pid != cmd.Process.Pid {
				others = append(others, pid)
			}
		}
	}
	if len(others) < 2 {
		t.Fatalf("children in the session's cgroup: %v", others)
	}
	for _, pid := range others {
		if s := r.Resolve(pid).Subject(); s.Session != "cg1" || s.Principal != policy.Web {
			t.Fatalf("pid %d resolved as %+v", pid, s)
		}
	}
	if me := r.Resolve(os.Getpid()).Subject(); me.Session != "" || me.Principal != policy.User {
		t.Fatalf("the test process: %+v", me)
	}
}

// An id known from an earlier mount is rejoined only by the owner with
// resume, never by another session.
func TestRestoredSessionIDBoundToRegistration(t *testing.T) {
	r, _ := newTestRegistry(t)
	r.Restore("agent", policy.User, "", "", 0, time.Now())
	owner := start(t, "sleep", "30")
	if reg, _, v, _ := r.RegisterWith(owner.Process.Pid, policy.Web, "agent", false); reg != nil || v.Rule != policy.RuleSession {
		t.Fatalf("registering a restored id without resume: %+v %v", reg, v)
	}
	web := start(t, "sh", "-c", "sleep 30 & wait")
	if _, _, v, _ := r.Register(web.Process.Pid, policy.Web, "w"); !v.Allow {
		t.Fatal("WEB session refused")
	}
	kid := waitChildren(t, web.Process.Pid, 1)[0]
	if reg, _, v, _ := r.RegisterWith(kid, policy.Web, "agent", true); reg != nil || v.Rule != policy.RuleSession {
		t.Fatalf("a WEB session resumed the owner's id: %+v %v", reg, v)
	}
	if reg, _, v, _ := r.RegisterWith(owner.Process.Pid, policy.User, "agent", true); reg == nil || !v.Allow {
		t.Fatalf("the owner's resume refused: %v", v)
	}
}

// Sub-sessions count towards the session they were started from.
func TestTreeRoot(t *testing.T) {
	a := &Session{ID: "a"}
	b := &Session{ID: "b", parent: a}
	c := &Session{ID: "c", parent: b}
	i := &Session{ID: "i", Implicit: true}
	d := &Session{ID: "d", parent: i}
	if c.TreeRoot() != a || a.TreeRoot() != a || d.TreeRoot() != d {
		t.Fatal("tree roots")
	}
	a.Quarantine()
	if !c.Quarantined() {
		t.Fatal("quarantine does not cover the tree")
	}
}

// A process outside sessions that is tainted gets an implicit session:
// its children forked afterwards carry the taint.
func TestImplicitSessionTaintsLaterChildren(t *testing.T) {
	r, cg := cgroupRegistry(t)
	cmd := exec.Command("sh", "-c", "read x; sleep 30 & wait")
	in, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	res := r.Resolve(cmd.Process.Pid)
	if !res.AddTaint(policy.WebDerived) {
		t.Fatal("taint did not grow")
	}
	rel := "i-" + strconv.Itoa(res.Proc.ID.Tgid) + "-" + strconv.FormatUint(res.Proc.ID.Start, 10)
	defer cg.Set(rel, "cgroup.kill", "1")
	in.Write([]byte("go\n"))
	kid := waitChildren(t, cmd.Process.Pid, 1)[0]
	s := r.Resolve(kid).Subject()
	if s.Taint&policy.WebDerived == 0 || s.Session != "" || s.Principal != policy.User {
		t.Fatalf("child of a tainted process: %+v", s)
	}
}

// An implicit session holds what the process starts after its taint, not
// the children it had before: in cgroup mode and in ancestry mode alike.
func TestImplicitSessionSparesEarlierChildren(t *testing.T) {
	for _, mode := range []string{"cgroup", "ancestry"} {
		t.Run(mode, func(t *testing.T) {
			r, _ := newTestRegistry(t)
			if mode == "cgroup" {
				var cg *Cgroups
				r, cg = cgroupRegistry(t)
				defer cg.RemoveEmpty()
			}
			cmd := exec.Command("sh", "-c", "sleep 30 & read x; sleep 30 & wait")
			in, _ := cmd.StdinPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			early := waitChildren(t, cmd.Process.Pid, 1)[0]
			time.Sleep(50 * time.Millisecond) // past the start times' 10 ms ticks
			res := r.Resolve(cmd.Process.Pid)
			if !res.AddTaint(policy.WebDerived) {
				t.Fatal("taint did not grow")
			}
			in.Write([]byte("go\n"))
			kids := waitChildren(t, cmd.Process.Pid, 2)
			defer func() {
				for _, k := range kids {
					syscall.Kill(k, syscall.SIGKILL)
				}
			}()
			for _, k := range kids {
				s := r.Resolve(k).Subject()
				if tainted := s.Taint&policy.WebDerived != 0; tainted != (k != early) {
					t.Errorf("child %d (started before the taint: %v): %+v", k, k == early, s)
				}
			}
		})
	}
}

// A tainted process that leaves its implicit session's cgroup (root may)
// is still tainted, and so is what it starts afterwards.
func TestImplicitTaintFollowsProcessOutOfItsCgroup(t *testing.T) {
	r, cg := cgroupRegistry(t)
	cmd := exec.Command("sh", "-c", "read x; sleep 30 & wait")
	in, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	was, _ := cgroupOf(pid)
	res := r.Resolve(pid)
	res.AddTaint(policy.WebDerived)
	rel := "i-" + strconv.Itoa(res.Proc.ID.Tgid) + "-" + strconv.FormatUint(res.Proc.ID.Start, 10)
	defer cg.Set(rel, "cgroup.kill", "1")
	if now, _ := cgroupOf(pid); now != cg.Root()+"/"+rel {
		t.Fatalf("not moved into its implicit session: %s", now)
	}
	if err := cg.MoveTo(pid, was); err != nil {
		t.Fatal(err)
	}
	if s := r.Resolve(pid).Subject(); s.Taint&policy.WebDerived == 0 {
		t.Fatalf("the process that left its cgroup: %+v", s)
	}
	in.Write([]byte("go\n"))
	kid := waitChildren(t, pid, 1)[0]
	defer syscall.Kill(kid, syscall.SIGKILL)
	if s := r.Resolve(kid).Subject(); s.Taint&policy.WebDerived == 0 {
		t.Errorf("a child started after the process left its cgroup: %+v", s)
	}
}

// An implicit session whose processes have all exited is removed.
func TestImplicitSessionPruned(t *testing.T) {
	r, cg := cgroupRegistry(t)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	res := r.Resolve(cmd.Process.Pid)
	res.AddTaint(policy.WebDerived)
	rel := "i-" + strconv.Itoa(res.Proc.ID.Tgid) + "-" + strconv.FormatUint(res.Proc.ID.Start, 10)
	if _, err := os.Stat(cg.dir(rel)); err != nil {
		t.Fatalf("no implicit cgroup: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	r.Prune()
	if _, err := os.Stat(cg.dir(rel)); !os.IsNotExist(err) {
		t.Fatalf("implicit cgroup left after its process exited: %v", err)
	}
	r.mu.RLock()
	_, known := r.byCg[rel]
	r.mu.RUnlock()
	if known {
		t.Fatal("implicit session still known")
	}
}

// Without cgroups, a fork event carries a tainted process's taint to its
// child (the weaker fallback of implicit sessions).
func TestAncestryForkCarriesTaint(t *testing.T) {
	r, _ := newTestRegistry(t)
	cmd := exec.Command("sh", "-c", "read x; sleep 30 & wait")
	in, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	r.Resolve(cmd.Process.Pid).AddTaint(policy.WebDerived)
	in.Write([]byte("go\n"))
	kid := waitChildren(t, cmd.Process.Pid, 1)[0]
	r.forkAt(cmd.Process.Pid, kid, 0)
	if s := r.Resolve(kid).Subject(); s.Taint&policy.WebDerived == 0 {
		t.Fatalf("child of a tainted process: %+v", s)
	}
}

// Joining a session never washes the joining process's taint.
func TestJoiningCarriesTaint(t *testing.T) {
	r, _ := newTestRegistry(t)
	a := start(t, "sleep", "30")
	b := start(t, "sleep", "30")
	s, _, v, _ := r.Register(a.Process.Pid, policy.User, "j")
	if s == nil || !v.Allow {
		t.Fatalf("register: %v", v)
	}
	r.Resolve(b.Process.Pid).AddTaint(policy.WebDerived)
	if s2, _, v, _ := r.Register(b.Process.Pid, policy.User, "j"); s2 != s || !v.Allow {
		t.Fatalf("the owner rejoining its session: %v", v)
	}
	if s.Taint()&policy.WebDerived == 0 {
		t.Fatal("a tainted process joined a session and the session stayed clean")
	}
}

// Freeze and Kill reach every process of a session, nested sessions too.
func TestFreezeAndKillSession(t *testing.T) {
	r, _ := cgroupRegistry(t)
	root := start(t, "sh", "-c", "read x; sleep 30 & wait")
	s, _, v, _ := r.Register(root.Process.Pid, policy.Web, "fk")
	if s == nil || !v.Allow {
		t.Fatalf("register: %v", v)
	}
	defer r.Kill(s)
	if err := r.Freeze(s, true); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(root.Process.Pid) + "/status")
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "State:") {
				return l
			}
		}
		return ""
	}
	frozen := false
	for i := 0; i < 100 && !frozen; i++ {
		abs, _ := cgroupOf(root.Process.Pid)
		rel, _ := r.cg.Within(abs)
		ev, _ := os.ReadFile(r.cg.dir(rel) + "/cgroup.events")
		frozen = strings.Contains(string(ev), "frozen 1")
		time.Sleep(10 * time.Millisecond)
	}
	if !frozen {
		t.Fatalf("session not frozen: %s", state())
	}
	if err := r.Freeze(s, false); err != nil {
		t.Fatal(err)
	}
	if err := r.Kill(s); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- root.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the session's process survived cgroup.kill")
	}
}

// A fork event read after its child exited (a subshell that forked and
// exited at once, on a loaded machine) still carries the taint on: the
// child's own fork events, which follow it, make its children members. Its
// exit event ends that: a later process given the same pid is not a
// member.
func TestForkEventOfAChildAlreadyGone(t *testing.T) {
	r, _ := newTestRegistry(t)
	parent := start(t, "sleep", "30")
	r.Resolve(parent.Process.Pid).AddTaint(policy.WebDerived)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	sub := gone.Process.Pid // exited and reaped: its /proc entry is gone
	r.forkAt(parent.Process.Pid, sub, 0)
	grandchild := start(t, "sleep", "30")
	r.forkAt(sub, grandchild.Process.Pid, 0)
	if s := r.Resolve(grandchild.Process.Pid).Subject(); s.Taint&policy.WebDerived == 0 {
		t.Fatalf("the child of a tainted process's short-lived child: %+v", s)
	}
	r.exited(sub)
	later := start(t, "sleep", "30")
	r.forkAt(sub, later.Process.Pid, 0)
	if s := r.Resolve(later.Process.Pid).Subject(); s.Taint != 0 {
		t.Fatalf("a fork event naming an exited pid as parent made a member: %+v", s)
	}
}

// A fork event read after its child exited and its pid went to another
// process (a loaded daemon reads events late, and pids wrap) does not make
// that process the child: it started after the event was sent.
func TestForkEventReadLateDoesNotAdoptThePidsNextProcess(t *testing.T) {
	r, _ := newTestRegistry(t)
	parent := start(t, "sleep", "30")
	r.Resolve(parent.Process.Pid).AddTaint(policy.WebDerived)
	monoNow := func() uint64 {
		var ts unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
		return uint64(ts.Nano())
	}
	sent := monoNow()
	time.Sleep(50 * time.Millisecond) // a few ticks
	other := start(t, "sleep", "30")  // the pid's next process, started after the event
	r.forkAt(parent.Process.Pid, other.Process.Pid, sent)
	if s := r.Resolve(other.Process.Pid).Subject(); s.Taint&policy.WebDerived != 0 {
		t.Fatalf("a process started after the fork event was taken for the tainted parent's child: %+v", s)
	}
	// A process that started before the event is the child: it carries
	// the taint.
	kid := start(t, "sleep", "30")
	r.forkAt(parent.Process.Pid, kid.Process.Pid, monoNow())
	if s := r.Resolve(kid.Process.Pid).Subject(); s.Taint&policy.WebDerived == 0 {
		t.Fatalf("the tainted parent's child: %+v", s)
	}
}
