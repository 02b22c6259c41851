package snapshot

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/logindex"
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
	// ContentSize is the length of the content after as the log's index
	// knows it (-1: unknown; the blob says).
	ContentSize int64 `json:"-"`
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

// Index is what the evidence log says about guarded files: a view of the
// log's index (package logindex), read from the state directory or built
// in memory from a bundle's records. It is safe for concurrent use.
type Index struct {
	mu    sync.RWMutex
	x     *logindex.Index
	state string // "" for an index built in memory
	err   error  // the first query the index could not answer, when even the log could not
}

// New returns an empty index held in memory (a bundle's records).
func New() *Index { return &Index{x: logindex.New()} }

// Load reads stateDir's log index and the records past it. Close it when
// done.
func Load(stateDir string) (*Index, error) {
	x, err := logindex.Open(stateDir)
	if err != nil {
		return nil, err
	}
	return &Index{x: x, state: stateDir}, nil
}

// Close releases the index's files.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.x.Close()
}

// Rebuilt says why the log's index was set aside and the whole log read
// instead ("" when it was not).
func (x *Index) Rebuilt() string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.x.Rebuilt()
}

// ix is the index to ask; when a question finds the index on disk damaged
// (a block that does not match its hash), the whole log is read instead
// and the question asked again (answer).
func (x *Index) ix() *logindex.Index {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.x
}

// answer runs q against the index, and once more against the whole log if
// the index could not answer.
func (x *Index) answer(q func(*logindex.Index) error) {
	ix := x.ix()
	err := q(ix)
	if err == nil || x.state == "" {
		x.note(err)
		return
	}
	x.mu.Lock()
	if x.x == ix {
		nx, oerr := logindex.OpenWhole(x.state, err.Error())
		if oerr != nil {
			x.mu.Unlock()
			x.note(oerr)
			return
		}
		x.x.Close()
		x.x = nx
	}
	ix = x.x
	x.mu.Unlock()
	x.note(q(ix))
}

func (x *Index) note(err error) {
	if err == nil {
		return
	}
	x.mu.Lock()
	if x.err == nil {
		x.err = err
	}
	x.mu.Unlock()
}

// Err is the first question neither the index nor the log could answer.
func (x *Index) Err() error {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.err
}

// Add indexes one record. Records must come in log order; a record already
// indexed is ignored, and parents the index has not seen are dropped.
func (x *Index) Add(idx int64, id string, r *evidence.Record) { x.ix().Add(idx, id, r) }

// Pruned reports whether aerfs gc removed the content with this hash (it
// may have been stored again since).
func (x *Index) Pruned(hash string) bool { return x.ix().Pruned(hash) }

// Mount is one mount in the log: its record's index, and whether an
// unmount record ended it (false after a crash).
type Mount struct {
	Idx    int64 `json:"idx"`
	Clean  bool  `json:"clean"`
	EndIdx int64 `json:"end_idx,omitempty"` // the unmount record's, when Clean
}

// Mounts lists the mounts in log order.
func (x *Index) Mounts() []Mount {
	var out []Mount
	for _, m := range x.ix().Mounts() {
		out = append(out, Mount{Idx: m.Idx, Clean: m.Clean, EndIdx: m.EndIdx})
	}
	return out
}

// Through is the log size the index has read: one past the index of the
// last record it holds (0 when empty). A gc plan made from the index is
// checked against the records from there on (evidence.Log.Prune).
func (x *Index) Through() int64 { return x.ix().Through() }

// Len is the number of records indexed.
func (x *Index) Len() int { return int(x.ix().Len()) }

func nsTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

func version(v logindex.Version) Version {
	return Version{Idx: v.Idx, Record: v.ID.Hex(), Time: nsTime(v.Time), Type: v.Type, Principal: v.Principal,
		Session: v.Session, Hash: v.Hash.Hex(), OldHash: v.Old.Hex(), ContentSize: v.Size}
}

// History lists the versions of path in log order: writes, deletes, the
// source of a rename leaving, restores, approved writes, and drift (content
// that appeared behind aerfs's back).
func (x *Index) History(path string) []Version {
	var vs []logindex.Version
	x.answer(func(ix *logindex.Index) (err error) {
		vs, err = ix.History(path)
		return err
	})
	out := make([]Version, len(vs))
	for i, v := range vs {
		out[i] = version(v)
	}
	return out
}

// Paths lists every path the index has a version of, sorted.
func (x *Index) Paths() []string { return x.ix().Paths() }

// Current is the guarded state the log says the workspace is in now.
func (x *Index) Current() State {
	st := State{}
	for p, h := range x.ix().Current() {
		st[p] = h.Hex()
	}
	return st
}

// event is a record that versions files or snapshots them all.
type event struct {
	idx   int64
	t     time.Time
	snap  bool
	files []evidence.FileState
	vers  []Version
	paths []string
}

