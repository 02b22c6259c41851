package evidence

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// # The id table
//
// The log's index file maps a record's position to its id; ids/ maps ids
// back to positions (docs/evidence-format.md §2.1). The writer needs it for
// every append (no id twice, parents earlier in the log), readers to find a
// record by its id or a prefix of it. It is derived data, rebuilt from the
// index file when it is missing or damaged, and it never decides alone: a
// position it gives is checked against the index entry before it is used.
//
// It is kept as immutable sorted runs, each covering a contiguous range of
// records ([from, to), every record of it), beside the records past the
// last run: the writer holds those in memory (at most about idWindow), a
// reader reads them from the index file. Runs of similar size are merged
// in the background, so a log of N records has O(log N) of them. The
// writer's memory is a Bloom filter per run (about 10 bits per record)
// and the window, not a map of every id.

const (
	idsName    = "ids"
	idRunMagic = "aerfs-i1"
	idHeader   = 32 // magic, from, to, count
	idEntry    = 16 // id prefix (8 bytes), position (uint64)
)

// idWindow: records past the last run before the writer writes a new one
// (a variable so that tests can make runs of a few records).
var idWindow = int64(1 << 14)

// idRunName is the file name of the run covering [from, to).
func idRunName(from, to int64) string { return fmt.Sprintf("%016x-%016x", from, to) }

func parseIDRunName(name string) (from, to int64, ok bool) {
	a, b, found := strings.Cut(name, "-")
	if !found || len(a) != 16 || len(b) != 16 {
		return 0, 0, false
	}
	x, err1 := strconv.ParseUint(a, 16, 63)
	y, err2 := strconv.ParseUint(b, 16, 63)
	if err1 != nil || err2 != nil || x >= y {
		return 0, 0, false
	}
	return int64(x), int64(y), true
}

// idRun is one run file, open for reading.
type idRun struct {
	from, to int64
	f        *os.File
	bloom    bloom // nil for a reader
}

func (r *idRun) count() int64 { return r.to - r.from }

// entry reads entry i of the run.
func (r *idRun) entry(i int64) (prefix [8]byte, pos int64, err error) {
	var b [idEntry]byte
	if _, err = r.f.ReadAt(b[:], idHeader+i*idEntry); err != nil {
		return
	}
	copy(prefix[:], b[:8])
	pos = int64(binary.BigEndian.Uint64(b[8:]))
	return
}

// matches returns the positions whose id prefix begins with p (at most 8
// bytes; a longer prefix is cut to 8 and checked by the caller).
func (r *idRun) matches(p []byte) ([]int64, error) {
	if len(p) > 8 {
		p = p[:8]
	}
	n := r.count()
	var ferr error
	lo := sort.Search(int(n), func(i int) bool {
		if ferr != nil {
			return true
		}
		k, _, err := r.entry(int64(i))
		if err != nil {
			ferr = err
			return true
		}
		return bytes.Compare(k[:len(p)], p) >= 0
	})
	if ferr != nil {
		return nil, ferr
	}
	var out []int64
	for i := int64(lo); i < n; i++ {
		k, pos, err := r.entry(i)
		if err != nil {
			return nil, err
		}
		if !bytes.HasPrefix(k[:], p) {
			break
		}
		out = append(out, pos)
	}
	return out, nil
}

