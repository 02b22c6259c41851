package evidence

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// Bundle format identifiers (docs/evidence-format.md §7).
const (
	BundleFormat  = "aerfs-evidence-bundle"
	BundleVersion = 1
)

// Names inside a bundle.
const (
	bManifest   = "manifest.json"
	bCheckpoint = "checkpoint"
	bRecords    = "records.jsonl"
	bIndex      = "index.jsonl"
	bRefs       = "refs.jsonl"
	bBlobs      = "blobs/"
)

// Manifest describes a bundle. It is not signed: every field that matters
// is checked against the signed checkpoint or against the files.
type Manifest struct {
	Format      string         `json:"format"`
	Version     int            `json:"version"`
	Created     string         `json:"created"`
	Origin      string         `json:"origin"`
	TreeSize    int64          `json:"tree_size"`
	RootHash    string         `json:"root_hash"`
	KeyID       string         `json:"key_id"`
	PublicKey   string         `json:"public_key"`
	Complete    bool           `json:"complete"`
	Filter      ManifestFilter `json:"filter"`
	RecordCount int64          `json:"record_count"`
	RefCount    int64          `json:"ref_count"`
	BlobCount   int64          `json:"blob_count"`
}

// ManifestFilter records how a partial bundle was selected; "" = any.
type ManifestFilter struct {
	Since   string `json:"since"`
	Session string `json:"session"`
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"` // the filter path's bytes when they are not UTF-8 (then path is "")
	Type    string `json:"type"`
}

// indexLine is one line of index.jsonl or refs.jsonl: a record's position
// and id, and its inclusion proof when the bundle is partial.
type indexLine struct {
	Idx   int64    `json:"idx"`
	ID    string   `json:"id"`
	Proof []string `json:"proof"`
}

// Export writes the records that f selects, as of stateDir's current
// checkpoint, into a self-contained bundle at out: a directory, or a zip
// when out ends in ".zip". It needs no lock. out must not exist; the
// bundle is built beside it and renamed into place.
func Export(stateDir string, f Filter, out string) (*Manifest, error) {
	return ExportProgress(stateDir, f, out, nil)
}

// ExportProgress is Export, telling p how far it has come: the records
// read of the checkpoint's, then the blobs written.
func ExportProgress(stateDir string, f Filter, out string, p Progress) (*Manifest, error) {
	if _, err := os.Lstat(out); err == nil {
		return nil, fmt.Errorf("evidence: export: %s already exists", out)
	}
	tmp := filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".tmp")
	os.RemoveAll(tmp)
	var w bundleWriter
	var err error
	if strings.HasSuffix(out, ".zip") {
		w, err = newZipWriter(tmp)
	} else {
		w, err = newDirWriter(tmp)
	}
	if err != nil {
		return nil, fmt.Errorf("evidence: export: %w", err)
	}
	m, err := exportTo(stateDir, f, w, p)
	if err == nil {
		if err = os.Rename(tmp, out); err != nil {
			err = fmt.Errorf("evidence: export: %w", err)
		}
	}
	if err != nil {
		w.abort()
		os.RemoveAll(tmp)
		return nil, err
	}
	return m, nil
}

// ExportZip writes the bundle Export would write, as a zip, to dst (the
// owner's `aerfs export` served by a root daemon streams it this way).
func ExportZip(stateDir string, f Filter, dst io.Writer) (*Manifest, error) {
	return exportTo(stateDir, f, &zipWriter{z: zip.NewWriter(dst)}, nil)
}

