package evidence

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// StoredBlobs lists every blob in stateDir's store with its size.
func StoredBlobs(stateDir string) (map[string]int64, error) {
	root := filepath.Join(evDir(stateDir), blobsName)
	out := map[string]int64{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		h := filepath.Base(filepath.Dir(p)) + d.Name()
		if !IsHash(h) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[h] = fi.Size()
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	return out, err
}

// Prune removes the blobs hashes from the store, after the gc record r
// that names them (payload.pruned, set here) is durable: a verifier then
// accepts them as absent, and no blob is ever missing without a record
// saying why. Records are never removed. It returns the record's id.
func (l *Log) Prune(r *Record, hashes []string) (string, error) {
	if len(hashes) == 0 {
		return "", nil
	}
	if r.Payload == nil {
		r.Payload = &Payload{}
	}
	r.Type = TypeGC
	r.Payload.Pruned = hashes
	id, err := l.Append(r)
	if err != nil {
		return "", err
	}
	// The gc record and every record before it are checkpointed before a
	// blob goes: recovery never reads a record past the checkpoint whose
	// blob is gone (it would take it for one a crash cut short).
	if err := l.Flush(); err != nil {
		return id, err
	}
	l.dirsMu.Lock()
	defer l.dirsMu.Unlock()
	dirs := map[string]bool{}
	var errs []error
	for _, h := range hashes {
		p := l.blobPath(h)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		delete(l.blobFiles, p)
		delete(l.lateFiles, p)
		dirs[filepath.Dir(p)] = true
	}
	for d := range dirs {
		if err := syncDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return id, fmt.Errorf("evidence: gc: %w", errors.Join(errs...))
	}
	return id, nil
}
