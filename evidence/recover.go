package evidence

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"golang.org/x/mod/sumdb/tlog"
)

// tailCut says what Open removed from a torn tail.
type tailCut struct {
	LogBytes     int64 // bytes cut from the end of the log
	IndexEntries int64 // index entries dropped (a partial one counts)
	HashBytes    int64 // bytes cut from the hashes file
	Good         int64 // records kept
	LastID       string
	Checkpointed int64
}

func (c *tailCut) String() string {
	last := "none"
	if c.Good > 0 {
		last = fmt.Sprintf("%d (id %s)", c.Good-1, c.LastID)
	}
	return fmt.Sprintf("torn tail: cut %d log bytes, %d index entries, %d hash bytes; last good record %s; checkpoint covered %d",
		c.LogBytes, c.IndexEntries, c.HashBytes, last, c.Checkpointed)
}

// recover brings the three log files back to one consistent length.
//
// Everything the signed checkpoint covers was acknowledged to a caller, so
// a hole there is damage, not a crash: Open refuses and `aerfs verify`
// says what is wrong. Past the checkpoint the log's lines are the truth: a
// record survives if its line is complete, canonical and new, and the first
// one that is not ends the log; the index entries and stored hashes past
// the checkpoint are rebuilt from the kept lines rather than trusted.
func (l *Log) recover(cp Checkpoint) (*tailCut, error) {
	damaged := func(format string, args ...any) error {
		return fmt.Errorf("evidence: log damaged below its signed checkpoint (%d records): %s; this is not a crash tail, run aerfs verify",
			cp.Size, fmt.Sprintf(format, args...))
	}
	if cp.Origin != l.origin {
		return nil, damaged("checkpoint origin %q is not the key's %q", cp.Origin, l.origin)
	}
	sizes := make([]int64, 3)
	for i, f := range []*os.File{l.logf, l.idxf, l.hashf} {
		fi, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("evidence: open: %w", err)
		}
		sizes[i] = fi.Size()
	}
	logSize, idxSize, hashSize := sizes[0], sizes[1], sizes[2]
	ni := idxSize / indexEntrySize
	nh := hashSize / tlog.HashSize
	N := cp.Size
	if ni < N {
		return nil, damaged("index has %d entries", ni)
	}
	if nh < tlog.StoredHashCount(N) {
		return nil, damaged("hashes file has %d hashes, needs %d", nh, tlog.StoredHashCount(N))
	}
	hr := &hashFile{f: l.hashf, n: tlog.StoredHashCount(N)}
	root, err := tlog.TreeHash(N, hr)
	if err != nil {
		return nil, damaged("%v", err)
	}
	if root != cp.Root {
		return nil, damaged("stored hashes give root %x, checkpoint says %x", root, cp.Root)
	}

	// The index below the checkpoint is trusted as far as Open goes (the
	// root covers its ids, and aerfs verify checks every entry): only the
	// newest committed record is read back and checked against its leaf,
	// so that opening a log costs the same at any size.
	var prevEnd int64
	if N > 0 {
		_, end, _, err := readEntry(l.idxf, N-1)
		if err != nil {
			return nil, damaged("index entry %d: %v", N-1, err)
		}
		prevEnd = end
		if prevEnd > logSize {
			return nil, damaged("log is %d bytes, record %d ends at byte %d", logSize, N-1, prevEnd)
		}
		if err := l.checkLine(N-1, hr); err != nil {
			return nil, damaged("record %d: %v", N-1, err)
		}
	}
	// The id table (ids.go) for the records the checkpoint covers; the
	// tail's are added as they are kept.
	if l.idt == nil {
		if l.idt, err = openIDTable(l.dir, l.idxf, N); err != nil {
			return nil, err
		}
	} else if err := l.idt.truncate(N); err != nil {
		return nil, err
	}

	// Past the checkpoint the log is the record: a commit flushes the log
	// before it answers and the index and hashes only after, so they may
	// lack (or hold stale) entries for records that are whole. Every whole,
	// canonical, new line is kept; the first that is not ends the log. The
	// index entries and stored hashes past the checkpoint are rebuilt from
	// the kept lines.
	good := N
	var tailIDs [][32]byte
	var tailEnds []int64
	end := prevEnd
	br := bufio.NewReaderSize(io.NewSectionReader(l.logf, prevEnd, logSize-prevEnd), MaxRecordSize+1)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			break // torn, too long, or the end
		}
		body := line[:len(line)-1]
		rec, err := ParseRecord(body)
		if err != nil || !l.blobsStored(rec) {
			break
		}
		id := sha256.Sum256(body)
		if pos, dup := l.idt.lookup(id); dup && pos != good {
			break
		}
		l.idt.add(id, good)
		end += int64(len(line))
		tailIDs = append(tailIDs, id)
		tailEnds = append(tailEnds, end)
		good++
	}
	prevEnd = end

	cut := &tailCut{
		LogBytes:     logSize - prevEnd,
		IndexEntries: max(0, (idxSize-good*indexEntrySize+indexEntrySize-1)/indexEntrySize),
		HashBytes:    max(0, hashSize-tlog.StoredHashCount(good)*tlog.HashSize),
		Good:         good,
		Checkpointed: N,
	}
	switch {
	case good > N:
		cut.LastID = hex.EncodeToString(tailIDs[len(tailIDs)-1][:])
	case good > 0:
		_, _, id, err := readEntry(l.idxf, good-1)
		if err != nil {
			return nil, fmt.Errorf("evidence: open: %w", err)
		}
		cut.LastID = hex.EncodeToString(id[:])
	}
	// Rebuild the index entries and stored hashes past the checkpoint.
	var idxBuf []byte
	hr = &hashFile{f: l.hashf, n: tlog.StoredHashCount(N)}
	for k, id := range tailIDs {
		var e [indexEntrySize]byte
		binary.BigEndian.PutUint64(e[:8], uint64(tailEnds[k]))
		copy(e[8:], id[:])
		idxBuf = append(idxBuf, e[:]...)
		hs, err := tlog.StoredHashesForRecordHash(N+int64(k), leafHash(id), hr)
		if err != nil {
			return nil, fmt.Errorf("evidence: open: %w", err)
		}
		hr.pending = append(hr.pending, hs...)
	}
	var buf []byte
	for _, h := range hr.pending {
		buf = append(buf, h[:]...)
	}
	if len(idxBuf) > 0 {
		if _, err := l.idxf.WriteAt(idxBuf, N*indexEntrySize); err != nil {
			return nil, fmt.Errorf("evidence: open: %w", err)
		}
	}
	if len(buf) > 0 {
		if _, err := l.hashf.WriteAt(buf, hr.n*tlog.HashSize); err != nil {
			return nil, fmt.Errorf("evidence: open: %w", err)
		}
	}
	torn := cut.LogBytes > 0 || cut.IndexEntries > 0 || cut.HashBytes > 0
	if torn {
		if err := l.logf.Truncate(prevEnd); err != nil {
			return nil, fmt.Errorf("evidence: open: cut log: %w", err)
		}
		if err := l.idxf.Truncate(good * indexEntrySize); err != nil {
			return nil, fmt.Errorf("evidence: open: cut index: %w", err)
		}
		if err := l.hashf.Truncate(tlog.StoredHashCount(good) * tlog.HashSize); err != nil {
			return nil, fmt.Errorf("evidence: open: cut hashes: %w", err)
		}
	}
	if torn || len(buf) > 0 || len(idxBuf) > 0 {
		for _, f := range []*os.File{l.logf, l.idxf, l.hashf} {
			if err := f.Sync(); err != nil {
				return nil, fmt.Errorf("evidence: open: %w", err)
			}
		}
	}
	l.n = good
	l.logEnd = prevEnd
	l.hashes = hashFile{f: l.hashf, n: tlog.StoredHashCount(good)}
	if !torn {
		return nil, nil
	}
	return cut, nil
}

