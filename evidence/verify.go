package evidence

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// Report says what a successful verification covered.
type Report struct {
	Source      string // bundle path or state directory
	Origin      string
	TreeSize    int64
	Root        string // hex
	KeyID       string
	KeySource   string // "argument", "bundle" or "state": where the trusted key came from
	Complete    bool   // every record of the tree was checked
	Records     int64  // records checked
	Refs        int64  // parent records proven by id only
	Blobs       int64
	Pruned      int64 // referenced blobs absent because aerfs gc removed them
	Bytes       int64 // record bytes hashed
	Uncommitted int64 // VerifyState: index entries past the checkpoint (appends in flight or a torn tail)
}

// VerifyBundle checks a bundle (directory or .zip) offline. pubkey is the
// trusted note verifier key; "" trusts the key the bundle carries, which
// proves only internal consistency, and the Report says so. Every failure
// is a *VerifyError.
func VerifyBundle(path, pubkey string) (*Report, error) {
	return VerifyBundleLimits(path, pubkey, DefaultLimits)
}

// VerifyBundleLimits is VerifyBundle with explicit resource limits.
func VerifyBundleLimits(path, pubkey string, lim Limits) (*Report, error) {
	return VerifyBundleProgress(path, pubkey, lim, nil)
}

// VerifyBundleProgress is VerifyBundleLimits, telling p how many of the
// bundle's records it has checked.
func VerifyBundleProgress(path, pubkey string, lim Limits, p Progress) (*Report, error) {
	files, err := ReadBundleFiles(path, lim)
	if err != nil {
		return nil, err
	}
	rep, err := verifyBundleFiles(files, pubkey, p)
	if err != nil {
		return nil, err
	}
	rep.Source = path
	return rep, nil
}

// parseManifest strictly decodes and checks a manifest.
func parseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := strictUnmarshal(b, &m); err != nil {
		return nil, prefix("manifest", err)
	}
	if err := requireKeys(b, "format", "version", "created", "origin", "tree_size", "root_hash",
		"key_id", "public_key", "complete", "filter", "record_count", "ref_count", "blob_count",
		"filter.since", "filter.session", "filter.path", "filter.type"); err != nil {
		return nil, prefix("manifest", err)
	}
	if m.Format != BundleFormat {
		return nil, schemaErr("manifest: format %q is not %q", m.Format, BundleFormat)
	}
	if m.Version != BundleVersion {
		return nil, schemaErr("manifest: unsupported bundle version %d (this verifier reads %d)", m.Version, BundleVersion)
	}
	if _, err := ParseTime(m.Created); err != nil {
		return nil, schemaErr("manifest: created: %v", err)
	}
	if m.Filter.Since != "" {
		if _, err := ParseTime(m.Filter.Since); err != nil {
			return nil, schemaErr("manifest: filter.since: %v", err)
		}
	}
	if err := checkB64("manifest: filter.path", m.Filter.Path, m.Filter.PathB64); err != nil {
		return nil, err
	}
	if !IsHash(m.RootHash) {
		return nil, schemaErr("manifest: root_hash is not lowercase hex SHA-256")
	}
	if len(m.KeyID) != 8 || !isLowerHex(m.KeyID) {
		return nil, schemaErr("manifest: key_id is not 8 lowercase hex digits")
	}
	if m.TreeSize < 0 || m.RecordCount < 0 || m.RefCount < 0 || m.BlobCount < 0 {
		return nil, schemaErr("manifest: negative count")
	}
	if m.Complete && m.Filter != (ManifestFilter{}) {
		return nil, schemaErr("manifest: a complete bundle has no filter")
	}
	return &m, nil
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// jsonLines splits a JSON Lines file; every line, the last included, must
// end in a newline, so a cut file is told apart from a short one.
func jsonLines(name string, b []byte) ([][]byte, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if b[len(b)-1] != '\n' {
		return nil, verr(KindIntegrity, "%s: truncated (last line has no newline)", name)
	}
	return bytes.Split(b[:len(b)-1], []byte("\n")), nil
}

