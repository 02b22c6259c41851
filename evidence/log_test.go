package evidence

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func newState(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := Init(dir, "test.aerfs/log"); err != nil {
		t.Fatal(err)
	}
	return dir
}

func openLog(t testing.TB, dir string) *Log {
	t.Helper()
	l, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func sampleRecord(i int) *Record {
	return &Record{
		Type: TypeVerdict, Principal: "USER", Taint: []string{},
		Parents: []string{},
		Meta: Meta{Path: "MEMORY.md", Op: "write", Verdict: "allow", Pid: 100 + i, UID: 1000,
			Session: "s1", Rule: "R3", Reason: "trusted writer"},
	}
}

func TestInitRefusesExistingKey(t *testing.T) {
	dir := newState(t)
	if err := Init(dir, "x"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second Init: %v", err)
	}
	fi, err := os.Stat(filepath.Join(dir, "evidence", "key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode: %v %v", fi.Mode(), err)
	}
}

func TestAppendReadBack(t *testing.T) {
	dir := newState(t)
	l := openLog(t, dir)
	var ids []string
	for i := 0; i < 10; i++ {
		r := sampleRecord(i)
		if i > 0 {
			r.Parents = []string{ids[i-1]}
		}
		id, err := l.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := r.ID(); got != id {
			t.Fatalf("Append id %s, Record.ID %s", id, got)
		}
		ids = append(ids, id)
	}
	if l.Size() != 10 {
		t.Fatalf("size %d", l.Size())
	}
	if _, err := l.Append(&Record{Type: TypeWrite, Principal: "USER", Parents: []string{strings.Repeat("a", 64)}}); err == nil {
		t.Fatal("append with unknown parent succeeded")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := ReadAll(dir, func(idx int64, id string, r *Record) error {
		if int(idx) != len(got) {
			t.Fatalf("idx %d", idx)
		}
		got = append(got, id)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatal("ids differ")
	}
	// Reopen: no recovery, appends continue.
	l = openLog(t, dir)
	defer l.Close()
	if l.Size() != 10 {
		t.Fatalf("reopened size %d", l.Size())
	}
	if _, err := l.Append(sampleRecord(99)); err != nil {
		t.Fatal(err)
	}
}

func TestSecondOpenRefused(t *testing.T) {
	dir := newState(t)
	l := openLog(t, dir)
	defer l.Close()
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second Open: %v", err)
	}
}

func TestBlobs(t *testing.T) {
	dir := newState(t)
	l := openLog(t, dir)
	defer l.Close()
	h1, err := l.PutBlob([]byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if h1 != "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" {
		t.Fatalf("hash %s", h1)
	}
	if h2, _ := l.PutBlob([]byte("hello")); h2 != h1 {
		t.Fatal("second put differs")
	}
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, []byte("hello"), 0o644)
	if h3, err := l.PutBlobFile(p); err != nil || h3 != h1 {
		t.Fatalf("PutBlobFile %s %v", h3, err)
	}
	l.Flush()
	// Small content is an entry of a pack, not a file of its own.
	if _, _, _, ok := packedAt(t, filepath.Join(dir, "evidence"), h1); !ok {
		t.Fatal("blob not packed")
	}
	if _, err := os.Stat(filepath.Join(dir, "evidence", "blobs", "2c", h1[2:])); err == nil {
		t.Fatal("a small blob has a file of its own")
	}
	b, err := ReadBlob(dir, h1)
	if err != nil || !bytes.Equal(b, []byte("hello")) {
		t.Fatalf("ReadBlob %q %v", b, err)
	}
	r := sampleRecord(1)
	r.Payload = &Payload{NewHash: h1}
	if _, err := l.Append(r); err != nil {
		t.Fatal(err)
	}
	r = sampleRecord(2)
	r.Payload = &Payload{NewHash: strings.Repeat("0", 64)}
	if _, err := l.Append(r); err == nil {
		t.Fatal("append naming a missing blob succeeded")
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "evidence", "blobs"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp") {
			t.Fatalf("temp left: %s", e.Name())
		}
	}
}

// A blob being written when the process died stays behind under its
// temporary name; the next Open (holding the lock) removes it.
func TestOpenRemovesTornBlobTemporaries(t *testing.T) {
	dir := newState(t)
	root := filepath.Join(dir, "evidence", "blobs")
	os.MkdirAll(root, 0o700)
	torn := filepath.Join(root, ".tmp-blob-0123456789abcdef")
	if err := os.WriteFile(torn, []byte("half a blo"), 0o400); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, dir)
	defer l.Close()
	if _, err := os.Stat(torn); err == nil {
		t.Fatalf("%s is still there after Open", torn)
	}
	if _, err := l.PutBlob([]byte("x")); err != nil {
		t.Fatal(err)
	}
}

// KeyPair accepts a state's own keys and refuses a signing key that does
// not belong to the public key beside it.
func TestKeyPair(t *testing.T) {
	a, b := newState(t), newState(t)
	pa, err := KeyPair(a)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := os.ReadFile(filepath.Join(a, "evidence", "key.pub"))
	if strings.TrimSpace(string(pub)) != pa {
		t.Fatalf("KeyPair returned %q, key.pub holds %q", pa, pub)
	}
	os.Chmod(filepath.Join(b, "evidence", "key.pub"), 0o644)
	if err := os.WriteFile(filepath.Join(b, "evidence", "key.pub"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := KeyPair(b); err == nil || !strings.Contains(err.Error(), "not one key pair") {
		t.Fatalf("KeyPair of a copied public key: %v", err)
	}
}
