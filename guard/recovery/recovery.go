package recovery

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/flow"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/guard/tracking"
	"github.com/aerfs/aerfs/guard/txn"
	"github.com/aerfs/aerfs/policy"
)

// Config is what recovery works with.
type Config struct {
	Dir        *backing.Dir
	Ledger     *ledger.Ledger
	Labels     *label.Store
	Index      *tracking.Index
	Changes    *tracking.Changes
	Txn        *txn.Txn
	Flow       *flow.Flow
	StagingDir string
	Policy     func() *policy.Policy
	// Label is the label a reader inherits from a file now (the gate's
	// view: a broken binding reads as EXTERNAL).
	Label func(rel string, st *syscall.Stat_t) *label.Label
	// Reserved reports whether rel is one of aerfs's own names.
	Reserved func(rel string) bool
}

// Recovery carries out the owner's changes of one root.
type Recovery struct{ c Config }

// New is the recovery of a root.
func New(c Config) *Recovery { return &Recovery{c: c} }

// Hash returns the hash of rel's content ("" when absent), keeping the
// content as a blob.
func (r *Recovery) Hash(rel string) (string, error) {
	st, err := r.c.Dir.Lstat(rel)
	if err != nil {
		if os.IsNotExist(err) || err == unix.ENOENT {
			return "", nil
		}
		return "", err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return "", fmt.Errorf("%s is not a regular file", rel)
	}
	return r.c.Txn.Store(rel)
}

// State hashes every guarded regular file in the backing directory (and
// keeps each content as a blob): what a snapshot records.
func (r *Recovery) State() (map[string]string, error) {
	pol := r.c.Policy()
	out := map[string]string{}
	var ferr error
	_ = r.c.Dir.Walk("", func(sub string, st *syscall.Stat_t) {
		if ferr != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || r.c.Reserved(path.Base(sub)) {
			return
		}
		if c, _, _ := pol.Classify(sub); !c.Guarded() {
			return
		}
		h, err := r.c.Txn.Store(sub)
		if err != nil {
			ferr = err
			return
		}
		out[sub] = h
	})
	return out, ferr
}

// ErrChanged is returned by Set when the file no longer holds the content
// the change was planned from.
var ErrChanged = errors.New("the file changed since the change was planned")

