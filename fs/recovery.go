package fs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
)

// # Recovery primitives
//
// Restores, approvals and drift repair change guarded files from the
// owner's channel, not from a FUSE request. They go through the same
// atomic replace as a commit, under the same per-path lock, and keep the
// previous version; the daemon records them.

// expect notes the content aerfs itself is about to give rel ("" = absent),
// before it does: the drift watcher sees aerfs's own changes too, and must
// not mistake them for drift.
func (m *Monitor) expect(rel, hash string) {
	m.mu.Lock()
	if m.expected == nil {
		m.expected = map[string]string{}
	}
	_, known := m.expected[rel]
	m.expected[rel] = hash
	if m.unflushed == nil {
		m.unflushed = map[string]struct{}{}
	}
	m.unflushed[rel] = struct{}{} // txn.go: SyncBacking
	onKnown := m.onKnown
	m.mu.Unlock()
	if !known && onKnown != nil {
		onKnown(rel)
	}
}

// SetOnKnown sets a function called with each guarded path aerfs starts to
// know the content of while mounted (its first commit, a rename onto it),
// before aerfs changes the file. The drift watcher watches the path's
// directory from then on: a guarded file may appear in a directory that
// held none when the mount started.
func (m *Monitor) SetOnKnown(f func(rel string)) {
	m.mu.Lock()
	m.onKnown = f
	m.mu.Unlock()
}

// changing marks rel as being changed by aerfs until the returned func is
// called: the drift watcher must not compare a file with its expected
// content in the middle of aerfs's own change (the rename that publishes
// it will wake the watcher again).
func (m *Monitor) changing(rel string) func() {
	m.mu.Lock()
	if m.inflight == nil {
		m.inflight = map[string]int{}
	}
	m.inflight[rel]++
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		if m.inflight[rel]--; m.inflight[rel] <= 0 {
			delete(m.inflight, rel)
		}
		m.mu.Unlock()
	}
}

