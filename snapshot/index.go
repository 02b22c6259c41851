package snapshot

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aerfs/aerfs/evidence"
)

// ErrNotFound is wrapped by lookups (record ids, snapshot ids) that match
// nothing; ErrAmbiguous by prefixes that match more than one.
var (
	ErrNotFound  = errors.New("not found")
	ErrAmbiguous = errors.New("ambiguous")
)

// MinPrefix is the shortest id prefix accepted for a record or snapshot.
const MinPrefix = 8

// Version is one state of one file: what a record made of it.
type Version struct {
	Idx       int64     `json:"idx"`
	Record    string    `json:"record"`
	Time      time.Time `json:"time"`
	Type      string    `json:"type"` // write, delete, rename, restore, approve, drift
	Principal string    `json:"principal"`
	Session   string    `json:"session,omitempty"`
	Hash      string    `json:"hash,omitempty"`     // content after; "" = absent
	OldHash   string    `json:"old_hash,omitempty"` // content before; "" = absent
}

// Snapshot is one snapshot record.
type Snapshot struct {
	ID    string    `json:"id"`
	Label string    `json:"label,omitempty"`
	Time  time.Time `json:"time"`
	Files int       `json:"files"`
}

// Pending is a quarantined write nobody has approved or rejected yet.
type Pending struct {
	ID        string    `json:"id"`
	Path      string    `json:"path"`
	Hash      string    `json:"hash"`                // the refused content
	BaseHash  string    `json:"base_hash,omitempty"` // the file when refused; "" = absent
	Time      time.Time `json:"time"`
	Principal string    `json:"principal"`
	Session   string    `json:"session,omitempty"`
	Rule      string    `json:"rule,omitempty"`
}

// rec is what the index keeps of one record.
type rec struct {
	idx       int64
	id        string
	typ       string
	t         time.Time
	principal string
	session   string
	path      string
	from, to  string
	parents   []int32 // positions of parents the index knows
	vFirst    int32   // versions of this record: vers[vFirst : vFirst+vCount]
	vCount    int32
	snap      int32 // position in snaps, or -1
	rFirst    int32 // files a reads record lists: reads[rFirst : rFirst+rCount]
	rCount    int32
}

// read is one file a reads record lists, with the hash of the version
// read ("" when unknown).
type read struct {
	path, hash string
}

type ver struct {
	rec       int32
	path      string
	typ       string
	hash, old string
}

type snap struct {
	rec   int32
	label string
	files []evidence.FileState
}

type quarantine struct {
	rec        int32
	hash, base string
	rule       string
	decided    bool
}

type approval struct {
	rec  int32
	hash string
}

// Index is what the evidence log says about guarded files, kept current by
// Add. It is safe for concurrent use.
type Index struct {
	mu      sync.RWMutex
	recs    []rec
	byID    map[string]int32
	vers    []ver
	reads   []read
	byPath  map[string][]int32 // path → versions, log order
	snaps   []snap
	events  []int32 // records that are versions or snapshots, log order
	cur     State
	quar    []quarantine
	quarBy  map[int32]int32     // record position → quar position
	approve map[string]approval // path → approved content awaiting its write
	mounts  []Mount
	pruned  map[string]bool // blobs gc records removed
}

// Pruned reports whether aerfs gc removed the content with this hash (it
// may have been stored again since).
func (x *Index) Pruned(hash string) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.pruned[hash]
}

// Mount is one mount in the log: its record's index, and whether an
// unmount record ended it (false after a crash).
type Mount struct {
	Idx    int64 `json:"idx"`
	Clean  bool  `json:"clean"`
	EndIdx int64 `json:"end_idx,omitempty"` // the unmount record's, when Clean
}

// Mounts lists the mounts in log order.
func (x *Index) Mounts() []Mount {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return append([]Mount(nil), x.mounts...)
}

// New returns an empty index.
func New() *Index {
	return &Index{
		byID:    map[string]int32{},
		byPath:  map[string][]int32{},
		cur:     State{},
		quarBy:  map[int32]int32{},
		approve: map[string]approval{},
	}
}

