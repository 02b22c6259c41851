package logindex

import (
	"sort"
	"strings"

	"github.com/aerfs/aerfs/evidence"
)

// Version is one state of one file: what a record made of it.
type Version struct {
	Path      string
	Idx       int64
	ID        Hash
	Time      int64  // unix nanoseconds; 0 when the record's time did not parse
	Type      string // write, approve, delete, rename, restore, drift
	Principal string
	Session   string
	Hash      Hash // content after; zero = absent
	Old       Hash // content before; zero = absent
	// Size is the length of the content after, as the blob store had it
	// when the version was indexed (-1: unknown, or absent).
	Size int64
}

// Version types, as a segment stores them (docs/evidence-format.md §11.3).
var versionTypes = []string{"", evidence.TypeWrite, evidence.TypeApprove, evidence.TypeDelete,
	evidence.TypeRename, evidence.TypeRestore, evidence.TypeDrift}

func versionCode(t string) uint8 {
	for i, x := range versionTypes {
		if x == t && i > 0 {
			return uint8(i)
		}
	}
	return 0
}

// Mount is one mount in the log: its record's index, and whether an
// unmount record ended it (false after a crash).
type Mount struct {
	Idx    int64
	Clean  bool
	EndIdx int64 // the unmount record's, when Clean
}

// Snapshot is one snapshot record.
type Snapshot struct {
	Idx   int64
	ID    Hash
	Time  int64
	Label string
	Files int
}

// Pending is a quarantined write nobody has approved or rejected yet.
type Pending struct {
	Idx       int64
	ID        Hash
	Path      string
	Hash      Hash // the refused content
	Base      Hash // the file when refused; zero = absent
	Time      int64
	Principal string
	Session   string
	Rule      string
}

// Approval is approved content awaiting the write that carries it.
type Approval struct {
	Idx  int64 // the approve record
	Hash Hash
}

// Session is what the log says of one registered session: the
// registration that made it (its id stays bound to it), the taint every
// record of it carried, and whether it ended.
type Session struct {
	ID        string
	Principal string
	Parent    string // the session it was started from ("" for none)
	Start     int64  // index of its first session_start record
	Started   int64  // unix ns
	// Ended is when the last session_end record ended it (0: not ended,
	// or registered again since).
	Ended   int64
	Taint   []string // sorted, no duplicates
	Agent   string   // the agent it runs ("" for none)
	Detail  string   // payload.detail of its last session_start (the confinement asked for)
	Cgroups []string // every registration's cgroup, in log order
}

func (s *Session) clone() *Session {
	c := *s
	c.Taint = append([]string(nil), s.Taint...)
	c.Cgroups = append([]string(nil), s.Cgroups...)
	return &c
}

func addTaint(have, more []string) []string {
	for _, t := range more {
		i := sort.SearchStrings(have, t)
		if i == len(have) || have[i] != t {
			have = append(have, "")
			copy(have[i+1:], have[i:])
			have[i] = t
		}
	}
	return have
}

// lastVer is what the fold keeps of a path's newest version.
type lastVer struct {
	idx       int64
	typ       string
	hash, old Hash
	count     int64
}

// fold is the state every record so far leaves behind: what a mount needs
// and every query that is not about one path or session.
type fold struct {
	n       int64 // records folded
	cur     map[string]Hash
	last    map[string]lastVer
	approve map[string]Approval
	pending []Pending
	// pendingRaw: the pending table as the state file holds it, decoded
	// when first needed (pend): a reader that never asks does not pay.
	pendingRaw []byte
	mounts     []Mount
	snaps      []Snapshot
	// sessions: those folded since the state file was written, or not
	// ended (live); the rest are in the state file (base).
	sessions map[string]*Session
	base     sessionTable
}

func newFold() *fold {
	return &fold{cur: map[string]Hash{}, last: map[string]lastVer{}, approve: map[string]Approval{},
		sessions: map[string]*Session{}}
}

// pend is the pending table, decoded from the state file if it was not.
func (f *fold) pend() ([]Pending, error) {
	if f.pendingRaw != nil {
		d := &dec{b: f.pendingRaw}
		ps, err := decodePending(d)
		if err != nil {
			return nil, err
		}
		f.pending, f.pendingRaw = ps, nil
	}
	return f.pending, nil
}

// session finds a session in the overlay or the state file.
func (f *fold) session(id string) (*Session, bool) {
	if s, ok := f.sessions[id]; ok {
		return s, true
	}
	if f.base == nil {
		return nil, false
	}
	return f.base.lookup(id)
}

// folded is what add learned of one record, for the part that indexes it.
type folded struct {
	versions []Version
	parents  []int64 // extra parents the fold adds (the approval of an approved write)
}