// events lists every record with versions or a snapshot, in log order.
func (x *Index) events() []*event {
	byIdx := map[int64]*event{}
	get := func(idx int64, t time.Time) *event {
		e := byIdx[idx]
		if e == nil {
			e = &event{idx: idx, t: t}
			byIdx[idx] = e
		}
		return e
	}
	for _, p := range x.Paths() {
		for _, v := range x.History(p) {
			e := get(v.Idx, v.Time)
			e.vers = append(e.vers, v)
			e.paths = append(e.paths, p)
		}
	}
	ix := x.ix()
	for _, s := range ix.Snapshots() {
		var files []evidence.FileState
		x.answer(func(ix *logindex.Index) (err error) {
			files, err = ix.SnapshotFiles(s)
			return err
		})
		e := get(s.Idx, nsTime(s.Time))
		e.snap = true
		for _, f := range files {
			f.Path, f.PathB64 = f.FilePath(), ""
			e.files = append(e.files, f)
		}
	}
	out := make([]*event, 0, len(byIdx))
	for _, e := range byIdx {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].idx < out[j].idx })
	return out
}

// StateAt is the guarded state at time t: every version and snapshot
// recorded at or before t, in log order. A file the log first mentions
// after t is taken as it was just before that mention (the old content of
// its first version, or what the first snapshot found).
func (x *Index) StateAt(t time.Time) State {
	evs := x.events()
	st := State{}
	decided := map[string]bool{}
	all := false // a snapshot at or before t decides every path
	for _, e := range evs {
		if e.t.After(t) {
			continue
		}
		if e.snap {
			st = State{}
			for _, f := range e.files {
				if f.Hash != "" {
					st[f.Path] = f.Hash
				}
			}
			all = true
		}
		for i, v := range e.vers {
			decided[e.paths[i]] = true
			if v.Hash == "" {
				delete(st, e.paths[i])
			} else {
				st[e.paths[i]] = v.Hash
			}
		}
	}
	if all {
		return st
	}
	for _, e := range evs {
		if !e.t.After(t) {
			continue
		}
		if e.snap {
			for _, f := range e.files {
				if !decided[f.Path] {
					decided[f.Path] = true
					if f.Hash != "" {
						st[f.Path] = f.Hash
					}
				}
			}
			// Known paths the snapshot does not list were absent then.
			for _, p := range x.Paths() {
				decided[p] = true
			}
			break
		}
		for i, v := range e.vers {
			if !decided[e.paths[i]] {
				decided[e.paths[i]] = true
				if v.OldHash != "" {
					st[e.paths[i]] = v.OldHash
				}
			}
		}
	}
	return st
}

// Snapshots lists snapshot records in log order.
func (x *Index) Snapshots() []Snapshot {
	ss := x.ix().Snapshots()
	out := make([]Snapshot, len(ss))
	for i, s := range ss {
		out[i] = Snapshot{ID: s.ID.Hex(), Label: s.Label, Time: nsTime(s.Time), Files: s.Files}
	}
	return out
}

// SnapshotState returns the guarded state a snapshot recorded. id is the
// snapshot's record id or a unique prefix of at least MinPrefix characters.
func (x *Index) SnapshotState(id string) (State, *Snapshot, error) {
	id = strings.ToLower(id)
	if len(id) < MinPrefix {
		return nil, nil, fmt.Errorf("snapshot id %q: give at least %d hex characters", id, MinPrefix)
	}
	ss := x.ix().Snapshots()
	found := -1
	for i, s := range ss {
		if strings.HasPrefix(s.ID.Hex(), id) {
			if found >= 0 {
				return nil, nil, fmt.Errorf("snapshot id %s: %w: it matches %.12s and %.12s",
					id, ErrAmbiguous, ss[found].ID.Hex(), s.ID.Hex())
			}
			found = i
		}
	}
	if found < 0 {
		return nil, nil, fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	s := ss[found]
	var files []evidence.FileState
	var err error
	x.answer(func(ix *logindex.Index) error {
		files, err = ix.SnapshotFiles(s)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	st := State{}
	for _, f := range files {
		if f.Hash != "" {
			st[f.FilePath()] = f.Hash
		}
	}
	return st, &Snapshot{ID: s.ID.Hex(), Label: s.Label, Time: nsTime(s.Time), Files: s.Files}, nil
}

// Resolve returns the full id and log index of the record whose id is id
// or starts with it (at least MinPrefix characters).
func (x *Index) Resolve(id string) (string, int64, error) {
	id = strings.ToLower(id)
	if len(id) < MinPrefix || len(id) > 64 || !isHex(id) {
		return "", 0, fmt.Errorf("record id %q: %w (give at least %d hex characters)", id, ErrNotFound, MinPrefix)
	}
	var found []int64
	var err error
	x.answer(func(ix *logindex.Index) error {
		found, err = ix.FindID(id)
		return err
	})
	if err != nil {
		return "", 0, err
	}
	if len(found) == 0 {
		return "", 0, fmt.Errorf("record %s: %w", id, ErrNotFound)
	}
	ids := make([]string, 0, 2)
	for _, idx := range found[:min(2, len(found))] {
		s, err := x.ix().IDOf(idx)
		if err != nil {
			return "", 0, err
		}
		ids = append(ids, s)
	}
	if len(found) > 1 {
		return "", 0, fmt.Errorf("record id %s: %w: it matches %.12s and %.12s", id, ErrAmbiguous, ids[0], ids[1])
	}
	return ids[0], found[0], nil
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
	var out []Pending
	for _, q := range x.ix().Pending() {
		out = append(out, Pending{ID: q.ID.Hex(), Path: q.Path, Hash: q.Hash.Hex(), BaseHash: q.Base.Hex(), Time: nsTime(q.Time),
			Principal: q.Principal, Session: q.Session, Rule: q.Rule})
	}
	return out
}