// Load reads every committed record of stateDir's evidence log once.
func Load(stateDir string) (*Index, error) {
	x := New()
	err := evidence.ReadAll(stateDir, func(idx int64, id string, r *evidence.Record) error {
		x.Add(idx, id, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return x, nil
}

// Through is the log size the index has read: one past the index of the
// last record it holds (0 when empty). A gc plan made from the index is
// checked against the records from there on (evidence.Log.Prune).
func (x *Index) Through() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if len(x.recs) == 0 {
		return 0
	}
	return x.recs[len(x.recs)-1].idx + 1
}

// Len is the number of records indexed.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.recs)
}

// Add indexes one record. Records must come in log order (the daemon calls
// it after each Append); a record already indexed is ignored, and parents
// the index has not seen are dropped.
func (x *Index) Add(idx int64, id string, r *evidence.Record) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.byID[id]; ok {
		return
	}
	t, _ := evidence.ParseTime(r.Meta.Time)
	pos := int32(len(x.recs))
	e := rec{idx: idx, id: id, typ: r.Type, t: t, principal: r.Principal, session: r.Meta.Session,
		path: r.Meta.FilePath(), vFirst: int32(len(x.vers)), snap: -1}
	if r.Payload != nil {
		e.from, e.to = r.Payload.FromPath(), r.Payload.ToPath()
	}
	for _, p := range r.Parents {
		if q, ok := x.byID[p]; ok {
			e.parents = append(e.parents, q)
		}
	}
	x.recs = append(x.recs, e)
	x.byID[id] = pos
	x.index(pos, r)
	x.recs[pos].vCount = int32(len(x.vers)) - x.recs[pos].vFirst
	if x.recs[pos].vCount > 0 || x.recs[pos].snap >= 0 {
		x.events = append(x.events, pos)
	}
}

// index derives versions, snapshots and quarantine state from the record
// at pos. Called with x.mu held.
func (x *Index) index(pos int32, r *evidence.Record) {
	p := r.Payload
	if p == nil {
		p = &evidence.Payload{}
	}
	path := r.Meta.FilePath() // the name's bytes, from path or path_b64
	switch r.Type {
	case evidence.TypeGC:
		if x.pruned == nil {
			x.pruned = map[string]bool{}
		}
		for _, h := range p.Pruned {
			x.pruned[h] = true
		}
	case evidence.TypeMount:
		x.mounts = append(x.mounts, Mount{Idx: x.recs[pos].idx})
	case evidence.TypeUnmount:
		if n := len(x.mounts); n > 0 {
			x.mounts[n-1].Clean = true
			x.mounts[n-1].EndIdx = x.recs[pos].idx
		}
	case evidence.TypeWrite:
		// A write with no new content is a plain file's: it is in the DAG
		// for provenance but has no version.
		if p.NewHash == "" || path == "" {
			return
		}
		typ := evidence.TypeWrite
		if a, ok := x.approve[path]; ok && a.hash == p.NewHash {
			typ = evidence.TypeApprove
			x.recs[pos].parents = append(x.recs[pos].parents, a.rec)
			delete(x.approve, path)
		}
		x.addVer(pos, path, typ, p.NewHash, p.OldHash)
	case evidence.TypeDelete:
		if path == "" {
			return
		}
		if _, known := x.byPath[path]; p.OldHash != "" || known {
			x.addVer(pos, path, evidence.TypeDelete, "", p.OldHash)
		}
	case evidence.TypeRename:
		src := p.FromPath()
		if src == "" {
			src = path
		}
		if src == "" {
			return
		}
		// The source leaves its name; a directory takes every file below.
		var moved []string
		for q := range x.cur {
			if q == src || strings.HasPrefix(q, src+"/") {
				moved = append(moved, q)
			}
		}
		sort.Strings(moved)
		for _, q := range moved {
			x.addVer(pos, q, evidence.TypeRename, "", x.cur[q])
		}
	case evidence.TypeRestore:
		for _, f := range p.Files {
			if fp := f.FilePath(); fp != "" {
				x.addVer(pos, fp, evidence.TypeRestore, f.Hash, f.OldHash)
			}
		}
	case evidence.TypeDrift:
		if path == "" || (p.NewHash == "" && p.OldHash == "") {
			return
		}
		x.addVer(pos, path, evidence.TypeDrift, p.NewHash, p.OldHash)
	case evidence.TypeReads:
		x.recs[pos].rFirst = int32(len(x.reads))
		for i := range p.Reads {
			x.reads = append(x.reads, read{path: p.Reads[i].FilePath(), hash: p.Reads[i].Hash})
		}
		x.recs[pos].rCount = int32(len(p.Reads))
	case evidence.TypeSnapshot:
		x.recs[pos].snap = int32(len(x.snaps))
		files := append([]evidence.FileState(nil), p.Files...)
		for i := range files {
			// Kept by name's bytes: path_b64 decoded into Path.
			files[i].Path, files[i].PathB64 = files[i].FilePath(), ""
		}
		x.snaps = append(x.snaps, snap{rec: pos, label: p.Detail, files: files})
		// A snapshot is the whole guarded state as the daemon found it.
		x.cur = State{}
		for _, f := range files {
			if f.Hash != "" {
				x.cur[f.Path] = f.Hash
			}
		}
	case evidence.TypeQuarantine:
		if path == "" || p.NewHash == "" {
			return
		}
		x.quarBy[pos] = int32(len(x.quar))
		x.quar = append(x.quar, quarantine{rec: pos, hash: p.NewHash, base: p.OldHash, rule: r.Meta.Rule})
	case evidence.TypeApprove, evidence.TypeReject:
		if len(r.Parents) == 0 {
			return
		}
		q, ok := x.byID[r.Parents[0]]
		if !ok {
			return
		}
		qi, ok := x.quarBy[q]
		if !ok {
			return
		}
		x.quar[qi].decided = true
		if r.Type == evidence.TypeApprove {
			x.approve[x.recs[q].path] = approval{rec: pos, hash: x.quar[qi].hash}
		}
	}
}

