package integration

import (
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A daemon that stops answering its control socket (stopped, stuck on
// its backing disk) must not hold up the mount of another workspace.
// aerfs mount asked every daemon on the host for its status, each for up
// to 60 s, only to learn whether its own state directory was mounted
// elsewhere: one stuck daemon made every later mount on the host take a
// minute more.
func TestMountDoesNotWaitForAnotherWorkspacesDaemon(t *testing.T) {
	a := newEnv(t, map[string]string{"MEMORY.md": "m\n"})
	r := runCmd("/", nil, aerfsBin, "mount", "--state", a.State, a.WS)
	if r.Code != 0 {
		t.Fatalf("mount: %s", r)
	}
	t.Cleanup(a.Unmount)
	m := regexp.MustCompile(`daemon pid (\d+)`).FindStringSubmatch(r.Stderr)
	if m == nil {
		t.Fatalf("no daemon pid in the mount's output: %s", r)
	}
	pid, _ := strconv.Atoi(m[1])
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	defer resume()

	b := newEnv(t, map[string]string{"MEMORY.md": "m\n"})
	cmd := exec.Command(aerfsBin, "mount", "--state", b.State, b.WS)
	cmd.Dir = "/"
	done := make(chan error, 1)
	var out []byte
	go func() {
		var err error
		out, err = cmd.CombinedOutput()
		done <- err
	}()
	// The control client's deadline is 60 s: a mount that asks the
	// stopped daemon is still waiting at 30 s.
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		resume()
		err = <-done
		t.Errorf("aerfs mount of another workspace waited for the stopped daemon of %s", a.WS)
	}
	t.Cleanup(b.Unmount)
	if err != nil {
		t.Fatalf("mount of the second workspace: %v\n%s", err, out)
	}
	resume()
	expectOK(t, "the second workspace serves", b.Owner("cat MEMORY.md"))
}
