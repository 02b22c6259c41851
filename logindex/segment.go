package logindex

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
)

// A segment is the index of records [from, to), immutable once written
// (docs/evidence-format.md §11.3):
//
//	header      32 bytes: "aerfs-x1", from, to (uint64), key count (uint32), 0 (uint32)
//	sections    9 × (offset, length) as uint64, then the sections in this order:
//	  R   one 48-byte entry per record
//	  P   parents, uint64 record indexes
//	  VR  uint32 positions in H: the versions of each record
//	  H   136-byte versions, grouped by path (the dictionary's order), each group in log order
//	  D   24-byte reads listings, grouped by path
//	  C   provenance links: (parent, child) as uint64 pairs, sorted, for every child in the segment
//	  KO  uint32 offsets into KB, one per key and one past the last
//	  KB  the keys' bytes: a kind byte, then the name
//	  KV  per key two uint32: its records (offset in PO, count), versions (first in H, count) or reads (first in D, count)
//	  PO  records lists: the first record's distance from `from`, then the gaps, as uvarints
//	block table one SHA-256 per 16 KiB block of everything above
//	footer      24 bytes: length of everything above, block count (uint64), "aerfs-xb"
//
// Integers are big-endian. The head names each segment with the SHA-256
// of its block table and footer, so a reader checks each block it reads
// against the table before using it.

const (
	segHeader   = 32
	segSections = 10
	secTable    = segSections * 16
	recSize     = 48
	histSize    = 136
	readSize    = 24
	footerSize  = 24
)

const (
	sR = iota
	sP
	sVR
	sH
	sD
	sC
	sKO
	sKB
	sKV
	sPO
)

var verdicts = []string{"", "allow", "deny"}

func verdictCode(v string) uint8 {
	for i, x := range verdicts {
		if x == v {
			return uint8(i)
		}
	}
	return 0
}