// add folds record idx (id, r) in. Records come in log order.
func (f *fold) add(idx int64, id Hash, r *evidence.Record) folded {
	f.n = idx + 1
	var out folded
	t := parseTimeNs(r.Meta.Time)
	p := r.Payload
	if p == nil {
		p = &evidence.Payload{}
	}
	path := r.Meta.FilePath()
	ver := func(fp, typ string, h, old Hash) {
		out.versions = append(out.versions, Version{Path: fp, Idx: idx, ID: id, Time: t, Type: typ,
			Principal: r.Principal, Session: r.Meta.Session, Hash: h, Old: old, Size: -1})
		lv := f.last[fp]
		f.last[fp] = lastVer{idx: idx, typ: typ, hash: h, old: old, count: lv.count + 1}
		if h == (Hash{}) {
			delete(f.cur, fp)
		} else {
			f.cur[fp] = h
		}
	}
	hash := func(s string) Hash { h, _ := ParseHash(s); return h }
	switch r.Type {
	case evidence.TypeMount:
		f.mounts = append(f.mounts, Mount{Idx: idx})
	case evidence.TypeUnmount:
		if n := len(f.mounts); n > 0 {
			f.mounts[n-1].Clean = true
			f.mounts[n-1].EndIdx = idx
		}
	case evidence.TypeWrite:
		// A write with no new content is a plain file's: it is in the DAG
		// for provenance but has no version.
		if p.NewHash == "" || path == "" {
			break
		}
		typ := evidence.TypeWrite
		if a, ok := f.approve[path]; ok && a.Hash == hash(p.NewHash) {
			typ = evidence.TypeApprove
			out.parents = append(out.parents, a.Idx)
			delete(f.approve, path)
		}
		ver(path, typ, hash(p.NewHash), hash(p.OldHash))
	case evidence.TypeDelete:
		if path == "" {
			break
		}
		if _, known := f.last[path]; p.OldHash != "" || known {
			ver(path, evidence.TypeDelete, Hash{}, hash(p.OldHash))
		}
	case evidence.TypeRename:
		src := p.FromPath()
		if src == "" {
			src = path
		}
		if src == "" {
			break
		}
		// The source leaves its name; a directory takes every file below.
		var moved []string
		for q := range f.cur {
			if q == src || strings.HasPrefix(q, src+"/") {
				moved = append(moved, q)
			}
		}
		sort.Strings(moved)
		for _, q := range moved {
			ver(q, evidence.TypeRename, Hash{}, f.cur[q])
		}
	case evidence.TypeRestore:
		for _, fs := range p.Files {
			if fp := fs.FilePath(); fp != "" {
				ver(fp, evidence.TypeRestore, hash(fs.Hash), hash(fs.OldHash))
			}
		}
	case evidence.TypeDrift:
		if path == "" || (p.NewHash == "" && p.OldHash == "") {
			break
		}
		ver(path, evidence.TypeDrift, hash(p.NewHash), hash(p.OldHash))
	case evidence.TypeSnapshot:
		f.snaps = append(f.snaps, Snapshot{Idx: idx, ID: id, Time: t, Label: p.Detail, Files: len(p.Files)})
		// A snapshot is the whole guarded state as the daemon found it.
		f.cur = map[string]Hash{}
		for _, fs := range p.Files {
			if fs.Hash != "" {
				f.cur[fs.FilePath()] = hash(fs.Hash)
			}
		}
	case evidence.TypeQuarantine:
		// A quarantined write names its content; a burst rollback
		// waiting for the owner may name none (the session created the
		// file: approving it removes the file).
		if path == "" || p.NewHash == "" && r.Meta.Op != "burst-rollback" {
			break
		}
		f.pend()
		f.pending = append(f.pending, Pending{Idx: idx, ID: id, Path: path, Hash: hash(p.NewHash), Base: hash(p.OldHash),
			Time: t, Principal: r.Principal, Session: r.Meta.Session, Rule: r.Meta.Rule})
	case evidence.TypeApprove, evidence.TypeReject:
		if len(r.Parents) == 0 {
			break
		}
		q := hash(r.Parents[0])
		f.pend()
		for i, pq := range f.pending {
			if pq.ID != q {
				continue
			}
			f.pending = append(f.pending[:i:i], f.pending[i+1:]...)
			if r.Type == evidence.TypeApprove {
				f.approve[pq.Path] = Approval{Idx: idx, Hash: pq.Hash}
			}
			break
		}
	}
	f.addSession(idx, t, r)
	return out
}

// addSession folds what a record says about its session: a registration
// (the first binds the id), taint, an end.
func (f *fold) addSession(idx, t int64, r *evidence.Record) {
	m := r.Meta
	if m.Session == "" {
		return
	}
	switch {
	case r.Type == evidence.TypeSessionStart && m.Verdict == "allow":
		var parent, cg, detail string
		if r.Payload != nil {
			parent, cg, detail = r.Payload.From, r.Payload.To, r.Payload.Detail
		}
		s, ok := f.session(m.Session)
		if !ok {
			s = &Session{ID: m.Session, Principal: r.Principal, Parent: parent, Start: idx, Started: t}
		} else {
			s = s.clone()
		}
		s.Taint = addTaint(s.Taint, r.Taint)
		if cg != "" {
			s.Cgroups = append(s.Cgroups, cg)
		}
		if _, a, ok := strings.Cut(detail, "; agent: "); ok && strings.TrimSpace(a) != "" {
			s.Agent = strings.TrimSpace(a)
		}
		s.Detail = detail
		s.Ended = 0
		f.sessions[m.Session] = s
	case r.Type == evidence.TypeTaint:
		if s, ok := f.session(m.Session); ok {
			s = s.clone()
			s.Taint = addTaint(s.Taint, r.Taint)
			f.sessions[m.Session] = s
		}
	case r.Type == evidence.TypeSessionEnd:
		if s, ok := f.session(m.Session); ok {
			s = s.clone()
			s.Ended = max(t, 1)
			f.sessions[m.Session] = s
		}
	}
}

func parseTimeNs(s string) int64 {
	t, err := evidence.ParseTime(s)
	if err != nil {
		return 0
	}
	return t.UnixNano()
}