func (x *Index) addVer(pos int32, path, typ, hash, old string) {
	vi := int32(len(x.vers))
	x.vers = append(x.vers, ver{rec: pos, path: path, typ: typ, hash: hash, old: old})
	x.byPath[path] = append(x.byPath[path], vi)
	if hash == "" {
		delete(x.cur, path)
	} else {
		x.cur[path] = hash
	}
}

func (x *Index) version(vi int32) Version {
	v := x.vers[vi]
	r := &x.recs[v.rec]
	return Version{Idx: r.idx, Record: r.id, Time: r.t, Type: v.typ, Principal: r.principal,
		Session: r.session, Hash: v.hash, OldHash: v.old}
}

// History lists the versions of path in log order: writes, deletes, the
// source of a rename leaving, restores, approved writes, and drift (content
// that appeared behind aerfs's back).
func (x *Index) History(path string) []Version {
	x.mu.RLock()
	defer x.mu.RUnlock()
	vs := x.byPath[path]
	out := make([]Version, len(vs))
	for i, vi := range vs {
		out[i] = x.version(vi)
	}
	return out
}

// Paths lists every path the index has a version of, sorted.
func (x *Index) Paths() []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]string, 0, len(x.byPath))
	for p := range x.byPath {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Current is the guarded state the log says the workspace is in now.
func (x *Index) Current() State {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.cur.Clone()
}

// StateAt is the guarded state at time t: every version and snapshot
// recorded at or before t, in log order. A file the log first mentions
// after t is taken as it was just before that mention (the old content of
// its first version, or what the first snapshot found).
func (x *Index) StateAt(t time.Time) State {
	x.mu.RLock()
	defer x.mu.RUnlock()
	st := State{}
	decided := map[string]bool{}
	all := false // a snapshot at or before t decides every path
	for _, pos := range x.events {
		r := &x.recs[pos]
		if r.t.After(t) {
			continue
		}
		if r.snap >= 0 {
			st = State{}
			for _, f := range x.snaps[r.snap].files {
				if f.Hash != "" {
					st[f.Path] = f.Hash
				}
			}
			all = true
		}
		for _, v := range x.vers[r.vFirst : r.vFirst+r.vCount] {
			decided[v.path] = true
			if v.hash == "" {
				delete(st, v.path)
			} else {
				st[v.path] = v.hash
			}
		}
	}
	if all {
		return st
	}
	for _, pos := range x.events {
		r := &x.recs[pos]
		if !r.t.After(t) {
			continue
		}
		if r.snap >= 0 {
			for _, f := range x.snaps[r.snap].files {
				if !decided[f.Path] {
					decided[f.Path] = true
					if f.Hash != "" {
						st[f.Path] = f.Hash
					}
				}
			}
			// Known paths the snapshot does not list were absent then.
			for p := range x.byPath {
				decided[p] = true
			}
			break
		}
		for _, v := range x.vers[r.vFirst : r.vFirst+r.vCount] {
			if !decided[v.path] {
				decided[v.path] = true
				if v.old != "" {
					st[v.path] = v.old
				}
			}
		}
	}
	return st
}

// Snapshots lists snapshot records in log order.
func (x *Index) Snapshots() []Snapshot {
	x.mu.RLock()
	defer x.mu.RUnlock()
	out := make([]Snapshot, len(x.snaps))
	for i, s := range x.snaps {
		r := &x.recs[s.rec]
		out[i] = Snapshot{ID: r.id, Label: s.label, Time: r.t, Files: len(s.files)}
	}
	return out
}

// SnapshotState returns the guarded state a snapshot recorded. id is the
// snapshot's record id or a unique prefix of at least MinPrefix characters.
func (x *Index) SnapshotState(id string) (State, *Snapshot, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	id = strings.ToLower(id)
	if len(id) < MinPrefix {
		return nil, nil, fmt.Errorf("snapshot id %q: give at least %d hex characters", id, MinPrefix)
	}
	found := -1
	for i, s := range x.snaps {
		if strings.HasPrefix(x.recs[s.rec].id, id) {
			if found >= 0 {
				return nil, nil, fmt.Errorf("snapshot id %s: %w: it matches %.12s and %.12s",
					id, ErrAmbiguous, x.recs[x.snaps[found].rec].id, x.recs[s.rec].id)
			}
			found = i
		}
	}
	if found < 0 {
		return nil, nil, fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	s := x.snaps[found]
	st := State{}
	for _, f := range s.files {
		if f.Hash != "" {
			st[f.Path] = f.Hash
		}
	}
	r := &x.recs[s.rec]
	return st, &Snapshot{ID: r.id, Label: s.label, Time: r.t, Files: len(s.files)}, nil
}

// Resolve returns the full id and log index of the record whose id is id
// or starts with it (at least MinPrefix characters).
func (x *Index) Resolve(id string) (string, int64, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	pos, err := x.resolve(id)
	if err != nil {
		return "", 0, err
	}
	return x.recs[pos].id, x.recs[pos].idx, nil
}

func (x *Index) resolve(id string) (int32, error) {
	id = strings.ToLower(id)
	if len(id) < MinPrefix || !isHex(id) {
		return -1, fmt.Errorf("record id %q: %w (give at least %d hex characters)", id, ErrNotFound, MinPrefix)
	}
	if pos, ok := x.byID[id]; ok {
		return pos, nil
	}
	found := int32(-1)
	for i := range x.recs {
		if strings.HasPrefix(x.recs[i].id, id) {
			if found >= 0 {
				return -1, fmt.Errorf("record id %s: %w: it matches %.12s and %.12s",
					id, ErrAmbiguous, x.recs[found].id, x.recs[i].id)
			}
			found = int32(i)
		}
	}
	if found < 0 {
		return -1, fmt.Errorf("record %s: %w", id, ErrNotFound)
	}
	return found, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Pending lists quarantined writes no approve or reject names, in log
// order.
func (x *Index) Pending() []Pending {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []Pending
	for _, q := range x.quar {
		if q.decided {
			continue
		}
		r := &x.recs[q.rec]
		out = append(out, Pending{ID: r.id, Path: r.path, Hash: q.hash, BaseHash: q.base, Time: r.t,
			Principal: r.principal, Session: r.session, Rule: q.rule})
	}
	return out
}
