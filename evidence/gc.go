package evidence

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// # gc as a transaction with the committer
//
// A gc plan is computed from the history read at some log size (what the
// retention keeps, what is current, what is pending); commits go on while
// it is computed. Pruning from that plan alone removed content committed
// meanwhile — a version the retention keeps, sometimes a file's current
// content — and nothing said so. So the plan only proposes: Prune takes
// its candidates to the committer, which decides, between two batches
// (no record is appended meanwhile) and with no content being stored
// (gcMu), which of them go. A candidate stays when
//
//   - a record appended since the plan's log size names it (a newer
//     version, a pending item, the current content of a path changed since),
//   - it is on its way through the journal (memBlobs), or
//   - it was stored and no record names it yet (live): a change has kept
//     it and is about to record it.
//
// The gc record naming what goes is then made durable and checkpointed,
// and only then are the files removed. A record that names content a gc
// removed after it was stored (gone) is refused rather than acknowledged
// without its content.

// liveTTL bounds how long content stored without a record protects itself
// from gc: a change records what it stored within moments; content no
// record ever named (a change that failed) is then ordinary garbage.
const liveTTL = time.Hour

// liveBlob counts the stores of one content not yet named by a record.
type liveBlob struct {
	n    int
	last time.Time
}

// stored notes that content h was just stored and no record names it yet.
func (l *Log) stored(h string) {
	l.liveMu.Lock()
	defer l.liveMu.Unlock()
	if l.live == nil {
		l.live = map[string]*liveBlob{}
	}
	b := l.live[h]
	if b == nil {
		b = &liveBlob{}
		l.live[h] = b
	}
	b.n++
	b.last = time.Now()
	delete(l.gone, goneKey(h)) // stored again: a record may name it
}

// named notes the content an acknowledged record names.
func (l *Log) named(r *Record) {
	if r == nil || r.Payload == nil {
		return
	}
	l.liveMu.Lock()
	defer l.liveMu.Unlock()
	for _, h := range r.Payload.BlobRefs() {
		if b := l.live[h]; b != nil {
			if b.n--; b.n <= 0 {
				delete(l.live, h)
			}
		}
	}
}

// prunedUnder reports content r names that a gc removed after it was
// stored: a record naming it would be acknowledged without its content.
func (l *Log) prunedUnder(r *Record) string {
	if r == nil || r.Payload == nil {
		return ""
	}
	l.liveMu.Lock()
	defer l.liveMu.Unlock()
	if len(l.gone) == 0 {
		return ""
	}
	for _, h := range r.Payload.BlobRefs() {
		if _, ok := l.gone[goneKey(h)]; ok {
			return h
		}
	}
	return ""
}

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
		err = nil
	}
	if err != nil {
		return nil, err
	}
	packed, err := packsOf(evDir(stateDir)).sizes()
	if err != nil {
		return nil, err
	}
	for h, n := range packed {
		out[h] = n
	}
	return out, nil
}

// pruneReq is a gc's request to the committer.
type pruneReq struct {
	rec        *Record
	candidates []string
	since      int64 // the log size the candidates were chosen at
	id         string
	pruned     []string
}

// Prune removes from the store those of candidates that nothing needs any
// more, deciding in the committer: candidates were chosen from the
// records below since (the log size the plan read), and a candidate that
// a record appended since names, that is on its way through the journal,
// or that was stored and is not yet recorded, stays. The gc record r
// naming what goes (payload.pruned, set here) is durable and checkpointed
// before a blob is removed, so no blob is ever missing without a record
// saying why; records are never removed. It returns the record's id ("" when
// nothing was pruned) and the hashes pruned.
func (l *Log) Prune(r *Record, candidates []string, since int64) (string, []string, error) {
	if len(candidates) == 0 {
		return "", nil, nil
	}
	p := &pruneReq{rec: r, candidates: candidates, since: since}
	req := &appendReq{prune: p, err: make(chan error, 1)}
	l.sendMu.RLock()
	if l.closed {
		l.sendMu.RUnlock()
		return "", nil, ErrClosed
	}
	l.reqs <- req
	l.sendMu.RUnlock()
	err := <-req.err
	return p.id, p.pruned, err
}

// commitBatch commits a batch, running each prune request in it between
// the records queued before and after it.
func (l *Log) commitBatch(batch []*appendReq) {
	start := 0
	for i, r := range batch {
		if r.prune == nil {
			continue
		}
		if i > start {
			l.commit(batch[start:i])
		}
		r.err <- l.prune(r.prune)
		start = i + 1
	}
	if start < len(batch) || len(batch) == 0 {
		l.commit(batch[start:])
	}
}

