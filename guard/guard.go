package guard

import (
	"fmt"
	"path"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/authority"
	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/guard/explain"
	"github.com/aerfs/aerfs/guard/flow"
	"github.com/aerfs/aerfs/guard/gate"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/guard/recovery"
	"github.com/aerfs/aerfs/guard/tracking"
	"github.com/aerfs/aerfs/guard/txn"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// StatusDir is the reserved name of the virtual directory at the root
// (.aerfs/status: what the guard knows about the caller).
const StatusDir = ".aerfs"

// RuleReserved is the rule id of refused changes inside StatusDir.
const RuleReserved = "RX-reserved"

// Config is what New needs.
type Config struct {
	RootFd   int    // the backing directory, opened before the mount covered it
	Path     string // the absolute path the root is mounted at (processes name its files under it)
	StateDir string
	Policy   *policy.Policy
	Registry *principal.Registry
	Labels   *label.Store
	Recorder ledger.Recorder
	Log      zerolog.Logger
	// Root names a further root of the policy: the paths of its records
	// are "@Root/…". Roots are the guards of the further roots, attached
	// to the workspace's guard.
	Root  string
	Roots []*Guard
	// Authority is the act gate's monitor (a new one when nil).
	Authority *authority.Monitor
	// Namespaces: create the sessions and shared roots when missing.
	Namespaces bool
	// OnCommit, when set, is told how long each guarded commit took, from
	// the close that asked for it to its durable record and publication.
	OnCommit func(time.Duration)
	// OnBurst is called (once, in its own goroutine) when a session is
	// quarantined after a burst of refusals.
	OnBurst func(s *principal.Session)
	// Explain, when set, is where the explanations read what the log said
	// before the mount (the log's index): the guard then follows the log
	// from record ExplainFrom (the mount's first) on, not from record 0.
	Explain     explain.Source
	ExplainFrom int64
	// LastReads, when set, finds a session's newest reads record: a
	// session back from retirement or a remount continues its provenance
	// chain from it.
	LastReads func(session string) string
	// TaintRecords, when set, lists the records of what tainted a
	// session other than a file it read (an exec of a web client, a web
	// host through the proxy, a declaration): every change the session
	// makes afterwards names them as parents.
	TaintRecords func(session string) []string
}

// house is the rooms of one root, shared by its two doors.
type house struct {
	root     string
	stateDir string
	dir      *backing.Dir
	reg      *principal.Registry
	led      *ledger.Ledger
	labels   *label.Store
	idx      *tracking.Index
	// linked: the files the index noted at mount that have another name
	// (crossLinks).
	linked   []label.Key
	changes  *tracking.Changes
	reads    *tracking.Reads
	opens    *tracking.Opens
	objs     *tracking.Objects
	gate     *gate.Gate
	flow     *flow.Flow
	txn      *txn.Txn
	rec      *recovery.Recovery
	status   *explain.Index
	staging  string
	onCommit func(time.Duration)
	roots    map[string]*Guard
	// names: a directory's rename holds it for writing, from the walk
	// that decides what it moves to the rename that moves it; every other
	// change that adds a name (a create, a link, a make, a rename of
	// anything else) holds it for reading, so that nothing arrives
	// beneath a moving directory that its walk did not decide.
	names sync.RWMutex
}

// New builds the guard of one root and indexes the guarded files already
// in its backing directory.
func New(c Config) (*Guard, error) {
	h := &house{root: c.Root, stateDir: c.StateDir, dir: backing.New(c.RootFd), reg: c.Registry,
		labels: c.Labels, idx: tracking.NewIndex(), changes: &tracking.Changes{}, opens: &tracking.Opens{},
		objs: &tracking.Objects{}, staging: path.Join(c.StateDir, "staging"), onCommit: c.OnCommit, roots: map[string]*Guard{}}
	h.led = ledger.New(c.Recorder, c.Root, c.Log)
	h.reads = tracking.NewReads(h.dir, h.led)
	var err error
	if h.txn, err = txn.New(txn.Config{Dir: h.dir, Ledger: h.led, Labels: h.labels, Changes: h.changes, Index: h.idx,
		Objects: h.objs, StagingDir: h.staging}); err != nil {
		return nil, err
	}
	mon := c.Authority
	if mon == nil {
		mon = authority.New(authority.Config{}, nil)
	}
	h.flow = flow.New(flow.Config{Labels: h.labels, Authority: mon, Reads: h.reads, Objects: h.objs, Ledger: h.led, Index: h.idx, Opens: h.opens, Forget: h.txn.Forget})
	h.gate = gate.New(gate.Config{Path: c.Path, Policy: c.Policy, Registry: c.Registry, Dir: h.dir, Ledger: h.led, Labels: h.labels,
		Index: h.idx, Opens: h.opens, Changes: h.changes, Reads: h.reads, Flow: h.flow, OnBurst: c.OnBurst})
	h.rec = recovery.New(recovery.Config{Dir: h.dir, Ledger: h.led, Labels: h.labels, Index: h.idx, Changes: h.changes,
		Txn: h.txn, Flow: h.flow, StagingDir: h.staging, Policy: h.gate.Policy, Reserved: isReserved,
		Label: func(rel string, st *syscall.Stat_t) *label.Label { _, l := h.gate.Target(rel, st); return l }})
	h.status = explain.New(c.StateDir, h.led.Flush)
	if c.Explain != nil {
		h.status.UseSource(c.Explain, c.ExplainFrom)
	}
	if c.TaintRecords != nil {
		h.reads.SetTaintRecords(c.TaintRecords)
	}
	if c.LastReads != nil {
		h.reads.SetLastReads(c.LastReads)
	}
	// A session the registry retires (ended, no process left) is
	// forgotten here too: memory follows the sessions that are live.
	if c.Registry != nil {
		c.Registry.OnRetire(h.forget)
	}
	for _, r := range c.Roots {
		h.roots[r.h.root] = r
	}
	if err := h.index(); err != nil {
		return nil, err
	}
	h.crossLinks()
	if c.Namespaces {
		if err := h.namespaces(); err != nil {
			return nil, err
		}
	}
	return &Guard{h: h}, nil
}

// forget drops what the house holds about the retired session s: what it
// read (listed first), its refusals counted for a burst, what the
// explanations followed of it.
func (h *house) forget(s *principal.Session) {
	h.reads.Forget(s)
	h.gate.Reset(s.ID)
	h.status.Forget(s.ID)
}

// indexed reports whether the index notes the file st at rel: its class
// is not plain, or it is in a session's or the shared namespace and has
// another name (a hard link made before the mount, whose plain name would
// reach into the namespace).
func indexed(pol *policy.Policy, rel string, st *syscall.Stat_t) bool {
	c, ns, _ := pol.Classify(rel)
	return c != policy.Plain || ns.Entered() && st.Nlink > 1
}

// index walks the backing directory once at mount and remembers the inode
// of every file whose path is not plain, so that a hard link made before
// the mount (or a link under a plain name) is still guarded. The temporary
// file of a commit a crash interrupted goes: either its rename happened
// (and this is not it) or the write is completed from its blob at mount.
func (h *house) index() error {
	pol := h.gate.Policy()
	var stale []string
	_ = h.dir.Walk("", func(rel string, st *syscall.Stat_t) {
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			if txn.IsCommitTemp(path.Base(rel)) {
				stale = append(stale, rel)
			} else if indexed(pol, rel, st) {
				h.idx.SetGuarded(label.KeyOf(st), rel)
				if st.Nlink > 1 {
					h.linked = append(h.linked, label.KeyOf(st))
				}
			}
		}
	})
	for _, rel := range stale {
		h.dir.Unlink(rel, 0)
	}
	return nil
}

