package evidence

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	for _, h := range hashes {
		if err := os.Remove(blobPath(ev, h)); err != nil {
			t.Fatal(err)
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
