package logindex

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/aerfs/aerfs/evidence"
)

// Index is what the evidence log says, as of a checkpoint kept on disk
// (segments and a state file) and the records folded in since (the
// window, in memory). It is safe for concurrent use.
type Index struct {
	mu    sync.RWMutex
	state string // the state directory; "" for an index that lives in memory only
	segs  []*segment
	win   *mem
	ids   map[Hash]int64 // the window's records
	f     *fold
	hd    *head    // the head it was opened from or last wrote (nil: none)
	stF   *os.File // the state file the fold's sessions table reads
	// lookup finds a record before the window by id (nil: only the
	// window's parents are known).
	lookup func(Hash) (int64, bool)
	rr     *evidence.RecordReader // the log, for what segments do not keep
	idc    *idCache
	// sizeOf gives a version's content length (-1 when unknown): the
	// blob store's, for an index with a log behind it.
	sizeOf func(Hash) int64
	// memOnly: no log behind it (a bundle's records): the window keeps
	// what a segment would read from the log.
	memOnly bool
	rebuilt string
	missing bool // rebuilt because there was no index
}

// New returns an empty index held in memory (a bundle's records).
func New() *Index {
	return &Index{win: newMem(0), ids: map[Hash]int64{}, f: newFold(), memOnly: true}
}

// Rebuilt says why the index on disk was set aside and the index rebuilt
// from the log ("" when it was not).
func (x *Index) Rebuilt() string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.rebuilt
}

// Missing reports whether the index was rebuilt because there was none
// (a log never indexed: new, or written before the index existed), rather
// than set aside.
func (x *Index) Missing() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.missing
}

// Open reads stateDir's index and folds in the records the log's
// checkpoint covers past it. An index that is missing or does not check
// out is set aside: the whole log is folded in memory instead, and
// Rebuilt says why (only the log's writer rebuilds it on disk).
func Open(stateDir string) (*Index, error) {
	ids := &idCache{state: stateDir}
	x, err := load(stateDir, ids.find)
	if err != nil {
		ids.close()
		x, werr := OpenWhole(stateDir, err.Error())
		if x != nil {
			x.missing = errors.Is(err, errMissing)
		}
		return x, werr
	}
	x.idc = ids
	if err := x.catchUp(); err != nil {
		x.Close()
		return nil, err
	}
	return x, nil
}

// OpenWhole folds stateDir's whole log in memory, without its index; why
// says why (Rebuilt).
func OpenWhole(stateDir, why string) (*Index, error) {
	ids := &idCache{state: stateDir}
	x := &Index{state: stateDir, win: newMem(0), ids: map[Hash]int64{}, f: newFold(), lookup: ids.find, idc: ids, rebuilt: why,
		sizeOf: blobSize(stateDir)}
	if err := x.catchUp(); err != nil {
		x.Close()
		return nil, err
	}
	return x, nil
}

// errMissing: there is no index yet (a log older than it, or never built).
var errMissing = errors.New("there is no index")

// load opens the index on disk, checked: the head's signature and binding
// to the log, the state file's hash, each segment's block table. Files
// replaced by the writer meanwhile are looked for again from a new head.
func load(stateDir string, lookup func(Hash) (int64, bool)) (*Index, error) {
	var err error
	for try := 0; try < 5; try++ {
		var x *Index
		x, err = load1(stateDir, lookup)
		if err == nil {
			return x, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, errMissing) {
			break
		}
	}
	return nil, err
}

