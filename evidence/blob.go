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
	"golang.org/x/sys/unix"
)

// Blobs are stored once, named by the SHA-256 of their content: content
// that travels through the journal as an entry of a pack under
// evidence/packs/ (pack.go), larger content (and every blob written before
// packs) as a file of its own under evidence/blobs/<first two hex>/<other
// 62>.

// blobStored reports whether content hash is in dir's store (packed or a
// file), without reading it.
func blobStored(dir, hash string) bool {
	if packsOf(dir).has(hash) {
		return true
	}
	_, err := os.Stat(blobPath(dir, hash))
	return err == nil
}

func blobPath(dir, hash string) string {
	return filepath.Join(dir, blobsName, hash[:2], hash[2:])
}

func (l *Log) blobPath(hash string) string { return blobPath(l.dir, hash) }

// PutBlob stores data and returns its hex SHA-256. Storing the same
// content twice is a no-op. The content is durable no later than the
// first record naming it; content no record names yet is durable once a
// Flush returns (a restore journal that names it flushes first).
func (l *Log) PutBlob(data []byte) (string, error) {
	l.gcMu.RLock() // gc.go: no prune decides while content is being stored
	defer l.gcMu.RUnlock()
	var h string
	var err error
	if len(data) <= journalBlobMax {
		h = l.putBlobMem(data)
	} else {
		h, err = l.putBlob(bytes.NewReader(data))
	}
	if err == nil {
		l.stored(h)
	}
	return h, err
}

// PutBlobFile stores the content of the file at path, streaming it.
func (l *Log) PutBlobFile(path string) (string, error) {
	l.gcMu.RLock() // gc.go: no prune decides while content is being stored
	defer l.gcMu.RUnlock()
	h, err := l.putBlobFile(path)
	if err == nil {
		l.stored(h)
	}
	return h, err
}

func (l *Log) putBlobFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("evidence: blob: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() <= journalBlobMax {
		data, err := io.ReadAll(io.LimitReader(f, journalBlobMax+1))
		if err != nil {
			return "", fmt.Errorf("evidence: blob: %w", err)
		}
		if len(data) <= journalBlobMax {
			return l.putBlobMem(data), nil
		}
		return l.putBlob(io.MultiReader(bytes.NewReader(data), f))
	}
	return l.putBlob(f)
}

// putBlobMem stores small content through the journal: it travels in the
// frame of the next batch of records, and is written as a blob file once
// that frame is durable (materialize). Nothing touches the disk here.
func (l *Log) putBlobMem(data []byte) string {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	l.dirsMu.Lock()
	_, known := l.memBlobs[h]
	l.dirsMu.Unlock()
	if known {
		return h
	}
	if l.packs.has(h) {
		return h
	}
	if _, err := os.Stat(l.blobPath(h)); err == nil {
		l.dirsMu.Lock() // see putBlob: a file being placed is queued once this returns
		l.dirsMu.Unlock()
		return h
	}
	body := data
	if c := zstdEncoder.EncodeAll(data, make([]byte, 0, len(data)/2)); len(c) < len(data) {
		body = c
	} else {
		body = bytes.Clone(data)
	}
	l.dirsMu.Lock()
	if _, known := l.memBlobs[h]; !known {
		l.memBlobs[h] = &memBlob{body: body}
	}
	l.dirsMu.Unlock()
	return h
}

// takePending returns the blobs no durable frame carries yet.
func (l *Log) takePending() map[string][]byte {
	l.dirsMu.Lock()
	defer l.dirsMu.Unlock()
	var out map[string][]byte
	for h, b := range l.memBlobs {
		if !b.journaled {
			if out == nil {
				out = map[string][]byte{}
			}
			out[h] = b.body
		}
	}
	return out
}