// Expected returns the content aerfs last gave rel, and whether it knows.
func (m *Monitor) Expected(rel string) (string, bool) {
	if r, sub, ok := m.route(rel); ok {
		return r.Expected(sub)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.expected[rel]
	return h, ok
}

// SetExpected replaces what aerfs believes the guarded files hold (from
// the evidence log, at mount).
func (m *Monitor) SetExpected(state map[string]string) {
	state = m.splitExpected(state)
	m.mu.Lock()
	m.expected = map[string]string{}
	for p, h := range state {
		m.expected[p] = h
	}
	m.mu.Unlock()
}

// SetLastRecord names the record of the current version of each path.
func (m *Monitor) SetLastRecord(id string, paths ...string) {
	paths = m.routeLastRecord(id, paths)
	m.mu.Lock()
	for _, p := range paths {
		m.lastRec[p] = id
	}
	m.mu.Unlock()
}

// HashRel returns the hash of rel's content ("" when absent), keeping the
// content as a blob.
func (m *Monitor) HashRel(rel string) (string, error) {
	if r, sub, ok := m.route(rel); ok {
		return r.HashRel(sub)
	}
	st, err := m.lstatRel(rel)
	if err != nil {
		if os.IsNotExist(err) || err == unix.ENOENT {
			return "", nil
		}
		return "", err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return "", fmt.Errorf("%s is not a regular file", rel)
	}
	return m.putBlobRel(rel)
}

// GuardedState hashes every guarded regular file in the backing directory
// (and keeps each content as a blob): what a snapshot records.
func (m *Monitor) GuardedState() (map[string]string, error) {
	pol := m.Policy()
	out := map[string]string{}
	var ferr error
	m.walkFiles("", func(sub string, st *syscall.Stat_t) {
		if ferr != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || isReserved(path.Base(sub)) {
			return
		}
		if c, _, _ := pol.Classify(sub); !c.Guarded() {
			return
		}
		h, err := m.putBlobRel(sub)
		if err != nil {
			ferr = err
			return
		}
		out[sub] = h
	})
	if ferr == nil {
		ferr = m.rootsState(out)
	}
	return out, ferr
}

// SetContent gives the guarded file rel the content with hash h, or removes
// it when h is "", through the one transaction: the previous version is
// kept, the record mk makes (given the previous hash) is durable before
// the file changes, then the file changes. A nil mk is for a change whose
// durable trace is elsewhere (a restore's journal): the change is then
// flushed before it returns. It is idempotent: a file that already holds h
// is left alone (no record). It returns the previous hash ("" when the file
// was absent) and the record's id.
func (m *Monitor) SetContent(rel, h string, mk func(old string) *evidence.Record) (string, string, error) {
	return m.setContent(rel, nil, h, mk)
}

// ErrChanged is returned by SetContentFrom when the file no longer holds
// the content the change was planned from.
var ErrChanged = errors.New("the file changed since the change was planned")

// SetContentFrom is SetContent for a change planned while the file held
// from ("" = absent): decided under the path's lock, so a commit that
// landed after the plan is never overwritten — it changes nothing and
// returns ErrChanged when the file holds neither from nor h (h: the change
// was made already, as a resumed restore finds it).
func (m *Monitor) SetContentFrom(rel, from, h string, mk func(old string) *evidence.Record) (string, string, error) {
	return m.setContent(rel, &from, h, mk)
}

func (m *Monitor) setContent(rel string, from *string, h string, mk func(old string) *evidence.Record) (string, string, error) {
	if r, sub, ok := m.route(rel); ok {
		return r.setContent(sub, from, h, r.unrootMaker(mk))
	}
	if rel == "" || strings.HasPrefix(rel, "/") || strings.Contains("/"+rel+"/", "/../") {
		return "", "", fmt.Errorf("bad path %q", rel)
	}
	defer m.lockPaths(rel)()
	old, err := m.HashRel(rel)
	if err != nil {
		return "", "", err
	}
	if from != nil && old != *from && old != h {
		return old, "", fmt.Errorf("%s: %w (it holds %.12s, the plan expected %.12s)", rel, ErrChanged, old, *from)
	}
	if old == h {
		m.expect(rel, h)
		return old, "", nil
	}
	var data []byte
	if h != "" {
		if data, err = m.rec.Blob(h); err != nil {
			return old, "", fmt.Errorf("content %.12s: %w", h, err)
		}
		if err := m.mkdirAll(path.Dir(cleanDir(rel))); err != nil {
			return old, "", err
		}
	}
	var rep *replacement
	var staged *os.File
	defer func() {
		if staged != nil {
			staged.Close()
		}
	}()
	var id string
	st, _ := m.lstatRel(rel)
	errno := m.apply(&txn{
		keep:  []string{rel},
		after: func(map[string]string) map[string]string { return map[string]string{rel: h} },
		prepare: func(kept map[string]string) ([]*evidence.Record, syscall.Errno) {
			old = kept[rel]
			if h != "" {
				f, err := os.CreateTemp(m.stagingDir(), "restore-*")
				if err != nil {
					return nil, gofs.ToErrno(err)
				}
				os.Remove(f.Name())
				staged = f
				if _, err := f.Write(data); err != nil {
					return nil, gofs.ToErrno(err)
				}
				var errno syscall.Errno
				if rep, errno = m.stageReplacement(rel, f, st); errno != 0 {
					return nil, errno
				}
				rep.durable = mk == nil
			}
			if mk == nil {
				return nil, 0
			}
			return []*evidence.Record{mk(old)}, 0
		},
		publish: func(ids []string) syscall.Errno {
			if len(ids) > 0 {
				id = ids[0]
			}
			if h != "" {
				errno := rep.publish()
				if errno == 0 {
					rep.close()
				}
				return errno
			}
			dfd, err := m.openDir(path.Dir(cleanDir(rel)))
			if err != nil {
				return gofs.ToErrno(err)
			}
			defer unix.Close(dfd)
			if err := unix.Unlinkat(dfd, path.Base(rel), 0); err != nil {
				return gofs.ToErrno(err)
			}
			if mk == nil {
				return gofs.ToErrno(unix.Fsync(dfd))
			}
			return 0
		},
		done: func(ids []string) syscall.Errno {
			if id != "" {
				m.setLastRecord(rel, id)
			}
			if h == "" {
				if st != nil && st.Nlink <= 1 {
					m.forgetInode(keyOf(st))
				}
				return 0
			}
			nst, err := m.lstatRel(rel)
			if err != nil {
				return gofs.ToErrno(err)
			}
			l := &Label{Origin: policy.User, Hash: h, Record: id}
			l.bindFingerprint(nst)
			m.mu.Lock()
			m.guarded[keyOf(nst)] = rel
			m.mu.Unlock()
			if err := m.Labels.Set(keyOf(nst), l); err != nil {
				return syscall.EIO
			}
			return 0
		},
		abort: func() {
			if rep != nil {
				rep.abort()
			}
		},
	})
	if errno != 0 {
		return old, id, errno
	}
	return old, id, nil
}

func cleanDir(rel string) string {
	if !strings.Contains(rel, "/") {
		return "./" + rel
	}
	return rel
}

// Drift is a guarded file whose content is not what aerfs last gave it.
type Drift struct {
	Path     string
	Expected string // "" = should be absent
	Found    string // "" = absent
}

// CheckDrift compares rel with what aerfs last gave it. A drifted file's
// label becomes EXTERNAL: whoever reads it inherits UNTRUSTED.
func (m *Monitor) CheckDrift(rel string) (*Drift, error) {
	if r, sub, ok := m.route(rel); ok {
		d, err := r.CheckDrift(sub)
		if d != nil {
			d.Path = rel
		}
		return d, err
	}
	// A commit between reading the expected content and hashing the file
	// would look like drift: compare between commits.
	defer m.lockPath(rel)()
	m.mu.Lock()
	busy := m.inflight[rel] > 0
	m.mu.Unlock()
	if busy {
		return nil, nil
	}
	want, known := m.Expected(rel)
	if !known {
		return nil, nil
	}
	found, err := m.HashRel(rel)
	if err != nil {
		return nil, err
	}
	if found == want {
		return nil, nil
	}
	if st, err := m.lstatRel(rel); err == nil {
		l := &Label{Origin: policy.External, Taint: policy.Untrusted, Hash: found}
		l.bindFingerprint(st)
		m.Labels.Set(keyOf(st), l)
	}
	// Believe the file from now on, so one drift is reported once.
	m.expect(rel, found)
	return &Drift{Path: rel, Expected: want, Found: found}, nil
}

// HasBlob reports whether the content with this hash is stored.
func (m *Monitor) HasBlob(hash string) bool { return m.rec.HasBlob(hash) }

// BackingPath is a path through which the backing directory can be watched
// (the mount covers the workspace path itself).
func (m *Monitor) BackingPath() string { return m.rootPath }

// Stat describes a backing path without following symlinks.
func (m *Monitor) Stat(rel string) (os.FileInfo, error) {
	f, err := m.openFileRel(rel, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}
