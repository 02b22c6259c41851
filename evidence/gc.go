package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// TypeGC records a garbage collection of content blobs (`aerfs gc`): the
// record's payload new_hash names a manifest blob listing every blob the
// collection removed and why. Records are never removed; a verifier takes
// a blob that is missing but named by an earlier gc manifest (and referenced
// by no later record) as pruned, and any other missing blob as lost.
const TypeGC = "gc"

func init() { recordTypes[TypeGC] = true }

// GCManifest is the content of a gc record's manifest blob
// (docs/evidence-format.md, "Garbage collection").
type GCManifest struct {
	Version    int          `json:"version"` // 1
	KeepLast   int          `json:"keep_last"`
	KeepWithin string       `json:"keep_within,omitempty"` // a Go duration
	MaxSize    int64        `json:"max_size,omitempty"`    // bytes; 0 = no cap
	Pruned     []PrunedBlob `json:"pruned"`
	Kept       int          `json:"kept"`       // blobs kept
	KeptBytes  int64        `json:"kept_bytes"` // their bytes
}

// PrunedBlob is one blob a gc removed.
type PrunedBlob struct {
	Hash    string `json:"hash"`
	Bytes   int64  `json:"bytes"`
	Path    string `json:"path,omitempty"`     // a file the blob was a version of
	PathB64 string `json:"path_b64,omitempty"` // as meta.path_b64
	Reason  string `json:"reason"`             // "retention" or "max-size"
}

// ParseGCManifest decodes a manifest blob.
func ParseGCManifest(b []byte) (*GCManifest, error) {
	var m GCManifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("evidence: gc manifest: %w", err)
	}
	if m.Version != 1 {
		return nil, fmt.Errorf("evidence: gc manifest: version %d", m.Version)
	}
	for _, p := range m.Pruned {
		if !IsHash(p.Hash) {
			return nil, fmt.Errorf("evidence: gc manifest: %q is not a hash", p.Hash)
		}
	}
	return &m, nil
}

// EncodeGCManifest is the manifest's stored form.
func EncodeGCManifest(m *GCManifest) []byte {
	m.Version = 1
	sort.Slice(m.Pruned, func(i, j int) bool { return m.Pruned[i].Hash < m.Pruned[j].Hash })
	b, _ := json.Marshal(m)
	return append(b, '\n')
}

// BlobSize is the stored size of a blob; ok is false when it is absent.
func BlobSize(stateDir, hash string) (int64, bool) {
	if !IsHash(hash) {
		return 0, false
	}
	st, err := os.Stat(blobPath(evDir(stateDir), hash))
	if err != nil {
		return 0, false
	}
	return st.Size(), true
}

// HasBlob says whether the blob is stored.
func HasBlob(stateDir, hash string) bool { _, ok := BlobSize(stateDir, hash); return ok }

// BlobStoreSize is the number and total size of the stored blobs.
func BlobStoreSize(stateDir string) (n int, total int64, err error) {
	root := filepath.Join(evDir(stateDir), blobsName)
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && IsHash(filepath.Base(filepath.Dir(p))+d.Name()) {
			if fi, err := d.Info(); err == nil {
				n++
				total += fi.Size()
			}
		}
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return n, total, err
}

// RemoveBlobs deletes stored blobs and makes the removals durable. Call it
// only after the gc record naming them is durable.
func RemoveBlobs(stateDir string, hashes []string) (int64, error) {
	dirs := map[string]bool{}
	var freed int64
	var errs []error
	for _, h := range hashes {
		if !IsHash(h) {
			continue
		}
		p := blobPath(evDir(stateDir), h)
		st, err := os.Lstat(p)
		if err != nil {
			continue
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, err)
			continue
		}
		freed += st.Size()
		dirs[filepath.Dir(p)] = true
	}
	for d := range dirs {
		if err := syncDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return freed, errors.Join(errs...)
}

// PrunedBlobs maps every blob some gc record pruned to the id of that
// record.
func PrunedBlobs(stateDir string) (map[string]string, error) {
	out := map[string]string{}
	err := ReadAll(stateDir, func(idx int64, id string, r *Record) error {
		if r.Type != TypeGC || r.Payload == nil || r.Payload.NewHash == "" {
			return nil
		}
		b, err := ReadBlob(stateDir, r.Payload.NewHash)
		if err != nil {
			return nil
		}
		m, err := ParseGCManifest(b)
		if err != nil {
			return nil
		}
		for _, p := range m.Pruned {
			out[p.Hash] = id
		}
		return nil
	})
	return out, err
}

// prunedTracker lets a verifier tell a pruned blob from a lost one: a
// missing blob is accounted for when a gc record after its last reference
// names it in its manifest.
type prunedTracker struct {
	missing map[string]int64 // hash -> index of the last record referencing it
	pruned  map[string]int64 // hash -> index of the last gc record naming it
}

func (t *prunedTracker) ref(h string, idx int64) {
	if t.missing == nil {
		t.missing = map[string]int64{}
	}
	t.missing[h] = idx
}

// gc notes a gc record at idx whose manifest is b.
func (t *prunedTracker) gc(idx int64, b []byte) error {
	m, err := ParseGCManifest(b)
	if err != nil {
		return verr(KindIntegrity, "record %d: %v", idx, err)
	}
	if t.pruned == nil {
		t.pruned = map[string]int64{}
	}
	for _, p := range m.Pruned {
		t.pruned[p.Hash] = idx
	}
	return nil
}

// check fails for a missing blob no later gc record accounts for.
func (t *prunedTracker) check() error {
	hs := make([]string, 0, len(t.missing))
	for h := range t.missing {
		hs = append(hs, h)
	}
	sort.Strings(hs)
	for _, h := range hs {
		if g, ok := t.pruned[h]; !ok || g < t.missing[h] {
			return verr(KindIntegrity, "blob %s: missing (referenced by record %d)", h, t.missing[h])
		}
	}
	return nil
}

// notePruned adds the blobs gc record r pruned to set.
func notePruned(stateDir string, r *Record, set map[string]bool) {
	b, err := ReadBlob(stateDir, r.Payload.NewHash)
	if err != nil {
		return
	}
	if m, err := ParseGCManifest(b); err == nil {
		for _, p := range m.Pruned {
			set[p.Hash] = true
		}
	}
}

// WriteBlob stores data as a blob of stateDir's log and makes it durable
// (content and name) before returning its hash: for blobs written outside
// the log's own group commit, such as a gc manifest.
func WriteBlob(stateDir string, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	dst := blobPath(evDir(stateDir), h)
	if _, err := os.Stat(dst); err == nil {
		return h, nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", fmt.Errorf("evidence: blob: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Join(evDir(stateDir), blobsName), ".tmp-blob-*")
	if err != nil {
		return "", fmt.Errorf("evidence: blob: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	body := data
	if c := zstdEncoder.EncodeAll(data, nil); len(c) < len(data) {
		body = c
	}
	if _, err := tmp.Write(body); err != nil {
		return "", fmt.Errorf("evidence: blob: %w", err)
	}
	if err := tmp.Chmod(0o400); err != nil {
		return "", fmt.Errorf("evidence: blob: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("evidence: blob: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", fmt.Errorf("evidence: blob: %w", err)
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return "", fmt.Errorf("evidence: blob: %w", err)
	}
	return h, syncDir(filepath.Join(evDir(stateDir), blobsName))
}
