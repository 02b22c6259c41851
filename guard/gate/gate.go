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
	// Path is the absolute path the root is mounted at: where processes
	// name its files.
	Path     string
	Policy   *policy.Policy
	Registry *principal.Registry
	Dir      *backing.Dir
	Ledger   *ledger.Ledger
	Labels   *label.Store
	Index    *tracking.Index
	Opens    *tracking.Opens
	Changes  *tracking.Changes
	Reads    *tracking.Reads
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

	execd   execd   // interp.go
	renames renames // renamed.go
	fold    folder
}

// New is the gate of a root.
func New(c Config) *Gate {
	g := &Gate{c: c, burst: map[string][]time.Time{}, armed: map[string]string{}}
	g.fold.emit = func(r *evidence.Record) { g.c.Ledger.Record(r) }
	g.pol.Store(c.Policy)
	return g
}

// FlushFolds records the counts of the refusals folded so far (the mount
// is ending: each is then in the log, one by one or in a count).
func (g *Gate) FlushFolds() { g.fold.flush() }

// Policy is the policy in force.
func (g *Gate) Policy() *policy.Policy { return g.pol.Load() }

// SetPolicy replaces the policy in force.
func (g *Gate) SetPolicy(p *policy.Policy) { g.pol.Store(p) }

// Caller is the thread behind a request: its id (NoCaller when the
// request names none) and the user id the kernel says it acts as for the
// request (its filesystem uid), which a thread that changed its
// credentials without an exec no longer shares with its resolution.
type Caller struct {
	Pid int
	UID uint32
}

// NoCaller is the Caller of a request that names no process.
var NoCaller = Caller{Pid: -1}

// Resolve resolves the process behind a request.
func (g *Gate) Resolve(c Caller) *principal.Resolved {
	if c.Pid <= 0 {
		return &principal.Resolved{Reason: "request without caller"}
	}
	return g.c.Registry.ResolveAs(c.Pid, int64(c.UID))
}

// ResolveCaller resolves the caller of a request it waits for in the
// kernel (a FLUSH), which may come from inside its exec: when its /proc
// does not answer within principal.CallerWait, res is nil and later
// returns the resolution once it does (principal.Registry.ResolveCaller).
func (g *Gate) ResolveCaller(c Caller) (res *principal.Resolved, later func() *principal.Resolved) {
	if c.Pid <= 0 {
		return &principal.Resolved{Reason: "request without caller"}, nil
	}
	return g.c.Registry.ResolveCaller(c.Pid, int64(c.UID))
}

