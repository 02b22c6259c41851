package evidence

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The state a power loss leaves while records are acknowledged but no
// checkpoint covers them yet: only what was flushed survives — the
// checkpoint and the journal. The log's tail, the index, the hashes and
// the blob files written since are gone. Open rebuilds every acknowledged
// record and its content from the journal, records that it did, and the
// state verifies.
func TestJournalRebuildsAcknowledgedRecords(t *testing.T) {
	d0, e0 := checkpointDelay, checkpointEvery
	checkpointDelay, checkpointEvery = time.Hour, time.Hour
	defer func() { checkpointDelay, checkpointEvery = d0, e0 }()

	d := newState(t)
	l := openLog(t, d)
	var hashes []string
	for i := 0; i < 4; i++ {
		h, err := l.PutBlob([]byte(strings.Repeat("version ", i+1) + "of MEMORY.md\n"))
		if err != nil {
			t.Fatal(err)
		}
		r := sampleRecord(i)
		r.Type, r.Payload = TypeWrite, &Payload{NewHash: h}
		if _, err := l.Append(r); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	// The crash image: a copy taken now, with what was not flushed lost.
	img := t.TempDir()
	if out, err := exec.Command("cp", "-a", evDir(d), img).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	l.Close()
	ev := filepath.Join(img, dirName)
	for _, n := range []string{logName, indexName, hashesName} {
		if err := os.Truncate(filepath.Join(ev, n), 0); err != nil {
			t.Fatal(err)
		}
	}
	// The packs' content since the checkpoint (all of it here) did not
	// reach the disk; their sizes did.
	zeroPacks(t, ev)
	for _, h := range hashes {
		if _, _, _, ok := packedAt(t, ev, h); ok {
			t.Fatalf("blob %s survived the power loss", h)
		}
	}
	l = openLog(t, img)
	if l.Size() != 5 {
		t.Fatalf("size %d after open, want the 4 acknowledged records and a recovery record", l.Size())
	}
	l.Close()
	last := lastRecord(t, img)
	if last.Type != TypeRecovery || !strings.Contains(last.Payload.Detail, "journal: 4 acknowledged records rebuilt") {
		t.Fatalf("last record %+v, want the rebuild recorded", last)
	}
	for i, h := range hashes {
		if b, err := ReadBlob(img, h); err != nil || string(b) != strings.Repeat("version ", i+1)+"of MEMORY.md\n" {
			t.Fatalf("blob %d: %q %v", i, b, err)
		}
	}
	if _, err := VerifyState(img, ""); err != nil {
		t.Fatal(err)
	}
}

// Frames of an earlier generation (before the last checkpoint) that lie
// past the newest frames are never taken for them.
func TestJournalStaleFramesIgnored(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "journal")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := [][]byte{encodeFrame(0, [][]byte{[]byte(`{"a":1}`)}, nil), encodeFrame(1, [][]byte{[]byte(`{"a":2}`)}, nil), encodeFrame(2, [][]byte{[]byte(`{"a":3}`)}, nil)}
	var off int64
	for _, fr := range old {
		f.WriteAt(fr, off)
		off += int64(len(fr))
	}
	// After a checkpoint at 3 the journal starts again at 0; one new
	// frame overwrites the start, and the old ones' tail follows it.
	nw := encodeFrame(3, [][]byte{[]byte(`{"b":4}`), []byte(`{"b":5}`)}, map[string][]byte{strings.Repeat("ab", 32): []byte("x")})
	f.WriteAt(nw, 0)
	frames, err := readJournal(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(frames) != 1 || frames[0].first != 3 || len(frames[0].records) != 2 || string(frames[0].blobs[strings.Repeat("ab", 32)]) != "x" {
		t.Fatalf("frames %+v, want only the new one", frames)
	}
	// A torn frame ends the journal.
	f.Truncate(int64(len(nw)) - 1)
	if frames, _ := readJournal(f); len(frames) != 0 {
		t.Fatalf("a torn frame was read: %+v", frames)
	}
}

// An index cut below the signed checkpoint is damage, reported as such
// (not as a journal error) whether or not the journal has frames.
func TestJournalDoesNotHideDamage(t *testing.T) {
	d := newState(t)
	appendN(t, d, 3)
	if err := os.Truncate(filepath.Join(evDir(d), indexName), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(d); err == nil || !strings.Contains(err.Error(), "below its signed checkpoint") {
		t.Fatalf("Open: %v, want the damage named", err)
	}
}

// noCheckpoint holds checkpoints back until Close: the state a crash
// leaves while records are only in the journal.
func noCheckpoint(t *testing.T) {
	d0, e0 := checkpointDelay, checkpointEvery
	checkpointDelay, checkpointEvery = time.Hour, time.Hour
	t.Cleanup(func() { checkpointDelay, checkpointEvery = d0, e0 })
}

// crashImage copies the state directory's evidence as it is on disk now
// (what a killed process leaves) and returns the copy's state directory.
func crashImage(t *testing.T, d string) string {
	t.Helper()
	img := t.TempDir()
	if out, err := exec.Command("cp", "-a", evDir(d), img).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return img
}

// failJournal makes the journal's flush fail while *on is set.
func failJournal(t *testing.T) func(bool) {
	old := fdatasync
	t.Cleanup(func() { fdatasync = old })
	var mu sync.Mutex
	failing := false
	fdatasync = func(f *os.File) error {
		mu.Lock()
		defer mu.Unlock()
		if failing && filepath.Base(f.Name()) == journalName {
			return syscall.EIO
		}
		return f.Sync()
	}
	return func(b bool) { mu.Lock(); failing = b; mu.Unlock() }
}

// aerfs gc prunes a blob whose file was written from the journal and
// waits for the checkpoint's flush: the log keeps working (a removed blob
// file is not an error to flush).
func TestJournalPruneOfAFreshBlob(t *testing.T) {
	noCheckpoint(t)
	d := newState(t)
	l := openLog(t, d)
	defer l.Close()
	h, _ := l.PutBlob([]byte("old version of MEMORY.md\n"))
	r := sampleRecord(1)
	r.Type, r.Payload = TypeWrite, &Payload{NewHash: h}
	if _, err := l.Append(r); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Prune(sampleRecord(2), []string{h}, l.Size()); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatalf("flush after gc: %v", err)
	}
	for i := 3; i < 6; i++ {
		if _, err := l.Append(sampleRecord(i)); err != nil {
			t.Fatalf("append after gc: %v", err)
		}
	}
}

// gc prunes the previous version that the newest write record (not yet
// checkpointed) names, and the process dies: no acknowledged record is
// lost at the next open.
func TestJournalPruneThenCrashKeepsAcknowledged(t *testing.T) {
	noCheckpoint(t)
	d := newState(t)
	l := openLog(t, d)
	x, _ := l.PutBlob([]byte("version 1\n"))
	r := sampleRecord(1)
	r.Type, r.Payload = TypeWrite, &Payload{NewHash: x}
	if _, err := l.Append(r); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	y, _ := l.PutBlob([]byte("version 2\n"))
	r = sampleRecord(2)
	r.Type, r.Payload = TypeWrite, &Payload{OldHash: x, NewHash: y}
	if _, err := l.Append(r); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Prune(sampleRecord(3), []string{x}, l.Size()); err != nil {
		t.Fatal(err)
	}
	n := l.Size()
	img := crashImage(t, d)
	l.Close()
	l2 := openLog(t, img)
	defer l2.Close()
	if l2.Size() < n {
		t.Fatalf("acknowledged %d records, %d after the crash", n, l2.Size())
	}
	if _, err := VerifyState(img, ""); err != nil {
		t.Fatal(err)
	}
}

// A batch whose journal flush failed never survives: not after the heal
// (a crash right after it), not after a Close with the log still broken.
func TestJournalFailedFrameNeverSurvives(t *testing.T) {
	t.Run("crash right after the heal's checkpoint", func(t *testing.T) {
		noCheckpoint(t)
		fail := failJournal(t)
		d := newState(t)
		// The crash image is taken when the heal's checkpoint is flushed,
		// before anything is written after it, with that checkpoint in
		// place.
		oldSync := syncFile
		t.Cleanup(func() { syncFile = oldSync })
		var mu sync.Mutex
		armed, img := false, ""
		syncFile = func(f *os.File) error {
			err := f.Sync()
			mu.Lock()
			defer mu.Unlock()
			if armed && strings.HasPrefix(filepath.Base(f.Name()), "."+checkpointName+".tmp") {
				armed = false
				img = crashImage(t, d)
				ev := filepath.Join(img, dirName)
				os.Rename(filepath.Join(ev, filepath.Base(f.Name())), filepath.Join(ev, checkpointName))
			}
			return err
		}
		l := openLog(t, d)
		defer l.Close()
		if _, err := l.Append(sampleRecord(1)); err != nil {
			t.Fatal(err)
		}
		fail(true)
		if _, err := l.Append(sampleRecord(2)); err == nil {
			t.Fatal("an append whose journal flush failed was acknowledged")
		}
		n := l.Size()
		fail(false)
		mu.Lock()
		armed = true
		mu.Unlock()
		l.Flush() // heals
		if img == "" {
			t.Fatal("the heal signed no checkpoint")
		}
		l2 := openLog(t, img)
		defer l2.Close()
		if l2.Size() != n {
			t.Fatalf("%d records after the crash, %d acknowledged: the failed batch came back", l2.Size(), n)
		}
	})
	t.Run("close", func(t *testing.T) {
		fail := failJournal(t)
		d := newState(t)
		l := openLog(t, d)
		if _, err := l.Append(sampleRecord(1)); err != nil {
			t.Fatal(err)
		}
		fail(true)
		if _, err := l.Append(sampleRecord(2)); err == nil {
			t.Fatal("an append whose journal flush failed was acknowledged")
		}
		fail(false)
		if err := l.Close(); err != nil {
			t.Fatalf("close heals the log: %v", err)
		}
		var pids []int
		heals := 0
		ReadAll(d, func(_ int64, _ string, r *Record) error {
			if r.Type == TypeRecovery && r.Meta.Op == "heal" {
				heals++
			} else {
				pids = append(pids, r.Meta.Pid)
			}
			return nil
		})
		if fmt.Sprint(pids) != "[101]" || heals != 1 {
			t.Fatalf("records %v, %d heal records: want only the acknowledged one and the heal", pids, heals)
		}
	})
}

// Content no record names yet is in the store once a Flush returns (a
// restore journal names such content): a process crash after it keeps it.
func TestJournalFlushStoresUnnamedContent(t *testing.T) {
	d := newState(t)
	l := openLog(t, d)
	defer l.Close()
	h, _ := l.PutBlob([]byte("the content before a restore\n"))
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, crashImage(t, d))
	defer l2.Close()
	if b, err := l2.Blob(h); err != nil || string(b) != "the content before a restore\n" {
		t.Fatalf("content stored and flushed is gone after a crash: %q %v", b, err)
	}
}
