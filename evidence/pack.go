package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// # Packs
//
// Content that travels through the journal (up to journalBlobMax, which
// is every version of a memory or configuration file in practice) is
// stored, once the frame carrying it is durable, as an entry appended to
// a pack file under evidence/packs/ rather than as a file of its own: a
// guarded commit then creates no inode in the state directory, and the
// store holds a few large files instead of one per version.
//
// A pack is a sequence of entries, each a 48-byte header and a body:
//
//	magic "aerfsPK1" | SHA-256 of the content (32 raw bytes) |
//	body length (uint64, big-endian) | body (the blob's bytes, raw or zstd,
//	exactly as a blob file holds them)
//
// A pack is only ever appended to, by the log's writer (the holder of the
// log's lock), and flushed before the checkpoint that ends the journal's
// copy of what it holds; until then a crash can leave a torn tail, which
// the journal's replay makes good by storing the content again in a new
// pack. The writer never appends to a pack it did not create in this
// process, so a torn tail is never written over. The index (hash →
// pack, offset, length) is built by reading the entries' headers, once per
// process and then for what was appended since; an entry's body is checked
// against its hash at every read, as a blob file's is, so a damaged entry
// reads as damage, never as content. aerfs gc repacks: the entries a pack
// keeps are appended to a new pack, which is flushed before the old pack
// is removed (a crash between the two leaves a duplicate, never a loss).
//
// Content larger than the journal takes stays a blob file of its own
// (blobs/), as does every blob written before packs: readers look in the
// packs first, then for the file.

const (
	packsName  = "packs"
	packMagic  = "aerfsPK1"
	packHeader = 48
	// packMax: a pack takes no new entry past this size.
	packMax = 64 << 20
	// packEntryMax bounds an entry's body when reading headers: nothing
	// larger is ever written (journalBlobMax, compressed or not).
	packEntryMax = 2 * journalBlobMax
)

func packName(n int) string { return fmt.Sprintf("%08d.pack", n) }

func packNumber(name string) (int, bool) {
	s, ok := strings.CutSuffix(name, ".pack")
	if !ok || len(s) != 8 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}

type packLoc struct {
	pack int
	off  int64 // of the body
	n    int64
}

type packEntry struct {
	hash string
	off  int64 // of the body
	n    int64
}

type packFile struct {
	f       *os.File
	scanned int64 // the headers up to here are indexed
	entries []packEntry
	damaged bool // a header that is not an entry's was passed over
}

// packSet is the packs of one evidence directory and their index, shared
// by every reader and the writer in this process.
type packSet struct {
	dir string // the evidence directory

	mu    sync.Mutex
	idx   map[string]packLoc
	packs map[int]*packFile
	// The writer's state: cur is the pack taking entries (0: none yet in
	// this process), curEnd where the next goes; dirty the packs written
	// since the last sync; newDir: a pack (or the packs directory) was
	// created since.
	cur    int
	curEnd int64
	dirty  map[int]bool
	newDir bool
	// owned: the log's writer in this process holds the log's lock, so
	// no other process adds to the packs and a miss in the index is an
	// answer, not a reason to read the directory again.
	owned bool
}

var (
	packSetsMu sync.Mutex
	packSets   = map[string]*packSet{}
)

// packsOf returns the pack set of the evidence directory dir.
func packsOf(dir string) *packSet {
	if a, err := filepath.Abs(dir); err == nil {
		dir = a
	}
	packSetsMu.Lock()
	defer packSetsMu.Unlock()
	p := packSets[dir]
	if p == nil {
		p = &packSet{dir: dir, idx: map[string]packLoc{}, packs: map[int]*packFile{}, dirty: map[int]bool{}}
		packSets[dir] = p
	}
	return p
}

func (p *packSet) root() string { return filepath.Join(p.dir, packsName) }

// reset forgets the index (the files may have changed behind this
// process: a log opened anew, a read that failed). The writer starts a
// new pack at its next entry.
func (p *packSet) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resetLocked()
	p.refresh()
}

// own reads the packs afresh for the log's writer, which holds the log's
// lock until disown.
func (p *packSet) own() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resetLocked()
	if err := p.refresh(); err != nil {
		return fmt.Errorf("evidence: packs: %w", err)
	}
	p.owned = true
	return nil
}

// disown ends the writer's hold (Close): the files are closed and read
// again by whoever reads next.
func (p *packSet) disown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.owned = false
	p.resetLocked()
}

func (p *packSet) resetLocked() {
	for _, pf := range p.packs {
		pf.f.Close()
	}
	p.idx = map[string]packLoc{}
	p.packs = map[int]*packFile{}
	p.cur, p.curEnd = 0, 0
	// dirty and newDir stay: what was written is still to be flushed.
}