// encodeSegment writes m as a segment: its bytes and the SHA-256 the head
// names it by.
func encodeSegment(m *mem) ([]byte, Hash, error) {
	// The dictionary: every key a record, a version or a listing names.
	keyset := map[string]bool{}
	for k := range m.post {
		keyset[k] = true
	}
	for p := range m.hist {
		keyset[string(kVersion)+p] = true
	}
	for p := range m.rds {
		keyset[string(kRead)+p] = true
	}
	for i := range m.recs {
		r := &m.recs[i]
		keyset[string(kName)+r.Principal] = true
		keyset[string(kType)+r.Type] = true
		if r.Session != "" {
			keyset[string(kSession)+r.Session] = true
		}
		if r.Path != "" {
			keyset[string(kPath)+r.Path] = true
		}
		for _, v := range r.Versions {
			keyset[string(kName)+v.Principal] = true
			if v.Session != "" {
				keyset[string(kSession)+v.Session] = true
			}
		}
	}
	keys := make([]string, 0, len(keyset))
	for k := range keyset {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pos := make(map[string]uint32, len(keys))
	for i, k := range keys {
		pos[k] = uint32(i)
	}
	ref := func(kind byte, name string) uint32 { return pos[string(kind)+name] }
	opt := func(kind byte, name string) uint32 {
		if name == "" {
			return 0
		}
		return ref(kind, name) + 1
	}

	var sec [segSections]enc
	kv := make([][2]uint32, len(keys))
	// H, grouped by path; where each (record, path) version went, for VR.
	hpos := map[[2]any]uint32{}
	nh := uint32(0)
	for i, k := range keys {
		switch k[0] {
		case kVersion:
			vs := m.hist[k[1:]]
			kv[i] = [2]uint32{nh, uint32(len(vs))}
			for j, v := range vs {
				e := &sec[sH]
				e.u64(uint64(v.Idx))
				e.i64(v.Time)
				e.u8(versionCode(v.Type))
				e.b = append(e.b, 0, 0, 0)
				e.u32(ref(kName, v.Principal))
				e.u32(opt(kSession, v.Session))
				e.u32(uint32(i))
				e.hash(v.ID)
				e.hash(v.Hash)
				e.hash(v.Old)
				e.i64(v.Size)
				hpos[[2]any{v.Idx, v.Path}] = nh + uint32(j)
			}
			nh += uint32(len(vs))
		case kRead:
			rs := m.rds[k[1:]]
			kv[i] = [2]uint32{uint32(len(sec[sD].b) / readSize), uint32(len(rs))}
			for _, r := range rs {
				e := &sec[sD]
				e.u64(uint64(r.Idx))
				if r.Known {
					e.u8(1)
				} else {
					e.u8(0)
				}
				e.b = append(e.b, 0, 0, 0, 0, 0, 0, 0)
				e.b = append(e.b, r.Hash8[:]...)
			}
		case kName:
		default:
			l := m.post[k]
			kv[i] = [2]uint32{uint32(len(sec[sPO].b)), uint32(len(l))}
			prev := m.from
			for _, x := range l {
				sec[sPO].uv(uint64(x - prev))
				prev = x
			}
		}
	}
	for i := range m.recs {
		r := &m.recs[i]
		e := &sec[sR]
		e.i64(r.Time)
		e.u32(ref(kType, r.Type))
		e.u32(ref(kName, r.Principal))
		e.u32(opt(kSession, r.Session))
		e.u32(opt(kPath, r.Path))
		e.u8(verdictCode(r.Verdict))
		e.b = append(e.b, 0, 0, 0)
		e.u32(uint32(len(sec[sP].b) / 8))
		e.u32(uint32(len(r.Parents)))
		e.u32(uint32(len(sec[sVR].b) / 4))
		e.u32(uint32(len(r.Versions)))
		e.u32(uint32(r.Reads))
		for _, p := range r.Parents {
			sec[sP].u64(uint64(p))
		}
		for _, v := range r.Versions {
			sec[sVR].u32(hpos[[2]any{v.Idx, v.Path}])
		}
	}
	var links [][2]int64
	for p, cs := range m.kids {
		for _, c := range cs {
			links = append(links, [2]int64{p, c})
		}
	}
	sort.Slice(links, func(i, j int) bool {
		if links[i][0] != links[j][0] {
			return links[i][0] < links[j][0]
		}
		return links[i][1] < links[j][1]
	})
	for _, l := range links {
		sec[sC].u64(uint64(l[0]))
		sec[sC].u64(uint64(l[1]))
	}
	var kb enc
	for _, k := range keys {
		sec[sKO].u32(uint32(len(kb.b)))
		kb.b = append(kb.b, k...)
	}
	sec[sKO].u32(uint32(len(kb.b)))
	sec[sKB] = kb
	for _, x := range kv {
		sec[sKV].u32(x[0])
		sec[sKV].u32(x[1])
	}

	var out enc
	out.b = append(out.b, segMagic...)
	out.u64(uint64(m.from))
	out.u64(uint64(m.to))
	out.u32(uint32(len(keys)))
	out.u32(0)
	off := uint64(segHeader + secTable)
	for i := range sec {
		out.u64(off)
		out.u64(uint64(len(sec[i].b)))
		off += uint64(len(sec[i].b))
	}
	for i := range sec {
		out.b = append(out.b, sec[i].b...)
	}
	body := len(out.b)
	tail := blockTable(out.b)
	var ft enc
	ft.u64(uint64(body))
	ft.u64(uint64(len(tail) / sha256.Size))
	ft.b = append(ft.b, segFooter...)
	tail = append(tail, ft.b...)
	out.b = append(out.b, tail...)
	return out.b, sum(tail), nil
}

func blockTable(body []byte) []byte {
	var t []byte
	for off := 0; off < len(body); off += blockSize {
		s := sha256.Sum256(body[off:min(off+blockSize, len(body))])
		t = append(t, s[:]...)
	}
	return t
}

// segment is a segment file open for reading. Every byte it hands out
// comes from a block checked against the block table the head vouches
// for.
type segment struct {
	ref      segRef // how the head names it
	from, to int64
	nkeys    int
	sec      [segSections][2]int64 // offset, length
	bf       *blockFile
	mu       sync.Mutex
	names    map[uint32]string // decoded keys, by position
}

// blockFile reads a segment's body through its block table.
type blockFile struct {
	r     io.ReaderAt
	c     io.Closer
	body  int64
	sums  []byte // the block table
	whole []byte // the whole body, every block checked (wholeBody); nil: read by block
	mu    sync.Mutex
	cache [4]struct {
		n    int64
		data []byte
	}
	next int
}

// openSegment opens the segment s of the head, checking the block table
// against the head and the header against s.
func openSegment(path string, s segRef) (*segment, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	seg, err := readSegment(f, f, s)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	seg.ref = s
	return seg, nil
}

// readSegment reads a segment of size s.size through r.
func readSegment(r io.ReaderAt, c io.Closer, s segRef) (*segment, error) {
	if s.size < segHeader+secTable+footerSize {
		return nil, formatErr("segment: %d bytes", s.size)
	}
	var ft [footerSize]byte
	if _, err := r.ReadAt(ft[:], s.size-footerSize); err != nil {
		return nil, err
	}
	body := int64(binary.BigEndian.Uint64(ft[:8]))
	nb := int64(binary.BigEndian.Uint64(ft[8:16]))
	if string(ft[16:]) != segFooter || body < segHeader+secTable || nb != (body+blockSize-1)/blockSize ||
		body+nb*sha256.Size+footerSize != s.size {
		return nil, formatErr("segment: bad footer")
	}
	tail := make([]byte, nb*sha256.Size+footerSize)
	if _, err := r.ReadAt(tail, body); err != nil {
		return nil, err
	}
	if sum(tail) != s.sum {
		return nil, formatErr("segment: block table does not match the head")
	}
	bf := &blockFile{r: r, c: c, body: body, sums: tail[:nb*sha256.Size]}
	hdr := make([]byte, segHeader+secTable)
	if err := bf.readAt(hdr, 0); err != nil {
		return nil, err
	}
	seg := &segment{bf: bf, names: map[uint32]string{}}
	if err := seg.parseHeader(hdr, s.from, s.to, body); err != nil {
		return nil, err
	}
	return seg, nil
}

func (seg *segment) parseHeader(hdr []byte, from, to, body int64) error {
	d := dec{b: hdr}
	if string(d.take(8, "magic")) != segMagic {
		return formatErr("segment: bad magic")
	}
	seg.from, seg.to = int64(d.u64("from")), int64(d.u64("to"))
	seg.nkeys = int(d.u32("keys"))
	d.u32("reserved")
	if seg.from != from || seg.to != to {
		return formatErr("segment: covers [%d, %d), the head says [%d, %d)", seg.from, seg.to, from, to)
	}
	at := int64(segHeader + secTable)
	for i := range seg.sec {
		off, n := int64(d.u64("section")), int64(d.u64("section"))
		if off != at || n < 0 || off+n > body {
			return formatErr("segment: section %d out of place", i)
		}
		seg.sec[i] = [2]int64{off, n}
		at += n
	}
	if d.err != nil {
		return d.err
	}
	k := int64(seg.nkeys)
	switch {
	case at != body:
		return formatErr("segment: sections end at %d, the body at %d", at, body)
	case seg.sec[sR][1] != (to-from)*recSize:
		return formatErr("segment: %d bytes of records for %d records", seg.sec[sR][1], to-from)
	case seg.sec[sKO][1] != (k+1)*4 || seg.sec[sKV][1] != k*8:
		return formatErr("segment: dictionary sections do not match %d keys", k)
	case seg.sec[sP][1]%8 != 0 || seg.sec[sVR][1]%4 != 0 || seg.sec[sH][1]%histSize != 0 || seg.sec[sD][1]%readSize != 0 || seg.sec[sC][1]%16 != 0:
		return formatErr("segment: a section is not a whole number of entries")
	}
	return nil
}

// readAt fills p from the body at off, through checked blocks.
func (bf *blockFile) readAt(p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > bf.body {
		return formatErr("segment: read [%d, %d) past the body (%d)", off, off+int64(len(p)), bf.body)
	}
	if bf.whole != nil {
		copy(p, bf.whole[off:])
		return nil
	}
	for len(p) > 0 {
		n := off / blockSize
		b, err := bf.block(n)
		if err != nil {
			return err
		}
		k := copy(p, b[off-n*blockSize:])
		p, off = p[k:], off+int64(k)
	}
	return nil
}

// wholeBody reads the whole body once, checking each block once: for
// reading a segment from end to end (a merge), where the few blocks
// block keeps would be read and checked again for every record, whose
// fields lie in sections blocks apart.
func (bf *blockFile) wholeBody() (*blockFile, error) {
	body := make([]byte, bf.body)
	if n, err := bf.r.ReadAt(body, 0); n < len(body) {
		return nil, fmt.Errorf("segment: body: %w", err)
	}
	for n := int64(0); n*blockSize < bf.body; n++ {
		b := body[n*blockSize : min((n+1)*blockSize, bf.body)]
		if s := sha256.Sum256(b); !bytes.Equal(s[:], bf.sums[n*32:n*32+32]) {
			return nil, formatErr("segment: block %d does not match its hash", n)
		}
	}
	return &blockFile{body: bf.body, sums: bf.sums, whole: body}, nil
}

func (bf *blockFile) block(n int64) ([]byte, error) {
	bf.mu.Lock()
	defer bf.mu.Unlock()
	for _, c := range bf.cache {
		if c.data != nil && c.n == n {
			return c.data, nil
		}
	}
	size := min(int64(blockSize), bf.body-n*blockSize)
	c := &bf.cache[bf.next]
	bf.next = (bf.next + 1) % len(bf.cache)
	if cap(c.data) < blockSize {
		c.data = make([]byte, blockSize)
	}
	c.data = c.data[:size]
	c.n = -1
	if _, err := bf.r.ReadAt(c.data, n*blockSize); err != nil {
		c.data = nil
		return nil, fmt.Errorf("segment: block %d: %w", n, err)
	}
	if s := sha256.Sum256(c.data); !bytes.Equal(s[:], bf.sums[n*32:n*32+32]) {
		c.data = nil
		return nil, formatErr("segment: block %d does not match its hash", n)
	}
	c.n = n
	return c.data, nil
}

func (seg *segment) close() error {
	if seg.bf.c != nil {
		return seg.bf.c.Close()
	}
	return nil
}

func (seg *segment) bounds() (int64, int64) { return seg.from, seg.to }

// section reads n bytes at off within section s.
func (seg *segment) section(s int, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off+n > seg.sec[s][1] {
		return nil, formatErr("segment: read [%d, %d) outside section %d (%d bytes)", off, off+n, s, seg.sec[s][1])
	}
	b := make([]byte, n)
	return b, seg.bf.readAt(b, seg.sec[s][0]+off)
}

// key returns key i of the dictionary.
func (seg *segment) key(i uint32) (string, error) {
	if int(i) >= seg.nkeys {
		return "", formatErr("segment: key %d of %d", i, seg.nkeys)
	}
	seg.mu.Lock()
	k, ok := seg.names[i]
	seg.mu.Unlock()
	if ok {
		return k, nil
	}
	o, err := seg.section(sKO, int64(i)*4, 8)
	if err != nil {
		return "", err
	}
	a, b := binary.BigEndian.Uint32(o), binary.BigEndian.Uint32(o[4:])
	if b <= a {
		return "", formatErr("segment: key %d is empty or out of order", i)
	}
	kb, err := seg.section(sKB, int64(a), int64(b-a))
	if err != nil {
		return "", err
	}
	k = string(kb)
	seg.mu.Lock()
	if len(seg.names) > 1<<14 {
		clear(seg.names)
	}
	seg.names[i] = k
	seg.mu.Unlock()
	return k, nil
}

func (seg *segment) name(i uint32, kind byte) (string, error) {
	k, err := seg.key(i)
	if err != nil {
		return "", err
	}
	if k[0] != kind {
		return "", formatErr("segment: key %d is not of kind %c", i, kind)
	}
	return k[1:], nil
}

func (seg *segment) optName(i uint32, kind byte) (string, error) {
	if i == 0 {
		return "", nil
	}
	return seg.name(i-1, kind)
}

// find is the position of key in the dictionary (or where it would go).
func (seg *segment) find(key string) (int, bool, error) {
	var ferr error
	i := sort.Search(seg.nkeys, func(i int) bool {
		if ferr != nil {
			return true
		}
		k, err := seg.key(uint32(i))
		if err != nil {
			ferr = err
			return true
		}
		return k >= key
	})
	if ferr != nil {
		return 0, false, ferr
	}
	if i < seg.nkeys {
		k, err := seg.key(uint32(i))
		if err != nil {
			return 0, false, err
		}
		return i, k == key, nil
	}
	return i, false, nil
}

func (seg *segment) kv(i int) (uint32, uint32, error) {
	b, err := seg.section(sKV, int64(i)*8, 8)
	if err != nil {
		return 0, 0, err
	}
	return binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:]), nil
}

