package logindex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"

	"github.com/aerfs/aerfs/evidence"
)

// Log is what the keeper needs of the log's writer: its key, to sign the
// head, and its id table, to link a record to its parents.
type Log interface {
	SignIndexHead(body []byte) ([]byte, error)
	LookupPosition(id [32]byte) (int64, bool)
}

// Keeper keeps a state directory's index current, for the log's writer
// (the daemon): it folds in the records each new checkpoint covers and
// writes the index every so often (CheckpointDue), merging segments of
// similar size in the same goroutine.
type Keeper struct {
	state string
	log   Log
	x     *Index
	mu    sync.Mutex // one catch-up or checkpoint at a time: the only writer of x
	last  time.Time  // when the index was last written
}

// When the keeper writes the index: once the window holds minWindow
// records and minInterval has passed, once it holds anything and
// maxInterval has passed, at once past maxWindow. A segment grows by
// merging up to segCap records.
var (
	minWindow   = int64(1024)
	maxWindow   = int64(8192)
	minInterval = time.Second
	maxInterval = 10 * time.Second
	segCap      = int64(1 << 15)
)

// OpenKeeper opens stateDir's index for the log's writer l, folds in the
// records past it, and writes it if anything was folded. An index that is
// missing or does not check out is removed and rebuilt from the whole log,
// written as it goes (a segment per segCap records), and Index().Rebuilt
// says why.
func OpenKeeper(stateDir string, l Log) (*Keeper, error) {
	k := &Keeper{state: stateDir, log: l}
	lookup := func(h Hash) (int64, bool) { return l.LookupPosition(h) }
	x, err := load(stateDir, lookup)
	if err != nil {
		reason := err.Error()
		if err := k.setAside(); err != nil {
			return nil, err
		}
		x = &Index{state: stateDir, win: newMem(0), ids: map[Hash]int64{}, f: newFold(), lookup: lookup, rebuilt: reason,
			missing: errors.Is(err, errMissing), sizeOf: blobSize(stateDir)}
	} else {
		k.removeStrays(x.hd)
	}
	k.x = x
	if err := k.catchUp(true); err != nil {
		x.Close()
		return nil, err
	}
	if x.hd == nil || x.f.n > x.hd.size {
		if err := k.Checkpoint(); err != nil {
			x.Close()
			return nil, err
		}
	}
	return k, nil
}

// Index is the index the keeper keeps (queries only).
func (k *Keeper) Index() *Index { return k.x }

func (k *Keeper) dir() string { return evidence.IndexDir(k.state) }

// setAside removes an index that cannot be used: it is derived from the
// log, which stays.
func (k *Keeper) setAside() error {
	ents, err := os.ReadDir(k.dir())
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(k.dir(), 0o700)
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		os.Remove(filepath.Join(k.dir(), e.Name()))
	}
	return nil
}

// removeStrays removes what a crash left in the index's directory that
// the head does not name.
func (k *Keeper) removeStrays(h *head) {
	keep := map[string]bool{headName: true, stateName(h.size): true}
	for _, s := range h.segs {
		keep[s.name()] = true
	}
	ents, _ := os.ReadDir(k.dir())
	for _, e := range ents {
		if !keep[e.Name()] {
			os.Remove(filepath.Join(k.dir(), e.Name()))
		}
	}
}

// CatchUp folds in the records the log's checkpoint covers past the index.
func (k *Keeper) CatchUp() error {
	return k.catchUp(false)
}

// catchUp folds in records; while rebuilding (spill), the window is
// written as a segment every segCap records, so that memory stays bounded.
func (k *Keeper) catchUp(spill bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	x := k.x
	_, err := evidence.ReadFrom(k.state, x.Through(), func(idx int64, id string, r *evidence.Record) error {
		x.Add(idx, id, r)
		if spill && int64(len(x.win.recs)) >= segCap {
			return k.spill()
		}
		return nil
	})
	return err
}

// spill writes the window as a segment the next head will name. Called
// with k.mu held.
func (k *Keeper) spill() error {
	x := k.x
	seg, err := k.writeSegment(x.win)
	if err != nil {
		return err
	}
	x.mu.Lock()
	x.segs = append(x.segs, seg)
	x.win = newMem(x.f.n)
	x.ids = map[Hash]int64{}
	x.mu.Unlock()
	return nil
}

// Due reports whether the window should be written now.
func (k *Keeper) Due() bool {
	x := k.x
	x.mu.RLock()
	n := int64(len(x.win.recs))
	x.mu.RUnlock()
	k.mu.Lock()
	since := time.Since(k.last)
	k.mu.Unlock()
	return n >= maxWindow || n >= minWindow && since >= minInterval || n > 0 && since >= maxInterval
}

// Run catches up and writes the index when due, until ctx is done; then it
// does both once more (the records of the unmount).
func (k *Keeper) Run(ctx context.Context, warn func(error)) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := k.CatchUp(); err != nil {
			warn(err)
			continue
		}
		if k.Due() {
			if err := k.Checkpoint(); err != nil {
				warn(err)
			}
		}
	}
}