func parseIndexLine(what string, b []byte) (*indexLine, error) {
	var il indexLine
	// Fast path: lines as aerfs writes them (compact, members in order).
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	fast := dec.Decode(&il) == nil && dec.InputOffset() == int64(len(b)) && il.Proof != nil
	if fast {
		again, _ := json.Marshal(&il)
		fast = bytes.Equal(again, b)
	}
	if !fast {
		il = indexLine{}
		if err := strictUnmarshal(b, &il); err != nil {
			return nil, prefix(what, err)
		}
		if err := requireKeys(b, "idx", "id", "proof"); err != nil {
			return nil, prefix(what, err)
		}
	}
	if !IsHash(il.ID) {
		return nil, schemaErr("%s: id is not lowercase hex SHA-256", what)
	}
	if il.Idx < 0 {
		return nil, schemaErr("%s: negative idx", what)
	}
	if _, err := parseHashes(il.Proof); err != nil {
		return nil, prefix(what+": proof", err)
	}
	return &il, nil
}

// VerifyBundleFiles checks a bundle already read with ReadBundleFiles, as
// VerifyBundle does: a caller that verifies and then uses the bundle's
// content (aerfs report) checks exactly the bytes it uses, with no second
// read that a bundle changed meanwhile could answer differently.
func VerifyBundleFiles(files map[string][]byte, pubkey string, p Progress) (*Report, error) {
	return verifyBundleFiles(files, pubkey, p)
}

