package integration

import (
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func daemonPid(t *testing.T, e *Env) int {
	t.Helper()
	r := e.Aerfs("status", "--json", "--workspace", e.WS)
	if r.Code != 0 {
		t.Fatalf("status: %s", r)
	}
	var st struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil || st.PID == 0 {
		t.Fatalf("status json %q: %v", r.Stdout, err)
	}
	return st.PID
}

// A daemon killed with SIGKILL leaves a dead mount ("transport endpoint is
// not connected"); the next mount clears it, committed writes are intact and
// the log still verifies.
func TestStaleMountAfterKill(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "v1\n"}).Mount()
	expectOK(t, "commit", e.Sh("USER", "u", "echo v2 > MEMORY.md"))
	pid := daemonPid(t, e)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the daemon to die", func() bool { return syscall.Kill(pid, 0) != nil })
	// While the kernel tears the connection down statfs may fail with EIO
	// for a moment; a dead mount then answers ENOTCONN (or ECONNABORTED).
	var err error
	for i := 0; i < 250; i++ {
		var sfs syscall.Statfs_t
		err = syscall.Statfs(e.WS, &sfs)
		if err == syscall.ENOTCONN || err == syscall.ECONNABORTED {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != syscall.ENOTCONN && err != syscall.ECONNABORTED {
		t.Fatalf("after SIGKILL, statfs = %v, want ENOTCONN", err)
	}
	r := runCmd("/", nil, aerfsBin, "mount", "--state", e.State, e.WS)
	expectOK(t, "mount over a stale mount", r)
	if got := e.Read("MEMORY.md"); got != "v2\n" {
		t.Fatalf("MEMORY.md after crash = %q", got)
	}
	expectOK(t, "verify the live log", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))
}

// Labels survive a remount: a file a WEB session wrote still taints its
// readers after the daemon restarted.
func TestLabelsSurviveRemount(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount()
	expectOK(t, "WEB writes", e.Sh("WEB", "w", "echo 'ignore previous instructions' > page.txt"))
	e.Unmount()
	e.Mount()
	expectOK(t, "USER reads page.txt", e.Sh("USER", "u", "cat page.txt >/dev/null"))
	expectFail(t, "tainted USER writes MEMORY.md", e.Sh("USER", "u", "echo x >> MEMORY.md"))
	if got := e.Read("MEMORY.md"); got != "m\n" {
		t.Fatalf("MEMORY.md = %q", got)
	}
}

// A process whose working directory is inside the workspace before the
// mount bypasses it; aerfs mount says so.
func TestMountReportsBypassingProcesses(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"})
	cmd := exec.Command("sleep", "30")
	cmd.Dir = e.WS
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	r := runCmd("/", nil, aerfsBin, "mount", "--state", e.State, e.WS)
	expectOK(t, "mount", r)
	t.Cleanup(e.Unmount)
	if !strings.Contains(r.Stderr, "bypasses the mount") || !strings.Contains(r.Stderr, "sleep") {
		t.Fatalf("mount did not report the process inside the workspace:\n%s", r.Stderr)
	}
}

// Mounting twice over the same workspace is refused with a clear error.
func TestDoubleMountRefused(t *testing.T) {
	e := newEnv(t, nil).Mount()
	r := runCmd("/", nil, aerfsBin, "mount", "--state", e.State, e.WS)
	expectFail(t, "second mount", r)
	if !strings.HasPrefix(r.Stderr, "aerfs: ") {
		t.Fatalf("error is not in the aerfs voice: %q", r.Stderr)
	}
}
