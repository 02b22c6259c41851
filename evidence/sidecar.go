package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// What the log's index (package logindex, docs/evidence-format.md §11)
// needs of the log: a signature by the log's key on its head, a proof that
// the tree it was computed at is a prefix of the signed log, and single
// records read by position.

// indexHeadMagic begins every index head the log's key signs. A checkpoint
// begins with the origin, which is never this line, so neither can pass
// for the other.
const indexHeadMagic = "aerfs-index "

// SignIndexHead signs body, an index head, with the log's key, as a note.
func (l *Log) SignIndexHead(body []byte) ([]byte, error) {
	if !bytes.HasPrefix(body, []byte(indexHeadMagic)) || !bytes.HasSuffix(body, []byte("\n")) {
		return nil, fmt.Errorf("evidence: not an index head")
	}
	return note.Sign(&note.Note{Text: string(body)}, l.signer)
}

// OpenIndexHead checks the signature of an index head against vkey and
// returns its body.
func OpenIndexHead(msg []byte, vkey string) ([]byte, error) {
	v, err := note.NewVerifier(strings.TrimSpace(vkey))
	if err != nil {
		return nil, verr(KindSignature, "index head: bad public key: %v", err)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		return nil, verr(KindSignature, "index head: %v", err)
	}
	if len(n.Sigs) != 1 || len(n.UnverifiedSigs) != 0 || !strings.HasPrefix(n.Text, indexHeadMagic) {
		return nil, verr(KindSignature, "index head: not one index head signed by the log's key")
	}
	return []byte(n.Text), nil
}

// CheckTreePrefix checks that the log's signed checkpoint (verified with
// key.pub) covers a tree whose first n records have the given root: an
// RFC 6962 consistency proof computed from the log's stored hashes and
// checked against the signed root. It returns that checkpoint.
func CheckTreePrefix(stateDir string, n int64, root [32]byte) (Checkpoint, error) {
	vkey, err := PublicKey(stateDir)
	if err != nil {
		return Checkpoint{}, err
	}
	rd, err := openReader(stateDir)
	if err != nil {
		return Checkpoint{}, err
	}
	defer rd.Close()
	cp, err := OpenCheckpoint(rd.cpRaw, vkey)
	if err != nil {
		return Checkpoint{}, err
	}
	switch {
	case n > cp.Size:
		return cp, verr(KindIntegrity, "the index covers %d records, the log's checkpoint %d", n, cp.Size)
	case n == cp.Size:
		if tlog.Hash(root) != cp.Root {
			return cp, verr(KindIntegrity, "the index's root is not the log's at %d records", n)
		}
		return cp, nil
	case n == 0:
		if empty, _ := tlog.TreeHash(0, rd.hashReader()); tlog.Hash(root) != empty {
			return cp, verr(KindIntegrity, "the index's root of an empty tree is not the empty root")
		}
		return cp, nil
	}
	proof, err := tlog.ProveTree(cp.Size, n, rd.hashReader())
	if err != nil {
		return cp, verr(KindIntegrity, "consistency proof %d → %d: %v", n, cp.Size, err)
	}
	if err := tlog.CheckTree(proof, cp.Size, cp.Root, n, tlog.Hash(root)); err != nil {
		return cp, verr(KindIntegrity, "the index's tree of %d records is not a prefix of the log's", n)
	}
	return cp, nil
}

// TreeRoot is the root of the log's first n records, from its stored
// hashes (n at most the checkpoint's size).
func TreeRoot(stateDir string, n int64) ([32]byte, error) {
	rd, err := openReader(stateDir)
	if err != nil {
		return [32]byte{}, err
	}
	defer rd.Close()
	if n > rd.cp.Size {
		return [32]byte{}, fmt.Errorf("evidence: %d records past the checkpoint (%d)", n, rd.cp.Size)
	}
	h, err := tlog.TreeHash(n, rd.hashReader())
	return h, err
}

// RecordReader reads single records of a state directory's log by their
// position, among those the checkpoint it opened covers.
type RecordReader struct {
	rd *reader
}

// OpenRecords opens stateDir's log for reading single records.
func OpenRecords(stateDir string) (*RecordReader, error) {
	rd, err := openReader(stateDir)
	if err != nil {
		return nil, err
	}
	return &RecordReader{rd: rd}, nil
}

// Size is the number of records the reader's checkpoint covers.
func (r *RecordReader) Size() int64 { return r.rd.cp.Size }