func load1(stateDir string, lookup func(Hash) (int64, bool)) (*Index, error) {
	dir := evidence.IndexDir(stateDir)
	msg, err := os.ReadFile(filepath.Join(dir, headName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errMissing
	}
	if err != nil {
		return nil, err
	}
	vkey, err := evidence.PublicKey(stateDir)
	if err != nil {
		return nil, err
	}
	body, err := evidence.OpenIndexHead(msg, vkey)
	if err != nil {
		return nil, fmt.Errorf("its head: %w", err)
	}
	h, err := parseHead(body)
	if err != nil {
		return nil, err
	}
	if origin, err := evidence.Origin(stateDir); err != nil || origin != h.origin {
		return nil, fmt.Errorf("its head names log %q, not this log", h.origin)
	}
	if _, err := evidence.CheckTreePrefix(stateDir, h.size, h.root); err != nil {
		return nil, fmt.Errorf("it was not computed from this log: %w", err)
	}
	x := &Index{state: stateDir, win: newMem(h.size), ids: map[Hash]int64{}, f: newFold(), hd: h, lookup: lookup, sizeOf: blobSize(stateDir)}
	ok := false
	defer func() {
		if !ok {
			x.Close()
		}
	}()
	sf, err := os.Open(filepath.Join(dir, stateName(h.size)))
	if err != nil {
		return nil, err
	}
	x.stF = sf
	if fi, err := sf.Stat(); err != nil || fi.Size() != h.state.size {
		return nil, formatErr("state file: size does not match the head")
	}
	if err := loadState(sf, h.state.size, h.state.sum, x.f); err != nil {
		return nil, err
	}
	if x.f.n != h.size {
		return nil, formatErr("state file: folds %d records, the head says %d", x.f.n, h.size)
	}
	for _, s := range h.segs {
		seg, err := openSegment(filepath.Join(dir, s.name()), s)
		if err != nil {
			return nil, err
		}
		x.segs = append(x.segs, seg)
	}
	ok = true
	return x, nil
}

// catchUp folds in the records the log's checkpoint covers past the index.
func (x *Index) catchUp() error {
	_, err := evidence.ReadFrom(x.state, x.f.n, func(idx int64, id string, r *evidence.Record) error {
		x.Add(idx, id, r)
		return nil
	})
	return err
}

// Close releases the index's files.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var errs []error
	for _, s := range x.segs {
		errs = append(errs, s.close())
	}
	x.segs = nil
	if x.stF != nil {
		errs = append(errs, x.stF.Close())
		x.stF = nil
	}
	if x.rr != nil {
		x.rr.Close()
		x.rr = nil
	}
	if x.idc != nil {
		x.idc.close()
	}
	return errors.Join(errs...)
}

// Add folds record idx in. Records come in log order; one already folded
// (by position or id) is ignored, and parents the index does not know are
// dropped.
func (x *Index) Add(idx int64, id string, r *evidence.Record) {
	h, ok := ParseHash(id)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.add(idx, h, r)
}

func (x *Index) add(idx int64, id Hash, r *evidence.Record) {
	if _, dup := x.ids[id]; dup || (!x.memOnly && idx < x.f.n) {
		return
	}
	var parents []int64
	seen := map[int64]bool{}
	note := func(q int64) {
		if q < idx && !seen[q] {
			seen[q] = true
			parents = append(parents, q)
		}
	}
	for _, p := range r.Parents {
		ph, ok := ParseHash(p)
		if !ok {
			continue
		}
		if q, ok := x.ids[ph]; ok {
			note(q)
		} else if x.lookup != nil {
			if q, ok := x.lookup(ph); ok {
				note(q)
			}
		}
	}
	fd := x.f.add(idx, id, r)
	for _, q := range fd.parents {
		note(q)
	}
	if x.sizeOf != nil {
		for i := range fd.versions {
			if v := &fd.versions[i]; v.Hash != (Hash{}) {
				v.Size = x.sizeOf(v.Hash)
			}
		}
	}
	if len(x.win.recs) == 0 {
		x.win.from = idx
	}
	x.win.add(idx, id, r, parents, fd)
	x.win.keepContent(idx, r, x.memOnly)
	x.ids[id] = idx
}

// parts lists the segments, then the window.
func (x *Index) parts() []part {
	out := make([]part, 0, len(x.segs)+1)
	for _, s := range x.segs {
		out = append(out, s)
	}
	return append(out, x.win)
}

// Through is one past the last record folded in (0 when none).
func (x *Index) Through() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.f.n
}

// Len is the number of records indexed.
func (x *Index) Len() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.memOnly {
		return int64(len(x.win.recs))
	}
	return x.f.n
}

// History lists the versions of path in log order.
func (x *Index) History(path string) ([]Version, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []Version
	for _, p := range x.parts() {
		vs, err := p.versions(path)
		if err != nil {
			return nil, err
		}
		out = append(out, vs...)
	}
	return out, nil
}

// Paths lists every path with a version, sorted.
func (x *Index) Paths() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return sortedKeys(x.f.last)
}

