package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A snapshot of 50 guarded files makes a record past 4 KiB: the live log
// and an exported bundle still verify. verify on a FIFO answers at once.
func TestVerifyLargeSnapshotAndFIFO(t *testing.T) {
	files := map[string]string{"MEMORY.md": "m\n"}
	for i := 0; i < 50; i++ {
		files[fmt.Sprintf("memory/note-%03d-with-a-longer-name.md", i)] = fmt.Sprintf("note %d\n", i)
	}
	e := newEnv(t, files).Mount()
	expectOK(t, "snapshot", e.Aerfs("snapshot", "--workspace", e.WS, "--label", "fifty"))
	e.Unmount()
	r := e.Aerfs("verify", "--state", e.State)
	if r.Code != 0 || strings.Contains(r.Stderr, "panic") {
		t.Fatalf("verify --state with a large snapshot record: %s", r)
	}
	out := filepath.Join(t.TempDir(), "b.zip")
	expectOK(t, "export", e.Aerfs("export", "--state", e.State, "-o", out))
	key := e.Aerfs("key", "--state", e.State)
	expectOK(t, "verify the bundle", e.Aerfs("verify", "--key", strings.TrimSpace(key.Stdout), out))

	fifo := filepath.Join(t.TempDir(), "evidence.zip")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r = e.Aerfs("verify", "--key", strings.TrimSpace(key.Stdout), fifo)
	if r.Code != 13 || !strings.Contains(r.Stderr, "not a regular file or a directory") || time.Since(start) > 5*time.Second {
		t.Fatalf("verify of a FIFO: want exit 13 at once naming the problem, got %s after %v", r, time.Since(start))
	}
}