// readIDRun opens a run and checks it whole: header, sorted entries inside
// its range, trailer hash. withBloom builds the writer's filter on the way.
func readIDRun(path string, from, to int64, withBloom bool) (*idRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	n := to - from
	if fi.Size() != idHeader+n*idEntry+sha256.Size {
		f.Close()
		return nil, fmt.Errorf("ids: %s: %d bytes, want %d", filepath.Base(path), fi.Size(), idHeader+n*idEntry+sha256.Size)
	}
	h := sha256.New()
	br := bufio.NewReaderSize(io.TeeReader(io.NewSectionReader(f, 0, fi.Size()-sha256.Size), h), 1<<16)
	var hdr [idHeader]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		f.Close()
		return nil, err
	}
	if string(hdr[:8]) != idRunMagic || int64(binary.BigEndian.Uint64(hdr[8:])) != from ||
		int64(binary.BigEndian.Uint64(hdr[16:])) != to || int64(binary.BigEndian.Uint64(hdr[24:])) != n {
		f.Close()
		return nil, fmt.Errorf("ids: %s: bad header", filepath.Base(path))
	}
	r := &idRun{from: from, to: to, f: f}
	if withBloom {
		r.bloom = newBloom(n)
	}
	var prev [idEntry]byte
	var e [idEntry]byte
	for i := int64(0); i < n; i++ {
		if _, err := io.ReadFull(br, e[:]); err != nil {
			f.Close()
			return nil, err
		}
		pos := int64(binary.BigEndian.Uint64(e[8:]))
		if pos < from || pos >= to || (i > 0 && bytes.Compare(e[:], prev[:]) <= 0) {
			f.Close()
			return nil, fmt.Errorf("ids: %s: entry %d out of order or range", filepath.Base(path), i)
		}
		if r.bloom != nil {
			r.bloom.add(e[:8])
		}
		prev = e
	}
	var sum [sha256.Size]byte
	if _, err := f.ReadAt(sum[:], fi.Size()-sha256.Size); err != nil {
		f.Close()
		return nil, err
	}
	if !bytes.Equal(sum[:], h.Sum(nil)) {
		f.Close()
		return nil, fmt.Errorf("ids: %s: hash mismatch", filepath.Base(path))
	}
	return r, nil
}

// writeIDRun writes the run of entries (sorted here) covering [from, to)
// under its final name, durably.
func writeIDRun(dir string, from, to int64, entries [][idEntry]byte) error {
	sort.Slice(entries, func(i, j int) bool { return bytes.Compare(entries[i][:], entries[j][:]) < 0 })
	return writeIDRunFrom(dir, from, to, func(yield func([idEntry]byte) error) error {
		for _, e := range entries {
			if err := yield(e); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeIDRunFrom writes a run whose sorted entries each() yields.
func writeIDRunFrom(dir string, from, to int64, each func(yield func([idEntry]byte) error) error) error {
	f, err := createTemp(dir, ".tmp-ids-", 0o600)
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<16)
	var hdr [idHeader]byte
	copy(hdr[:8], idRunMagic)
	binary.BigEndian.PutUint64(hdr[8:], uint64(from))
	binary.BigEndian.PutUint64(hdr[16:], uint64(to))
	binary.BigEndian.PutUint64(hdr[24:], uint64(to-from))
	w.Write(hdr[:])
	n := int64(0)
	err = each(func(e [idEntry]byte) error {
		n++
		_, err := w.Write(e[:])
		return err
	})
	if err == nil && n != to-from {
		err = fmt.Errorf("ids: run %s has %d entries, want %d", idRunName(from, to), n, to-from)
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		_, err = f.Write(h.Sum(nil))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, idRunName(from, to))); err != nil {
		return err
	}
	return syncDir(dir)
}

// idRunsIn lists the well-named run files in dir, by from then by size
// (largest first).
func idRunsIn(dir string) ([][2]int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out [][2]int64
	for _, e := range ents {
		if from, to, ok := parseIDRunName(e.Name()); ok {
			out = append(out, [2]int64{from, to})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i][0] != out[j][0] {
			return out[i][0] < out[j][0]
		}
		return out[i][1] > out[j][1]
	})
	return out, nil
}

// cover picks runs that cover [0, R) one after the other, each as long as
// possible, with R ≤ limit.
func cover(runs [][2]int64, limit int64) [][2]int64 {
	var out [][2]int64
	at := int64(0)
	for _, r := range runs {
		if r[0] == at && r[1] <= limit {
			out = append(out, r)
			at = r[1]
		}
	}
	return out
}

// idTable is the writer's id table.
type idTable struct {
	dir   string
	index *os.File // the log's index file (positions → ids), to confirm hits

	mu     sync.Mutex
	runs   []*idRun // cover [0, r)
	r      int64
	recent map[[32]byte]int64 // records [r, n)
	gen    int                // bumped by truncate: a merge started before it is dropped
	busy   bool               // a run is being written or merged
	wg     sync.WaitGroup     // the run writer
}

// openIDTable opens the id table for the first n records of the log whose
// index file is index: the runs that cover a prefix of them (checked
// whole; damaged or stray ones removed), and the rest from the index file.
func openIDTable(evDir string, index *os.File, n int64) (*idTable, error) {
	dir := filepath.Join(evDir, idsName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("evidence: ids: %w", err)
	}
	t := &idTable{dir: dir, index: index, recent: map[[32]byte]int64{}}
	if tmps, _ := filepath.Glob(filepath.Join(dir, ".tmp-ids-*")); len(tmps) > 0 {
		for _, p := range tmps {
			os.Remove(p)
		}
	}
	all, err := idRunsIn(dir)
	if err != nil {
		return nil, fmt.Errorf("evidence: ids: %w", err)
	}
	keep := map[[2]int64]bool{}
	for _, c := range cover(all, n) {
		r, err := readIDRun(filepath.Join(dir, idRunName(c[0], c[1])), c[0], c[1], true)
		if err != nil {
			break // the rest is rebuilt from the index file
		}
		t.runs = append(t.runs, r)
		t.r = c[1]
		keep[c] = true
	}
	for _, c := range all {
		if !keep[c] {
			os.Remove(filepath.Join(dir, idRunName(c[0], c[1])))
		}
	}
	// Records no run covers (a log older than the table, or a damaged
	// run): written as runs straight from the index file, a window at a
	// time, so that they never all sit in memory; merged in the
	// background.
	built := false
	for n-t.r >= 2*idWindow {
		entries, err := t.indexEntries(t.r, t.r+idWindow)
		if err == nil {
			err = writeIDRun(dir, t.r, t.r+idWindow, entries)
		}
		var r *idRun
		if err == nil {
			r, err = readIDRun(filepath.Join(dir, idRunName(t.r, t.r+idWindow)), t.r, t.r+idWindow, true)
		}
		if err != nil {
			break // the window holds the rest
		}
		t.runs = append(t.runs, r)
		t.r += idWindow
		built = true
	}
	if err := t.loadRecent(t.r, n); err != nil {
		t.close()
		return nil, err
	}
	if built {
		t.busy = true
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			t.mergeRuns()
			t.mu.Lock()
			t.busy = false
			t.mu.Unlock()
		}()
	}
	return t, nil
}

