package daemon

import (
	"runtime/debug"
	"testing"
)

// The daemon bounds its memory softly unless the environment names a
// limit of its own (GOMEMLIMIT, which the runtime reads at start).
func TestBoundMemory(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	t.Setenv("GOMEMLIMIT", "")
	debug.SetMemoryLimit(1 << 62)
	boundMemory()
	if got := debug.SetMemoryLimit(-1); got != memoryLimit {
		t.Fatalf("memory limit %d, want %d", got, memoryLimit)
	}
	t.Setenv("GOMEMLIMIT", "200MiB")
	debug.SetMemoryLimit(200 << 20)
	boundMemory()
	if got := debug.SetMemoryLimit(-1); got != 200<<20 {
		t.Fatalf("GOMEMLIMIT was overridden: %d", got)
	}
}