// Target classifies rel and attaches the label of the file with stat st
// (nil when absent), checking the label's binding: a label whose binding
// broke (the content changed outside the mount) reads as EXTERNAL.
func (g *Gate) Target(rel string, st *syscall.Stat_t) (policy.Target, *label.Label) {
	pol := g.Policy()
	c, ns, sess := pol.Classify(rel)
	t := policy.Target{Class: c, Namespace: ns, Session: sess, Absent: st == nil}
	if st == nil {
		return t, nil
	}
	k := label.KeyOf(st)
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG && st.Nlink > 1 {
		// A hard link shares its content with a guarded name: decided as
		// that name's class, or as the stricter of two guarded classes
		// (a plain link moved under another class's directory).
		names, more := g.c.Index.Guarded(k)
		mixed := false
		for _, p := range names {
			if p != rel {
				if pst, err := g.c.Dir.Lstat(p); err != nil || label.KeyOf(pst) != k {
					g.c.Index.Drop(k, p) // the name went (unlinked, renamed, replaced)
					continue
				}
			}
			pc, pns, psess := pol.Classify(p)
			if pc != policy.Plain {
				t.Class = policy.Strictest(t.Class, pc)
			}
			switch {
			case !pns.Entered():
			case t.Namespace == policy.NSNone:
				// A plain name of a file in a namespace: what a write
				// through it changes is the namespace's.
				t.Namespace, t.Session = pns, psess
			case t.Namespace != pns || t.Session != psess:
				mixed = true
			}
		}
		if mixed {
			// Names in two namespaces (a link made before the mount
			// between a session's and the shared namespace, or two
			// sessions'): no session's own, so only the owner reaches it.
			t.Namespace, t.Session = policy.NSSession, policy.LinkedSession
		}
		if more {
			t.Class = policy.Identity // a name past the index's bound: of any class
		}
	}
	l := g.c.Labels.Get(k)
	switch {
	case l == nil:
		return t, nil
	case l.Kind != 0:
		if l.Kind != st.Mode&syscall.S_IFMT {
			g.c.Labels.Set(k, nil)
			return t, nil
		}
		// a special object's label (guard/flow)
	case l.Matches(st) || g.c.Opens.Writing(k):
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		// Labels are for regular files: this one belongs to an earlier
		// file whose inode number was reused. Never open a FIFO or a
		// device to hash it.
		g.c.Labels.Set(k, nil)
		return t, nil
	case l.Hash != "" && g.sameContent(rel, l.Hash):
		l.Bind(st)
		_ = g.c.Labels.Set(k, l)
	case g.c.Changes.Locked(rel):
		// a commit of rel is publishing a version: the stat raced it
	case g.boundNow(rel, k, &l):
		// st was taken before a close bound the label anew
	default:
		g.c.Ledger.Log.Warn().Str("path", rel).Msg("label binding broken: content changed outside the mount; treated as EXTERNAL")
		g.c.Ledger.Record(&evidence.Record{Type: evidence.TypeVerdict, Principal: policy.External.String(),
			Meta: evidence.Meta{Path: rel, Op: "drift", Verdict: "allow", Rule: "drift",
				Reason: "content no longer matches its label: treated as EXTERNAL"}})
		l = l.Broken()
	}
	t.LabelTaint = l.ReadTaint()
	return t, l
}

// boundNow reports whether the plain label of k holds for the file at
// rel as it is now, deciding under the inode's binding lock (a written
// handle's close binds under it before it stops counting as a writer):
// the file still open for writing, or its label, read again, bound to
// its fingerprint taken again. *l is set to the label read again.
func (g *Gate) boundNow(rel string, k label.Key, l **label.Label) bool {
	defer g.c.Opens.Binding(k)()
	now, err := g.c.Dir.Lstat(rel)
	if err != nil || label.KeyOf(now) != k {
		return false
	}
	cur := g.c.Labels.Get(k)
	if cur == nil || cur.Kind != 0 {
		return false
	}
	if cur.Matches(now) || g.c.Opens.Writing(k) {
		*l = cur
		return true
	}
	return false
}

func (g *Gate) sameContent(rel, hash string) bool {
	h, err := g.c.Dir.Hash(rel)
	return err == nil && h == hash
}

// CommitVerdict is the gate's answer to a commit of staged content.
type CommitVerdict struct {
	// Res is the writer the outcome is recorded under: the opener as it
	// is now, or the writer that was refused.
	Res     *principal.Resolved
	Target  policy.Target
	Verdict policy.Verdict
	// Placeholder: only the committing handle's empty placeholder is at
	// the path (it is no previous version).
	Placeholder bool
	// Label is the new content's label (allowed).
	Label *label.Label
	// Record is the commit's record: its write record (allowed), or its
	// refusal, with which the content is kept in quarantine.
	Record  *evidence.Record
	Refused bool
}