// indexEntries reads the ids of records [from, to) from the index file as
// run entries.
func (t *idTable) indexEntries(from, to int64) ([][idEntry]byte, error) {
	b := make([]byte, (to-from)*indexEntrySize)
	if _, err := t.index.ReadAt(b, from*indexEntrySize); err != nil {
		return nil, err
	}
	out := make([][idEntry]byte, to-from)
	for i := range out {
		copy(out[i][:8], b[i*indexEntrySize+8:])
		binary.BigEndian.PutUint64(out[i][8:], uint64(from+int64(i)))
	}
	return out, nil
}

// loadRecent reads the ids of records [from, to) from the index file.
func (t *idTable) loadRecent(from, to int64) error {
	const chunk = 4096
	buf := make([]byte, chunk*indexEntrySize)
	for i := from; i < to; i += chunk {
		k := min(chunk, to-i)
		b := buf[:k*indexEntrySize]
		if _, err := t.index.ReadAt(b, i*indexEntrySize); err != nil {
			return fmt.Errorf("evidence: ids: read index: %w", err)
		}
		for j := int64(0); j < k; j++ {
			var id [32]byte
			copy(id[:], b[j*indexEntrySize+8:(j+1)*indexEntrySize])
			t.recent[id] = i + j
		}
	}
	return nil
}

func (t *idTable) close() {
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.runs {
		r.f.Close()
	}
	t.runs = nil
}