// prune is Prune's decision and removal, in the committer.
func (l *Log) prune(p *pruneReq) error {
	l.gcMu.Lock() // no content is stored while this decides and removes
	defer l.gcMu.Unlock()
	keep := map[string]bool{}
	l.mu.Lock()
	if l.broken != nil {
		err := l.broken
		l.mu.Unlock()
		return err
	}
	err := l.namedSince(p.since, keep)
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("evidence: gc: reading the records since its plan: %w", err)
	}
	l.dirsMu.Lock()
	for h := range l.memBlobs {
		keep[h] = true
	}
	l.dirsMu.Unlock()
	now := time.Now()
	l.liveMu.Lock()
	for h, b := range l.live {
		if now.Sub(b.last) > liveTTL {
			delete(l.live, h) // stored by a change that never recorded it
			continue
		}
		keep[h] = true
	}
	for h, t := range l.gone {
		if now.Sub(time.Unix(0, t)) > liveTTL {
			delete(l.gone, h)
		}
	}
	l.liveMu.Unlock()
	var hashes []string
	for _, h := range p.candidates {
		if IsHash(h) && !keep[h] {
			keep[h] = true // once
			hashes = append(hashes, h)
		}
	}
	if len(hashes) == 0 {
		return nil
	}
	sort.Strings(hashes) // payload.pruned is sorted (docs/evidence-format.md §3.3)
	r := p.rec
	if r.Payload == nil {
		r.Payload = &Payload{}
	}
	r.Type = TypeGC
	r.Payload.Pruned = hashes
	req, err := l.makeReq(r, false)
	if err != nil {
		return err
	}
	// The gc record and every record before it are checkpointed before a
	// blob goes: recovery never reads a record past the checkpoint whose
	// blob is gone (it would take it for one a crash cut short).
	barrier := &appendReq{barrier: true, err: make(chan error, 1)}
	l.commit([]*appendReq{req, barrier})
	if err := <-req.err; err != nil {
		return err
	}
	p.id = fmt.Sprintf("%x", req.id)
	if err := <-barrier.err; err != nil {
		return err
	}
	p.pruned = hashes
	l.dirsMu.Lock()
	defer l.dirsMu.Unlock()
	dirs := map[string]bool{}
	var errs []error
	l.liveMu.Lock()
	if l.gone == nil {
		l.gone = map[[32]byte]int64{}
	}
	for _, h := range hashes {
		if k := goneKey(h); k != ([32]byte{}) {
			l.gone[k] = now.UnixNano()
		}
	}
	l.liveMu.Unlock()
	for _, h := range hashes {
		bp := l.blobPath(h)
		if err := os.Remove(bp); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue // packed, or gone already
		}
		delete(l.blobFiles, bp)
		delete(l.lateFiles, bp)
		dirs[filepath.Dir(bp)] = true
	}
	for d := range dirs {
		if err := syncDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	drop := make(map[string]bool, len(hashes))
	for _, h := range hashes {
		drop[h] = true
	}
	if err := l.packs.repack(drop); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("evidence: gc: %w", errors.Join(errs...))
	}
	return nil
}

// namedSince adds to keep every blob named by the records from index since
// to the last acknowledged one, read back from the log file (written, if
// not yet flushed, for every acknowledged record). Called with l.mu held.
func (l *Log) namedSince(since int64, keep map[string]bool) error {
	if since < 0 || since > l.n {
		return fmt.Errorf("the plan read %d records, the log has %d", since, l.n)
	}
	if since == l.n {
		return nil
	}
	var start int64
	if since > 0 {
		var e [indexEntrySize]byte
		if _, err := l.idxf.ReadAt(e[:], (since-1)*indexEntrySize); err != nil {
			return err
		}
		start = int64(binary.BigEndian.Uint64(e[:8]))
	}
	if start > l.logEnd {
		return fmt.Errorf("index entry %d ends at %d, past the log's end %d", since-1, start, l.logEnd)
	}
	br := bufio.NewReaderSize(io.NewSectionReader(l.logf, start, l.logEnd-start), MaxRecordSize+1)
	for i := since; i < l.n; i++ {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		r, err := ParseRecord(line[:len(line)-1])
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if r.Payload != nil {
			for _, h := range r.Payload.BlobRefs() {
				keep[h] = true
			}
		}
	}
	return nil
}

// goneKey is the key of content h in Log.gone: its hash's 32 bytes, not the
// hex text (an hour of prunes under a busy agent is a hundred thousand
// entries).
// A text that is not a hash has the zero key, which no content has.
func goneKey(h string) [32]byte {
	var k [32]byte
	if len(h) != 64 {
		return [32]byte{}
	}
	if _, err := hex.Decode(k[:], []byte(h)); err != nil {
		return [32]byte{}
	}
	return k
}