// crossLinks marks, in each root's index, the files another root (or the
// workspace) noted with another name at mount: a hard link made before the
// mount between two roots on one file system. Each root decides by its own
// policy and index; such a file is decided as the strictest class through
// every name (tracking.Index.Mark), since which class its names have in
// the other root is not known here.
func (h *house) crossLinks() {
	all := []*house{h}
	for _, r := range h.roots {
		all = append(all, r.h)
	}
	for _, a := range all {
		for _, b := range all {
			if a == b {
				continue
			}
			for _, k := range a.linked {
				b.idx.Mark(k)
			}
		}
	}
}

// namespaces creates the sessions and shared roots in the backing
// directory when they are missing, the workspace owner's.
func (h *house) namespaces() error {
	sessions, shared := h.gate.Policy().Namespaces()
	var root unix.Stat_t
	if err := unix.Fstat(h.dir.Fd(), &root); err != nil {
		return err
	}
	for _, d := range []string{sessions, shared} {
		if _, err := h.dir.Lstat(d); err == nil {
			continue
		}
		if err := h.dir.MkdirAll(d); err != nil {
			return fmt.Errorf("creating %s: %w", d, err)
		}
		unix.Fchownat(h.dir.Fd(), d, int(root.Uid), int(root.Gid), unix.AT_SYMLINK_NOFOLLOW)
	}
	return nil
}

// isReserved reports whether name is one of aerfs's own: a commit's
// temporary file or the status directory.
func isReserved(name string) bool {
	return len(name) >= len(txn.ReservedPrefix) && name[:len(txn.ReservedPrefix)] == txn.ReservedPrefix || name == StatusDir
}
