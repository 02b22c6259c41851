package tracking

import (
	"os/exec"
	"testing"
	"time"
)

// A writer on its way out is not an unidentified writer: a zombie (and a
// process with PF_EXITING) counts as exited, and its last resolutions
// decide what it wrote.
func TestExitingWriterCountsAsExited(t *testing.T) {
	if exiting(1) {
		t.Fatal("init is not exiting")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for !exiting(cmd.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("an exited, unreaped child is not seen as exiting")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, c := range []struct {
		stat string
		want bool
	}{
		{"12 (sh) S 1 12 12 0 -1 4194304 90 0 0 0", false},
		{"12 (a) b) Z 1 12 12 0 -1 4194304 90 0 0 0", true},
		{"12 (sh) R 1 12 12 0 -1 4194308 90 0 0 0", true}, // PF_EXITING
		{"12 (sh) X 1 12 12 0 -1 0 0 0 0 0", true},
		{"garbage", false},
	} {
		if got := exitingStat([]byte(c.stat)); got != c.want {
			t.Errorf("exitingStat(%q) = %v, want %v", c.stat, got, c.want)
		}
	}
}
