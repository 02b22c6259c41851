package integration

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// aerfs watch prints one line per decision as it is recorded, from the
// moment it starts; --refused keeps only refusals.
func TestWatchShowsDecisionsLive(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount()
	expectOK(t, "an owner write before watch starts", e.Owner("echo before >> MEMORY.md"))
	start := func(args ...string) (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(aerfsBin, append([]string{"watch", "--workspace", e.WS}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd, &out
	}
	all, allOut := start()
	refused, refOut := start("--refused")
	time.Sleep(700 * time.Millisecond) // both have read the log's end
	expectOK(t, "owner write", e.Owner("echo '- live' >> MEMORY.md"))
	expectFail(t, "WEB write", e.Sh("WEB", "w", "echo evil >> MEMORY.md"))
	time.Sleep(1500 * time.Millisecond)
	all.Process.Kill()
	refused.Process.Kill()
	all.Wait()
	refused.Wait()

	lines := strings.Split(strings.TrimSpace(allOut.String()), "\n")
	var allow, deny int
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 7 {
			t.Fatalf("a watch line has fewer than 7 columns: %q", l)
		}
		switch f[1] {
		case "ALLOW":
			allow++
		case "DENY":
			deny++
			if f[3] != "WEB" || f[4] != "w" || f[6] != "MEMORY.md" || !strings.Contains(l, "—") {
				t.Errorf("refusal line: %q", l)
			}
		}
	}
	if allow == 0 || deny == 0 {
		t.Fatalf("want the owner's allowed write and the WEB refusal, got:\n%s", allOut.String())
	}
	if strings.Contains(allOut.String(), "\033[") {
		t.Errorf("colour codes written into a pipe")
	}
	for _, l := range strings.Split(strings.TrimSpace(refOut.String()), "\n") {
		if !strings.Contains(l, " DENY ") {
			t.Errorf("--refused printed a line that is not a refusal: %q", l)
		}
	}
	if refOut.Len() == 0 {
		t.Errorf("--refused printed nothing")
	}
}