// lookup returns the position of the record with this id.
func (t *idTable) lookup(id [32]byte) (int64, bool) {
	t.mu.Lock()
	if pos, ok := t.recent[id]; ok {
		t.mu.Unlock()
		return pos, true
	}
	runs := append([]*idRun(nil), t.runs...)
	t.mu.Unlock()
	for _, r := range runs {
		if !r.bloom.has(id[:8]) {
			continue
		}
		ps, err := r.matches(id[:8])
		if err != nil {
			continue
		}
		for _, pos := range ps {
			if got, err := indexID(t.index, pos); err == nil && got == id {
				return pos, true
			}
		}
	}
	return 0, false
}

// scan looks for id in the first n entries of the index file itself: the
// last word before an append is refused for a parent the table does not
// know (it never should).
func (t *idTable) scan(id [32]byte, n int64) (int64, bool) {
	const chunk = 4096
	buf := make([]byte, chunk*indexEntrySize)
	for i := int64(0); i < n; i += chunk {
		k := min(chunk, n-i)
		b := buf[:k*indexEntrySize]
		if _, err := t.index.ReadAt(b, i*indexEntrySize); err != nil {
			return 0, false
		}
		for j := int64(0); j < k; j++ {
			if bytes.Equal(b[j*indexEntrySize+8:(j+1)*indexEntrySize], id[:]) {
				return i + j, true
			}
		}
	}
	return 0, false
}

// add notes a record just acknowledged.
func (t *idTable) add(id [32]byte, pos int64) {
	t.mu.Lock()
	t.recent[id] = pos
	t.mu.Unlock()
}

// truncate forgets every record from n on (a heal cut the log back).
func (t *idTable) truncate(n int64) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	for id, pos := range t.recent {
		if pos >= n {
			delete(t.recent, id)
		}
	}
	if t.r <= n {
		return nil
	}
	for len(t.runs) > 0 && t.runs[len(t.runs)-1].to > n {
		r := t.runs[len(t.runs)-1]
		r.f.Close()
		os.Remove(filepath.Join(t.dir, idRunName(r.from, r.to)))
		t.runs = t.runs[:len(t.runs)-1]
	}
	t.r = 0
	if len(t.runs) > 0 {
		t.r = t.runs[len(t.runs)-1].to
	}
	clear(t.recent)
	return t.loadRecent(t.r, n)
}

// maybeFlush writes the oldest idWindow records of the window as a run when
// the window has grown past it, then merges runs of similar size, in the
// background. n is the log's size.
func (t *idTable) maybeFlush(n int64) {
	t.mu.Lock()
	if t.busy || n-t.r < 2*idWindow {
		t.mu.Unlock()
		return
	}
	t.busy = true
	from, to, gen := t.r, t.r+idWindow, t.gen
	entries := make([][idEntry]byte, 0, idWindow)
	for id, pos := range t.recent {
		if pos >= from && pos < to {
			var e [idEntry]byte
			copy(e[:8], id[:8])
			binary.BigEndian.PutUint64(e[8:], uint64(pos))
			entries = append(entries, e)
		}
	}
	t.mu.Unlock()
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer func() {
			t.mu.Lock()
			t.busy = false
			t.mu.Unlock()
		}()
		if int64(len(entries)) != to-from || writeIDRun(t.dir, from, to, entries) != nil {
			return // the window keeps them; tried again later
		}
		r, err := readIDRun(filepath.Join(t.dir, idRunName(from, to)), from, to, true)
		if err != nil {
			return
		}
		t.mu.Lock()
		if t.gen != gen || t.r != from {
			t.mu.Unlock()
			r.f.Close()
			os.Remove(filepath.Join(t.dir, idRunName(from, to)))
			return
		}
		t.runs = append(t.runs, r)
		t.r = to
		for id, pos := range t.recent {
			if pos < to {
				delete(t.recent, id)
			}
		}
		t.mu.Unlock()
		t.mergeRuns()
	}()
}