// Current is the guarded state the log says the workspace is in now.
func (x *Index) Current() map[string]Hash {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make(map[string]Hash, len(x.f.cur))
	for k, v := range x.f.cur {
		out[k] = v
	}
	return out
}

// Pending lists quarantined writes no approve or reject names, in log
// order.
func (x *Index) Pending() []Pending {
	x.mu.Lock() // the first call decodes the table
	defer x.mu.Unlock()
	ps, _ := x.f.pend() // its shape was checked when the state file was read
	return append([]Pending(nil), ps...)
}

// Mounts lists the mounts in log order.
func (x *Index) Mounts() []Mount {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return append([]Mount(nil), x.f.mounts...)
}

// Snapshots lists snapshot records in log order.
func (x *Index) Snapshots() []Snapshot {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return append([]Snapshot(nil), x.f.snaps...)
}

// logRecord reads record idx from the log. Called with x.mu held (either
// way): the reader is opened once.
func (x *Index) logRecord(idx int64) (string, *evidence.Record, error) {
	if x.state == "" {
		return "", nil, fmt.Errorf("logindex: record %d: no log behind this index", idx)
	}
	if x.rr == nil || idx >= x.rr.Size() {
		rr, err := evidence.OpenRecords(x.state)
		if err != nil {
			return "", nil, err
		}
		if x.rr != nil {
			x.rr.Close()
		}
		x.rr = rr
	}
	return x.rr.Record(idx)
}

// LogRecord reads record idx from the log.
func (x *Index) LogRecord(idx int64) (string, *evidence.Record, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.logRecord(idx)
}

// SnapshotFiles lists the files a snapshot recorded.
func (x *Index) SnapshotFiles(s Snapshot) ([]evidence.FileState, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if fs, ok := x.win.snapFiles[s.Idx]; ok {
		return fs, nil
	}
	_, r, err := x.logRecord(s.Idx)
	if err != nil {
		return nil, err
	}
	if r.Type != evidence.TypeSnapshot || r.Payload == nil && s.Files > 0 {
		return nil, formatErr("record %d is not the snapshot the index says", s.Idx)
	}
	if r.Payload == nil {
		return nil, nil
	}
	return r.Payload.Files, nil
}

// ReadPaths lists the files reads record idx lists.
func (x *Index) ReadPaths(idx int64) ([]string, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if ps, ok := x.win.readPaths[idx]; ok {
		return ps, nil
	}
	if x.memOnly {
		return nil, nil
	}
	_, r, err := x.logRecord(idx)
	if err != nil || r.Payload == nil {
		return nil, err
	}
	out := make([]string, len(r.Payload.Reads))
	for i := range r.Payload.Reads {
		out[i] = r.Payload.Reads[i].FilePath()
	}
	return out, nil
}

// Pruned reports whether a gc record pruned the content with this hash.
func (x *Index) Pruned(hash string) bool {
	l, _ := x.Records(kPruned, hash)
	return len(l) > 0
}

// Records lists, in log order, the records posted under a key: kind
// (KindPath, KindSession, KindType, KindOp) and name.
func (x *Index) Records(kind byte, name string) ([]int64, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.records(string(kind) + name)
}

func (x *Index) records(key string) ([]int64, error) {
	var out []int64
	for _, p := range x.parts() {
		l, err := p.postings(key)
		if err != nil {
			return nil, err
		}
		out = append(out, l...)
	}
	return out, nil
}

// Key kinds a caller may ask Records for.
const (
	KindPath    = kPath
	KindSession = kSession
	KindType    = kType
	KindOp      = kOp
)

// PathRecords lists, in log order, every record whose meta.path,
// payload.from or payload.to is path or lies under path/ (what
// `aerfs log --path` selects).
func (x *Index) PathRecords(path string) ([]int64, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []int64
	for _, p := range x.parts() {
		keys, err := p.keysUnder(kPath, path)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			l, err := p.postings(k)
			if err != nil {
				return nil, err
			}
			out = append(out, l...)
		}
	}
	return sortUniq(out), nil
}