// blobsStored reports whether every blob r's payload names is stored whole.
// A blob's content and name are flushed with the log batch of the first
// record naming it, so a record whose blob a crash lost or cut short was
// never acknowledged. Only records past the checkpoint are checked, so the
// hashing is bounded by the last batches. A heal also counts content held
// in memory on its way through the journal (memBlobs): an acknowledged
// record's blob whose file a full disk kept from being written is durable
// in the journal frame that carried it, and the record must not be cut for
// it (the heal would then never find the records it acknowledged).
func (l *Log) blobsStored(r *Record) bool {
	if r.Payload == nil {
		return true
	}
	for _, h := range r.Payload.BlobRefs() {
		if h == "" {
			continue
		}
		l.dirsMu.Lock()
		_, mem := l.memBlobs[h]
		l.dirsMu.Unlock()
		if mem {
			continue
		}
		if _, err := readBlob(l.dir, h); err != nil { // raw or compressed, checked against h
			return false
		}
	}
	return true
}

// checkLine reads record i's line and checks it against the index entry
// and the stored leaf hash.
func (l *Log) checkLine(i int64, hr *hashFile) error {
	start, end, want, err := readEntry(l.idxf, i)
	if err != nil {
		return err
	}
	line := make([]byte, end-start)
	if _, err := l.logf.ReadAt(line, start); err != nil {
		return fmt.Errorf("truncated: %w", err)
	}
	if line[len(line)-1] != '\n' {
		return fmt.Errorf("line does not end in a newline")
	}
	body := line[:len(line)-1]
	if _, err := ParseRecord(body); err != nil {
		return err
	}
	id := sha256.Sum256(body)
	if id != want {
		return fmt.Errorf("id does not match the index")
	}
	leaf, err := hr.ReadHashes([]int64{tlog.StoredHashIndex(0, i)})
	if err != nil {
		return err
	}
	if leaf[0] != leafHash(id) {
		return fmt.Errorf("stored hash does not match")
	}
	return nil
}
