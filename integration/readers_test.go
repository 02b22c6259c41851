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

// verify without --key checks a bundle's integrity but says plainly that
// its origin is not verified and exits 14; with the workspace's key it
// exits 0; with another workspace's key it fails the signature (12).
func TestVerifyWithoutKeySaysOriginUnverified(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount()
	expectOK(t, "owner write", e.Owner("echo more >> MEMORY.md"))
	out := filepath.Join(t.TempDir(), "b.zip")
	expectOK(t, "export", e.Aerfs("export", "--workspace", e.WS, "-o", out))
	r := e.Aerfs("verify", out)
	if r.Code != 14 || !strings.Contains(r.Stdout, "ORIGIN NOT VERIFIED") || !strings.Contains(r.Stderr, "hint: pass the key you trust: aerfs verify --key") {
		t.Fatalf("verify without --key: %s", r)
	}
	key := strings.TrimSpace(e.Aerfs("key", "--workspace", e.WS).Stdout)
	expectOK(t, "verify with the key", e.Aerfs("verify", "--key", key, out))
	other := newEnv(t, nil)
	otherKey := strings.TrimSpace(other.Aerfs("key", "--state", other.State).Stdout)
	if r := e.Aerfs("verify", "--key", otherKey, out); r.Code != 12 {
		t.Fatalf("verify with another workspace's key: %s", r)
	}
}