// Set gives the guarded file rel the content with hash h, or removes it
// when h is "", through the one transaction: the previous version is
// kept, the record mk makes (given the previous hash) is durable before
// the file changes, then the file changes. A nil mk is for a change whose
// durable trace is elsewhere (a restore's journal): the change is then
// flushed before it returns. base, when not nil, is the content rel must
// still hold (an edit made against a version someone changed meanwhile
// would silently undo that change). It is idempotent: a file that already
// holds h is left alone (no record). from, when not nil, is the content
// rel held when the change was planned (a restore's step, an approval's
// reviewed base): decided under the path's lock, a change that landed
// after the plan is never overwritten — Set changes nothing and returns
// ErrChanged when rel holds neither from nor h (h: the change was made
// already, as a resumed restore finds it). owner: the owner wrote or
// reviewed the content (an edit, an approval), which gets the owner's
// label; any other content put back (a restore, a rollback, a drift
// repair, a change completed) gets the label its version was published
// with. It returns the previous hash ("" when the file was absent) and the
// record's id.
func (r *Recovery) Set(rel, h string, base, from *string, owner bool, mk func(old string) *evidence.Record) (string, string, error) {
	if rel == "" || strings.HasPrefix(rel, "/") || strings.Contains("/"+rel+"/", "/../") {
		return "", "", fmt.Errorf("bad path %q", rel)
	}
	defer r.c.Txn.Lock(rel)()
	old, err := r.Hash(rel)
	if err != nil {
		return "", "", err
	}
	if base != nil && old != *base {
		return "", "", fmt.Errorf("%s changed while it was being edited", rel)
	}
	if from != nil && old != *from && old != h {
		return old, "", fmt.Errorf("%s: %w (it holds %.12s, the plan expected %.12s)", rel, ErrChanged, old, *from)
	}
	if old == h {
		r.c.Changes.Expect(rel, h)
		return old, "", nil
	}
	var data []byte
	if h != "" {
		if data, err = r.c.Ledger.Blob(h); err != nil {
			return old, "", fmt.Errorf("content %.12s: %w", h, err)
		}
		if err := r.c.Dir.MkdirAll(path.Dir(cleanDir(rel))); err != nil {
			return old, "", err
		}
	}
	var rep *txn.Replacement
	var staged *os.File
	defer func() {
		if staged != nil {
			staged.Close()
		}
	}()
	var id string
	st, _ := r.c.Dir.Lstat(rel)
	errno := r.c.Txn.Apply(&txn.Change{
		Keep:  []string{rel},
		After: func(map[string]string) map[string]string { return map[string]string{rel: h} },
		Prepare: func(kept map[string]string) ([]*evidence.Record, syscall.Errno) {
			old = kept[rel]
			if h != "" {
				f, err := os.CreateTemp(r.c.StagingDir, "restore-*")
				if err != nil {
					return nil, backing.Errno(err)
				}
				os.Remove(f.Name())
				staged = f
				if _, err := f.Write(data); err != nil {
					return nil, backing.Errno(err)
				}
				var errno syscall.Errno
				if rep, errno = r.c.Txn.Stage(rel, f, st); errno != 0 {
					return nil, errno
				}
				rep.Durable = mk == nil
			}
			if mk == nil {
				return nil, 0
			}
			return []*evidence.Record{mk(old)}, 0
		},
		Publish: func(ids []string) syscall.Errno {
			if len(ids) > 0 {
				id = ids[0]
			}
			if h != "" {
				return rep.Publish()
			}
			dfd, err := r.c.Dir.OpenDir(path.Dir(cleanDir(rel)))
			if err != nil {
				return backing.Errno(err)
			}
			defer unix.Close(dfd)
			if err := unix.Unlinkat(dfd, path.Base(rel), 0); err != nil {
				return backing.Errno(err)
			}
			if mk == nil {
				return backing.Errno(unix.Fsync(dfd))
			}
			return 0
		},
		Done: func(ids []string) syscall.Errno {
			if id != "" {
				r.c.Index.SetLast(id, rel)
			}
			if h == "" {
				if st != nil && st.Nlink <= 1 {
					r.c.Txn.Forget(label.KeyOf(st))
				}
				return 0
			}
			nst, err := r.c.Dir.Lstat(rel)
			if err != nil {
				return backing.Errno(err)
			}
			var sources []*label.Label
			if !owner {
				sources = r.c.Labels.Versions(h)
			}
			l, _ := r.c.Flow.Next(flow.Move{Op: flow.Restore, Sources: sources, To: flow.Dest{Path: rel, Hash: h, Guarded: true}})
			r.c.Index.SetGuarded(label.KeyOf(nst), rel)
			l.Record = id
			l.Bind(nst)
			if err := r.c.Labels.Set(label.KeyOf(nst), l); err != nil {
				return syscall.EIO
			}
			return 0
		},
		Abort: func() {
			if rep != nil {
				rep.Abort()
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

// Check compares rel with what aerfs last gave it. A drifted file's label
// becomes EXTERNAL: whoever reads it inherits UNTRUSTED.
func (r *Recovery) Check(rel string) (*Drift, error) {
	// A commit between reading the expected content and hashing the file
	// would look like drift: compare between commits.
	defer r.c.Txn.Lock(rel)()
	if r.c.Changes.InFlight(rel) {
		return nil, nil
	}
	want, known := r.c.Changes.Expected(rel)
	if !known {
		return nil, nil
	}
	found, err := r.Hash(rel)
	if err != nil {
		return nil, err
	}
	if found == want {
		return nil, nil
	}
	if st, err := r.c.Dir.Lstat(rel); err == nil {
		l, _ := r.c.Flow.Next(flow.Move{Op: flow.Drift, To: flow.Dest{Path: rel, Hash: found}})
		l.Bind(st)
		r.c.Labels.Set(label.KeyOf(st), l)
	}
	// Believe the file from now on, so one drift is reported once.
	r.c.Changes.Expect(rel, found)
	r.c.Txn.Changed(rel)
	return &Drift{Path: rel, Expected: want, Found: found}, nil
}

// Adopt makes the current content of rel the owner's: its label (EXTERNAL
// after drift, or any untrusted or tainted origin) goes, so that whoever
// reads it from now on gains no taint. The record mk makes (given the
// label removed and the content's hash) is durable before the label
// changes. It returns the label it removed, the content's hash and the
// record's id.
func (r *Recovery) Adopt(rel string, mk func(old *label.Label, h string) *evidence.Record) (*label.Label, string, string, error) {
	if rel == "" || r.c.Reserved(rel) {
		return nil, "", "", fmt.Errorf("bad path %q", rel)
	}
	defer r.c.Txn.Lock(rel)()
	st, err := r.c.Dir.Lstat(rel)
	if err != nil {
		return nil, "", "", fmt.Errorf("%s: %w", rel, err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, "", "", fmt.Errorf("%s is not a regular file", rel)
	}
	old := r.c.Label(rel, st)
	if old.Clean() {
		return nil, "", "", fmt.Errorf("nothing to adopt: %s carries no label from outside the mount or from an untrusted or tainted writer", rel)
	}
	h, err := r.c.Txn.Store(rel)
	if err != nil {
		return nil, "", "", err
	}
	// The content may have changed between the stat and the hash: bind
	// what was hashed, or nothing.
	nst, err := r.c.Dir.Lstat(rel)
	if err != nil || nst.Ino != st.Ino || nst.Size != st.Size || nst.Mtim != st.Mtim || nst.Ctim != st.Ctim {
		return nil, "", "", fmt.Errorf("%s changed while it was being adopted: try again", rel)
	}
	id, err := r.c.Ledger.Must(mk(old, h))
	if err != nil {
		return nil, "", "", err
	}
	c, _, _ := r.c.Policy().Classify(rel)
	nl, _ := r.c.Flow.Next(flow.Move{Op: flow.Adopt, To: flow.Dest{Path: rel, Hash: h, Guarded: c.Guarded()}})
	if nl != nil {
		nl.Record = id
		nl.Bind(nst)
		r.c.Index.SetGuarded(label.KeyOf(nst), rel)
		r.c.Changes.Expect(rel, h)
	}
	if err := r.c.Labels.Set(label.KeyOf(nst), nl); err != nil {
		return nil, "", "", err
	}
	r.c.Index.SetLast(id, rel)
	return old, h, id, nil
}