// materialize packs the blobs a durable frame carries (not flushed: the
// frame is their durable copy until the next checkpoint, which flushes
// the packs first). journaled are marked, then written.
func (l *Log) materialize(journaled map[string][]byte) {
	if len(journaled) == 0 {
		return
	}
	l.dirsMu.Lock()
	for h := range journaled {
		if b := l.memBlobs[h]; b != nil {
			b.journaled = true
		}
	}
	l.dirsMu.Unlock()
	for h, body := range journaled {
		if err := l.writeBlobBody(h, body); err != nil {
			// Stays in memory (and in the journal) until the next batch
			// tries again; readers in this process still find it.
			continue
		}
		l.dirsMu.Lock()
		delete(l.memBlobs, h)
		l.dirsMu.Unlock()
	}
}

// writeMemBlobs packs blobs held in memory, flushed with
// the next checkpoint: those a durable frame carries that materialize
// could not write (journaledOnly: before a checkpoint ends the journal's
// copy), or all of them (a reader's flush or Close: content no record
// names yet must be in the store all the same).
func (l *Log) writeMemBlobs(journaledOnly bool) error {
	l.dirsMu.Lock()
	left := map[string][]byte{}
	for h, b := range l.memBlobs {
		if b.journaled || !journaledOnly {
			left[h] = b.body
		}
	}
	l.dirsMu.Unlock()
	for h, body := range left {
		if err := l.writeBlobBody(h, body); err != nil {
			return err
		}
		l.dirsMu.Lock()
		delete(l.memBlobs, h)
		l.dirsMu.Unlock()
	}
	return nil
}

// writeBlobBody stores content whose blob bytes (raw or zstd) are known
// and that a durable journal frame carries (or that is about to be
// flushed): appended to this process's pack (pack.go), flushed with the
// next checkpoint.
func (l *Log) writeBlobBody(h string, body []byte) error {
	return l.packs.put(h, body)
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
	tmp, err := createBlobTemp(root, ".tmp-blob-", 0o400)
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
	if err := l.placeBlob(tmp.Name(), sum, false); err != nil {
		return "", fmt.Errorf("evidence: blob: %w", err)
	}
	renamed = true
	return sum, nil
}

// placeBlob renames a written temporary into place as blob sum and queues
// its content and name for a flush: with the next batch, or (late) with
// the next checkpoint.
func (l *Log) placeBlob(tmp, sum string, late bool) error {
	root := filepath.Join(l.dir, blobsName)
	dst := blobPath(l.dir, sum)
	sub := filepath.Dir(dst)
	l.dirsMu.Lock()
	known := l.subdirs[sub]
	l.dirsMu.Unlock()
	created := false
	if !known {
		_, err := os.Stat(sub)
		created = err != nil
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return err
		}
	}
	l.dirsMu.Lock()
	defer l.dirsMu.Unlock()
	err := os.Rename(tmp, dst)
	if errors.Is(err, fs.ErrNotExist) && known {
		// The directory went since (aerfs gc removes empty ones).
		if err = os.MkdirAll(sub, 0o700); err == nil {
			created = true
			err = os.Rename(tmp, dst)
		}
	}
	if err != nil {
		return err
	}
	files, dirs := l.blobFiles, l.blobDirs
	if late {
		files, dirs = l.lateFiles, l.lateDirs
	}
	l.subdirs[sub] = true
	files[dst] = true
	dirs[sub] = true
	if created {
		dirs[root] = true
	}
	return nil
}

// createBlobTemp makes a blob's temporary file; a test swaps it to fail
// blob files as a full disk does.
var createBlobTemp = createTemp

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