// refresh indexes the packs created and the entries appended since the
// last call, and forgets packs that are gone. Called with p.mu held.
func (p *packSet) refresh() error {
	des, err := os.ReadDir(p.root())
	if errors.Is(err, fs.ErrNotExist) {
		des, err = nil, nil
	}
	if err != nil {
		return err
	}
	seen := map[int]bool{}
	for _, de := range des {
		n, ok := packNumber(de.Name())
		if !ok {
			continue
		}
		seen[n] = true
		pf := p.packs[n]
		if pf == nil {
			f, err := os.OpenFile(filepath.Join(p.root(), de.Name()), os.O_RDONLY|syscallNoFollow, 0)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return err
			}
			pf = &packFile{f: f}
			p.packs[n] = pf
		}
		if n == p.cur {
			continue // this process's own pack: indexed as it is written
		}
		if err := p.scan(n, pf); err != nil {
			return err
		}
	}
	for n, pf := range p.packs {
		if !seen[n] && n != p.cur {
			p.dropPack(n, pf)
		}
	}
	return nil
}

func (p *packSet) dropPack(n int, pf *packFile) {
	pf.f.Close()
	delete(p.packs, n)
	for _, e := range pf.entries {
		if loc, ok := p.idx[e.hash]; ok && loc.pack == n {
			delete(p.idx, e.hash)
		}
	}
	delete(p.dirty, n)
}

// scan indexes the entries of pack n past what was read before. A header
// that is not whole yet ends the scan (the writer may be appending it);
// a whole header that is not an entry's (a torn tail, damage) is passed
// over to the next magic, if any.
func (p *packSet) scan(n int, pf *packFile) error {
	fi, err := pf.f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	var hdr [packHeader]byte
	off := pf.scanned
	for off+packHeader <= size {
		if _, err := pf.f.ReadAt(hdr[:], off); err != nil {
			return err
		}
		ln := int64(binary.BigEndian.Uint64(hdr[40:]))
		if string(hdr[:8]) == packMagic && ln >= 0 && ln <= packEntryMax {
			if off+packHeader+ln > size {
				break // not whole yet, or torn
			}
			h := hex.EncodeToString(hdr[8:40])
			pf.entries = append(pf.entries, packEntry{hash: h, off: off + packHeader, n: ln})
			p.idx[h] = packLoc{pack: n, off: off + packHeader, n: ln}
			off += packHeader + ln
			continue
		}
		next, err := nextMagic(pf.f, off+1, size)
		if err != nil {
			return err
		}
		if next < 0 {
			break
		}
		pf.damaged = true
		off = next
	}
	pf.scanned = off
	return nil
}

// nextMagic finds the next entry magic in f at or past off (-1: none).
func nextMagic(f *os.File, off, size int64) (int64, error) {
	buf := make([]byte, 1<<20)
	for off < size {
		n, err := f.ReadAt(buf, off)
		if n == 0 && err != nil {
			return -1, err
		}
		if i := bytes.Index(buf[:n], []byte(packMagic)); i >= 0 {
			return off + int64(i), nil
		}
		if int64(n) < int64(len(buf)) {
			return -1, nil
		}
		off += int64(n) - int64(len(packMagic)) + 1
	}
	return -1, nil
}

// lookup returns where content h is packed.
func (p *packSet) lookup(h string) (*os.File, packLoc, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	loc, ok := p.idx[h]
	if !ok && !p.owned {
		if p.refresh() != nil {
			return nil, loc, false
		}
		loc, ok = p.idx[h]
	}
	if !ok {
		return nil, loc, false
	}
	return p.packs[loc.pack].f, loc, true
}

// has reports whether content h is packed.
func (p *packSet) has(h string) bool {
	_, _, ok := p.lookup(h)
	return ok
}

// get returns the body of content h's entry (not checked against h: the
// caller decodes it). ok is false when no pack holds h.
func (p *packSet) get(h string) (body []byte, ok bool, err error) {
	for try := 0; ; try++ {
		f, loc, ok := p.lookup(h)
		if !ok {
			return nil, false, nil
		}
		body = make([]byte, loc.n)
		_, err := f.ReadAt(body, loc.off)
		if err == nil {
			return body, true, nil
		}
		if try > 0 {
			return nil, true, err
		}
		// The pack was removed or cut behind this process: read the
		// directory afresh once.
		p.reset()
	}
}

// put appends content h (its blob body) to this process's pack. Only the
// log's writer calls it. The entry is flushed by the next sync.
func (p *packSet) put(h string, body []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if loc, ok := p.idx[h]; ok && loc.pack == p.cur {
		return nil // this process packed it already
	}
	return p.putLocked(h, body)
}

func (p *packSet) putLocked(h string, body []byte) error {
	raw, err := hex.DecodeString(h)
	if err != nil || len(raw) != sha256.Size {
		return fmt.Errorf("evidence: pack: bad hash %q", h)
	}
	if p.cur == 0 || p.curEnd >= packMax {
		if err := p.startPack(); err != nil {
			return err
		}
	}
	pf := p.packs[p.cur]
	e := make([]byte, packHeader, packHeader+len(body))
	copy(e, packMagic)
	copy(e[8:], raw)
	binary.BigEndian.PutUint64(e[40:], uint64(len(body)))
	e = append(e, body...)
	if _, err := pf.f.WriteAt(e, p.curEnd); err != nil {
		// Whatever part of it landed is a torn entry: start a new pack
		// rather than write over it.
		p.cur = 0
		return fmt.Errorf("evidence: pack: %w", err)
	}
	loc := packLoc{pack: p.cur, off: p.curEnd + packHeader, n: int64(len(body))}
	pf.entries = append(pf.entries, packEntry{hash: h, off: loc.off, n: loc.n})
	p.idx[h] = loc
	p.curEnd += int64(len(e))
	pf.scanned = p.curEnd
	p.dirty[p.cur] = true
	return nil
}

