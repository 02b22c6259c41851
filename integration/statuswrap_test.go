package integration

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// aerfs status shows a session's confinement wrapped, once for sessions
// that got the same one (--verbose: for each), not a line of 300 and more
// characters per session. (Session lines are checked: the header names
// the test's long temporary paths.)
func TestStatusWrapsConfinement(t *testing.T) {
	e := newEnv(t, nil).Mount()
	for _, id := range []string{"first", "second"} {
		c := exec.Command(aerfsBin, "run", "--principal", "USER", "--session", id, "--", "sleep", "30")
		c.Dir = e.WS
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Signal(syscall.SIGTERM); c.Wait() })
	}
	var st Result
	for i := 0; i < 50; i++ {
		st = e.mustAerfs("status", "--workspace", e.WS)
		if strings.Count(st.Stdout, " confined: ") == 2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, l := range strings.Split(st.Stdout, "\n") {
		// (A single path longer than a line stays whole.)
		if strings.HasPrefix(l, "  ") && len(l) > 110 && strings.Contains(strings.TrimSpace(l), " ") {
			t.Errorf("status line of %d characters: %s", len(l), l)
		}
	}
	if strings.Count(st.Stdout, " confined: landlock") != 1 || strings.Count(st.Stdout, " confined: as session ") != 1 {
		t.Errorf("the second session's same confinement is not said once:\n%s", st.Stdout)
	}
	v := e.mustAerfs("status", "--verbose", "--workspace", e.WS)
	if strings.Count(v.Stdout, " confined: landlock") != 2 {
		t.Errorf("status --verbose does not show each session's confinement:\n%s", v.Stdout)
	}
}