// syncBlobDirs makes the blob files stored since the last call durable:
// their content and their names, all flushed at once. Those written from
// the journal are included when late is set (a checkpoint, a close).
func (l *Log) syncBlobDirs(late bool) error {
	l.dirsMu.Lock()
	dirs, files := l.blobDirs, l.blobFiles
	l.blobDirs, l.blobFiles = map[string]bool{}, map[string]bool{}
	if late {
		for d := range l.lateDirs {
			dirs[d] = true
		}
		for f := range l.lateFiles {
			files[f] = true
		}
		l.lateDirs, l.lateFiles = map[string]bool{}, map[string]bool{}
	}
	l.dirsMu.Unlock()
	var wg sync.WaitGroup
	var errs []error
	var mu sync.Mutex
	flush := func(p string, sync func(string) error) {
		defer wg.Done()
		// A file or directory gone since it was queued was removed by
		// aerfs gc, after its record: nothing left to flush.
		if err := sync(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
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
	if late {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.packs.sync(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		l.requeue(files, dirs, false) // flushed again with the next batch
	}
	return errors.Join(errs...)
}

// requeue puts blob files and directories whose flush failed back among
// those waiting for one: the next batch's, or (late) the next checkpoint's.
func (l *Log) requeue(files, dirs map[string]bool, late bool) {
	l.dirsMu.Lock()
	defer l.dirsMu.Unlock()
	fq, dq := l.blobFiles, l.blobDirs
	if late {
		fq, dq = l.lateFiles, l.lateDirs
	}
	for f := range files {
		fq[f] = true
	}
	for d := range dirs {
		dq[d] = true
	}
}

// syncLateBlobs flushes the blob files written since the last checkpoint
// (and any still waiting for a batch). Many of them — a steady stream of
// commits between two checkpoints — are flushed with one syncfs of the
// state directory's file system rather than one fsync each: one device
// flush instead of hundreds (250 small files: 4.7 ms against 12–67 ms here).
func (l *Log) syncLateBlobs() error {
	l.dirsMu.Lock()
	many := len(l.lateFiles) >= syncfsFrom
	l.dirsMu.Unlock()
	if !many {
		return l.syncBlobDirs(true)
	}
	l.dirsMu.Lock()
	files, dirs := l.lateFiles, l.lateDirs
	l.lateFiles, l.lateDirs = map[string]bool{}, map[string]bool{}
	l.dirsMu.Unlock()
	d, err := os.Open(l.dir)
	if err == nil {
		err = unix.Syncfs(int(d.Fd()))
		d.Close()
	}
	if err != nil {
		l.requeue(files, dirs, true)
		return err
	}
	return l.syncBlobDirs(true)
}

// syncfsFrom is how many waiting blob files make a checkpoint flush them
// with syncfs.
const syncfsFrom = 32

// syncPath flushes the file at p.
func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Blob returns a stored blob, checking its hash: one still on its way
// through the journal from memory.
func (l *Log) Blob(hash string) ([]byte, error) {
	l.dirsMu.Lock()
	b := l.memBlobs[hash]
	l.dirsMu.Unlock()
	if b != nil {
		return decodeBlob(hash, b.body)
	}
	return readBlob(l.dir, hash)
}

// ReadBlob reads a blob from stateDir without opening the log.
func ReadBlob(stateDir, hash string) ([]byte, error) { return readBlob(evDir(stateDir), hash) }

func readBlob(dir, hash string) ([]byte, error) {
	if !IsHash(hash) {
		return nil, fmt.Errorf("evidence: blob %q: not a lowercase hex SHA-256", hash)
	}
	packed, ok, err := packsOf(dir).get(hash)
	if ok && err == nil {
		d, derr := decodeBlob(hash, packed)
		if derr == nil {
			return d, nil
		}
		if _, serr := os.Stat(blobPath(dir, hash)); serr != nil {
			return nil, derr // damaged in its pack, and no file of its own
		}
	}
	b, err := os.ReadFile(blobPath(dir, hash))
	if err != nil {
		return nil, fmt.Errorf("evidence: blob %s: %w", hash, err)
	}
	return decodeBlob(hash, b)
}

// decodeBlob checks a blob file's bytes against its hash and returns the
// content.
func decodeBlob(hash string, b []byte) ([]byte, error) {
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