// startPack creates the next pack and makes it the one taking entries.
func (p *packSet) startPack() error {
	if err := p.refresh(); err != nil {
		return fmt.Errorf("evidence: pack: %w", err)
	}
	if _, err := os.Stat(p.root()); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(p.root(), 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("evidence: pack: %w", err)
		}
		p.newDir = true
	}
	n := 1
	for m := range p.packs {
		n = max(n, m+1)
	}
	for ; ; n++ {
		f, err := os.OpenFile(filepath.Join(p.root(), packName(n)), os.O_RDWR|os.O_CREATE|os.O_EXCL|syscallNoFollow, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("evidence: pack: %w", err)
		}
		p.packs[n] = &packFile{f: f}
		p.cur, p.curEnd = n, 0
		p.newDir = true
		return nil
	}
}

// syncPacks flushes the packs written since the last call, and the packs
// directory when a pack was created in it.
func (p *packSet) sync() error {
	p.mu.Lock()
	var files []*os.File
	var reopen []string
	dirty := p.dirty
	for n := range dirty {
		if pf := p.packs[n]; pf != nil {
			files = append(files, pf.f)
		} else {
			reopen = append(reopen, filepath.Join(p.root(), packName(n)))
		}
	}
	newDir := p.newDir
	p.dirty, p.newDir = map[int]bool{}, false
	p.mu.Unlock()
	var errs []error
	for _, f := range files {
		if err := fdatasync(f); err != nil {
			errs = append(errs, err)
		}
	}
	for _, path := range reopen {
		// Forgotten by a reset since it was written: flushed all the same
		// (gone: a repack removed it after flushing what it kept).
		if f, err := os.Open(path); err == nil {
			errs = append(errs, fdatasync(f))
			f.Close()
		} else if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if newDir {
		errs = append(errs, syncDir(p.root()), syncDir(p.dir))
	}
	if err := errors.Join(errs...); err != nil {
		p.mu.Lock()
		for n := range dirty {
			p.dirty[n] = true
		}
		p.newDir = p.newDir || newDir
		p.mu.Unlock()
		return fmt.Errorf("evidence: pack: %w", err)
	}
	return nil
}

// sizes lists every packed content with the length of its entry's body.
func (p *packSet) sizes() (map[string]int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.refresh(); err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(p.idx))
	for h, loc := range p.idx {
		out[h] = loc.n
	}
	return out, nil
}

// repack removes the content in drop from the packs: every pack holding
// one of them (or damaged) has the entries it keeps appended to a new
// pack, which is flushed before the old one is removed. Only the log's
// writer calls it, with no content being stored.
func (p *packSet) repack(drop map[string]bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.refresh(); err != nil {
		return fmt.Errorf("evidence: repack: %w", err)
	}
	var old []int
	for n, pf := range p.packs {
		hit := pf.damaged
		for _, e := range pf.entries {
			hit = hit || drop[e.hash]
		}
		if hit {
			old = append(old, n)
		}
	}
	if len(old) == 0 {
		return nil
	}
	sort.Ints(old)
	gone := map[int]bool{}
	for _, n := range old {
		gone[n] = true
	}
	if gone[p.cur] {
		p.cur = 0 // a new pack takes what the current one keeps
	}
	copied := map[string]bool{}
	for _, n := range old {
		pf := p.packs[n]
		for _, e := range pf.entries {
			if drop[e.hash] || copied[e.hash] {
				continue
			}
			if loc, ok := p.idx[e.hash]; ok && !gone[loc.pack] {
				continue // another pack that stays holds it
			}
			body := make([]byte, e.n)
			if _, err := pf.f.ReadAt(body, e.off); err != nil {
				return fmt.Errorf("evidence: repack: %w", err)
			}
			if _, err := decodeBlob(e.hash, body); err != nil {
				continue // damaged: not content, nothing to keep
			}
			if err := p.putLocked(e.hash, body); err != nil {
				return fmt.Errorf("evidence: repack: %w", err)
			}
			copied[e.hash] = true
		}
	}
	// What the old packs keep is durable in the new one before they go.
	p.mu.Unlock()
	err := p.sync()
	p.mu.Lock()
	if err != nil {
		return fmt.Errorf("evidence: repack: %w", err)
	}
	var errs []error
	for _, n := range old {
		pf := p.packs[n]
		if pf == nil {
			continue
		}
		if err := os.Remove(filepath.Join(p.root(), packName(n))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		p.dropPack(n, pf)
	}
	for h := range drop {
		if loc, ok := p.idx[h]; ok && gone[loc.pack] {
			delete(p.idx, h)
		}
	}
	errs = append(errs, syncDir(p.root()))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("evidence: repack: %w", err)
	}
	return nil
}
