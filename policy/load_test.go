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

// TestLoadRefusesLargeFileUnread: a 50 MB policy file is refused from its
// size, before any of it is read. The file is sparse, and a read would
// show in the process's allocation count.
func TestLoadRefusesLargeFileUnread(t *testing.T) {
	p := filepath.Join(t.TempDir(), "policy.yaml")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(50 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = Load(p)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("want a size refusal, got %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("Load allocated %d bytes for a refused 50 MB file", got)
	}
}

// TestReadFileLimit: one byte over the limit is refused, the limit itself
// is read.
func TestReadFileLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, make([]byte, MaxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("want a size refusal, got %v", err)
	}
	if err := os.Truncate(p, MaxFileSize); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(p); err != nil || len(b) != MaxFileSize {
		t.Fatalf("a file at the limit: %d bytes, %v", len(b), err)
	}
}

// TestLoadRefusesFIFO: a FIFO in place of the policy is refused at once.
func TestLoadRefusesFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "policy.yaml")
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
	case <-time.After(3 * time.Second):
		t.Fatal("Load blocked on a FIFO")
	}
}
