package principal

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/sandbox"
)

func TestPlaceCgroup(t *testing.T) {
	own := &Cgroups{rel: "/aerfs/00112233aabbccdd"}
	for _, c := range []struct {
		abs   string
		own   *Cgroups
		place cgPlace
		move  bool
	}{
		{"/", own, cgOutside, true},
		{"/user.slice/user-1000.slice/session-2.scope", own, cgOutside, true},
		{"/aerfsx/y", own, cgOutside, true},
		{"/aerfs/00112233aabbccdd", own, cgOwn, true},
		{"/aerfs/00112233aabbccdd/s-1/s-2", own, cgOwn, true},
		{"/aerfs/ffeeddccbbaa9988/s-abc", own, cgForeign, false},
		{"/aerfs/ffeeddccbbaa9988/i-12-34", own, cgForeignImplicit, false},
		{"/aerfs/ffeeddccbbaa9988/i-12-34/s-5", own, cgForeign, false},
		{"/aerfs/ffeeddccbbaa9988", own, cgForeign, false},
		{"/aerfs", own, cgForeign, false},
		{"/aerfs/00112233aabbccdd/s-1", nil, cgForeign, false}, // ancestry mode: every aerfs cgroup is another mount's
	} {
		if p := placeCgroup(c.abs, c.own); p != c.place {
			t.Errorf("placeCgroup(%q) = %d, want %d", c.abs, p, c.place)
		}
		if m := movable(c.abs, c.own); m != c.move {
			t.Errorf("movable(%q) = %v, want %v", c.abs, m, c.move)
		}
	}
}

// Two mounts on one host: a process in a session of B is unidentified to
// A (never registered there nor moved out of B's cgroup); an owner process
// cached by A as the owner is resolved again once B has made it a session;
// an owner process in B's implicit session is still the owner to A, and A
// never moves it out of there.
func TestForeignCgroupsAcrossMounts(t *testing.T) {
	a, _ := cgroupRegistry(t)
	b, cgB := cgroupRegistry(t)

	web := start(t, "sleep", "30")
	reg, _, v, err := b.RegisterWith(web.Process.Pid, policy.Web, "web", false)
	if err != nil || reg == nil || !v.Allow {
		t.Fatalf("register in B: %+v %v %v", reg, v, err)
	}
	defer cgB.Set(reg.Cgroup, "cgroup.kill", "1")
	res := a.Resolve(web.Process.Pid)
	if res.Identified || !strings.Contains(res.Reason, "another aerfs mount's session") {
		t.Fatalf("B's WEB session resolved by A as %+v (%s)", res.Subject(), res.Reason)
	}
	if reg, _, v, _ := a.RegisterWith(web.Process.Pid, policy.User, "nested", false); reg != nil || v.Rule != policy.RuleUnidentified {
		t.Fatalf("A registered B's session: %+v %v", reg, v)
	}
	if abs, _ := cgroupOf(web.Process.Pid); abs != cgB.Root()+"/"+reg.Cgroup {
		t.Fatalf("B's session was moved to %s", abs)
	}

	// Cached by A as the owner, then made a session by B.
	owner := start(t, "sleep", "30")
	if s := a.Resolve(owner.Process.Pid).Subject(); !s.Identified || s.Principal != policy.User || s.Session != "" {
		t.Fatalf("owner process: %+v", s)
	}
	reg2, _, v, err := b.RegisterWith(owner.Process.Pid, policy.Web, "web2", false)
	if err != nil || reg2 == nil || !v.Allow {
		t.Fatalf("register in B: %+v %v %v", reg2, v, err)
	}
	defer cgB.Set(reg2.Cgroup, "cgroup.kill", "1")
	if res := a.Resolve(owner.Process.Pid); res.Identified {
		t.Fatalf("A still serves the owner's cached resolution after B made the process a WEB session: %+v", res.Subject())
	}

	// B's implicit session: the owner to A, and never moved by A.
	tainted := start(t, "sleep", "30")
	rb := b.Resolve(tainted.Process.Pid)
	rb.AddTaint(policy.WebDerived)
	abs, _ := cgroupOf(tainted.Process.Pid)
	if !strings.HasPrefix(abs, cgB.Root()+"/i-") {
		t.Fatalf("B made no implicit session: %s", abs)
	}
	ra := a.Resolve(tainted.Process.Pid)
	if s := ra.Subject(); !s.Identified || s.Principal != policy.User {
		t.Fatalf("an owner process in B's implicit session resolved by A as %+v (%s)", s, ra.Reason)
	}
	ra.AddTaint(policy.Untrusted)
	if now, _ := cgroupOf(tainted.Process.Pid); now != abs {
		t.Fatalf("A moved the process out of B's implicit session into %s", now)
	}
	if s := a.Resolve(tainted.Process.Pid).Subject(); s.Taint&policy.Untrusted == 0 {
		t.Fatalf("A lost the taint of the process it could not move: %+v", s)
	}
}

