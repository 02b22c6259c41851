package evidence

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// A write that fails (a full disk) breaks the log only until the cause
// goes away: the failed batch is answered with an error and leaves no
// record behind, the next append heals the files without a reopen, the
// first record after it says what happened, and the state verifies.
func TestLogHealsAfterAFailedFlush(t *testing.T) {
	for _, target := range []string{logName, indexName, hashesName} {
		t.Run(target, func(t *testing.T) {
			old := syncFile
			t.Cleanup(func() { syncFile = old })
			var mu sync.Mutex
			failing := false
			syncFile = func(f *os.File) error {
				mu.Lock()
				defer mu.Unlock()
				if failing && filepath.Base(f.Name()) == target {
					return syscall.ENOSPC
				}
				return f.Sync()
			}
			setFailing := func(b bool) { mu.Lock(); failing = b; mu.Unlock() }

			d := newState(t)
			l := openLog(t, d)
			defer l.Close()
			if _, err := l.Append(sampleRecord(1)); err != nil {
				t.Fatal(err)
			}
			if err := l.Flush(); err != nil { // the derived files and checkpoint too
				t.Fatal(err)
			}
			setFailing(true)
			_, err := l.Append(sampleRecord(2))
			if target == logName {
				// The record's own flush failed: it is refused.
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("append while the log cannot be flushed: %v, want ENOSPC", err)
				}
			} else if err != nil {
				// The log line was durable: acknowledged; the derived
				// files failed after the answer.
				t.Fatalf("append whose log line is durable: %v", err)
			}
			// While the cause lasts, every append fails and says why.
			if _, err := l.Append(sampleRecord(3)); err == nil {
				t.Fatalf("append after a failed flush succeeded while the disk is still full")
			}
			setFailing(false)
			if _, err := l.Append(sampleRecord(4)); err != nil {
				t.Fatalf("append after the cause went away: %v (the log must heal without a reopen)", err)
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			var pids []int
			heals := 0
			if err := ReadAll(d, func(_ int64, _ string, r *Record) error {
				if r.Type == TypeRecovery && r.Meta.Op == "heal" {
					heals++
					return nil
				}
				pids = append(pids, r.Meta.Pid)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			want := []int{101, 104}
			if target != logName {
				want = []int{101, 102, 104}
			}
			if len(pids) != len(want) {
				t.Fatalf("records %v, want pids %v", pids, want)
			}
			for i := range want {
				if pids[i] != want[i] {
					t.Fatalf("records %v, want pids %v", pids, want)
				}
			}
			if heals != 1 {
				t.Fatalf("%d heal records, want 1", heals)
			}
			l.Close()
			if _, err := VerifyState(d, ""); err != nil {
				t.Fatalf("verify after heal: %v", err)
			}
			l2 := openLog(t, d)
			l2.Close()
		})
	}
}