func (seg *segment) record(idx int64) (Rec, error) {
	if idx < seg.from || idx >= seg.to {
		return Rec{}, formatErr("record %d outside [%d, %d)", idx, seg.from, seg.to)
	}
	b, err := seg.section(sR, (idx-seg.from)*recSize, recSize)
	if err != nil {
		return Rec{}, err
	}
	d := dec{b: b}
	r := Rec{Idx: idx, Time: d.i64("time")}
	typ, prin, sess, path := d.u32("type"), d.u32("principal"), d.u32("session"), d.u32("path")
	vc := d.u8("verdict")
	d.take(3, "pad")
	pf, pc, vf, vn, rd := d.u32("parents"), d.u32("parents"), d.u32("versions"), d.u32("versions"), d.u32("reads")
	if d.err != nil {
		return Rec{}, d.err
	}
	if int(vc) >= len(verdicts) {
		return Rec{}, formatErr("record %d: verdict %d", idx, vc)
	}
	r.Verdict, r.Reads = verdicts[vc], int(rd)
	if r.Type, err = seg.name(typ, kType); err == nil {
		if r.Principal, err = seg.name(prin, kName); err == nil {
			if r.Session, err = seg.optName(sess, kSession); err == nil {
				r.Path, err = seg.optName(path, kPath)
			}
		}
	}
	if err != nil {
		return Rec{}, err
	}
	if pc > 0 {
		pb, err := seg.section(sP, int64(pf)*8, int64(pc)*8)
		if err != nil {
			return Rec{}, err
		}
		for i := range int(pc) {
			r.Parents = append(r.Parents, int64(binary.BigEndian.Uint64(pb[i*8:])))
		}
	}
	if vn > 0 {
		if int64(vn) > seg.sec[sH][1]/histSize {
			return Rec{}, formatErr("record %d: %d versions", idx, vn)
		}
		vb, err := seg.section(sVR, int64(vf)*4, int64(vn)*4)
		if err != nil {
			return Rec{}, err
		}
		for i := range int(vn) {
			v, err := seg.hist(binary.BigEndian.Uint32(vb[i*4:]), "")
			if err != nil {
				return Rec{}, err
			}
			r.Versions = append(r.Versions, v)
		}
	}
	return r, nil
}