// A process in the mount namespace of a confined session (the state
// directory's cover says whose) is unidentified to every daemon that does
// not have it in a session, in ancestry mode too: the rootless fallback.
func TestSessionNamespaceMarker(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a mount namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	state := t.TempDir()
	marked := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		"mount -t tmpfs "+sandbox.SessionMarker+" "+state+" && exec sleep 30")
	if err := marked.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { marked.Process.Kill(); marked.Wait() }()
	var res *Resolved
	for i := 0; i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
		if _, ok, _ := sessionNamespace(marked.Process.Pid); ok {
			break
		}
	}
	for _, c := range []struct{ dir, want string }{
		{state, "a confined session of this mount"},
		{filepath.Join(state, "other"), "another aerfs mount"},
	} {
		r, _ := newTestRegistry(t) // ancestry mode
		r.SetStateDir(c.dir)
		res = r.Resolve(marked.Process.Pid)
		if res.Identified || !strings.Contains(res.Reason, c.want) {
			t.Errorf("state %s: a process in a session's namespace resolved as %+v (%q)", c.dir, res.Subject(), res.Reason)
		}
	}
	// A process in a namespace of its own without the mark is itself.
	plain := exec.Command("unshare", "-m", "sleep", "30")
	if err := plain.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { plain.Process.Kill(); plain.Wait() }()
	time.Sleep(100 * time.Millisecond)
	r, _ := newTestRegistry(t)
	r.SetStateDir(state)
	if s := r.Resolve(plain.Process.Pid).Subject(); !s.Identified {
		t.Errorf("a process in an unmarked namespace is unidentified")
	}
}

// The host lock is root's alone (mode 0000), and a daemon that cannot take
// it within HostLockWait gives the move up with a HostLockError naming the
// holder instead of waiting.
func TestHostLockBoundedAndRootOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the host lock is root's")
	}
	done, err := lockHost()
	if err != nil {
		t.Fatal(err)
	}
	done()
	fi, err := os.Stat(HostLock)
	if err != nil || fi.Mode().Perm() != 0 {
		t.Fatalf("%s: %v, mode %v", HostLock, err, fi.Mode())
	}
	f, err := os.Open(HostLock) // another open file: its flock conflicts
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	wait := HostLockWait
	HostLockWait = 50 * time.Millisecond
	defer func() { HostLockWait = wait }()
	t0 := time.Now()
	_, err = lockHost()
	var hl *HostLockError
	if !errors.As(err, &hl) || !strings.Contains(err.Error(), "held by pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("lockHost with the lock held elsewhere: %v", err)
	}
	if time.Since(t0) > 10*time.Second {
		t.Fatalf("lockHost waited %v", time.Since(t0))
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	done, err = lockHost()
	if err != nil {
		t.Fatalf("lockHost once free: %v", err)
	}
	done()
}