func verifyBundleFiles(files map[string][]byte, pubkey string, progress Progress) (*Report, error) {
	// Layout: the fixed files, plus blobs/<hash>, and nothing else.
	for name := range files {
		switch name {
		case bManifest, bCheckpoint, bRecords, bIndex, bRefs:
			continue
		}
		if h, ok := strings.CutPrefix(name, bBlobs); ok && IsHash(h) {
			continue
		}
		return nil, schemaErr("bundle: unexpected file %s", name)
	}
	for _, name := range []string{bManifest, bCheckpoint, bRecords, bIndex, bRefs} {
		if _, ok := files[name]; !ok {
			return nil, verr(KindIntegrity, "bundle: missing %s", name)
		}
	}
	m, err := parseManifest(files[bManifest])
	if err != nil {
		return nil, err
	}
	kid, err := keyID(m.PublicKey)
	if err != nil {
		return nil, schemaErr("manifest: public_key: %v", err)
	}
	if kid != m.KeyID {
		return nil, verr(KindSignature, "manifest: key_id %s does not match public_key (%s)", m.KeyID, kid)
	}
	rep := &Report{KeySource: "argument", Complete: m.Complete}
	if pubkey == "" {
		pubkey = m.PublicKey
		rep.KeySource = "bundle"
	}
	rep.KeyID, err = keyID(pubkey)
	if err != nil {
		return nil, verr(KindSignature, "public key: %v", err)
	}
	cp, err := OpenCheckpoint(files[bCheckpoint], pubkey)
	if err != nil {
		return nil, err
	}
	switch {
	case cp.Origin != m.Origin:
		return nil, verr(KindIntegrity, "manifest: origin %q does not match checkpoint %q", m.Origin, cp.Origin)
	case cp.Size != m.TreeSize:
		return nil, verr(KindIntegrity, "manifest: tree_size %d does not match checkpoint %d", m.TreeSize, cp.Size)
	case cp.RootHex() != m.RootHash:
		return nil, verr(KindIntegrity, "manifest: root_hash does not match checkpoint")
	}
	rep.Origin, rep.TreeSize, rep.Root = cp.Origin, cp.Size, cp.RootHex()

	recs, err := jsonLines(bRecords, files[bRecords])
	if err != nil {
		return nil, err
	}
	idxs, err := jsonLines(bIndex, files[bIndex])
	if err != nil {
		return nil, err
	}
	refLines, err := jsonLines(bRefs, files[bRefs])
	if err != nil {
		return nil, err
	}
	if int64(len(recs)) != m.RecordCount {
		return nil, verr(KindIntegrity, "records.jsonl: %d records, manifest says %d", len(recs), m.RecordCount)
	}
	if len(idxs) != len(recs) {
		return nil, verr(KindIntegrity, "index.jsonl: %d lines for %d records", len(idxs), len(recs))
	}
	if int64(len(refLines)) != m.RefCount {
		return nil, verr(KindIntegrity, "refs.jsonl: %d refs, manifest says %d", len(refLines), m.RefCount)
	}
	if m.Complete && m.RecordCount != cp.Size {
		return nil, verr(KindIntegrity, "records.jsonl: complete bundle has %d records, tree has %d", m.RecordCount, cp.Size)
	}

	known := map[string]int64{} // id -> idx, records and refs
	type pending struct {
		idx     int64
		parents []string
	}
	var checks []pending
	blobsWanted := map[string]int64{}
	prunedBlobs := map[string]bool{} // blobs the bundle's gc records say were removed
	var rb rootBuilder
	last := int64(-1)
	for k, line := range recs {
		progress.tick("records", int64(k+1), int64(len(recs)))
		il, err := parseIndexLine(fmt.Sprintf("index.jsonl line %d", k+1), idxs[k])
		if err != nil {
			return nil, err
		}
		what := fmt.Sprintf("record %d", il.Idx)
		if il.Idx <= last {
			return nil, verr(KindIntegrity, "%s: out of order (after record %d)", what, last)
		}
		if il.Idx >= cp.Size {
			return nil, verr(KindIntegrity, "%s: beyond the tree (size %d)", what, cp.Size)
		}
		last = il.Idx
		r, err := ParseRecord(line)
		if err != nil {
			return nil, prefix(what, err)
		}
		sum := sha256.Sum256(line)
		id := hex.EncodeToString(sum[:])
		if id != il.ID {
			return nil, verr(KindIntegrity, "%s: id mismatch", what)
		}
		if prev, dup := known[id]; dup {
			return nil, verr(KindIntegrity, "%s: duplicate of record %d", what, prev)
		}
		known[id] = il.Idx
		rep.Bytes += int64(len(line)) + 1
		if m.Complete {
			if il.Idx != int64(k) {
				return nil, verr(KindIntegrity, "%s: complete bundle skips record %d", what, k)
			}
			if len(il.Proof) != 0 {
				return nil, schemaErr("%s: complete bundle carries a proof", what)
			}
			rb.add(leafHash(sum))
		} else if err := checkInclusion(il.Idx, il.ID, il.Proof, cp); err != nil {
			return nil, err
		}
		checks = append(checks, pending{il.Idx, r.Parents})
		if r.Payload != nil {
			for _, h := range r.Payload.BlobRefs() {
				if _, seen := blobsWanted[h]; h != "" && !seen {
					blobsWanted[h] = il.Idx
				}
			}
			for _, h := range r.Payload.Pruned {
				prunedBlobs[h] = true
			}
		}
	}
	if m.Complete {
		if rb.root() != cp.Root {
			return nil, verr(KindIntegrity, "records: root hash mismatch (tree size %d)", cp.Size)
		}
	}
	rep.Records = int64(len(recs))

	lastRef := int64(-1)
	for k, line := range refLines {
		il, err := parseIndexLine(fmt.Sprintf("refs.jsonl line %d", k+1), line)
		if err != nil {
			return nil, err
		}
		what := fmt.Sprintf("ref %d", il.Idx)
		if il.Idx <= lastRef {
			return nil, verr(KindIntegrity, "%s: out of order", what)
		}
		lastRef = il.Idx
		if _, dup := known[il.ID]; dup {
			return nil, verr(KindIntegrity, "%s: duplicate of a record in the bundle", what)
		}
		if err := checkInclusion(il.Idx, il.ID, il.Proof, cp); err != nil {
			return nil, prefix("ref", err)
		}
		known[il.ID] = il.Idx
	}
	rep.Refs = int64(len(refLines))

	for _, c := range checks {
		for _, p := range c.parents {
			pi, ok := known[p]
			if !ok {
				return nil, verr(KindIntegrity, "record %d: parent %s is neither in the bundle nor proven", c.idx, p)
			}
			if pi >= c.idx {
				return nil, verr(KindIntegrity, "record %d: parent %s is not earlier in the log", c.idx, p)
			}
		}
	}

	var present []string
	for name := range files {
		if h, ok := strings.CutPrefix(name, bBlobs); ok {
			present = append(present, h)
		}
	}
	sort.Strings(present)
	if int64(len(present)) != m.BlobCount {
		return nil, verr(KindIntegrity, "blobs: %d present, manifest says %d", len(present), m.BlobCount)
	}
	for _, h := range present {
		if _, ok := blobsWanted[h]; !ok {
			return nil, verr(KindIntegrity, "blob %s: not referenced by any record", h)
		}
		if sha256Hex(files[bBlobs+h]) != h {
			return nil, verr(KindIntegrity, "blob %s: hash mismatch", h)
		}
		delete(blobsWanted, h)
	}
	for h, idx := range blobsWanted {
		if prunedBlobs[h] {
			rep.Pruned++
			continue
		}
		return nil, verr(KindIntegrity, "blob %s: missing (referenced by record %d)", h, idx)
	}
	rep.Blobs = int64(len(present))
	return rep, nil
}

