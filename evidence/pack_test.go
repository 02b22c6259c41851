package evidence

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// packedAt finds content h in the packs of the evidence directory ev by
// reading them as docs/evidence-format.md describes them, independently
// of pack.go: the pack's path and the offset and length of the entry's
// body (ok false: not packed).
func packedAt(t *testing.T, ev, h string) (path string, off, n int64, ok bool) {
	t.Helper()
	des, _ := os.ReadDir(filepath.Join(ev, packsName))
	for _, de := range des {
		p := filepath.Join(ev, packsName, de.Name())
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for o := int64(0); o+48 <= int64(len(b)); {
			if string(b[o:o+8]) != "aerfsPK1" {
				break
			}
			ln := int64(binary.BigEndian.Uint64(b[o+40 : o+48]))
			if hex.EncodeToString(b[o+8:o+40]) == h {
				path, off, n, ok = p, o+48, ln, true // the last entry wins
			}
			o += 48 + ln
		}
	}
	return path, off, n, ok
}

// loseBlob removes content h from the store of ev as a lost write would:
// its file, or its pack entry's header (zeroed).
func loseBlob(t *testing.T, ev, h string) {
	t.Helper()
	defer packsOf(ev).reset()
	if err := os.Remove(blobPath(ev, h)); err == nil {
		return
	}
	p, off, _, ok := packedAt(t, ev, h)
	if !ok {
		t.Fatalf("blob %s is neither a file nor packed", h)
	}
	writeAt(t, p, make([]byte, 48), off-48)
}

// damageBlob changes content h's stored bytes in place: fn gets the file
// (a blob file or a pack), the offset of the blob's bytes in it and their
// length.
func damageBlob(t *testing.T, ev, h string, fn func(path string, off, n int64)) {
	t.Helper()
	defer packsOf(ev).reset()
	if p, off, n, ok := packedAt(t, ev, h); ok {
		fn(p, off, n)
		return
	}
	p := blobPath(ev, h)
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o600)
	fn(p, 0, st.Size())
}

// zeroPacks overwrites every pack of ev with zeros: a power loss that
// kept the packs' sizes and lost their content.
func zeroPacks(t *testing.T, ev string) {
	t.Helper()
	defer packsOf(ev).reset()
	des, _ := os.ReadDir(filepath.Join(ev, packsName))
	for _, de := range des {
		p := filepath.Join(ev, packsName, de.Name())
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		writeAt(t, p, make([]byte, st.Size()), 0)
	}
}

