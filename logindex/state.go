package logindex

import (
	"crypto/sha256"
	"encoding/binary"
	"io"
	"sort"
	"sync"
)

// The state file holds the fold of records [0, n) (docs/evidence-format.md
// §11.4):
//
//	header    "aerfs-s1", n, then the lengths of the three areas (uint64 each)
//	tables    current   count, then (path, hash)                        the guarded state
//	          last      count, then (path, idx, type, hash, old, count)  each path's newest version
//	          approve   count, then (path, idx, hash)                   approved content awaiting its write
//	          pending   count, then (idx, id, path, hash, base, time, principal, session, rule)
//	          mounts    count, then (idx, clean, end)
//	          snapshots count, then (idx, id, time, label, files)
//	sessions  count (uint64), count × uint64 offsets, then the sessions sorted by id
//	cgroups   count (uint64), count × uint64 offsets, then (cgroup, session id) sorted by cgroup
//
// In the tables and entries, counts and indexes are uvarints, strings a
// uvarint length and the bytes, hashes 32 raw bytes (all zero: absent),
// times int64 unix nanoseconds. Offsets count from the first entry. The
// head names the file with the SHA-256 of all of it.

const stHeader = 8 + 4*8

func encodeState(f *fold, sessions func(yield func(*Session) error) error) ([]byte, error) {
	var e enc
	paths := sortedKeys(f.cur)
	e.uv(uint64(len(paths)))
	for _, p := range paths {
		e.str(p)
		e.hash(f.cur[p])
	}
	paths = sortedKeys(f.last)
	e.uv(uint64(len(paths)))
	for _, p := range paths {
		l := f.last[p]
		e.str(p)
		e.uv(uint64(l.idx))
		e.u8(versionCode(l.typ))
		e.hash(l.hash)
		e.hash(l.old)
		e.uv(uint64(l.count))
	}
	paths = sortedKeys(f.approve)
	e.uv(uint64(len(paths)))
	for _, p := range paths {
		a := f.approve[p]
		e.str(p)
		e.uv(uint64(a.Idx))
		e.hash(a.Hash)
	}
	pending, err := f.pend()
	if err != nil {
		return nil, err
	}
	var pe enc
	pe.uv(uint64(len(pending)))
	for _, q := range pending {
		pe.uv(uint64(q.Idx))
		pe.hash(q.ID)
		pe.str(q.Path)
		pe.hash(q.Hash)
		pe.hash(q.Base)
		pe.i64(q.Time)
		pe.str(q.Principal)
		pe.str(q.Session)
		pe.str(q.Rule)
	}
	// The pending table goes with its length first, so that a reader can
	// skip it until it is asked for.
	e.uv(uint64(len(pe.b)))
	e.b = append(e.b, pe.b...)
	e.uv(uint64(len(f.mounts)))
	for _, m := range f.mounts {
		e.uv(uint64(m.Idx))
		if m.Clean {
			e.u8(1)
		} else {
			e.u8(0)
		}
		e.uv(uint64(m.EndIdx))
	}
	e.uv(uint64(len(f.snaps)))
	for _, s := range f.snaps {
		e.uv(uint64(s.Idx))
		e.hash(s.ID)
		e.i64(s.Time)
		e.str(s.Label)
		e.uv(uint64(s.Files))
	}
	var sess, entries enc
	var offs []uint64
	var cgs [][2]string
	err = sessions(func(s *Session) error {
		offs = append(offs, uint64(len(entries.b)))
		encodeSession(&entries, s)
		for _, c := range s.Cgroups {
			cgs = append(cgs, [2]string{c, s.ID})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sess.u64(uint64(len(offs)))
	for _, o := range offs {
		sess.u64(o)
	}
	sess.b = append(sess.b, entries.b...)
	sort.SliceStable(cgs, func(i, j int) bool { return cgs[i][0] < cgs[j][0] })
	// A cgroup belongs to the first registration that made it.
	var uniq [][2]string
	for _, c := range cgs {
		if len(uniq) == 0 || uniq[len(uniq)-1][0] != c[0] {
			uniq = append(uniq, c)
		}
	}
	var cg enc
	entries = enc{}
	offs = offs[:0]
	for _, c := range uniq {
		offs = append(offs, uint64(len(entries.b)))
		entries.str(c[0])
		entries.str(c[1])
	}
	cg.u64(uint64(len(offs)))
	for _, o := range offs {
		cg.u64(o)
	}
	cg.b = append(cg.b, entries.b...)

	var out enc
	out.b = append(out.b, stMagic...)
	out.u64(uint64(f.n))
	out.u64(uint64(len(e.b)))
	out.u64(uint64(len(sess.b)))
	out.u64(uint64(len(cg.b)))
	out.b = append(out.b, e.b...)
	out.b = append(out.b, sess.b...)
	out.b = append(out.b, cg.b...)
	return out.b, nil
}

func encodeSession(e *enc, s *Session) {
	e.str(s.ID)
	e.str(s.Principal)
	e.str(s.Parent)
	e.uv(uint64(s.Start))
	e.i64(s.Started)
	e.i64(s.Ended)
	e.uv(uint64(len(s.Taint)))
	for _, t := range s.Taint {
		e.str(t)
	}
	e.str(s.Agent)
	e.str(s.Detail)
	e.uv(uint64(len(s.Cgroups)))
	for _, c := range s.Cgroups {
		e.str(c)
	}
}

func decodeSession(d *dec) *Session {
	s := &Session{ID: d.str("session id"), Principal: d.str("principal"), Parent: d.str("parent"),
		Start: int64(d.uv("start")), Started: d.i64("started"), Ended: d.i64("ended")}
	n := d.count(1, "taint")
	for range n {
		s.Taint = append(s.Taint, d.str("taint"))
	}
	s.Agent, s.Detail = d.str("agent"), d.str("detail")
	n = d.count(1, "cgroups")
	for range n {
		s.Cgroups = append(s.Cgroups, d.str("cgroup"))
	}
	if d.err == nil && s.ID == "" {
		d.fail("session id")
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// sessionTable is the sessions of a state file, read on demand.
type sessionTable interface {
	lookup(id string) (*Session, bool)
	byCgroup(cg string) (string, bool)
	each(yield func(*Session) error) error
	count() int
}

// fileSessions reads sessions and cgroups from the state file.
type fileSessions struct {
	mu      sync.Mutex
	r       io.ReaderAt
	sessAt  int64 // where the session entries begin
	sessOff []uint64
	sessEnd int64
	cgAt    int64
	cgOff   []uint64
	cgEnd   int64
}

func (t *fileSessions) count() int { return len(t.sessOff) }

// entry reads entry i of a table whose entries begin at at and end at end.
func (t *fileSessions) entry(offs []uint64, at, end int64, i int) (*dec, error) {
	lo := at + int64(offs[i])
	hi := end
	if i+1 < len(offs) {
		hi = at + int64(offs[i+1])
	}
	if lo < at || hi < lo || hi > end {
		return nil, formatErr("state: entry %d out of place", i)
	}
	b := make([]byte, hi-lo)
	if _, err := t.r.ReadAt(b, lo); err != nil {
		return nil, err
	}
	return &dec{b: b}, nil
}

func (t *fileSessions) session(i int) (*Session, error) {
	d, err := t.entry(t.sessOff, t.sessAt, t.sessEnd, i)
	if err != nil {
		return nil, err
	}
	s := decodeSession(d)
	if d.err == nil && len(d.b) != 0 {
		d.fail("session entry")
	}
	return s, d.err
}

func (t *fileSessions) lookup(id string) (*Session, bool) {
	var ferr error
	i := sort.Search(len(t.sessOff), func(i int) bool {
		s, err := t.session(i)
		if err != nil {
			ferr = err
			return true
		}
		return s.ID >= id
	})
	if ferr != nil || i == len(t.sessOff) {
		return nil, false
	}
	s, err := t.session(i)
	if err != nil || s.ID != id {
		return nil, false
	}
	return s, true
}

func (t *fileSessions) byCgroup(cg string) (string, bool) {
	get := func(i int) (string, string, error) {
		d, err := t.entry(t.cgOff, t.cgAt, t.cgEnd, i)
		if err != nil {
			return "", "", err
		}
		a, b := d.str("cgroup"), d.str("session")
		return a, b, d.err
	}
	var ferr error
	i := sort.Search(len(t.cgOff), func(i int) bool {
		c, _, err := get(i)
		if err != nil {
			ferr = err
			return true
		}
		return c >= cg
	})
	if ferr != nil || i == len(t.cgOff) {
		return "", false
	}
	c, id, err := get(i)
	if err != nil || c != cg {
		return "", false
	}
	return id, true
}

func (t *fileSessions) each(yield func(*Session) error) error {
	for i := range t.sessOff {
		s, err := t.session(i)
		if err != nil {
			return err
		}
		if err := yield(s); err != nil {
			return err
		}
	}
	return nil
}

// loadState reads a state file of the given size and hash: the small
// tables into f, the sessions and cgroups as tables read on demand through
// r. Every byte is hashed on the way and checked against want.
func loadState(r io.ReaderAt, size int64, want Hash, f *fold) error {
	if size < stHeader {
		return formatErr("state: %d bytes", size)
	}
	h := sha256.New()
	hdr := make([]byte, stHeader)
	if _, err := r.ReadAt(hdr, 0); err != nil {
		return err
	}
	h.Write(hdr)
	d := dec{b: hdr}
	if string(d.take(8, "magic")) != stMagic {
		return formatErr("state: bad magic")
	}
	f.n = int64(d.u64("n"))
	lt, ls, lc := int64(d.u64("tables")), int64(d.u64("sessions")), int64(d.u64("cgroups"))
	if lt < 0 || ls < 8 || lc < 8 || lt > size || ls > size || lc > size || stHeader+lt+ls+lc != size {
		return formatErr("state: areas do not add up to the file")
	}
	tables := make([]byte, lt)
	if _, err := r.ReadAt(tables, stHeader); err != nil {
		return err
	}
	h.Write(tables)
	if err := decodeTables(tables, f); err != nil {
		return err
	}
	t := &fileSessions{r: r}
	var err error
	if t.sessOff, t.sessAt, t.sessEnd, err = readTable(r, h, stHeader+lt, ls, "sessions"); err != nil {
		return err
	}
	if t.cgOff, t.cgAt, t.cgEnd, err = readTable(r, h, stHeader+lt+ls, lc, "cgroups"); err != nil {
		return err
	}
	var got Hash
	copy(got[:], h.Sum(nil))
	if got != want {
		return formatErr("state: hash does not match the head")
	}
	f.base = t
	return nil
}

// readTable reads a table's offsets (checked to increase inside it) and
// hashes its entries without keeping them.
func readTable(r io.ReaderAt, h io.Writer, at, n int64, what string) ([]uint64, int64, int64, error) {
	var c [8]byte
	if _, err := r.ReadAt(c[:], at); err != nil {
		return nil, 0, 0, err
	}
	h.Write(c[:])
	k := binary.BigEndian.Uint64(c[:])
	if k > uint64((n-8)/8) {
		return nil, 0, 0, formatErr("state: %s: %d entries do not fit", what, k)
	}
	ob := make([]byte, k*8)
	if _, err := r.ReadAt(ob, at+8); err != nil {
		return nil, 0, 0, err
	}
	h.Write(ob)
	entries := at + 8 + int64(k)*8
	end := at + n
	offs := make([]uint64, k)
	for i := range offs {
		offs[i] = binary.BigEndian.Uint64(ob[i*8:])
		if (i == 0 && offs[i] != 0) || (i > 0 && offs[i] <= offs[i-1]) || entries+int64(offs[i]) >= end {
			return nil, 0, 0, formatErr("state: %s: offset %d out of place", what, i)
		}
	}
	if k == 0 && entries != end {
		return nil, 0, 0, formatErr("state: %s: bytes without entries", what)
	}
	if _, err := io.Copy(h, io.NewSectionReader(r, entries, end-entries)); err != nil {
		return nil, 0, 0, err
	}
	return offs, entries, end, nil
}

// decodePending reads a pending table (the whole of d).
func decodePending(d *dec) ([]Pending, error) {
	n := d.count(110, "pending")
	var out []Pending
	for range n {
		q := Pending{Idx: int64(d.uv("idx")), ID: d.hash("id"), Path: d.str("path"), Hash: d.hash("hash"),
			Base: d.hash("base"), Time: d.i64("time"), Principal: d.str("principal"), Session: d.str("session"), Rule: d.str("rule")}
		out = append(out, q)
	}
	if d.err == nil && len(d.b) != 0 {
		return nil, formatErr("state: %d bytes past the pending table", len(d.b))
	}
	return out, d.err
}

// decodeTables reads the tables area into f.
func decodeTables(b []byte, f *fold) error {
	d := &dec{b: b}
	n := d.count(33, "current")
	for range n {
		p := d.str("path")
		f.cur[p] = d.hash("hash")
	}
	n = d.count(68, "last")
	for range n {
		p := d.str("path")
		l := lastVer{idx: int64(d.uv("idx"))}
		code := d.u8("type")
		if code == 0 || int(code) >= len(versionTypes) {
			d.fail("version type")
		} else {
			l.typ = versionTypes[code]
		}
		l.hash, l.old, l.count = d.hash("hash"), d.hash("old"), int64(d.uv("count"))
		f.last[p] = l
	}
	n = d.count(34, "approve")
	for range n {
		p := d.str("path")
		f.approve[p] = Approval{Idx: int64(d.uv("idx")), Hash: d.hash("hash")}
	}
	pl := d.uv("pending")
	if d.err == nil && pl > uint64(len(d.b)) {
		d.fail("pending")
	}
	raw := d.take(int(pl), "pending")
	if d.err == nil && len(raw) > 0 {
		// Decoded when asked (the hash over the file vouches for it).
		f.pendingRaw = raw
	}
	n = d.count(3, "mounts")
	for range n {
		m := Mount{Idx: int64(d.uv("idx")), Clean: d.u8("clean") == 1, EndIdx: int64(d.uv("end"))}
		f.mounts = append(f.mounts, m)
	}
	n = d.count(43, "snapshots")
	for range n {
		s := Snapshot{Idx: int64(d.uv("idx")), ID: d.hash("id"), Time: d.i64("time"), Label: d.str("label"), Files: int(d.uv("files"))}
		f.snaps = append(f.snaps, s)
	}
	if d.err == nil && len(d.b) != 0 {
		return formatErr("state: %d bytes past the tables", len(d.b))
	}
	return d.err
}

// overlaySessions yields the sessions of base with those of over in their
// place, and those only over has, in id order.
func overlaySessions(base sessionTable, over map[string]*Session) func(yield func(*Session) error) error {
	return func(yield func(*Session) error) error {
		ids := sortedKeys(over)
		i := 0
		flush := func(upto string, incl bool) error {
			for i < len(ids) && (ids[i] < upto || incl) {
				if err := yield(over[ids[i]]); err != nil {
					return err
				}
				i++
			}
			return nil
		}
		if base != nil {
			err := base.each(func(s *Session) error {
				if err := flush(s.ID, false); err != nil {
					return err
				}
				if _, ok := over[s.ID]; ok {
					return nil // flushed above or below: the overlay's is newer
				}
				return yield(s)
			})
			if err != nil {
				return err
			}
		}
		return flush("", true)
	}
}

// memSessions is a session table in memory (a fold built from scratch
// before it is written).
type memSessions map[string]*Session

func (m memSessions) lookup(id string) (*Session, bool) { s, ok := m[id]; return s, ok }
func (m memSessions) count() int                        { return len(m) }
func (m memSessions) byCgroup(cg string) (string, bool) {
	for _, s := range m {
		for _, c := range s.Cgroups {
			if c == cg {
				return s.ID, true
			}
		}
	}
	return "", false
}
func (m memSessions) each(yield func(*Session) error) error {
	for _, id := range sortedKeys(m) {
		if err := yield(m[id]); err != nil {
			return err
		}
	}
	return nil
}
