package policy

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A policy file past the size limit is refused from its size, before any
// of it is read: a sparse 50 MB file costs nothing to refuse.
func TestLoadRefusesLargeFileUnread(t *testing.T) {
	p := filepath.Join(t.TempDir(), "aerfs.yaml")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(50 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	_, err = Load(p)
	runtime.ReadMemStats(&m1)
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("want a size refusal, got %v", err)
	}
	// Reading the file first would have allocated its 50 MB.
	if grew := m1.TotalAlloc - m0.TotalAlloc; grew > 1<<20 {
		t.Fatalf("refusing the file allocated %d bytes: it was read", grew)
	}
}

// A FIFO named as the policy is refused at once.
func TestLoadRefusesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "aerfs.yaml")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(p); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("want a refusal, got %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Load blocked on a FIFO")
	}
}

// The size limit is inclusive: a policy of exactly maxPolicySize bytes
// loads, one byte more is refused.
func TestLoadSizeLimitIsInclusive(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{maxPolicySize, maxPolicySize + 1} {
		head := "version: 1\n"
		line := "# " + strings.Repeat("x", 97) + "\n"
		body := head + strings.Repeat(line, (size-len(head))/len(line))
		body += "#" + strings.Repeat("y", size-len(body)-2) + "\n"
		if len(body) != size {
			t.Fatalf("built %d bytes, want %d", len(body), size)
		}
		p := filepath.Join(dir, "aerfs.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		data, rerr := ReadFile(p)
		_, err := Load(p)
		if size == maxPolicySize && (err != nil || rerr != nil || string(data) != body) {
			t.Errorf("a policy of exactly %d bytes: %v, %v, read %d bytes", size, err, rerr, len(data))
		}
		if size > maxPolicySize && (err == nil || !strings.Contains(err.Error(), "larger than")) {
			t.Errorf("a policy of %d bytes: want a size refusal, got %v", size, err)
		}
	}
}
