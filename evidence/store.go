package evidence

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// File names inside stateDir/evidence (docs/evidence-format.md §2).
const (
	dirName        = "evidence"
	logName        = "log"
	indexName      = "index"
	hashesName     = "hashes"
	checkpointName = "checkpoint"
	keyName        = "key"
	pubName        = "key.pub"
	lockName       = "lock"
	blobsName      = "blobs"
)

// indexEntrySize: big-endian uint64 end offset of the record's line in
// the log, then the record id's 32 raw bytes.
const indexEntrySize = 8 + 32

func evDir(stateDir string) string { return filepath.Join(stateDir, dirName) }

// Init creates stateDir/evidence with an empty log, a fresh Ed25519 note
// key named origin, and a signed checkpoint of the empty tree. It refuses
// to run where a key already exists: replacing a key orphans every
// checkpoint signed with it.
func Init(stateDir, origin string) error {
	if origin == "" {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		origin = "aerfs.local/" + hex.EncodeToString(b[:])
	}
	dir := evDir(stateDir)
	if err := os.MkdirAll(filepath.Join(dir, blobsName), 0o700); err != nil {
		return fmt.Errorf("evidence: init: %w", err)
	}
	for _, n := range []string{keyName, pubName} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			return fmt.Errorf("evidence: init: %s already exists; refusing to replace the log's key", filepath.Join(dir, n))
		}
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		return fmt.Errorf("evidence: init: origin %q: %w", origin, err)
	}
	return initWithKey(dir, skey, vkey)
}

// InitWithKey is Init with a given note key pair (skey, vkey as
// note.GenerateKey writes them): for golden fixtures, which must be
// reproducible, and never for a workspace.
func InitWithKey(stateDir, skey, vkey string) error {
	return initWithKey(evDir(stateDir), strings.TrimSpace(skey), strings.TrimSpace(vkey))
}

// initWithKey lays out dir with a given key pair; the test vectors use it
// with their committed test key.
func initWithKey(dir, skey, vkey string) error {
	if err := os.MkdirAll(filepath.Join(dir, blobsName), 0o700); err != nil {
		return fmt.Errorf("evidence: init: %w", err)
	}
	if err := writeNew(filepath.Join(dir, keyName), []byte(skey+"\n"), 0o600); err != nil {
		return err
	}
	if err := writeNew(filepath.Join(dir, pubName), []byte(vkey+"\n"), 0o644); err != nil {
		return err
	}
	for _, n := range []string{logName, indexName, hashesName} {
		f, err := os.OpenFile(filepath.Join(dir, n), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return fmt.Errorf("evidence: init: %w", err)
		}
		f.Close()
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		return err
	}
	empty, _ := tlog.TreeHash(0, nil)
	cp, err := signCheckpoint(Checkpoint{Origin: s.Name(), Size: 0, Root: empty}, s)
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, checkpointName), cp, 0o644); err != nil {
		return err
	}
	return syncDir(dir)
}

// PublicKey returns the note verifier key ("origin+keyhash+base64") that
// checks this state directory's checkpoints, for `aerfs key`.
func PublicKey(stateDir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(evDir(stateDir), pubName))
	if err != nil {
		return "", fmt.Errorf("evidence: %w", err)
	}
	vkey := strings.TrimSpace(string(b))
	if _, err := note.NewVerifier(vkey); err != nil {
		return "", fmt.Errorf("evidence: %s: %w", pubName, err)
	}
	return vkey, nil
}

