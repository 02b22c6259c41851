package evidence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A write that fails (a full disk) breaks the log only until the cause
// goes away: the failed batch is answered with an error and leaves no
// record behind, the next append heals the files without a reopen, the
// first record after it says what happened, and the state verifies.
func TestLogHealsAfterAFailedFlush(t *testing.T) {
	for _, target := range []string{journalName, logName, indexName, hashesName} {
		t.Run(target, func(t *testing.T) {
			old, oldData := syncFile, fdatasync
			t.Cleanup(func() { syncFile, fdatasync = old, oldData })
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
			fdatasync = syncFile
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
			if target == journalName {
				// The record's own flush failed: it is refused.
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("append while the journal cannot be flushed: %v, want ENOSPC", err)
				}
			} else {
				if err != nil {
					// The journal frame was durable: acknowledged; the
					// log and derived files fail after the answer, when
					// the checkpoint is due (a reader's flush makes it
					// due at once).
					t.Fatalf("append whose journal frame is durable: %v", err)
				}
				if err := l.Flush(); !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("flush while %s cannot be synced: %v, want ENOSPC", target, err)
				}
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
			if target != journalName {
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

// The records of one change commit together or not at all: a later one
// may name an earlier one as parent, and a failed flush leaves none.
func TestAppendAllIsAtomic(t *testing.T) {
	fail := failJournal(t)
	d := newState(t)
	l := openLog(t, d)
	defer l.Close()
	a, b := sampleRecord(1), sampleRecord(2)
	ids, err := l.AppendAll(a, b)
	if err != nil || len(ids) != 2 {
		t.Fatalf("AppendAll: %v %v", ids, err)
	}
	c := sampleRecord(3)
	c.Parents = []string{ids[1]}
	d1 := sampleRecord(4)
	ids2, err := l.AppendAll(d1, c)
	if err != nil {
		t.Fatalf("AppendAll with a parent in the log: %v", err)
	}
	e := sampleRecord(5)
	f := sampleRecord(6)
	if _, err := l.AppendAll(e, f); err != nil {
		t.Fatal(err)
	}
	// A parent that is neither in the log nor earlier in the group
	// refuses the whole group.
	g, h := sampleRecord(7), sampleRecord(8)
	unknown := "00" + ids2[0][2:]
	if unknown == ids2[0] {
		unknown = "ff" + ids2[0][2:] // one id in 256 starts with 00
	}
	h.Parents = []string{unknown}
	if _, err := l.AppendAll(g, h); err == nil {
		t.Fatal("a group with an unknown parent was accepted")
	}
	fail(true)
	if _, err := l.AppendAll(sampleRecord(9), sampleRecord(10)); err == nil {
		t.Fatal("a group whose flush failed was acknowledged")
	}
	fail(false)
	if _, err := l.Append(sampleRecord(11)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	var pids []int
	ReadAll(d, func(_ int64, _ string, r *Record) error {
		if r.Type != TypeRecovery {
			pids = append(pids, r.Meta.Pid)
		}
		return nil
	})
	want := "[101 102 104 103 105 106 111]"
	if got := fmt.Sprint(pids); got != want {
		t.Fatalf("records %s, want %s", got, want)
	}
	if _, err := VerifyState(d, ""); err != nil {
		t.Fatal(err)
	}
}

// A blob travels in the journal frame of the first record that names it:
// a record past the checkpoint whose blob a crash cut short and whose
// frame is not durable was never acknowledged, and Open cuts it; with its
// frame durable, Open writes the blob again from the frame and keeps it.
func TestRecordWithCutBlobIsCutAtOpen(t *testing.T) {
	for _, framed := range []bool{false, true} {
		t.Run(fmt.Sprint("frame durable: ", framed), func(t *testing.T) { recordWithCutBlob(t, framed) })
	}
}

func recordWithCutBlob(t *testing.T, framed bool) {
	d := newState(t)
	l := openLog(t, d)
	if _, err := l.Append(sampleRecord(1)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	cp, err := os.ReadFile(filepath.Join(evDir(d), checkpointName))
	if err != nil {
		t.Fatal(err)
	}
	l = openLog(t, d)
	h, err := l.PutBlob([]byte("the new content of MEMORY.md\n"))
	if err != nil {
		t.Fatal(err)
	}
	r := sampleRecord(2)
	r.Type, r.Payload = TypeWrite, &Payload{NewHash: h}
	if _, err := l.Append(r); err != nil {
		t.Fatal(err)
	}
	l.Close()
	// What a power loss can leave: the record's line, the blob's name but
	// not all of its content, and the checkpoint before the record.
	if err := os.WriteFile(filepath.Join(evDir(d), checkpointName), cp, 0o644); err != nil {
		t.Fatal(err)
	}
	damageBlob(t, evDir(d), h, func(p string, off, n int64) {
		// The rest of the blob's bytes never reached the disk.
		writeAt(t, p, make([]byte, n-5), off+5)
	})
	if !framed {
		os.Truncate(filepath.Join(evDir(d), journalName), 0)
	}
	l = openLog(t, d)
	l.Close()
	var types []string
	ReadAll(d, func(_ int64, _ string, r *Record) error {
		types = append(types, r.Type)
		return nil
	})
	if framed {
		if got := fmt.Sprint(types); got != "[verdict write]" {
			t.Fatalf("records after open: %s, want the acknowledged write kept, its blob written again from the journal", got)
		}
		if b, err := ReadBlob(d, h); err != nil || string(b) != "the new content of MEMORY.md\n" {
			t.Fatalf("blob after open: %q %v", b, err)
		}
		return
	}
	if got := fmt.Sprint(types); got != "[verdict recovery]" {
		t.Fatalf("records after open: %s, want the record with the cut blob gone and the cut recorded", got)
	}
}

// A full disk keeps an acknowledged record's blob file from being written
// (its content is durable in the journal frame that carried it, and held
// in memory), then the log breaks. Once space is back, the heal keeps that
// record — it must not take it for one whose blob a crash lost, cut it and
// then never find the records it acknowledged — and writes the blob file.
func TestHealKeepsRecordsWhoseBlobIsOnlyInTheJournal(t *testing.T) {
	oldTemp, oldSync := createBlobTemp, syncFile
	t.Cleanup(func() { createBlobTemp, syncFile = oldTemp, oldSync })
	var mu sync.Mutex
	full := false
	setFull := func(b bool) { mu.Lock(); full = b; mu.Unlock() }
	isFull := func() bool { mu.Lock(); defer mu.Unlock(); return full }
	createBlobTemp = func(dir, prefix string, perm os.FileMode) (*os.File, error) {
		if isFull() {
			return nil, syscall.ENOSPC
		}
		return createTemp(dir, prefix, perm)
	}
	syncFile = func(f *os.File) error {
		if isFull() && filepath.Base(f.Name()) == logName {
			return syscall.ENOSPC
		}
		return f.Sync()
	}
	d := newState(t)
	l := openLog(t, d)
	defer l.Close()
	if _, err := l.Append(sampleRecord(1)); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	setFull(true)
	h, err := l.PutBlob([]byte("acknowledged content\n"))
	if err != nil {
		t.Fatal(err)
	}
	w := sampleRecord(2)
	w.Type, w.Payload = TypeWrite, &Payload{NewHash: h}
	if _, err := l.Append(w); err != nil {
		t.Fatalf("append whose journal frame is durable: %v", err)
	}
	if err := l.Flush(); err == nil {
		t.Fatal("flush succeeded while the log cannot be synced")
	}
	setFull(false)
	if _, err := l.Append(sampleRecord(3)); err != nil {
		t.Fatalf("append once space is back: %v (the heal must keep the acknowledged record)", err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	ReadAll(d, func(_ int64, _ string, r *Record) error {
		if r.Type != TypeRecovery {
			pids = append(pids, r.Meta.Pid)
		}
		return nil
	})
	if got := fmt.Sprint(pids); got != "[101 102 103]" {
		t.Fatalf("records %s, want [101 102 103]", got)
	}
	if b, err := ReadBlob(d, h); err != nil || string(b) != "acknowledged content\n" {
		t.Fatalf("blob after the heal: %q %v", b, err)
	}
	l.Close()
	if _, err := VerifyState(d, ""); err != nil {
		t.Fatal(err)
	}
}

// A broken log heals by itself, with nobody appending, once the cause is
// gone (retry with backoff), and says so to OnHealth.
func TestBrokenLogHealsWithoutAppends(t *testing.T) {
	fail := failJournal(t)
	d := newState(t)
	l := openLog(t, d)
	defer l.Close()
	health := make(chan error, 16)
	l.OnHealth(func(err error) { health <- err })
	fail(true)
	if _, err := l.Append(sampleRecord(1)); err == nil {
		t.Fatal("append succeeded while the journal cannot be flushed")
	}
	if err := <-health; err == nil {
		t.Fatal("OnHealth was not told the log fails")
	}
	fail(false)
	select {
	case err := <-health:
		if err != nil {
			t.Fatalf("OnHealth: %v, want nil (healed)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the log did not heal by itself within 5 s of the cause going away")
	}
	heals := 0
	l.Flush()
	ReadAll(d, func(_ int64, _ string, r *Record) error {
		if r.Type == TypeRecovery && r.Meta.Op == "heal" {
			heals++
		}
		return nil
	})
	if heals != 1 {
		t.Fatalf("%d heal records, want 1", heals)
	}
}
