package integration

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// aerfs status names what each session's confinement holds, in short
// (--verbose: the whole report, wrapped), not a line of 300 and more
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
	if strings.Count(st.Stdout, " confined: landlock abi ") != 2 || strings.Contains(st.Stdout, "CapEff") || strings.Contains(st.Stdout, e.State+",") {
		t.Errorf("status does not name each session's confinement in short:\n%s", st.Stdout)
	}
	v := e.mustAerfs("status", "--verbose", "--workspace", e.WS)
	if strings.Count(v.Stdout, "CapEff=0") != 2 {
		t.Errorf("status --verbose does not show each session's whole confinement report:\n%s", v.Stdout)
	}
	for _, l := range strings.Split(v.Stdout, "\n") {
		if strings.HasPrefix(l, "  ") && len(l) > 110 && strings.Contains(strings.TrimSpace(l), " ") {
			t.Errorf("status --verbose line of %d characters: %s", len(l), l)
		}
	}
}
