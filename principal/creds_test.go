package principal

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/aerfs/aerfs/policy"
)

// credChild starts python3 running script, whose steps each print a line
// and wait for one on stdin; next(want) lets it take its next step and
// checks the line it prints.
func credChild(t *testing.T, script string) (pid int, next func(want string)) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("changes a process's user: needs root")
	}
	cmd := exec.Command("python3", "-c", script)
	in, _ := cmd.StdinPipe()
	outp, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	out := bufio.NewReader(outp)
	first := true
	next = func(want string) {
		t.Helper()
		if !first {
			in.Write([]byte("\n"))
		}
		first = false
		line, err := out.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != want {
			t.Fatalf("child said %q (%v), want %q", line, err, want)
		}
	}
	return cmd.Process.Pid, next
}

// A thread resolved as one user and then acting as another without an
// exec (setresuid, as a service dropping its privileges does) is resolved
// again from its /proc: neither the thread cache nor the process cache
// hands out the resolution of the user it was.
func TestResolutionFollowsACredentialChange(t *testing.T) {
	pid, next := credChild(t, `import os, sys
print("ready", flush=True)
sys.stdin.readline()
os.setgroups([]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
print("dropped", flush=True)
sys.stdin.readline()
`)
	next("ready")
	pol := policy.Default()
	r := NewRegistry(uint32(os.Getuid()), func() *policy.Policy { return pol }, nil)
	if res := r.ResolveAs(pid, 0); res.Proc.UID != 0 || res.Principal != policy.User {
		t.Fatalf("before the change: uid %d, %v", res.Proc.UID, res.Principal)
	}
	next("dropped")
	// The kernel now makes the thread's requests as uid 65534.
	res := r.ResolveAs(pid, 65534)
	if res.Proc.UID != 65534 || res.Principal == policy.User {
		t.Fatalf("after dropping to nobody the thread resolves as uid %d, %v (the owner's resolution was kept)", res.Proc.UID, res.Principal)
	}
	if res, _ := r.ResolveCaller(pid, 65534); res == nil || res.Proc.UID != 65534 {
		t.Fatalf("ResolveCaller after the change: %+v", res)
	}
}

// A thread that changes only its real uid keeps acting as the user it was
// for the kernel (its effective and filesystem uid): it is decided as that
// user whether its resolution was cached before the change or not, never
// as one or the other depending on the cache.
func TestRealUIDChangeDecidedAsTheUserTheRequestIsMadeAs(t *testing.T) {
	pid, next := credChild(t, `import os, sys
print("ready", flush=True)
sys.stdin.readline()
os.setresuid(1000, 0, 0)
print("changed", flush=True)
sys.stdin.readline()
`)
	next("ready")
	pol := policy.Default()
	warm := NewRegistry(uint32(os.Getuid()), func() *policy.Policy { return pol }, nil)
	warm.ResolveAs(pid, 0)
	next("changed")
	cold := NewRegistry(uint32(os.Getuid()), func() *policy.Policy { return pol }, nil)
	a, b := warm.ResolveAs(pid, 0), cold.ResolveAs(pid, 0)
	if a.Principal != b.Principal || a.Proc.UID != b.Proc.UID || b.Proc.UID != 0 {
		t.Fatalf("after a change of the real uid alone: cached %v (uid %d), fresh %v (uid %d); want both the owner's (uid 0)",
			a.Principal, a.Proc.UID, b.Principal, b.Proc.UID)
	}
}
