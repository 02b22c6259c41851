package daemon

import (
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/policy"
)

// guarded is the daemon's hold on one root: the guard's facade, the
// evidence log it records in (the daemon's own records go there too) and
// the backing directory the drift watcher watches.
type guarded struct {
	*guard.Guard
	led   *ledger.Ledger
	dir   *backing.Dir
	roots map[string]bool // the further roots attached to the workspace's guard
	// taints: the records of what tainted each session (taints.go); set
	// on the workspace's, through which every taint is recorded.
	taints *taintRecords

	mu        sync.Mutex
	held      []string            // files a policy edit holds out of its guarded classes (policywatch.go)
	unflushed map[string]struct{} // guarded paths changed since the last SyncBacking
	drift     []DriftStatus       // drift found since the daemon started (status, mount's output)
	driftN    int                 // how many, past the ones kept
}

// maxDriftShown is how many drifted paths the status keeps (it counts the
// rest): aerfs log --type drift has them all.
const maxDriftShown = 100

// noteDrift keeps a drifted path for the status.
func (g *guarded) noteDrift(d DriftStatus) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.driftN++
	if len(g.drift) < maxDriftShown {
		g.drift = append(g.drift, d)
	}
}

// driftFound returns the drift kept and how much was found.
func (g *guarded) driftFound() ([]DriftStatus, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]DriftStatus(nil), g.drift...), g.driftN
}

// newGuarded holds the guard g of the root named root ("" for the
// workspace: its records name the root's files "@root/…").
func newGuarded(g *guard.Guard, rec ledger.Recorder, root string, rootFd int) *guarded {
	gd := &guarded{Guard: g, led: ledger.New(rec, root, zerolog.Nop()), dir: backing.New(rootFd)}
	g.Expect(guard.Expectation{OnChange: gd.changed})
	return gd
}

// changed notes a guarded path aerfs is about to change, for SyncBacking.
func (g *guarded) changed(rel string) {
	g.mu.Lock()
	if g.unflushed == nil {
		g.unflushed = map[string]struct{}{}
	}
	g.unflushed[rel] = struct{}{}
	g.mu.Unlock()
}

// Record makes r durable.
func (g *guarded) Record(r *evidence.Record) (string, error) { return g.led.Must(r) }

// TaintedBy notes that the record id tainted the session: what it
// changes afterwards, in every root, names the record as a parent.
func (g *guarded) TaintedBy(session, id string) { g.taints.add(session, id) }

// FlushLog makes every record queued so far durable and visible to readers.
func (g *guarded) FlushLog() error { return g.led.Flush() }

// Blob returns the content with hash h.
func (g *guarded) Blob(h string) ([]byte, error) { return g.led.Blob(h) }

// PutBlob stores data as a blob and returns its hash.
func (g *guarded) PutBlob(data []byte) (string, error) { return g.led.PutBlob(data) }

// HasBlob reports whether the content with this hash is stored.
func (g *guarded) HasBlob(h string) bool { return g.led.HasBlob(h) }

// SyncBacking flushes what aerfs published since the last call: every
// guarded path it changed (renames of content not flushed on their own)
// and its directory are durable before the unmount is recorded, so a
// clean unmount record means nothing is left to complete. Only those, not
// a syncfs of the whole backing file system (backing.Dir.SyncPaths).
func (g *guarded) SyncBacking() error {
	g.mu.Lock()
	paths := make([]string, 0, len(g.unflushed))
	for p := range g.unflushed {
		paths = append(paths, p)
	}
	g.unflushed = nil
	g.mu.Unlock()
	return g.dir.SyncPaths(paths)
}

// hashOf is the content of the guarded file rel ("" when absent), kept as
// a blob.
func (g *guarded) hashOf(rel string) (string, error) {
	st, err := g.State(rel)
	return st[rel], err
}

// setContent gives the guarded file rel the content h ("" removes it)
// through the guard's transaction, with the record mk makes (nil: the
// change is flushed, its trace is a restore's journal). It returns the
// previous content and the record's id.
func (g *guarded) setContent(rel, h string, mk func(old string) *evidence.Record) (string, string, error) {
	return g.change(guard.Change{Path: rel, Hash: h}, mk)
}

// setContentFrom is setContent for a change planned while rel held from
// ("" = absent): a commit that landed after the plan is never overwritten
// (guard.ErrChanged).
func (g *guarded) setContentFrom(rel, from, h string, mk func(old string) *evidence.Record) (string, string, error) {
	return g.change(guard.Change{Path: rel, Hash: h, From: &from}, mk)
}

func (g *guarded) change(c guard.Change, mk func(old string) *evidence.Record) (string, string, error) {
	if mk != nil {
		c.Record = func(f guard.Found) *evidence.Record { return mk(f.Old) }
	}
	r, err := g.Change(c)
	return r.Old, r.ID, err
}

// bornAfter reports whether the file rel was made, or moved or changed,
// after t: the later of its birth time (where the file system keeps one)
// and its change time, which the kernel sets, never the file's writer (a
// rename from elsewhere keeps the birth time, and moves the change time).
func (g *guarded) bornAfter(rel string, t time.Time) bool {
	var st syscall.Stat_t
	gen, err := g.dir.Statx(rel, &st)
	if err != nil {
		return false
	}
	born := time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	if b := time.Unix(0, int64(gen)); gen > 1 && b.After(born) {
		born = b
	}
	return born.After(t)
}

// isRootPath reports whether the record path p names a file of a further
// root attached to this guard.
func (g *guarded) isRootPath(p string) bool {
	name, _, ok := policy.SplitRootPath(p)
	return ok && g.roots[name]
}

// setHeld notes the files a policy edit holds out of its guarded classes
// until they are no longer open for writing (status).
func (m *guarded) setHeld(held []string) {
	m.mu.Lock()
	m.held = held
	m.mu.Unlock()
}

// policyHeld is what setHeld noted.
func (m *guarded) policyHeld() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.held...)
}

// record appends r to the log, saying so when it cannot.
func (m *guarded) record(log zerolog.Logger, r *evidence.Record) {
	if _, err := m.Record(r); err != nil {
		log.Error().Err(err).Str("type", r.Type).Msg("record not written")
	}
}
