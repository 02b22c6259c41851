package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// Blobs are stored once under evidence/blobs/<first two hex>/<other 62>,
// named by the SHA-256 of their content.

func blobPath(dir, hash string) string {
	return filepath.Join(dir, blobsName, hash[:2], hash[2:])
}

func (l *Log) blobPath(hash string) string { return blobPath(l.dir, hash) }

// PutBlob stores data and returns its hex SHA-256. Storing the same
// content twice is a no-op.
func (l *Log) PutBlob(data []byte) (string, error) {
	return l.putBlob(bytes.NewReader(data))
}

// PutBlobFile stores the content of the file at path, streaming it.
func (l *Log) PutBlobFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("evidence: blob: %w", err)
	}
	defer f.Close()
	return l.putBlob(f)
}

// putBlob writes to a temp file in the blob tree while hashing and renames
// it to its hash. Nothing is flushed here: the blob's content and its new
// name are flushed by the next group commit, at the same time as the log
// and before any record naming the blob is acknowledged (syncBlobs), so a
// guarded commit waits for one round of flushes, not two. Recovery cuts a
// record past the checkpoint whose blob did not survive whole.
func (l *Log) putBlob(r io.Reader) (string, error) {
	dir := l.dir
	root := filepath.Join(dir, blobsName)
	// Made read-only from the start (a blob never changes), with a name
	// of its own.
	tmp, err := createTemp(root, ".tmp-blob-", 0o400)
	if err != nil {
		return "", fmt.Errorf("evidence: blob: %w", err)
	}
	renamed := false
	defer func() {
		tmp.Close()
		if !renamed {
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	if err := writeBlobContent(tmp, h, r); err != nil {
		return "", fmt.Errorf("evidence: blob: %w", err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	dst := blobPath(dir, sum)
	if _, err := os.Stat(dst); err == nil {
		// Stored already. Another putBlob may have renamed it in a moment
		// ago: wait until it is queued for the next flush.
		l.dirsMu.Lock()
		l.dirsMu.Unlock()
		return sum, nil
	}
	sub := filepath.Dir(dst)
	l.dirsMu.Lock()
	known := l.subdirs[sub]
	l.dirsMu.Unlock()
	created := false
	if !known {
		_, err = os.Stat(sub)
		created = err != nil
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return "", fmt.Errorf("evidence: blob: %w", err)
		}
	}
	l.dirsMu.Lock()
	defer l.dirsMu.Unlock()
	err = os.Rename(tmp.Name(), dst)
	if errors.Is(err, fs.ErrNotExist) && known {
		// The directory went since (aerfs gc removes empty ones).
		if err = os.MkdirAll(sub, 0o700); err == nil {
			created = true
			err = os.Rename(tmp.Name(), dst)
		}
	}
	if err != nil {
		return "", fmt.Errorf("evidence: blob: %w", err)
	}
	renamed = true
	l.subdirs[sub] = true
	l.blobFiles[dst] = true
	l.blobDirs[sub] = true
	if created {
		l.blobDirs[root] = true
	}
	return sum, nil
}

// createTemp creates a new file named prefix and a random suffix in dir,
// with mode perm, open for reading and writing.
func createTemp(dir, prefix string, perm os.FileMode) (*os.File, error) {
	for i := 0; ; i++ {
		name := filepath.Join(dir, fmt.Sprintf("%s%016x", prefix, rand.Uint64()))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) && i < 100 {
			continue
		}
		return f, err
	}
}

// syncBlobDirs makes the blobs stored since the last call durable: their
// content and their names, all flushed at once.
func (l *Log) syncBlobDirs() error {
	l.dirsMu.Lock()
	dirs, files := l.blobDirs, l.blobFiles
	l.blobDirs, l.blobFiles = map[string]bool{}, map[string]bool{}
	l.dirsMu.Unlock()
	var wg sync.WaitGroup
	var errs []error
	var mu sync.Mutex
	flush := func(p string, sync func(string) error) {
		defer wg.Done()
		if err := sync(p); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	}
	for d := range dirs {
		wg.Add(1)
		go flush(d, syncDir)
	}
	for f := range files {
		wg.Add(1)
		go flush(f, syncPath)
	}
	wg.Wait()
	if len(errs) > 0 {
		// Whatever failed is flushed again with the next batch.
		l.dirsMu.Lock()
		for d := range dirs {
			l.blobDirs[d] = true
		}
		for f := range files {
			l.blobFiles[f] = true
		}
		l.dirsMu.Unlock()
	}
	return errors.Join(errs...)
}

// syncPath flushes the file at p.
func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Blob returns a stored blob, checking its hash.
func (l *Log) Blob(hash string) ([]byte, error) { return readBlob(l.dir, hash) }

// ReadBlob reads a blob from stateDir without opening the log.
func ReadBlob(stateDir, hash string) ([]byte, error) { return readBlob(evDir(stateDir), hash) }

func readBlob(dir, hash string) ([]byte, error) {
	if !IsHash(hash) {
		return nil, fmt.Errorf("evidence: blob %q: not a lowercase hex SHA-256", hash)
	}
	b, err := os.ReadFile(blobPath(dir, hash))
	if err != nil {
		return nil, fmt.Errorf("evidence: blob %s: %w", hash, err)
	}
	// Stored raw (every blob written before compression, and content
	// compression does not shrink), or as one zstd stream. The raw check
	// comes first: raw content may itself begin with zstd's magic.
	if s := sha256.Sum256(b); hex.EncodeToString(s[:]) == hash {
		return b, nil
	}
	if bytes.HasPrefix(b, zstdMagic) {
		if d, err := zstdDecoder.DecodeAll(b, nil); err == nil {
			if s := sha256.Sum256(d); hex.EncodeToString(s[:]) == hash {
				return d, nil
			}
		}
	}
	return nil, &VerifyError{Kind: KindIntegrity, What: fmt.Sprintf("blob %s: hash mismatch", hash)}
}

// writeBlobContent writes r's content to w, zstd-compressed when that makes
// it smaller (raw otherwise), and hashes the uncompressed content into h:
// a blob's name is always the hash of its content. Content up to
// blobInMemory is compressed in one piece; larger content is compressed
// as it streams.
func writeBlobContent(w io.Writer, h io.Writer, r io.Reader) error {
	head, err := io.ReadAll(io.LimitReader(r, blobInMemory+1))
	if err != nil {
		return err
	}
	h.Write(head)
	if len(head) <= blobInMemory {
		body := head
		if c := zstdEncoder.EncodeAll(head, make([]byte, 0, len(head)/2)); len(c) < len(head) {
			body = c
		}
		_, err := w.Write(body)
		return err
	}
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return err
	}
	if _, err := zw.Write(head); err != nil {
		return err
	}
	if _, err := io.Copy(io.MultiWriter(zw, h), r); err != nil {
		return err
	}
	return zw.Close()
}

// blobInMemory is the largest content putBlob compresses in one piece.
const blobInMemory = 16 << 20

var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// One encoder and one decoder serve every blob: EncodeAll and DecodeAll
// may be called concurrently. The decoder's window and memory are bounded
// so that a crafted blob cannot make it allocate without limit.
var (
	zstdEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(2))
	zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(2), zstd.WithDecoderMaxMemory(1<<30), zstd.WithDecoderMaxWindow(64<<20))
)