// hist decodes version entry h (path is its group's, when known).
func (seg *segment) hist(h uint32, path string) (Version, error) {
	b, err := seg.section(sH, int64(h)*histSize, histSize)
	if err != nil {
		return Version{}, err
	}
	d := dec{b: b}
	v := Version{Idx: int64(d.u64("idx")), Time: d.i64("time")}
	code := d.u8("type")
	d.take(3, "pad")
	prin, sess, key := d.u32("principal"), d.u32("session"), d.u32("path")
	v.ID, v.Hash, v.Old = d.hash("id"), d.hash("hash"), d.hash("old")
	v.Size = d.i64("size")
	if d.err != nil {
		return Version{}, d.err
	}
	if code == 0 || int(code) >= len(versionTypes) {
		return Version{}, formatErr("version %d: type %d", h, code)
	}
	v.Type = versionTypes[code]
	if v.Principal, err = seg.name(prin, kName); err == nil {
		if v.Session, err = seg.optName(sess, kSession); err == nil && path == "" {
			path, err = seg.name(key, kVersion)
		}
	}
	v.Path = path
	return v, err
}

func (seg *segment) versions(path string) ([]Version, error) {
	i, ok, err := seg.find(string(kVersion) + path)
	if err != nil || !ok {
		return nil, err
	}
	first, n, err := seg.kv(i)
	if err != nil {
		return nil, err
	}
	if int64(first)+int64(n) > seg.sec[sH][1]/histSize {
		return nil, formatErr("segment: versions of %q outside the section", path)
	}
	out := make([]Version, 0, n)
	for h := first; h < first+n; h++ {
		v, err := seg.hist(h, path)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (seg *segment) postings(key string) ([]int64, error) {
	i, ok, err := seg.find(key)
	if err != nil || !ok {
		return nil, err
	}
	off, n, err := seg.kv(i)
	if err != nil {
		return nil, err
	}
	// At most 10 bytes a record; read what the section holds.
	want := min(int64(n)*10, seg.sec[sPO][1]-int64(off))
	b, err := seg.section(sPO, int64(off), want)
	if err != nil {
		return nil, err
	}
	if int64(n) > int64(len(b)) {
		return nil, formatErr("segment: postings of %q longer than the section", key)
	}
	d := dec{b: b}
	out := make([]int64, 0, n)
	prev := seg.from
	for range n {
		x := prev + int64(d.uv("postings"))
		if d.err != nil || x < prev || x >= seg.to || (len(out) > 0 && x == prev) {
			return nil, formatErr("segment: postings of %q out of range", key)
		}
		out = append(out, x)
		prev = x
	}
	return out, nil
}

func (seg *segment) keysUnder(kind byte, name string) ([]string, error) {
	var out []string
	lo := string(kind) + name
	i, _, err := seg.find(lo)
	if err != nil {
		return nil, err
	}
	for ; i < seg.nkeys; i++ {
		k, err := seg.key(uint32(i))
		if err != nil {
			return nil, err
		}
		if k[0] != kind || len(k) < len(lo) || k[:len(lo)] != lo {
			break
		}
		if under(k[1:], name) {
			out = append(out, k)
		}
	}
	return out, nil
}

func (seg *segment) reads(path string) ([]Read, error) {
	i, ok, err := seg.find(string(kRead) + path)
	if err != nil || !ok {
		return nil, err
	}
	first, n, err := seg.kv(i)
	if err != nil {
		return nil, err
	}
	b, err := seg.section(sD, int64(first)*readSize, int64(n)*readSize)
	if err != nil {
		return nil, err
	}
	out := make([]Read, n)
	for j := range out {
		e := b[j*readSize:]
		out[j].Idx = int64(binary.BigEndian.Uint64(e))
		out[j].Known = e[8] == 1
		copy(out[j].Hash8[:], e[16:24])
		if out[j].Idx < seg.from || out[j].Idx >= seg.to {
			return nil, formatErr("segment: reads of %q out of range", path)
		}
	}
	return out, nil
}

func (seg *segment) link(i int64) (int64, int64, error) {
	b, err := seg.section(sC, i*16, 16)
	if err != nil {
		return 0, 0, err
	}
	return int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:])), nil
}

