package evidence

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func storedSize(t *testing.T, dir, h string) int64 {
	t.Helper()
	if _, _, n, ok := packedAt(t, evDir(dir), h); ok {
		return n
	}
	st, err := os.Stat(blobPath(evDir(dir), h))
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// Text is stored compressed, named by the hash of its uncompressed bytes,
// and read back whole; incompressible content and content that itself
// starts with zstd's magic are stored raw; raw blobs written before
// compression still read; a corrupted compressed blob is a hash mismatch.
func TestBlobCompression(t *testing.T) {
	dir := newState(t)
	l := openLog(t, dir)
	defer l.Close()

	text := []byte(strings.Repeat("- the user prefers short answers and tests first\n", 400))
	h, err := l.PutBlob(text)
	if err != nil {
		t.Fatal(err)
	}
	if s := sha256.Sum256(text); hex.EncodeToString(s[:]) != h {
		t.Fatalf("blob name is not the hash of the content")
	}
	l.Flush()
	if n := storedSize(t, dir, h); n*4 > int64(len(text)) {
		t.Errorf("text stored in %d bytes of %d: not compressed", n, len(text))
	}
	if b, err := ReadBlob(dir, h); err != nil || !bytes.Equal(b, text) {
		t.Fatalf("read back: %v", err)
	}

	random := make([]byte, 4096)
	rand.Read(random)
	magic := append(append([]byte{}, zstdMagic...), random...)
	for _, c := range [][]byte{random, magic, {}} {
		h, err := l.PutBlob(c)
		if err != nil {
			t.Fatal(err)
		}
		l.Flush()
		if n := storedSize(t, dir, h); n != int64(len(c)) {
			t.Errorf("incompressible %d bytes stored in %d", len(c), n)
		}
		if b, err := ReadBlob(dir, h); err != nil || !bytes.Equal(b, c) {
			t.Fatalf("read back raw: %v", err)
		}
	}

	// A blob as stored before compression (raw, 0400), beginning with
	// zstd's magic.
	old := append(append([]byte{}, zstdMagic...), []byte(strings.Repeat("old ", 100))...)
	s := sha256.Sum256(old)
	oh := hex.EncodeToString(s[:])
	p := blobPath(evDir(dir), oh)
	os.MkdirAll(filepath.Dir(p), 0o700)
	if err := os.WriteFile(p, old, 0o400); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadBlob(dir, oh); err != nil || !bytes.Equal(b, old) {
		t.Fatalf("old raw blob: %v", err)
	}

	// Streamed content larger than the in-memory limit.
	big := bytes.Repeat([]byte("0123456789abcdef"), (blobInMemory+4096)/16)
	f := filepath.Join(t.TempDir(), "big")
	os.WriteFile(f, big, 0o600)
	bh, err := l.PutBlobFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := ReadBlob(dir, bh); err != nil || !bytes.Equal(b, big) {
		t.Fatalf("big blob: %v", err)
	}
	if n := storedSize(t, dir, bh); n*10 > int64(len(big)) {
		t.Errorf("big blob stored in %d bytes", n)
	}

	// Corrupt the compressed text blob: one byte flipped.
	damageBlob(t, evDir(dir), h, func(p string, off, n int64) { flipByteAt(t, p, off+n/2) })
	if _, err := ReadBlob(dir, h); KindOf(err) != KindIntegrity {
		t.Fatalf("corrupted compressed blob: %v, want an integrity error", err)
	}
}

// BlobSize gives the content's length without decompressing it: for text
// stored compressed (in a pack, from its frame's header), raw content, raw
// content that begins with zstd's magic, and content too large for the
// journal (a blob file of its own, compressed as it streamed).
func TestBlobSize(t *testing.T) {
	dir := newState(t)
	l := openLog(t, dir)
	defer l.Close()
	random := make([]byte, 4096)
	rand.Read(random)
	contents := [][]byte{
		[]byte(strings.Repeat("- the user prefers short answers\n", 300)),
		random,
		append(append([]byte{}, zstdMagic...), random...),
		[]byte(strings.Repeat("a large version of a memory file\n", 80000)),
		{},
	}
	for _, c := range contents {
		h, err := l.PutBlob(c)
		if err != nil {
			t.Fatal(err)
		}
		l.Flush()
		if n, err := BlobSize(dir, h); err != nil || n != int64(len(c)) {
			t.Errorf("content of %d bytes: BlobSize %d, %v", len(c), n, err)
		}
	}
	if _, err := BlobSize(dir, strings.Repeat("ab", 32)); err == nil {
		t.Errorf("BlobSize of content never stored: no error")
	}
}
