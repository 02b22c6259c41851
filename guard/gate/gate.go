package gate

import (
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aerfs/aerfs/authority"
	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/flow"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/guard/tracking"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Config is what the gate decides with.
type Config struct {
	Policy   *policy.Policy
	Registry *principal.Registry
	Dir      *backing.Dir
	Ledger   *ledger.Ledger
	Labels   *label.Store
	Index    *tracking.Index
	Opens    *tracking.Opens
	Changes  *tracking.Changes
	Flow     *flow.Flow
	// OnBurst is called (once, in its own goroutine) when a session tree
	// is quarantined after a burst of refusals.
	OnBurst func(s *principal.Session)
}

// Gate decides for one root.
type Gate struct {
	c   Config
	pol atomic.Pointer[policy.Policy]

	mu      sync.Mutex
	burst   map[string][]time.Time // session tree root → times of its recent refusals
	anyHeld atomic.Bool            // some session is quarantined: plain fast paths must look

	tokMu sync.Mutex
	armed map[string]string // rel + "\x00" + action → owner token the next such action presents
}

// New is the gate of a root.
func New(c Config) *Gate {
	g := &Gate{c: c, burst: map[string][]time.Time{}, armed: map[string]string{}}
	g.pol.Store(c.Policy)
	return g
}

// Policy is the policy in force.
func (g *Gate) Policy() *policy.Policy { return g.pol.Load() }

// SetPolicy replaces the policy in force.
func (g *Gate) SetPolicy(p *policy.Policy) { g.pol.Store(p) }

// Caller is the thread id of a request (NoCaller when the request carries
// none).
type Caller int

// NoCaller is the Caller of a request that names no process.
const NoCaller Caller = -1

// Resolve resolves the process behind a request.
func (g *Gate) Resolve(c Caller) *principal.Resolved {
	if c == NoCaller {
		return &principal.Resolved{Reason: "request without caller"}
	}
	return g.c.Registry.Resolve(int(c))
}

// Target classifies rel and attaches the label of the file with stat st
// (nil when absent).
func (g *Gate) Target(rel string, st *syscall.Stat_t) (policy.Target, *label.Label) {
	pol := g.Policy()
	c, ns, sess := pol.Classify(rel)
	t := policy.Target{Class: c, Namespace: ns, Session: sess, Absent: st == nil}
	if st != nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && c == policy.Plain && st.Nlink > 1 {
		// A hard link shares its content with a guarded name.
		if p, ok := g.c.Index.Guarded(label.KeyOf(st)); ok {
			t.Class, _, _ = pol.Classify(p)
		}
	}
	l := g.label(st, rel)
	t.LabelTaint = l.ReadTaint()
	return t, l
}

// label returns the label a reader inherits from the file with stat st,
// checking its binding. A label whose binding broke is EXTERNAL.
func (g *Gate) label(st *syscall.Stat_t, rel string) *label.Label {
	if st == nil {
		return nil
	}
	k := label.KeyOf(st)
	l := g.c.Labels.Get(k)
	if l == nil {
		return nil
	}
	if l.Kind != 0 {
		if l.Kind == st.Mode&syscall.S_IFMT {
			return l // a special object's label (guard/flow)
		}
		g.c.Labels.Set(k, nil)
		return nil
	}
	if l.Matches(st) || g.c.Opens.Writing(k) {
		return l
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		// Labels are for regular files: this one belongs to an earlier
		// file whose inode number was reused. Never open a FIFO or a
		// device to hash it.
		g.c.Labels.Set(k, nil)
		return nil
	}
	if l.Hash != "" {
		if h, err := g.c.Dir.Hash(rel); err == nil && h == l.Hash {
			l.Bind(st)
			_ = g.c.Labels.Set(k, l)
			return l
		}
	}
	if g.c.Changes.Locked(rel) {
		return l // a commit of rel is publishing a version: the stat raced it
	}
	g.c.Ledger.Log.Warn().Str("path", rel).Msg("label binding broken: content changed outside the mount; treated as EXTERNAL")
	g.c.Ledger.Record(&evidence.Record{Type: evidence.TypeVerdict, Principal: policy.External.String(),
		Meta: evidence.Meta{Path: rel, Op: "drift", Verdict: "allow", Rule: "drift",
			Reason: "content no longer matches its label: treated as EXTERNAL"}})
	return l.Broken()
}

// Authority is the authority monitor of the act gate.
func (g *Gate) Authority() *authority.Monitor { return g.c.Flow.Authority() }