func (seg *segment) children(idx int64) ([]int64, error) {
	n := seg.sec[sC][1] / 16
	var ferr error
	i := sort.Search(int(n), func(i int) bool {
		p, _, err := seg.link(int64(i))
		if err != nil {
			ferr = err
			return true
		}
		return p >= idx
	})
	if ferr != nil {
		return nil, ferr
	}
	var out []int64
	for j := int64(i); j < n; j++ {
		p, c, err := seg.link(j)
		if err != nil {
			return nil, err
		}
		if p != idx {
			break
		}
		if c < seg.from || c >= seg.to || c <= p {
			return nil, formatErr("segment: link %d → %d out of range", p, c)
		}
		out = append(out, c)
	}
	return out, nil
}

// toMem decodes the whole segment (for a merge).
func (seg *segment) toMem() (*mem, error) {
	bf, err := seg.bf.wholeBody()
	if err != nil {
		return nil, err
	}
	seg = &segment{ref: seg.ref, from: seg.from, to: seg.to, nkeys: seg.nkeys, sec: seg.sec, bf: bf, names: map[uint32]string{}}
	m := newMem(seg.from)
	m.to = seg.to
	m.recs = make([]Rec, 0, seg.to-seg.from)
	for idx := seg.from; idx < seg.to; idx++ {
		r, err := seg.record(idx)
		if err != nil {
			return nil, err
		}
		m.recs = append(m.recs, r)
	}
	for j := int64(0); j < seg.sec[sC][1]/16; j++ {
		p, c, err := seg.link(j)
		if err != nil {
			return nil, err
		}
		m.kids[p] = append(m.kids[p], c)
	}
	for i := 0; i < seg.nkeys; i++ {
		k, err := seg.key(uint32(i))
		if err != nil {
			return nil, err
		}
		switch k[0] {
		case kVersion:
			if m.hist[k[1:]], err = seg.versions(k[1:]); err != nil {
				return nil, err
			}
		case kRead:
			if m.rds[k[1:]], err = seg.reads(k[1:]); err != nil {
				return nil, err
			}
		case kName:
		default:
			l, err := seg.postings(k)
			if err != nil {
				return nil, err
			}
			if len(l) > 0 {
				m.post[k] = l
			}
		}
	}
	return m, nil
}
