package logindex

import (
	"sort"
	"strings"

	"github.com/aerfs/aerfs/evidence"
)

// Key kinds: the first byte of every key of a part's dictionary
// (docs/evidence-format.md §11.3).
const (
	kPath    = 'p' // a path a record names (meta.path, payload.from, payload.to) → its records
	kSession = 's' // a session → its records
	kType    = 't' // a record type → its records
	kOp      = 'o' // a meta.op → its records
	kPruned  = 'g' // a blob hash a gc record pruned → the gc record
	kVersion = 'v' // a path → its versions
	kRead    = 'r' // a path → the reads records that list it
	kName    = 'n' // a principal's name (no records)
)

// Rec is what a part keeps of one record.
type Rec struct {
	Idx       int64
	ID        Hash  // known in memory; from a segment, read from the log's index file
	Time      int64 // unix ns
	Type      string
	Principal string
	Verdict   string
	Session   string
	Path      string    // meta.path (its bytes)
	Parents   []int64   // the parents the index knows, and an approved write's approval
	Versions  []Version // the versions it made, by path
	Reads     int       // how many files a reads record lists
}

// Read is one reads record's listing of a path.
type Read struct {
	Idx   int64
	Known bool    // the content's hash is known (else only a fingerprint was)
	Hash8 [8]byte // the first 8 bytes of that hash
}

// part is the index of a contiguous range of records: on disk (a
// segment) or in memory (the records past the last segment).
type part interface {
	bounds() (from, to int64)
	record(idx int64) (Rec, error)
	versions(path string) ([]Version, error)
	postings(key string) ([]int64, error)
	// keysUnder lists the keys of kind whose name is name or lies under
	// name + "/", sorted.
	keysUnder(kind byte, name string) ([]string, error)
	reads(path string) ([]Read, error)
	// children lists the records of the part that name idx as a parent.
	children(idx int64) ([]int64, error)
	close() error
}

// mem is a part in memory.
type mem struct {
	from, to int64
	recs     []Rec                // by index; a bundle's may have gaps
	hist     map[string][]Version // path → versions, log order
	rds      map[string][]Read    // path → reads records
	post     map[string][]int64   // key → records
	kids     map[int64][]int64    // parent → the part's records naming it
	// What a segment does not keep (it is read from the log) but a part
	// without a log behind it (a bundle's) must: the files a reads record
	// lists and a snapshot's files.
	readPaths map[int64][]string
	snapFiles map[int64][]evidence.FileState
}

func newMem(from int64) *mem {
	return &mem{from: from, to: from, hist: map[string][]Version{}, rds: map[string][]Read{}, post: map[string][]int64{},
		kids: map[int64][]int64{}, readPaths: map[int64][]string{}, snapFiles: map[int64][]evidence.FileState{}}
}

func (m *mem) bounds() (int64, int64) { return m.from, m.to }

func (m *mem) record(idx int64) (Rec, error) {
	i := sort.Search(len(m.recs), func(i int) bool { return m.recs[i].Idx >= idx })
	if i == len(m.recs) || m.recs[i].Idx != idx {
		return Rec{}, formatErr("record %d is not in [%d, %d)", idx, m.from, m.to)
	}
	return m.recs[i], nil
}

func (m *mem) children(idx int64) ([]int64, error) { return m.kids[idx], nil }

func (m *mem) versions(path string) ([]Version, error) { return m.hist[path], nil }
func (m *mem) postings(key string) ([]int64, error)    { return m.post[key], nil }
func (m *mem) reads(path string) ([]Read, error)       { return m.rds[path], nil }
func (m *mem) close() error                            { return nil }

func (m *mem) keysUnder(kind byte, name string) ([]string, error) {
	var out []string
	add := func(k string) {
		if under(k[1:], name) {
			out = append(out, k)
		}
	}
	switch kind {
	case kVersion:
		for p := range m.hist {
			add(string(kind) + p)
		}
	case kRead:
		for p := range m.rds {
			add(string(kind) + p)
		}
	default:
		for k := range m.post {
			if k[0] == kind {
				add(k)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

func under(s, name string) bool { return s == name || strings.HasPrefix(s, name+"/") }

// add indexes record idx, after the fold has said what it made.
func (m *mem) add(idx int64, id Hash, r *evidence.Record, parents []int64, fd folded) {
	m.to = idx + 1
	rec := Rec{Idx: idx, ID: id, Time: parseTimeNs(r.Meta.Time), Type: r.Type, Principal: r.Principal, Verdict: r.Meta.Verdict,
		Session: r.Meta.Session, Path: r.Meta.FilePath(), Parents: parents, Versions: fd.versions}
	post := func(kind byte, name string) {
		k := string(kind) + name
		if l := m.post[k]; len(l) == 0 || l[len(l)-1] != idx {
			m.post[k] = append(l, idx)
		}
	}
	for _, p := range []string{rec.Path, r.Payload.FromPath(), r.Payload.ToPath()} {
		if p != "" {
			post(kPath, p)
		}
	}
	if rec.Session != "" {
		post(kSession, rec.Session)
	}
	post(kType, rec.Type)
	if r.Meta.Op != "" {
		post(kOp, r.Meta.Op)
	}
	if p := r.Payload; p != nil {
		for _, h := range p.Pruned {
			post(kPruned, h)
		}
		rec.Reads = len(p.Reads)
		for _, fr := range p.Reads {
			rd := Read{Idx: idx}
			if h, ok := ParseHash(fr.Hash); ok && fr.Hash != "" {
				rd.Known = true
				copy(rd.Hash8[:], h[:8])
			}
			fp := fr.FilePath()
			m.rds[fp] = append(m.rds[fp], rd)
		}
	}
	for _, v := range fd.versions {
		m.hist[v.Path] = append(m.hist[v.Path], v)
	}
	for _, p := range parents {
		if l := m.kids[p]; len(l) == 0 || l[len(l)-1] != idx {
			m.kids[p] = append(l, idx)
		}
	}
	m.recs = append(m.recs, rec)
}

// keepContent keeps what a segment would read from the log: a snapshot's
// files, and with all (a part with no log behind it) a reads record's.
func (m *mem) keepContent(idx int64, r *evidence.Record, all bool) {
	if r.Payload == nil {
		return
	}
	if all && len(r.Payload.Reads) > 0 {
		ps := make([]string, len(r.Payload.Reads))
		for i := range r.Payload.Reads {
			ps[i] = r.Payload.Reads[i].FilePath()
		}
		m.readPaths[idx] = ps
	}
	if r.Type == evidence.TypeSnapshot {
		m.snapFiles[idx] = append([]evidence.FileState(nil), r.Payload.Files...)
	}
}

// merge appends o, the part that follows m, to m.
func (m *mem) merge(o *mem) {
	m.recs = append(m.recs, o.recs...)
	m.to = o.to
	for k, v := range o.hist {
		m.hist[k] = append(m.hist[k], v...)
	}
	for k, v := range o.rds {
		m.rds[k] = append(m.rds[k], v...)
	}
	for k, v := range o.post {
		m.post[k] = append(m.post[k], v...)
	}
	for k, v := range o.kids {
		m.kids[k] = append(m.kids[k], v...)
	}
}
