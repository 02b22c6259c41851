package integration

// aerfs unmount with other workspaces' sessions alive: each confined
// session has its own mount namespace, made while this workspace was
// mounted, holding a copy of its mount that the host's unmount does not
// reach (/ is private here, and a copy in a less privileged namespace is
// locked: it never follows the host). The daemon still leaves, in bounded
// time, whatever else writes to the backing file system.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// daemonPID is the pid of the daemon serving e.
func (e *Env) daemonPID(t *testing.T) int {
	t.Helper()
	r := e.Aerfs("status", "--json")
	var st struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil || st.PID == 0 {
		t.Fatalf("status --json: %v\n%s", err, r)
	}
	return st.PID
}

// startSessions starts n confined sessions of e that live until the test
// ends, and waits until each is registered.
func (e *Env) startSessions(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		cmd := exec.Command(aerfsBin, "run", "--workspace", e.WS, "--principal", "WEB", "--session", "bg"+strconv.Itoa(i), "--", "sleep", "120")
		cmd.Dir = e.WS
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	}
	for i := 0; i < 200; i++ {
		if strings.Count(e.Aerfs("status", "--verbose").Stdout, "kernel: no_new_privs") >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the %d sessions did not start:\n%s", n, e.Aerfs("status", "--verbose").Stdout)
}

// processGone reports whether pid has exited (a zombie not yet reaped by
// init has).
func processGone(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return err != nil || (i > 0 && i+2 < len(s) && s[i+2] == 'Z')
}

// expectLeft checks that e's daemon pid has exited after aerfs unmount
// returned, its unmount recorded as clean (the last record of the log).
func (e *Env) expectLeft(t *testing.T, pid int) {
	t.Helper()
	for i := 0; i < 40 && !processGone(pid); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if !processGone(pid) {
		t.Fatalf("the daemon (pid %d) still runs after aerfs unmount returned", pid)
	}
	last := e.Log()
	if n := len(last); n == 0 || last[n-1].Record.Type != "unmount" {
		t.Errorf("the unmount is not recorded as clean (the last record of the log)")
	}
}

// unmountTimed runs aerfs unmount and says how long it took.
func unmountTimed(e *Env) (Result, time.Duration) {
	start := time.Now()
	r := runCmd("/", nil, aerfsBin, "unmount", e.WS)
	return r, time.Since(start)
}

// Ten confined sessions of workspace B hold copies of A's mount in their
// namespaces: aerfs unmount of A returns within 5 s, A's daemon exits,
// and A mounts again at once. B and its sessions are untouched.
func TestUnmountWithOtherWorkspacesSessions(t *testing.T) {
	envs := mountAll(t, 2)
	a, b := envs[0], envs[1]
	expectOK(t, "owner's line in A", a.Owner(`echo "- before unmount" >> MEMORY.md`))
	pid := a.daemonPID(t)
	b.startSessions(t, 10)
	r, took := unmountTimed(a)
	expectOK(t, "aerfs unmount A", r)
	if took > 5*time.Second {
		t.Errorf("aerfs unmount took %s with ten sessions of B alive", took)
	}
	a.expectLeft(t, pid)
	a.Mount()
	if !strings.Contains(a.Read("MEMORY.md"), "- before unmount") {
		t.Errorf("A's memory lost its line")
	}
	if got := strings.Count(b.Aerfs("status", "--verbose").Stdout, "kernel: no_new_privs"); got != 10 {
		t.Errorf("B's sessions after A's unmount: %d alive", got)
	}
	expectOK(t, "B still works", b.Owner(`echo "- B" >> MEMORY.md`))
}

// The same while another process writes to the backing file system
// (AERFS_BUSY_WRITE_MB, 2048 for make test-unmount-busy; skipped when
// unset, too slow for make test): aerfs unmount flushes what aerfs wrote,
// not the whole file system, and returns within 5 s.
func TestUnmountWhileBackingBusy(t *testing.T) {
	mb, _ := strconv.Atoi(os.Getenv("AERFS_BUSY_WRITE_MB"))
	if mb <= 0 {
		t.Skip("set AERFS_BUSY_WRITE_MB (make test-unmount-busy writes 2048)")
	}
	envs := mountAll(t, 2)
	a, b := envs[0], envs[1]
	b.startSessions(t, 10)
	expectOK(t, "owner's line in A", a.Owner(`echo "- before unmount" >> MEMORY.md`))
	pid := a.daemonPID(t)
	big := filepath.Join(filepath.Dir(a.WS), "busy.bin")
	dd := exec.Command("dd", "if=/dev/zero", "of="+big, "bs=1M", "count="+strconv.Itoa(mb))
	if err := dd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dd.Process.Kill(); dd.Wait(); os.Remove(big) })
	// Unmount while the writer is well under way.
	for i := 0; i < 600; i++ {
		if fi, err := os.Stat(big); err == nil && fi.Size() >= int64(mb)<<19 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	r, took := unmountTimed(a)
	expectOK(t, "aerfs unmount A", r)
	t.Logf("aerfs unmount took %s while %d MB were being written", took, mb)
	if took > 5*time.Second {
		t.Errorf("aerfs unmount took %s while the backing file system was busy", took)
	}
	a.expectLeft(t, pid)
	dd.Wait()
	a.Mount()
	if !strings.Contains(a.Read("MEMORY.md"), "- before unmount") {
		t.Errorf("A's memory lost its line")
	}
}