// Checkpoint writes what was folded since the last head: the window as a
// segment, the state file, and a new head signed by the log's key; then
// merges segments of similar size.
func (k *Keeper) Checkpoint() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	x := k.x
	n := x.Through()
	if x.hd != nil && x.hd.size == n {
		return nil
	}
	k.last = time.Now()
	if len(x.win.recs) > 0 {
		if err := k.spill(); err != nil {
			return err
		}
	}
	root, err := evidence.TreeRoot(k.state, n)
	if err != nil {
		return fmt.Errorf("logindex: root at %d: %w", n, err)
	}
	origin, err := evidence.Origin(k.state)
	if err != nil {
		return err
	}
	st, err := encodeState(x.f, overlaySessions(x.f.base, x.f.sessions))
	if err != nil {
		return err
	}
	sf, err := k.writeFile(stateName(n), st)
	if err != nil {
		return err
	}
	h := &head{origin: origin, size: n, root: root}
	h.state.size, h.state.sum = int64(len(st)), sum(st)
	for _, s := range x.segs {
		h.segs = append(h.segs, s.ref)
	}
	base := newFold()
	if err := loadState(sf, h.state.size, h.state.sum, base); err != nil {
		sf.Close()
		return err
	}
	if err := k.writeHead(h); err != nil {
		sf.Close()
		return err
	}
	x.mu.Lock()
	old, oldHead := x.stF, x.hd
	x.stF, x.hd = sf, h
	x.f.base = base.base
	x.f.sessions = map[string]*Session{}
	x.mu.Unlock()
	if old != nil {
		old.Close()
	}
	if oldHead != nil && oldHead.size != n {
		os.Remove(filepath.Join(k.dir(), stateName(oldHead.size)))
	}
	return k.merge()
}

// merge merges the last two segments while the newer holds at least half
// as many records as the older and together at most segCap: sizes fall
// geometrically, so a log of N records has O(log N) segments below the
// cap. Called with k.mu held.
func (k *Keeper) merge() error {
	x := k.x
	merged := false
	defer func() {
		if merged {
			debug.FreeOSMemory() // a merge's buffers are not kept
		}
	}()
	for {
		x.mu.RLock()
		segs := append([]*segment(nil), x.segs...)
		h := x.hd
		x.mu.RUnlock()
		n := len(segs)
		if n < 2 {
			return nil
		}
		a, b := segs[n-2], segs[n-1]
		la, lb := a.to-a.from, b.to-b.from
		if 2*lb < la || la+lb > segCap {
			return nil
		}
		ma, err := a.toMem()
		if err != nil {
			return err
		}
		mb, err := b.toMem()
		if err != nil {
			return err
		}
		ma.merge(mb)
		seg, err := k.writeSegment(ma)
		if err != nil {
			return err
		}
		nh := *h
		nh.segs = append(append([]segRef(nil), h.segs[:n-2]...), seg.ref)
		if err := k.writeHead(&nh); err != nil {
			seg.close()
			return err
		}
		x.mu.Lock()
		x.segs = append(x.segs[:n-2:n-2], seg)
		x.hd = &nh
		x.mu.Unlock()
		for _, s := range []*segment{a, b} {
			s.close()
			os.Remove(filepath.Join(k.dir(), s.ref.name()))
		}
		merged = true
	}
}

// writeSegment writes m as a segment file and opens it.
func (k *Keeper) writeSegment(m *mem) (*segment, error) {
	b, s, err := encodeSegment(m)
	if err != nil {
		return nil, err
	}
	ref := segRef{from: m.from, to: m.to, size: int64(len(b)), sum: s}
	f, err := k.writeFile(ref.name(), b)
	if err != nil {
		return nil, err
	}
	seg, err := readSegment(f, f, ref)
	if err != nil {
		f.Close()
		return nil, err
	}
	seg.ref = ref
	return seg, nil
}

// writeFile writes a file of the index under its name, durably, and
// returns it open for reading.
func (k *Keeper) writeFile(name string, b []byte) (*os.File, error) {
	dir := k.dir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".tmp-"+name+"-")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("logindex: write %s: %w", name, err)
	}
	if err := syncDir(dir); err != nil {
		return nil, err
	}
	return os.Open(filepath.Join(dir, name))
}

// writeHead signs h with the log's key and puts it in place.
func (k *Keeper) writeHead(h *head) error {
	msg, err := k.log.SignIndexHead(h.encode())
	if err != nil {
		return err
	}
	f, err := k.writeFile(headName, msg)
	if err != nil {
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Close catches up with the log a last time and writes the index, so that
// the next mount reads it and nothing else.
func (k *Keeper) Close() error {
	err := k.CatchUp()
	if err == nil {
		err = k.Checkpoint()
	}
	return errors.Join(err, k.x.Close())
}

// Build writes stateDir's index from its whole log (the log must not be
// open elsewhere): for a log made without a daemon, and for tests.
func Build(stateDir string) error {
	l, err := evidence.Open(stateDir)
	if err != nil {
		return err
	}
	k, err := OpenKeeper(stateDir, l)
	if err != nil {
		l.Close()
		return err
	}
	return errors.Join(k.Close(), l.Close())
}