func writeAt(t *testing.T, path string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// aerfs gc repacks: the pruned content is gone from every pack (its bytes
// too, not only its index entry), what the pack kept is read from the new
// pack, the old pack file is removed, and the state verifies.
func TestGCRepacks(t *testing.T) {
	d := newState(t)
	ev := evDir(d)
	l := openLog(t, d)
	defer l.Close()
	var hs []string
	prev := ""
	for i := 0; i < 3; i++ {
		h, err := l.PutBlob([]byte(strings.Repeat(fmt.Sprintf("version %d\n", i), 50)))
		if err != nil {
			t.Fatal(err)
		}
		r := sampleRecord(i)
		r.Type, r.Payload = TypeWrite, &Payload{OldHash: prev, NewHash: h}
		if _, err := l.Append(r); err != nil {
			t.Fatal(err)
		}
		hs, prev = append(hs, h), h
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	oldPack, _, _, ok := packedAt(t, ev, hs[1])
	if !ok {
		t.Fatal("version 1 not packed")
	}
	if _, pruned, err := l.Prune(sampleRecord(9), []string{hs[1]}, l.Size()); err != nil || len(pruned) != 1 {
		t.Fatalf("prune: %v %v", pruned, err)
	}
	if _, _, _, ok := packedAt(t, ev, hs[1]); ok {
		t.Fatal("pruned content is still in a pack")
	}
	if _, err := os.Stat(oldPack); !os.IsNotExist(err) {
		t.Fatalf("the repacked pack is still there: %v", err)
	}
	if l.HasBlob(hs[1]) {
		t.Fatal("the log still has the pruned content")
	}
	for _, i := range []int{0, 2} {
		if _, _, _, ok := packedAt(t, ev, hs[i]); !ok {
			t.Fatalf("version %d lost by the repack", i)
		}
		if b, err := ReadBlob(d, hs[i]); err != nil || !strings.HasPrefix(string(b), fmt.Sprintf("version %d\n", i)) {
			t.Fatalf("version %d after the repack: %q %v", i, b, err)
		}
	}
	if sizes, err := StoredBlobs(d); err != nil || len(sizes) != 2 {
		t.Fatalf("stored after the repack: %v %v", sizes, err)
	}
	if _, err := VerifyState(d, ""); err != nil {
		t.Fatal(err)
	}
}

// A crash while a pack's entries are being written: the pack's tail is
// torn (an entry's header whole, its body cut, then zeros where the size
// reached the disk and the data did not). The journal still carries every
// acknowledged version: at the next open they are stored again, in a new
// pack (the torn one is never written over), and read back whole, then
// and after the next open.
func TestPackTornTailIsReplayedIntoANewPack(t *testing.T) {
	noCheckpoint(t)
	d := newState(t)
	l := openLog(t, d)
	var hs []string
	for i := 0; i < 3; i++ {
		h, err := l.PutBlob([]byte(strings.Repeat(fmt.Sprintf("line %d\n", i), 30)))
		if err != nil {
			t.Fatal(err)
		}
		r := sampleRecord(i)
		r.Type, r.Payload = TypeWrite, &Payload{NewHash: h}
		if _, err := l.Append(r); err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	img := crashImage(t, d)
	l.Close()
	ev := evDir(img)
	p, off, n, ok := packedAt(t, ev, hs[2])
	if !ok {
		t.Fatal("not packed")
	}
	if err := os.Truncate(p, off+n/2); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, off+n+4096); err != nil { // zeros past the cut
		t.Fatal(err)
	}
	tornSize := off + n + 4096
	packsOf(ev).reset()
	l = openLog(t, img)
	h4, _ := l.PutBlob([]byte("after the crash\n"))
	r := sampleRecord(7)
	r.Type, r.Payload = TypeWrite, &Payload{NewHash: h4}
	if _, err := l.Append(r); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if st, err := os.Stat(p); err != nil || st.Size() != tornSize {
		t.Fatalf("the torn pack was written to: %v %v", st, err)
	}
	for i, h := range append(hs, h4) {
		q, _, _, ok := packedAt(t, ev, h)
		if !ok && i == 2 {
			t.Fatalf("the torn version was not stored again")
		}
		if i == 2 && q == p {
			t.Fatal("the torn version was stored in the torn pack")
		}
		if _, err := ReadBlob(img, h); err != nil {
			t.Fatalf("version %d: %v", i, err)
		}
	}
	l = openLog(t, img)
	l.Close()
	if _, err := VerifyState(img, ""); err != nil {
		t.Fatal(err)
	}
}

// The index read afresh while the log is open (a reader whose read of a
// pack failed does that) does not make the writer forget a pack it has
// still to flush: the checkpoint that ends the journal's copy flushes it.
func TestPackResetKeepsTheFlushOwed(t *testing.T) {
	noCheckpoint(t)
	d := newState(t)
	l := openLog(t, d)
	defer l.Close()
	h, _ := l.PutBlob([]byte("a version on its way to a pack\n"))
	r := sampleRecord(1)
	r.Type, r.Payload = TypeWrite, &Payload{NewHash: h}
	if _, err := l.Append(r); err != nil {
		t.Fatal(err)
	}
	// Packed by the committer once the frame is durable, just after the
	// append returns.
	var p string
	ok := false
	for i := 0; i < 500 && !ok; i++ {
		if p, _, _, ok = packedAt(t, evDir(d), h); !ok {
			time.Sleep(time.Millisecond)
		}
	}
	if !ok {
		t.Fatal("not packed")
	}
	packsOf(evDir(d)).reset()
	old := fdatasync
	defer func() { fdatasync = old }()
	var mu sync.Mutex
	var flushed []string
	fdatasync = func(f *os.File) error {
		mu.Lock()
		flushed = append(flushed, f.Name())
		mu.Unlock()
		return old(f)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(flushed, p) {
		t.Fatalf("the checkpoint flushed %v, not the pack %s", flushed, p)
	}
}

// A reader indexes a pack through a window of the file: a pack of many
// entries, longer than several windows, with entries that straddle a
// window's end, is indexed whole, every entry at its place.
func TestPackIndexedThroughWindows(t *testing.T) {
	noCheckpoint(t)
	d := newState(t)
	l := openLog(t, d)
	want := map[string][]byte{}
	for i := 0; i < 3*packScanWindow/(40<<10)+7; i++ {
		// Incompressible: entries are stored compressed.
		b := make([]byte, 40<<10+i)
		rand.Read(b)
		h, err := l.PutBlob(b)
		if err != nil {
			t.Fatal(err)
		}
		want[h] = b
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	ev := evDir(d)
	var size int64
	des, _ := os.ReadDir(filepath.Join(ev, packsName))
	for _, de := range des {
		fi, _ := de.Info()
		size += fi.Size()
	}
	if size < 3*packScanWindow {
		t.Fatalf("the packs hold %d bytes, want more than three windows", size)
	}
	packsOf(ev).reset()
	for h, b := range want {
		if !BlobStored(d, h) {
			t.Fatalf("blob %s not found by a fresh reader", h)
		}
		got, err := ReadBlob(d, h)
		if err != nil || string(got) != string(b) {
			t.Fatalf("blob %s read back as %d bytes (%v), want %d", h, len(got), err, len(b))
		}
	}
}