// mergeRuns merges the last two runs while the newer is at least half the
// size of the older one, so sizes fall geometrically and a log of N records
// has O(log N) runs. Called by the run writer only.
func (t *idTable) mergeRuns() {
	for {
		t.mu.Lock()
		k := len(t.runs)
		if k < 2 || 2*t.runs[k-1].count() < t.runs[k-2].count() {
			t.mu.Unlock()
			return
		}
		a, b, gen := t.runs[k-2], t.runs[k-1], t.gen
		t.mu.Unlock()
		err := writeIDRunFrom(t.dir, a.from, b.to, func(yield func([idEntry]byte) error) error {
			return mergeIDEntries(a, b, yield)
		})
		if err != nil {
			return
		}
		m, err := readIDRun(filepath.Join(t.dir, idRunName(a.from, b.to)), a.from, b.to, true)
		if err != nil {
			return
		}
		t.mu.Lock()
		k = len(t.runs)
		if t.gen != gen || k < 2 || t.runs[k-2] != a || t.runs[k-1] != b {
			t.mu.Unlock()
			m.f.Close()
			return
		}
		t.runs = append(t.runs[:k-2], m)
		t.mu.Unlock()
		for _, r := range []*idRun{a, b} {
			r.f.Close()
			os.Remove(filepath.Join(t.dir, idRunName(r.from, r.to)))
		}
	}
}

// mergeIDEntries yields the entries of a and b in order.
func mergeIDEntries(a, b *idRun, yield func([idEntry]byte) error) error {
	ra := bufio.NewReaderSize(io.NewSectionReader(a.f, idHeader, a.count()*idEntry), 1<<16)
	rb := bufio.NewReaderSize(io.NewSectionReader(b.f, idHeader, b.count()*idEntry), 1<<16)
	var ea, eb [idEntry]byte
	na, nb := a.count(), b.count()
	next := func(r *bufio.Reader, e *[idEntry]byte, left *int64) (bool, error) {
		if *left == 0 {
			return false, nil
		}
		*left--
		_, err := io.ReadFull(r, e[:])
		return err == nil, err
	}
	okA, err := next(ra, &ea, &na)
	if err != nil {
		return err
	}
	okB, err := next(rb, &eb, &nb)
	if err != nil {
		return err
	}
	for okA || okB {
		if okA && (!okB || bytes.Compare(ea[:], eb[:]) < 0) {
			if err := yield(ea); err != nil {
				return err
			}
			if okA, err = next(ra, &ea, &na); err != nil {
				return err
			}
		} else {
			if err := yield(eb); err != nil {
				return err
			}
			if okB, err = next(rb, &eb, &nb); err != nil {
				return err
			}
		}
	}
	return nil
}

// indexID reads record pos's id from the index file.
func indexID(index io.ReaderAt, pos int64) ([32]byte, error) {
	var b [indexEntrySize]byte
	var id [32]byte
	if _, err := index.ReadAt(b[:], pos*indexEntrySize); err != nil {
		return id, err
	}
	copy(id[:], b[8:])
	return id, nil
}

// IDReader finds records of a state directory's log by id, for a reader:
// the id table's runs, checked whole the first time they are needed, and
// the index entries past them.
type IDReader struct {
	rd      *reader
	runs    []*idRun
	at      int64 // the runs cover [0, at)
	checked bool
	tail    map[[32]byte]int64
}

// OpenIDs opens stateDir's id table for reading, as of its checkpoint.
func OpenIDs(stateDir string) (*IDReader, error) {
	rd, err := openReader(stateDir)
	if err != nil {
		return nil, err
	}
	return &IDReader{rd: rd}, nil
}

func (r *IDReader) open() {
	if r.checked {
		return
	}
	r.checked = true
	dir := filepath.Join(r.rd.dir, idsName)
	all, _ := idRunsIn(dir)
	for _, c := range cover(all, r.rd.cp.Size) {
		run, err := readIDRun(filepath.Join(dir, idRunName(c[0], c[1])), c[0], c[1], false)
		if err != nil {
			break
		}
		r.runs = append(r.runs, run)
		r.at = c[1]
	}
	r.tail = map[[32]byte]int64{}
	t := &idTable{index: r.rd.index, recent: r.tail}
	if t.loadRecent(r.at, r.rd.cp.Size) != nil {
		r.tail = nil
	}
}

