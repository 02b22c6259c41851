package logindex

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"
)

// A merge reads a segment's body whole, checking each block once: what it
// reads is what reading block by block gives, and a damaged block in any
// place fails it as it fails a read of that block.
func TestWholeBodyChecksEveryBlock(t *testing.T) {
	body := make([]byte, 3*blockSize+100)
	for i := range body {
		body[i] = byte(i * 7)
	}
	var sums []byte
	for off := 0; off < len(body); off += blockSize {
		s := sha256.Sum256(body[off:min(off+blockSize, len(body))])
		sums = append(sums, s[:]...)
	}
	open := func(b []byte) *blockFile {
		return &blockFile{r: bytes.NewReader(b), body: int64(len(b)), sums: sums}
	}
	w, err := open(body).wholeBody()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int64{{0, 10}, {blockSize - 5, 10}, {2*blockSize + 3, blockSize}, {int64(len(body)) - 7, 7}} {
		a, b := make([]byte, r[1]), make([]byte, r[1])
		if err := w.readAt(a, r[0]); err != nil {
			t.Fatal(err)
		}
		if err := open(body).readAt(b, r[0]); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("read [%d, +%d): whole and by block differ", r[0], r[1])
		}
	}
	if err := w.readAt(make([]byte, 8), int64(len(body))-4); err == nil {
		t.Fatal("a read past the body succeeded")
	}
	for _, at := range []int{5, blockSize + 1, 3*blockSize + 99} {
		bad := append([]byte(nil), body...)
		bad[at] ^= 1
		if _, err := open(bad).wholeBody(); err == nil || !strings.Contains(err.Error(), "does not match its hash") {
			t.Fatalf("byte %d damaged: %v", at, err)
		}
	}
	if _, err := open(body[:len(body)-1]).wholeBody(); err == nil {
		t.Fatal("a short body was read whole")
	}
}