// VerifyState checks a live state directory: every record the checkpoint
// covers, against the index, the stored hashes, an independently
// recomputed root, and the blob store. It takes no lock and ignores
// records past the checkpoint (it counts them in Report.Uncommitted). A
// log shorter than its checkpoint is an integrity failure: Open only
// ever cuts past the checkpoint.
func VerifyState(stateDir, pubkey string) (*Report, error) {
	return VerifyStateProgress(stateDir, pubkey, nil)
}

// VerifyStateProgress is VerifyState, telling p how many of the
// checkpoint's records it has checked.
func VerifyStateProgress(stateDir, pubkey string, progress Progress) (*Report, error) {
	dir := evDir(stateDir)
	rep := &Report{Source: stateDir, KeySource: "argument", Complete: true}
	if pubkey == "" {
		b, err := os.ReadFile(filepath.Join(dir, pubName))
		if err != nil {
			return nil, ioErr("key.pub: %v", err)
		}
		pubkey = strings.TrimSpace(string(b))
		rep.KeySource = "state"
	}
	var err error
	if rep.KeyID, err = keyID(pubkey); err != nil {
		return nil, verr(KindSignature, "public key: %v", err)
	}
	cpRaw, err := os.ReadFile(filepath.Join(dir, checkpointName))
	if err != nil {
		return nil, ioErr("checkpoint: %v", err)
	}
	cp, err := OpenCheckpoint(cpRaw, pubkey)
	if err != nil {
		return nil, err
	}
	rep.Origin, rep.TreeSize, rep.Root = cp.Origin, cp.Size, cp.RootHex()
	open := func(name string) (*os.File, int64, error) {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return nil, 0, ioErr("%s: %v", name, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, ioErr("%s: %v", name, err)
		}
		return f, fi.Size(), nil
	}
	logf, logSize, err := open(logName)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	idxf, idxSize, err := open(indexName)
	if err != nil {
		return nil, err
	}
	defer idxf.Close()
	hashf, hashSize, err := open(hashesName)
	if err != nil {
		return nil, err
	}
	defer hashf.Close()
	N := cp.Size
	if ni := idxSize / indexEntrySize; ni < N {
		return nil, verr(KindIntegrity, "index: truncated: checkpoint covers %d records, index has %d", N, ni)
	} else {
		rep.Uncommitted = ni - N
	}
	if nh := hashSize / tlog.HashSize; nh < tlog.StoredHashCount(N) {
		return nil, verr(KindIntegrity, "hashes: truncated: %d stored, tree of %d needs %d", nh, N, tlog.StoredHashCount(N))
	}
	hr := &hashFile{f: hashf, n: tlog.StoredHashCount(N)}

	idxr := bufio.NewReaderSize(io.NewSectionReader(idxf, 0, N*indexEntrySize), 1<<16)
	logr := bufio.NewReaderSize(io.NewSectionReader(logf, 0, logSize), 1<<16)
	ids := make(map[[32]byte]int64, N)
	blobs := map[string]bool{}
	missing := map[string]int64{} // referenced blobs not stored, by first referencing record
	pruned := map[string]bool{}   // blobs gc records say they removed
	var rb rootBuilder
	var pos int64
	var ent [indexEntrySize]byte
	line := make([]byte, 0, 4096)
	for i := int64(0); i < N; i++ {
		progress.tick("records", i+1, N)
		what := fmt.Sprintf("record %d", i)
		if _, err := io.ReadFull(idxr, ent[:]); err != nil {
			return nil, ioErr("index: %v", err)
		}
		end := int64(beUint64(ent[:8]))
		if end <= pos || end-pos > MaxRecordSize+1 {
			return nil, verr(KindIntegrity, "%s: index offset %d out of order", what, end)
		}
		if end > logSize {
			return nil, verr(KindIntegrity, "%s: truncated: log ends at byte %d, record ends at %d", what, logSize, end)
		}
		if n := end - pos; n > int64(cap(line)) {
			line = make([]byte, n)
		}
		line = line[:end-pos]
		if _, err := io.ReadFull(logr, line); err != nil {
			return nil, ioErr("log: %v", err)
		}
		pos = end
		if line[len(line)-1] != '\n' {
			return nil, verr(KindIntegrity, "%s: does not end where the index says", what)
		}
		body := line[:len(line)-1]
		r, err := ParseRecord(body)
		if err != nil {
			return nil, prefix(what, err)
		}
		sum := sha256.Sum256(body)
		if !bytes.Equal(sum[:], ent[8:]) {
			return nil, verr(KindIntegrity, "%s: id mismatch", what)
		}
		if prev, dup := ids[sum]; dup {
			return nil, verr(KindIntegrity, "%s: duplicate of record %d", what, prev)
		}
		leaf := leafHash(sum)
		stored, err := hr.ReadHashes([]int64{tlog.StoredHashIndex(0, i)})
		if err != nil {
			return nil, ioErr("hashes: %v", err)
		}
		if stored[0] != leaf {
			return nil, verr(KindIntegrity, "%s: stored hash mismatch", what)
		}
		for _, p := range r.Parents {
			var pid [32]byte
			hex.Decode(pid[:], []byte(p))
			if _, ok := ids[pid]; !ok {
				return nil, verr(KindIntegrity, "%s: parent %s is not an earlier record", what, p)
			}
		}
		ids[sum] = i
		rb.add(leaf)
		rep.Bytes += int64(len(line))
		if r.Payload != nil {
			for _, h := range r.Payload.BlobRefs() {
				if h == "" || blobs[h] {
					continue
				}
				if _, err := readBlob(dir, h); err != nil {
					if KindOf(err) != 0 {
						return nil, err.(*VerifyError)
					}
					if !blobStored(dir, h) {
						// Missing: fine only if a gc record pruned it.
						if _, seen := missing[h]; !seen {
							missing[h] = i
						}
						continue
					}
					return nil, ioErr("blob %s: %v", h, err)
				}
				blobs[h] = true
			}
			for _, h := range r.Payload.Pruned {
				pruned[h] = true
			}
		}
	}
	for h, i := range missing {
		if !pruned[h] {
			return nil, verr(KindIntegrity, "blob %s: missing (referenced by record %d)", h, i)
		}
	}
	rep.Pruned = int64(len(missing))
	if rb.root() != cp.Root {
		return nil, verr(KindIntegrity, "log: root hash mismatch (tree size %d)", N)
	}
	if th, err := tlog.TreeHash(N, hr); err != nil || th != cp.Root {
		return nil, verr(KindIntegrity, "hashes: stored tree hashes do not give the checkpoint root")
	}
	rep.Records = N
	rep.Blobs = int64(len(blobs))
	return rep, nil
}

func beUint64(b []byte) uint64 {
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}
