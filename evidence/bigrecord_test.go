package evidence

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A record of any size the log accepts verifies: a snapshot of many
// guarded files makes records far past 4 KiB, and one near the 1 MiB limit
// must verify in the live log and in an exported bundle.
func TestVerifyLargeRecords(t *testing.T) {
	dir := newState(t)
	l := openLog(t, dir)
	small := sampleRecord(1)
	if _, err := l.Append(small); err != nil {
		t.Fatal(err)
	}
	blob, err := l.PutBlob([]byte("a note\n"))
	if err != nil {
		t.Fatal(err)
	}
	// A snapshot of 50 guarded files (about 6 KiB).
	snap := &Record{Type: TypeSnapshot, Principal: "SYS", Taint: []string{}, Parents: []string{},
		Meta: Meta{Op: "snapshot", Verdict: "allow"}, Payload: &Payload{}}
	for i := 0; i < 50; i++ {
		snap.Payload.Files = append(snap.Payload.Files, FileState{Path: fmt.Sprintf("memory/note-%03d.md", i),
			Hash: blob})
	}
	if _, err := l.Append(snap); err != nil {
		t.Fatal(err)
	}
	// One just under the limit (the reason grows until the record is ~1 MiB).
	big := sampleRecord(2)
	big.Meta.Reason = strings.Repeat("r", MaxRecordSize-2048)
	if _, err := l.Append(big); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(sampleRecord(3)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := VerifyState(dir, "")
	if err != nil {
		t.Fatalf("verify --state with records past 4 KiB: %v", err)
	}
	if rep.TreeSize != 4 {
		t.Fatalf("tree size %d", rep.TreeSize)
	}
	out := filepath.Join(t.TempDir(), "b.zip")
	if _, err := Export(dir, Filter{}, out); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyBundle(out, ""); err != nil {
		t.Fatalf("verify of the exported bundle: %v", err)
	}
}

// verify refuses anything but a regular file or a directory, at once: a
// FIFO is never opened for reading (which would block until a writer came).
func TestVerifyRefusesFIFOAtOnce(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "bundle.zip")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := VerifyBundle(fifo, "")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file or a directory") {
			t.Fatalf("want a refusal of the FIFO, got %v", err)
		}
	case <-time.After(5 * time.Second):
		// Unblock the stuck open so the test binary can end.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("verify blocked on a FIFO")
	}
}
