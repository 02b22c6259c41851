package principal

import (
	"testing"
	"time"
)

// A read of /proc that blocks is given up after ProcWait, and while it is
// still blocked, the same process is not waited for again.
func TestWithinProcWaitGivesUpAndRemembers(t *testing.T) {
	release := make(chan struct{})
	start := time.Now()
	if WithinProcWait(-7, func() { <-release }) {
		t.Fatal("a blocked read counted as answered")
	}
	if d := time.Since(start); d < ProcWait {
		t.Fatalf("gave up after %v, before ProcWait", d)
	}
	ran := false
	start = time.Now()
	if WithinProcWait(-7, func() { ran = true }) || ran || time.Since(start) > ProcWait/2 {
		t.Fatal("a process whose earlier read is still blocked was read again")
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for !WithinProcWait(-7, func() {}) {
		if time.Now().After(deadline) {
			t.Fatal("the process stays stalled after its read returned")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