// Find returns the position of the record with this id.
func (r *IDReader) Find(id [32]byte) (int64, bool) {
	r.open()
	if pos, ok := r.tail[id]; ok {
		return pos, true
	}
	for _, run := range r.runs {
		ps, err := run.matches(id[:8])
		if err != nil {
			continue
		}
		for _, pos := range ps {
			if got, err := indexID(r.rd.index, pos); err == nil && got == id {
				return pos, true
			}
		}
	}
	return 0, false
}

// Close releases the reader's files.
func (r *IDReader) Close() {
	for _, run := range r.runs {
		run.f.Close()
	}
	r.rd.Close()
}

// LookupID returns the positions of the records covered by stateDir's
// checkpoint whose id begins with prefix (lowercase hex, at least 8
// characters), in log order. It reads the id table's runs and the index
// entries past them; a run that is damaged is passed over and its range
// read from the index file instead.
func LookupID(stateDir, prefix string) ([]int64, error) {
	if len(prefix) < 8 || len(prefix) > 64 {
		return nil, fmt.Errorf("evidence: id prefix %q: give 8 to 64 hex characters", prefix)
	}
	raw, err := hex.DecodeString(prefix[:len(prefix)&^1])
	if err != nil {
		return nil, fmt.Errorf("evidence: id prefix %q is not hex", prefix)
	}
	rd, err := openReader(stateDir)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	n := rd.cp.Size
	var found []int64
	check := func(pos int64) error {
		id, err := indexID(rd.index, pos)
		if err != nil {
			return fmt.Errorf("evidence: %w", err)
		}
		if strings.HasPrefix(hex.EncodeToString(id[:]), prefix) {
			found = append(found, pos)
		}
		return nil
	}
	dir := filepath.Join(rd.dir, idsName)
	all, _ := idRunsIn(dir)
	at := int64(0)
	for _, c := range cover(all, n) {
		r, err := readIDRun(filepath.Join(dir, idRunName(c[0], c[1])), c[0], c[1], false)
		if err != nil {
			break
		}
		ps, err := r.matches(raw)
		r.f.Close()
		if err != nil {
			break
		}
		for _, pos := range ps {
			if err := check(pos); err != nil {
				return nil, err
			}
		}
		at = c[1]
	}
	// The records no run covers: straight from the index file.
	const chunk = 4096
	buf := make([]byte, chunk*indexEntrySize)
	for i := at; i < n; i += chunk {
		k := min(chunk, n-i)
		b := buf[:k*indexEntrySize]
		if _, err := rd.index.ReadAt(b, i*indexEntrySize); err != nil {
			return nil, fmt.Errorf("evidence: read index: %w", err)
		}
		for j := int64(0); j < k; j++ {
			id := b[j*indexEntrySize+8 : (j+1)*indexEntrySize]
			if bytes.HasPrefix(id, raw) && strings.HasPrefix(hex.EncodeToString(id), prefix) {
				found = append(found, i+j)
			}
		}
	}
	sort.Slice(found, func(i, j int) bool { return found[i] < found[j] })
	return found, nil
}

// bloom is a Bloom filter over 8-byte id prefixes (already uniformly
// distributed: they are SHA-256 output), about 10 bits per entry and 7
// probes, so about 1% false positives.
type bloom []uint64

func newBloom(n int64) bloom { return make(bloom, max((n*10+63)/64, 1)) }

func (b bloom) probes(p []byte, f func(bit uint64)) {
	x := binary.BigEndian.Uint64(p)
	h1, h2 := x, x>>32|x<<32|1
	m := uint64(len(b)) * 64
	for i := uint64(0); i < 7; i++ {
		f((h1 + i*h2) % m)
	}
}

func (b bloom) add(p []byte) { b.probes(p, func(bit uint64) { b[bit/64] |= 1 << (bit % 64) }) }

func (b bloom) has(p []byte) bool {
	if b == nil {
		return true
	}
	ok := true
	b.probes(p, func(bit uint64) { ok = ok && b[bit/64]&(1<<(bit%64)) != 0 })
	return ok
}
