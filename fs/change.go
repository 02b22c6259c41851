package fs

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/aerfs/aerfs/principal"
)

// pathLocks serialises the changes of one guarded path: the whole
// decide → keep the previous version → store → record → publish → label
// sequence of a commit runs under its path's lock, so that each record
// names the version it really replaced and nobody sees a version whose
// label and expected content are still those of another commit. The zero
// value is ready to use.
type pathLocks struct {
	mu sync.Mutex
	m  map[string]*pathLock
}

type pathLock struct {
	sync.Mutex
	users int // holders and waiters; the entry goes when it drops to 0
}

// lock takes rel's lock and returns the function that releases it.
func (p *pathLocks) lock(rel string) func() {
	p.mu.Lock()
	if p.m == nil {
		p.m = map[string]*pathLock{}
	}
	l := p.m[rel]
	if l == nil {
		l = &pathLock{}
		p.m[rel] = l
	}
	l.users++
	p.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		p.mu.Lock()
		if l.users--; l.users == 0 {
			delete(p.m, rel)
		}
		p.mu.Unlock()
	}
}

// busy reports whether a change of rel holds or awaits its lock: a stat
// taken now may belong to the version being replaced, and the label it is
// checked against to the one being published.
func (p *pathLocks) busy(rel string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[rel] != nil
}

// lockPath serialises changes of the guarded path rel.
func (m *Monitor) lockPath(rel string) func() { return m.paths.lock(rel) }

// writerSet is every process that wrote through a guarded handle (its
// opener included), each with the resolutions seen while it wrote.
type writerSet struct {
	order []principal.ProcID
	seen  map[principal.ProcID][]*principal.Resolved
}

// note adds res (a resolution of a process that writes through the
// handle). Resolutions are few per process: the registry hands out the
// same one until something about the process changes.
func (w *writerSet) note(res *principal.Resolved) {
	if res == nil || !res.Identified {
		return
	}
	if w.seen == nil {
		w.seen = map[principal.ProcID][]*principal.Resolved{}
	}
	id := res.Proc.ID
	rs, known := w.seen[id]
	if !known {
		w.order = append(w.order, id)
	}
	for _, r := range rs {
		if r == res {
			return
		}
	}
	if len(rs) >= 8 {
		// Keep the first (the identity it opened or first wrote with) and
		// the latest ones.
		rs = append(rs[:1], rs[2:]...)
	}
	w.seen[id] = append(rs, res)
}

// subjects resolves every writer afresh for a commit and returns every
// resolution the commit must be allowed for: each writer as it is now (a
// live process is resolved again by its tgid and must still be the same
// process) and as it was when it wrote. Principals only go down and taint
// only goes up, so deciding for all of them is deciding for the worst. A
// writer that exited is decided by its last resolutions, whose session
// taint is live. The first element is the subject the commit is recorded
// under: the opener as it is now.
func (m *Monitor) writersNow(w *writerSet) []*principal.Resolved {
	var out []*principal.Resolved
	for _, id := range w.order {
		if now := m.resolveNow(id); now != nil {
			w.note(now)
			out = append(out, now)
		}
	}
	for _, id := range w.order {
		out = append(out, w.seen[id]...)
	}
	return out
}

// resolveNow resolves the process id as it is now: nil when it has
// exited, an unidentified subject when it is alive but cannot be resolved
// as itself.
func (m *Monitor) resolveNow(id principal.ProcID) *principal.Resolved {
	if !principal.Alive(id) {
		return nil
	}
	res := m.Reg.Resolve(id.Tgid)
	if res.Identified && res.Proc.ID == id {
		return res
	}
	if !principal.Alive(id) {
		return nil
	}
	reason := res.Reason
	if res.Identified {
		reason = fmt.Sprintf("pid %d is now process %s", id.Tgid, res.Proc.ID)
	}
	return &principal.Resolved{Reason: fmt.Sprintf("writer %s could not be resolved again at commit: %s", id, reason)}
}

// rebase returns the content a handle whose changes since its base are
// appends commits: the file's current content followed by what the handle
// appended past baseLen. Called with rel's lock held.
func (m *Monitor) rebase(rel string, staged *os.File, baseLen int64) (*os.File, error) {
	cur, err := m.openFileRel(rel, os.O_RDONLY)
	if err != nil {
		if os.IsNotExist(err) {
			// Deleted since: the appended bytes alone.
			return m.copyStaged(nil, 0, staged, baseLen)
		}
		return nil, err
	}
	defer cur.Close()
	fi, err := cur.Stat()
	if err != nil {
		return nil, err
	}
	return m.copyStaged(cur, fi.Size(), staged, baseLen)
}

// copyStaged makes a new staging file holding head (size bytes) followed
// by staged from offset from.
func (m *Monitor) copyStaged(head *os.File, size int64, staged *os.File, from int64) (*os.File, error) {
	sfi, err := staged.Stat()
	if err != nil {
		return nil, err
	}
	tail := max(sfi.Size()-from, 0)
	f, _, err := m.stagingFor(size + tail)
	if err != nil {
		return nil, err
	}
	if head != nil {
		if _, err := io.Copy(f, io.NewSectionReader(head, 0, size)); err != nil {
			f.Close()
			return nil, err
		}
	}
	if _, err := io.Copy(f, io.NewSectionReader(staged, from, tail)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