// Commit decides a commit of the content with hash to rel for every
// writer (the first is the opener as it is now; each must be allowed: a
// descriptor handed to a WEB process does not carry its opener's
// authority; what each read was settled before: tracking.Opens.Settle),
// then asks the label flow for the content's label and the act gate
// whether content of its class may become a control file.
// created is the inode of the empty placeholder the committing handle
// created (nil when it created none); extends says the new content keeps
// the current one (an append), whose label then flows into it.
func (g *Gate) Commit(writers []*principal.Resolved, rel, hash string, created *label.Key, extends bool) CommitVerdict {
	st, _ := g.c.Dir.Lstat(rel)
	t, l := g.Target(rel, st)
	cv := CommitVerdict{Res: writers[0], Placeholder: created != nil && st != nil && label.KeyOf(st) == *created && st.Size == 0}
	t.Absent = t.Absent || cv.Placeholder
	cv.Target = t
	held := func(res *principal.Resolved) bool { return res.Session.Quarantined() }
	subj := cv.Res.Subject()
	for _, w := range writers[1:] {
		ws := w.Subject()
		if v := g.Policy().DecideCommit(ws, held(w), t); !v.Allow {
			cv.Res, subj = w, ws
			return g.refuseCommit(cv, subj, rel, v)
		}
		subj.Taint |= ws.Taint
		subj.Principal = policy.Lower(subj.Principal, ws.Principal)
	}
	cv.Verdict = g.Policy().DecideCommit(subj, held(cv.Res), t)
	if !cv.Verdict.Allow {
		return g.refuseCommit(cv, subj, rel, cv.Verdict)
	}
	var sources []*label.Label
	if extends && !cv.Placeholder {
		sources = []*label.Label{l}
	}
	cv.Label, _ = g.c.Flow.Next(flow.Move{Op: flow.Commit, Subjects: writers, Sources: sources, To: flow.Dest{Path: rel, Hash: hash, Guarded: true}})
	var machinery authority.Rule
	if st := cv.Label.Stamp; t.Class == policy.Control && st != nil && st.Class != authority.Act {
		// Configuration acts: an agent's note (inform) or anything an
		// untrusted source shaped (none) does not become configuration
		// without the owner (aerfs pending, aerfs approve) — except an
		// agent's note at the client's own machinery (AU3-machinery).
		d := authority.Check(st, authority.Control, g.Authority().Config(), g.Place(rel))
		if !d.Allowed() {
			if d.Rule != authority.RuleControlInform {
				g.Denied(cv.Res)
			}
			cv.Record, cv.Refused = ledger.Verdict(cv.Res, subj, policy.OpWrite, rel, policy.Verdict{}), true
			cv.Record.Meta.Rule, cv.Record.Meta.Reason, cv.Record.Meta.Class = d.Rule.ID(), d.Rule.Reason(), st.Class.String()
			return cv
		}
		machinery = d.Rule
	}
	cv.Record = g.WriteRecord(cv.Res, subj, rel, cv.Verdict, label.ClassOf(cv.Label))
	if machinery != authority.RuleUnset {
		cv.Record.Meta.Rule, cv.Record.Meta.Reason = machinery.ID(), machinery.Reason()
	}
	return cv
}

func (g *Gate) refuseCommit(cv CommitVerdict, subj policy.Subject, rel string, v policy.Verdict) CommitVerdict {
	if v.Rule != policy.RuleReview {
		g.Denied(cv.Res)
	}
	cv.Verdict, cv.Refused = v, true
	cv.Record = ledger.Verdict(cv.Res, subj, policy.OpWrite, rel, v)
	return cv
}

// WriteRecord is the record of a write of rel (its hashes are filled by
// the transaction) by res, decided v, of content of class: its parents are
// the record of rel's current version and what res read.
func (g *Gate) WriteRecord(res *principal.Resolved, subj policy.Subject, rel string, v policy.Verdict, class string) *evidence.Record {
	return &evidence.Record{
		Type: evidence.TypeWrite, Principal: subj.Principal.String(), Taint: ledger.TaintNames(subj.Taint),
		Parents: g.c.Reads.Parents(res, g.c.Index.Last(rel)),
		Meta: evidence.Meta{Path: rel, Op: "commit", Verdict: "allow", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe,
			UID: res.Proc.UID, Session: subj.Session, Rule: v.Rule.ID(), Reason: v.Rule.Reason(), Class: class},
	}
}

// Authority is the authority monitor of the act gate.
func (g *Gate) Authority() *authority.Monitor { return g.c.Flow.Authority() }