// ID is record idx's id, from the index file.
func (r *RecordReader) ID(idx int64) (string, error) {
	if idx < 0 || idx >= r.rd.cp.Size {
		return "", fmt.Errorf("evidence: record %d is not covered by the checkpoint (%d)", idx, r.rd.cp.Size)
	}
	id, err := indexID(r.rd.index, idx)
	if err != nil {
		return "", fmt.Errorf("evidence: %w", err)
	}
	return hex.EncodeToString(id[:]), nil
}

// Record reads record idx: its id and the record, parsed strictly and
// checked against the id the index file gives.
func (r *RecordReader) Record(idx int64) (string, *Record, error) {
	if idx < 0 || idx >= r.rd.cp.Size {
		return "", nil, fmt.Errorf("evidence: record %d is not covered by the checkpoint (%d)", idx, r.rd.cp.Size)
	}
	start, end, id, err := readEntry(r.rd.index, idx)
	if err != nil {
		return "", nil, fmt.Errorf("evidence: %w", err)
	}
	line := make([]byte, end-start)
	if _, err := r.rd.log.ReadAt(line, start); err != nil {
		return "", nil, fmt.Errorf("evidence: record %d: %w", idx, err)
	}
	if line[len(line)-1] != '\n' {
		return "", nil, fmt.Errorf("evidence: record %d: no newline", idx)
	}
	rec, err := ParseRecord(line[:len(line)-1])
	if err != nil {
		return "", nil, fmt.Errorf("evidence: record %d: %w", idx, err)
	}
	if IDOf(line[:len(line)-1]) != hex.EncodeToString(id[:]) {
		return "", nil, fmt.Errorf("evidence: record %d: id does not match the index", idx)
	}
	return hex.EncodeToString(id[:]), rec, nil
}

// Close releases the reader's files.
func (r *RecordReader) Close() { r.rd.Close() }

// ReadFrom calls fn for records [from, checkpoint size) in log order and
// returns the size it read to.
func ReadFrom(stateDir string, from int64, fn func(idx int64, id string, r *Record) error) (int64, error) {
	return readRange(stateDir, from, fn)
}

// IndexDir is where the log's index lives in stateDir.
func IndexDir(stateDir string) string { return filepath.Join(evDir(stateDir), "ix") }

// Origin is the log's origin (its key's name).
func Origin(stateDir string) (string, error) {
	vkey, err := PublicKey(stateDir)
	if err != nil {
		return "", err
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return "", err
	}
	return v.Name(), nil
}

// Signer is what signs an index head: the log (the writer) holds the key.
type Signer interface {
	SignIndexHead(body []byte) ([]byte, error)
}

// LookupPosition returns the position of the record with this id, if the
// log (the writer's id table) has it.
func (l *Log) LookupPosition(id [32]byte) (int64, bool) {
	if l.idt == nil {
		return 0, false
	}
	return l.idt.lookup(id)
}

// BlobSize is the length of the stored content with this hash, for an
// index to show. Content stored raw is checked against its name; content
// stored compressed is not decompressed: its zstd frame says its length
// (every blob aerfs compresses in one piece, which is all content the
// journal carries, has it), and a read of the content checks it (Blob).
func BlobSize(stateDir, hash string) (int64, error) {
	dir := evDir(stateDir)
	if !IsHash(hash) {
		return 0, fmt.Errorf("evidence: blob %q: not a lowercase hex SHA-256", hash)
	}
	b, ok, err := packsOf(dir).get(hash)
	if !ok || err != nil {
		if b, err = os.ReadFile(blobPath(dir, hash)); err != nil {
			return 0, fmt.Errorf("evidence: blob %s: %w", hash, err)
		}
	}
	if s := sha256.Sum256(b); hex.EncodeToString(s[:]) == hash {
		return int64(len(b)), nil
	}
	var h zstd.Header
	if bytes.HasPrefix(b, zstdMagic) && h.Decode(b) == nil && h.HasFCS && !h.Skippable {
		return int64(h.FrameContentSize), nil
	}
	d, err := decodeBlob(hash, b)
	return int64(len(d)), err
}

// BlobStored reports whether content with this hash is in stateDir's
// blob store, without reading it.
func BlobStored(stateDir, hash string) bool {
	if !IsHash(hash) {
		return false
	}
	return blobStored(evDir(stateDir), hash)
}