func sortUniq(l []int64) []int64 {
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	out := l[:0]
	for i, v := range l {
		if i == 0 || v != l[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// Record returns what the index keeps of record idx.
func (x *Index) Record(idx int64) (Rec, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range x.parts() {
		if from, to := p.bounds(); idx >= from && idx < to {
			r, err := p.record(idx)
			if err != nil {
				return r, err
			}
			if r.ID == (Hash{}) && !x.memOnly {
				id, err := x.recordID(idx)
				if err != nil {
					return r, err
				}
				r.ID = id
			}
			return r, nil
		}
	}
	return Rec{}, fmt.Errorf("logindex: record %d is not indexed", idx)
}

func (x *Index) recordID(idx int64) (Hash, error) {
	if x.rr == nil || idx >= x.rr.Size() {
		if _, _, err := x.logRecord(0); err != nil && x.rr == nil {
			return Hash{}, err
		}
	}
	s, err := x.rr.ID(idx)
	if err != nil {
		return Hash{}, err
	}
	h, _ := ParseHash(s)
	return h, nil
}

// Children lists, in log order, the records that name idx as a parent.
func (x *Index) Children(idx int64) ([]int64, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []int64
	for _, p := range x.parts() {
		if _, to := p.bounds(); to <= idx {
			continue
		}
		l, err := p.children(idx)
		if err != nil {
			return nil, err
		}
		out = append(out, l...)
	}
	return out, nil
}

// ReadsUnder lists the reads records that list path or a file under it,
// each with the listing: every one of them, in log order per path.
func (x *Index) ReadsUnder(path string) (map[string][]Read, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := map[string][]Read{}
	for _, p := range x.parts() {
		keys, err := p.keysUnder(kRead, path)
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			l, err := p.reads(k[1:])
			if err != nil {
				return nil, err
			}
			out[k[1:]] = append(out[k[1:]], l...)
		}
	}
	return out, nil
}

// FindID lists, in log order, the records whose id begins with prefix
// (lowercase hex).
func (x *Index) FindID(prefix string) ([]int64, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []int64
	for id, idx := range x.ids {
		if strings.HasPrefix(hex.EncodeToString(id[:]), prefix) {
			out = append(out, idx)
		}
	}
	if !x.memOnly && x.win.from > 0 {
		l, err := evidence.LookupID(x.state, prefix)
		if err != nil {
			return nil, err
		}
		for _, idx := range l {
			if idx < x.win.from {
				out = append(out, idx)
			}
		}
	}
	return sortUniq(out), nil
}

// IDOf is record idx's id.
func (x *Index) IDOf(idx int64) (string, error) {
	r, err := x.Record(idx)
	if err != nil {
		return "", err
	}
	return r.ID.Hex(), nil
}

// Session returns what the log says of session id.
func (x *Index) Session(id string) (*Session, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	s, ok := x.f.session(id)
	if !ok {
		return nil, false
	}
	return s.clone(), true
}

// SessionByCgroup is the session whose registration made cgroup cg
// (relative to the mount's subtree).
func (x *Index) SessionByCgroup(cg string) (*Session, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, s := range x.f.sessions {
		for _, c := range s.Cgroups {
			if c == cg {
				return s.clone(), true
			}
		}
	}
	if x.f.base == nil {
		return nil, false
	}
	id, ok := x.f.base.byCgroup(cg)
	if !ok {
		return nil, false
	}
	if _, over := x.f.sessions[id]; over {
		return nil, false // the overlay's (newer) registration does not hold it
	}
	s, ok := x.f.base.lookup(id)
	return s, ok
}

// EachSession calls fn for every session ever registered, in id order.
func (x *Index) EachSession(fn func(*Session) error) error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return overlaySessions(x.f.base, x.f.sessions)(func(s *Session) error { return fn(s.clone()) })
}

// blobSize is the length of stored content, -1 when it is not stored.
func blobSize(stateDir string) func(Hash) int64 {
	return func(h Hash) int64 {
		n, err := evidence.BlobSize(stateDir, h.Hex())
		if err != nil {
			return -1
		}
		return n
	}
}

// idCache finds records by id for a reader: in the log's id table.
type idCache struct {
	state string
	ids   *evidence.IDReader
	err   error
}

func (c *idCache) close() {
	if c.ids != nil {
		c.ids.Close()
		c.ids = nil
	}
}

func (c *idCache) find(id Hash) (int64, bool) {
	if c.ids == nil && c.err == nil {
		c.ids, c.err = evidence.OpenIDs(c.state)
	}
	if c.err != nil {
		return 0, false
	}
	return c.ids.Find(id)
}