func exportTo(stateDir string, f Filter, w bundleWriter, progress Progress) (*Manifest, error) {
	vkey, err := PublicKey(stateDir)
	if err != nil {
		return nil, err
	}
	rd, err := openReader(stateDir)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	cp, err := OpenCheckpoint(rd.cpRaw, vkey)
	if err != nil {
		return nil, fmt.Errorf("evidence: export: %w", err)
	}
	kid, _ := keyID(vkey)
	m := &Manifest{
		Format: BundleFormat, Version: BundleVersion, Created: FormatTime(time.Now()),
		Origin: cp.Origin, TreeSize: cp.Size, RootHash: cp.RootHex(),
		KeyID: kid, PublicKey: vkey, Complete: f.IsZero(),
		Filter: manifestFilter(f),
	}
	if !f.Since.IsZero() {
		m.Filter.Since = FormatTime(f.Since)
	}

	hr := rd.hashReader()
	prove := func(idx int64) ([]string, error) {
		if m.Complete {
			return []string{}, nil
		}
		p, err := tlog.ProveRecord(cp.Size, idx, hr)
		if err != nil {
			return nil, fmt.Errorf("evidence: export: prove %d: %w", idx, err)
		}
		return hashesHex(p), nil
	}
	recW, err := w.create(bRecords)
	if err != nil {
		return nil, err
	}
	var index, refs bytes.Buffer
	all := map[string]int64{}
	selected := map[string]bool{}
	referenced := map[string]int64{}
	blobs := map[string]bool{}
	pruned := map[string]bool{}
	err = ReadAll(stateDir, func(idx int64, id string, r *Record) error {
		if idx >= cp.Size {
			return nil
		}
		progress.tick("records", idx+1, cp.Size)
		all[id] = idx
		if r.Payload != nil {
			for _, h := range r.Payload.Pruned {
				pruned[h] = true
			}
		}
		// gc records travel with every bundle: they say which of the
		// bundle's blobs are absent on purpose.
		if !f.Match(r) && r.Type != TypeGC {
			return nil
		}
		c, err := r.Canonical()
		if err != nil {
			return err
		}
		if _, err := recW.Write(append(c, '\n')); err != nil {
			return err
		}
		p, err := prove(idx)
		if err != nil {
			return err
		}
		writeJSONLine(&index, indexLine{Idx: idx, ID: id, Proof: p})
		selected[id] = true
		m.RecordCount++
		for _, par := range r.Parents {
			if _, seen := referenced[par]; !seen {
				referenced[par] = all[par]
			}
		}
		if r.Payload != nil {
			for _, h := range r.Payload.BlobRefs() {
				if h != "" {
					blobs[h] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := recW.Close(); err != nil {
		return nil, err
	}
	if err := w.put(bIndex, index.Bytes()); err != nil {
		return nil, err
	}
	var refIdx []int64
	refID := map[int64]string{}
	for id, idx := range referenced {
		if !selected[id] {
			refIdx = append(refIdx, idx)
			refID[idx] = id
		}
	}
	sort.Slice(refIdx, func(i, j int) bool { return refIdx[i] < refIdx[j] })
	for _, idx := range refIdx {
		p, err := prove(idx)
		if err != nil {
			return nil, err
		}
		writeJSONLine(&refs, indexLine{Idx: idx, ID: refID[idx], Proof: p})
		m.RefCount++
	}
	if err := w.put(bRefs, refs.Bytes()); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(blobs))
	for h := range blobs {
		names = append(names, h)
	}
	sort.Strings(names)
	for i, h := range names {
		progress.tick("blobs", int64(i+1), int64(len(names)))
		b, err := ReadBlob(stateDir, h)
		if err != nil {
			if pruned[h] && errors.Is(err, fs.ErrNotExist) {
				continue // removed by aerfs gc, which a gc record in the bundle says
			}
			return nil, fmt.Errorf("evidence: export: %w", err)
		}
		if err := w.put(bBlobs+h, b); err != nil {
			return nil, err
		}
		m.BlobCount++
	}
	if err := w.put(bCheckpoint, rd.cpRaw); err != nil {
		return nil, err
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := w.put(bManifest, append(mb, '\n')); err != nil {
		return nil, err
	}
	if err := w.finish(); err != nil {
		return nil, fmt.Errorf("evidence: export: %w", err)
	}
	return m, nil
}

func writeJSONLine(b *bytes.Buffer, v any) {
	j, _ := json.Marshal(v)
	b.Write(j)
	b.WriteByte('\n')
}

type bundleWriter interface {
	create(name string) (io.WriteCloser, error)
	put(name string, data []byte) error
	finish() error
	abort()
}

type dirWriter struct{ root string }

func newDirWriter(root string) (*dirWriter, error) {
	if err := os.MkdirAll(filepath.Join(root, "blobs"), 0o755); err != nil {
		return nil, err
	}
	return &dirWriter{root}, nil
}

func (d *dirWriter) create(name string) (io.WriteCloser, error) {
	return os.OpenFile(filepath.Join(d.root, filepath.FromSlash(name)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
}

func (d *dirWriter) put(name string, data []byte) error {
	f, err := d.create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (d *dirWriter) finish() error { return nil }
func (d *dirWriter) abort()        {}

type zipWriter struct {
	f *os.File // nil: the zip goes to a stream the caller closes
	z *zip.Writer
}

func newZipWriter(path string) (*zipWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &zipWriter{f: f, z: zip.NewWriter(f)}, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func (z *zipWriter) create(name string) (io.WriteCloser, error) {
	h := &zip.FileHeader{Name: name, Method: zip.Deflate}
	h.SetMode(0o644)
	w, err := z.z.CreateHeader(h)
	return nopCloser{w}, err
}

func (z *zipWriter) put(name string, data []byte) error {
	w, err := z.create(name)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

func (z *zipWriter) finish() error {
	if z.f == nil {
		return z.z.Close()
	}
	if err := z.z.Close(); err != nil {
		z.f.Close()
		return err
	}
	if err := z.f.Sync(); err != nil {
		z.f.Close()
		return err
	}
	return z.f.Close()
}

func (z *zipWriter) abort() {
	if z.f != nil {
		z.f.Close()
	}
}

// sha256Hex is the blob naming function.
func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func manifestFilter(f Filter) ManifestFilter {
	m := ManifestFilter{Session: f.Session, Type: f.Type}
	m.Path, m.PathB64 = split(f.Path)
	return m
}