// KeyPair returns the public key of stateDir's log once it has checked that
// the signing key beside it belongs to it (a note signed with the one
// opens with the other): a state directory made by someone else cannot
// pass as this log by carrying a copy of its public key.
func KeyPair(stateDir string) (string, error) {
	vkey, err := PublicKey(stateDir)
	if err != nil {
		return "", err
	}
	skey, err := os.ReadFile(filepath.Join(evDir(stateDir), keyName))
	if err != nil {
		return "", fmt.Errorf("evidence: %w", err)
	}
	signer, err := note.NewSigner(strings.TrimSpace(string(skey)))
	if err != nil {
		return "", fmt.Errorf("evidence: %s: %w", keyName, err)
	}
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		return "", fmt.Errorf("evidence: %s: %w", pubName, err)
	}
	msg, err := note.Sign(&note.Note{Text: "aerfs key pair check\n"}, signer)
	if err == nil {
		_, err = note.Open(msg, note.VerifierList(verifier))
	}
	if err != nil {
		return "", fmt.Errorf("evidence: %s and %s are not one key pair: %w", keyName, pubName, err)
	}
	return vkey, nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeAtomic replaces path with data: temp file, fsync, rename. Readers
// see the old or the new content, never a mix.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if err := syncFile(f); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// hashFile reads tlog stored hashes from the hashes file, plus hashes
// computed for the batch being committed that are not on disk yet.
type hashFile struct {
	f       io.ReaderAt
	n       int64 // stored hashes in the file
	pending []tlog.Hash
}

func (h *hashFile) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		switch {
		case x < 0:
			return nil, fmt.Errorf("stored hash index %d", x)
		case x < h.n:
			if _, err := h.f.ReadAt(out[i][:], x*tlog.HashSize); err != nil {
				return nil, fmt.Errorf("hashes: read %d: %w", x, err)
			}
		case x-h.n < int64(len(h.pending)):
			out[i] = h.pending[x-h.n]
		default:
			return nil, fmt.Errorf("hashes: index %d beyond %d stored", x, h.n+int64(len(h.pending)))
		}
	}
	return out, nil
}

// leafHash is the Merkle leaf for a record: RFC 6962 leaf hashing of the
// record id's 32 raw bytes, so a record's inclusion can be proven by id
// alone (docs/evidence-format.md §5).
func leafHash(id [32]byte) tlog.Hash { return tlog.RecordHash(id[:]) }

// reader is read-only access to a state directory's log, without the lock.
// It only looks at what the checkpoint covers: those bytes are durable
// and never change, whatever the daemon is doing.
type reader struct {
	dir        string
	log, index *os.File
	hashes     *os.File
	cpRaw      []byte
	cp         Checkpoint
}

func openReader(stateDir string) (*reader, error) {
	dir := evDir(stateDir)
	r := &reader{dir: dir}
	var err error
	if r.cpRaw, err = os.ReadFile(filepath.Join(dir, checkpointName)); err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	if r.cp, err = peekCheckpoint(r.cpRaw); err != nil {
		return nil, err
	}
	if r.log, err = os.Open(filepath.Join(dir, logName)); err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	if r.index, err = os.Open(filepath.Join(dir, indexName)); err != nil {
		r.Close()
		return nil, fmt.Errorf("evidence: %w", err)
	}
	if r.hashes, err = os.Open(filepath.Join(dir, hashesName)); err != nil {
		r.Close()
		return nil, fmt.Errorf("evidence: %w", err)
	}
	return r, nil
}

func (r *reader) Close() {
	for _, f := range []*os.File{r.log, r.index, r.hashes} {
		if f != nil {
			f.Close()
		}
	}
}

func (r *reader) hashReader() *hashFile {
	return &hashFile{f: r.hashes, n: tlog.StoredHashCount(r.cp.Size)}
}

// entry returns record i's log span and id from the index.
func readEntry(index io.ReaderAt, i int64) (start, end int64, id [32]byte, err error) {
	var b [2 * indexEntrySize]byte
	if i == 0 {
		if _, err = index.ReadAt(b[indexEntrySize:], 0); err != nil {
			return
		}
	} else if _, err = index.ReadAt(b[:], (i-1)*indexEntrySize); err != nil {
		return
	} else {
		start = int64(binary.BigEndian.Uint64(b[:8]))
	}
	end = int64(binary.BigEndian.Uint64(b[indexEntrySize:]))
	copy(id[:], b[indexEntrySize+8:])
	if end <= start || end-start > MaxRecordSize+1 {
		err = fmt.Errorf("index entry %d: bad span [%d, %d)", i, start, end)
	}
	return
}

func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
