package guard

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"

	"github.com/aerfs/aerfs/authority"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/explain"
	"github.com/aerfs/aerfs/guard/flow"
	"github.com/aerfs/aerfs/guard/gate"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/recovery"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Guard is the daemon's door into the guard of one root (and, for the
// workspace, of the further roots attached to it: a path "@name/…" is
// routed to root name's guard). It has twelve methods; everything else
// happens behind it.
type Guard struct{ h *house }

// Door is what the FUSE nodes serve (fs.Mount).
func (g *Guard) Door() *Door { return &Door{h: g.h} }

// Policy is the policy in force.
func (g *Guard) Policy() *policy.Policy { return g.h.gate.Policy() }

// PolicyChange is what putting a policy in force leaves for the owner
// (SetPolicy); paths of a further root are "@root/path".
type PolicyChange struct {
	// Held: files the policy guards (identity, memory, control) more
	// strictly, open for writing through a plain descriptor, held at their
	// class in force until closed: the kernel passes such a descriptor's
	// writes on without asking, which would change a guarded file
	// undecided and unrecorded (RW-open-writer).
	Held []string
	// Exposed: files the policy makes secret that are open for writing
	// ("path (open for writing)": the secret class is in force at once, so
	// that no new reader gets them, and that descriptor's writes go on
	// undecided), or that a process the policy would not let open them has
	// open for reading ("path (pid N)"): its reads go on through the kernel
	// until it closes them. Every reader of them is tainted SECRET_RISK.
	Exposed []string
	// StillHeld reports, later, whether a held file (in any root) is still
	// open for writing: the edit, tried again, would hold it again. It
	// looks at the held files only, where trying the edit walks the whole
	// workspace.
	StillHeld func() bool
}

// SetPolicy puts p in force, with the act gate's configuration a
// (attestors and thresholds count from the next decision on). Each further
// root gets its part of p; a root p no longer has keeps its policy until
// the next mount (it stays mounted and guarded). The namespace roots stay
// those the mount started with (policy.WithNamespacesOf).
//
// Every file p guards is noted first, so that a name linked to it while it
// was plain is decided as it is; files it holds or exposes are returned,
// and the caller puts p in force again once the held ones are closed. No
// name is made, moved or opened for writing meanwhile (the namespace lock,
// which such changes take for reading). err: part of a tree could not be
// read to look for open files.
func (g *Guard) SetPolicy(p *policy.Policy, a authority.Config) (PolicyChange, error) {
	ch, err := g.h.setPolicy(p)
	g.h.flow.Authority().SetConfig(a)
	for name, r := range g.h.roots {
		rp, ok := p.Root(name)
		if !ok {
			g.h.led.Log.Warn().Str("root", name).Msg("the policy no longer names this root: it stays guarded by its old rules until the next mount")
			continue
		}
		rch, rerr := r.h.setPolicy(rp.Policy)
		for _, rel := range rch.Held {
			ch.Held = append(ch.Held, "@"+name+"/"+rel)
		}
		for _, rel := range rch.Exposed {
			ch.Exposed = append(ch.Exposed, "@"+name+"/"+rel)
		}
		err = errors.Join(err, rerr)
	}
	g.h.crossLinks() // links to another root's file that p guards now
	ch.StillHeld = g.stillHeld
	return ch, err
}

// stillHeld is PolicyChange.StillHeld: whether a file a policy edit
// holds back (Holding) in this root or a further one is still open for
// writing through a plain descriptor.
func (g *Guard) stillHeld() bool {
	if g.h.stillHeld() {
		return true
	}
	for _, r := range g.h.roots {
		if r.h.stillHeld() {
			return true
		}
	}
	return false
}

func (h *house) stillHeld() bool {
	for _, rel := range h.gate.Policy().HeldPaths() {
		if st, err := h.dir.Lstat(rel); err == nil && h.opens.Passthrough(label.KeyOf(st), 0, 0) {
			return true
		}
	}
	return false
}

// refuseHeld refuses to open for writing, truncate, create, remove, rename
// or link rel while a policy edit holds it at its old class
// (RW-open-writer): the hold is for the descriptors that were open at the
// edit, not for new writers or for content arriving by another name.
func (h *house) refuseHeld(c Caller, rel string) syscall.Errno {
	if !h.gate.Policy().Held(rel) {
		return 0
	}
	return h.gate.Refuse(c, policy.OpWrite, rel, policy.RuleOpenWriter.ID(),
		"a policy edit holds this file at its old class while a descriptor opened before the edit writes it: nothing else changes it until that one is closed and the edit is in force")
}

// setPolicy puts next in force in this root (SetPolicy).
func (h *house) setPolicy(next *policy.Policy) (PolicyChange, error) {
	h.names.Lock()
	defer h.names.Unlock()
	cur := h.gate.Policy()
	next = next.WithNamespacesOf(cur)
	writing := h.opens.AnyWriting()
	held := map[string]policy.Class{}
	var ch PolicyChange
	type reading struct {
		rel string
		res *principal.Resolved
	}
	var readers []reading
	err := h.dir.Walk("", func(rel string, st *syscall.Stat_t) {
		if st.Mode&syscall.S_IFMT != syscall.S_IFREG || !indexed(next, rel, st) {
			return
		}
		c, _, _ := next.Classify(rel)
		k := label.KeyOf(st)
		h.idx.SetGuarded(k, rel)
		if st.Nlink > 1 && !slices.Contains(h.linked, k) {
			h.linked = append(h.linked, k)
		}
		was, _, _ := cur.Classify(rel)
		if policy.Strictest(was, c) == was {
			return
		}
		if writing && h.opens.Passthrough(k, 0, 0) {
			if c.Guarded() {
				held[rel] = was
				ch.Held = append(ch.Held, rel)
				return
			}
			// Made secret: in force at once, so that no new reader
			// gets it; what the open descriptor writes is not decided.
			ch.Exposed = append(ch.Exposed, rel+" (open for writing)")
		}
		if c == policy.Secret {
			for _, res := range h.opens.OpenReaders(k) {
				readers = append(readers, reading{rel, res})
			}
		}
	})
	h.gate.SetPolicy(next.Holding(held))
	for _, r := range readers {
		// What it reads from now on is a secret read.
		h.flow.Next(flow.Move{Op: flow.Read, Subjects: []*principal.Resolved{r.res}, To: flow.Dest{Path: r.rel}, Add: policy.SecretRisk})
		if !r.res.Identified || !r.res.Subject().Principal.Trusted() {
			ch.Exposed = append(ch.Exposed, fmt.Sprintf("%s (pid %d)", r.rel, r.res.Proc.ID.Tgid))
		}
	}
	return ch, err
}

// Status is what `aerfs status` counts.
type Status struct {
	Allowed, Denied, Committed, Quarantined int64
	Labels                                  int
}

// Status counts the verdicts and labels of this root (not of the further
// roots: each reports its own).
func (g *Guard) Status() Status {
	s := g.h.led.Stats
	return Status{Allowed: s.Allowed.Load(), Denied: s.Denied.Load(), Committed: s.Committed.Load(),
		Quarantined: s.Quarantined.Load(), Labels: g.h.labels.Len()}
}

// Question is what Explain is asked about: a process (what .aerfs/status
// tells it), a session, or a path — one of them.
type Question struct {
	Process *principal.Resolved
	Session *principal.Session
	Path    string
}

// Explain tells what the log says about a process, a session or a path.
func (g *Guard) Explain(q Question) *explain.Explanation {
	switch {
	case q.Session != nil:
		return g.h.status.Session(q.Session, g.Policy())
	case q.Path != "":
		h, rel := g.h, q.Path
		if r, sub, ok := g.route(rel); ok {
			h, rel = r.h, sub // the root's file, from the workspace's log
		}
		st, _ := h.dir.Lstat(rel)
		t, l := h.gate.Target(rel, st)
		return g.h.status.Path(q.Path, t.Class, h.gate.Policy().Machinery(rel), l, st != nil)
	}
	return g.h.status.Process(q.Process, g.Policy())
}

// State is the content of guarded files, by hash ("" for absent), each
// content kept as a blob: of every guarded file (with those of the
// further roots, by record path) when no path is given, what a snapshot
// records; of the given paths otherwise.
func (g *Guard) State(paths ...string) (map[string]string, error) {
	out := map[string]string{}
	if len(paths) == 0 {
		st, err := g.h.rec.State()
		if err != nil {
			return nil, err
		}
		for p, h := range st {
			out[p] = h
		}
		for name, r := range g.h.roots {
			st, err := r.State()
			if err != nil {
				return nil, fmt.Errorf("root %s: %w", name, err)
			}
			for p, h := range st {
				out[r.h.led.RecordPath(p)] = h
			}
		}
		return out, nil
	}
	for _, p := range paths {
		h, rel := g.h, p
		if r, sub, ok := g.route(p); ok {
			h, rel = r.h, sub
		}
		hash, err := h.rec.Hash(rel)
		if err != nil {
			return nil, err
		}
		out[p] = hash
	}
	return out, nil
}

// ChangeKind is what an owner's change changes.
type ChangeKind int

const (
	// Content: the file's content becomes Hash (or Data), or the file goes
	// ("" Hash, no Data): a restore, an approval, an edit, a rollback, a
	// drift repair, a change completed at mount.
	Content ChangeKind = iota
	// Adopt: the current content becomes the owner's; its label goes.
	Adopt
)

// Change is a change of a guarded path from the owner's channel.
type Change struct {
	Kind ChangeKind
	Path string
	Hash string
	Data []byte  // stored first; Hash becomes its hash
	Base *string // the content Path must still hold (an edit's)
	// From is the content Path held when the change was planned (a
	// restore's step, an approval's reviewed base): a change that landed
	// since is never overwritten (ErrChanged), unless it made Path hold
	// Hash already.
	From *string
	// Record makes the change's record from what it found (nil: the
	// change's durable trace is elsewhere, a restore's journal: the
	// change is then flushed before Change returns).
	Record func(Found) *evidence.Record
	// Reviewed: the owner reviewed the content (an approval), which gets
	// the owner's label, as content the owner wrote (Data) does. Any other
	// content put back (a restore, a rollback, a drift repair) gets the
	// label its version was published with.
	Reviewed bool
}

// ErrChanged is returned by Change when Path no longer holds From.
var ErrChanged = recovery.ErrChanged

// Found is what a change found and made.
type Found struct {
	Old, New string       // the content before and after
	Label    *label.Label // the label an adoption removed
}

// Result is what a change did: what it found, and its record's id ("" when
// the file already held what it should).
type Result struct {
	Found
	ID string
}

// Change carries out an owner's change through the one transaction.
func (g *Guard) Change(c Change) (Result, error) {
	h := g.h
	if r, sub, ok := g.route(c.Path); ok {
		h, c.Path = r.h, sub
		if mk := c.Record; mk != nil {
			c.Record = func(f Found) *evidence.Record { return r.h.led.Unroot(mk(f)) }
		}
	}
	if c.Kind == Adopt {
		old, hash, id, err := h.rec.Adopt(c.Path, func(old *label.Label, hash string) *evidence.Record {
			return c.Record(Found{New: hash, Label: old})
		})
		return Result{Found: Found{New: hash, Label: old}, ID: id}, err
	}
	if c.Base != nil {
		if cl, _, _ := h.gate.Policy().Classify(c.Path); !cl.Guarded() {
			return Result{}, fmt.Errorf("%s is not guarded (class plain): edit it directly", c.Path)
		}
	}
	if c.Data != nil {
		hash, err := h.led.PutBlob(c.Data)
		if err != nil {
			return Result{}, err
		}
		c.Hash = hash
	}
	var mk func(string) *evidence.Record
	if c.Record != nil {
		mk = func(old string) *evidence.Record { return c.Record(Found{Old: old, New: c.Hash}) }
	}
	old, id, err := h.rec.Set(c.Path, c.Hash, c.Base, c.From, c.Reviewed || c.Data != nil, mk)
	return Result{Found: Found{Old: old, New: c.Hash}, ID: id}, err
}

// Promote moves the item at rel (under sessions/<id>/) into the shared
// namespace on behalf of res, if the policy and the act gate allow it. It
// returns the new path.
// When refused, the string says which file kept the item back and, on a
// second line, what to do, if there is more to say than the rule's reason.
func (g *Guard) Promote(res *principal.Resolved, rel string) (string, policy.Verdict, error) {
	return g.Door().promote(res, rel)
}

// Drift compares rel with what aerfs last gave it; a drifted file's label
// becomes EXTERNAL (nil: no drift).
func (g *Guard) Drift(rel string) (*Drift, error) {
	if r, sub, ok := g.route(rel); ok {
		d, err := r.Drift(sub)
		if d != nil {
			d.Path = rel
		}
		return d, err
	}
	return g.h.rec.Check(rel)
}

// Expectation is what aerfs believes about guarded files.
type Expectation struct {
	// State replaces what aerfs believes the guarded files hold (record
	// paths; from the evidence log, at mount). nil: unchanged.
	State map[string]string
	// Record names the record of the current version of Paths.
	Record string
	Paths  []string
	// OnKnown, when set, is called with each guarded path of this root
	// aerfs starts to know the content of while mounted (its first commit,
	// a rename onto it), before aerfs changes the file: the drift watcher
	// watches the path's directory from then on.
	OnKnown func(rel string)
	// OnChange, when set, is called with each guarded path of this root
	// aerfs is about to change (a commit, a rename, a restore): what the
	// flush at unmount makes durable.
	OnChange func(rel string)
}

// Expect sets what aerfs believes about guarded files.
func (g *Guard) Expect(e Expectation) {
	if e.State != nil {
		per := map[*Guard]map[string]string{}
		for _, r := range g.h.roots {
			per[r] = map[string]string{}
		}
		own := map[string]string{}
		for p, hash := range e.State {
			if r, rel, ok := g.route(p); ok {
				per[r][rel] = hash
				continue
			}
			own[p] = hash
		}
		for r, st := range per {
			r.Expect(Expectation{State: st})
		}
		g.h.changes.SetExpected(own)
	}
	for _, p := range e.Paths {
		if r, rel, ok := g.route(p); ok {
			r.h.idx.SetLast(e.Record, rel)
			continue
		}
		g.h.idx.SetLast(e.Record, p)
	}
	if e.OnKnown != nil {
		g.h.changes.OnKnown(e.OnKnown)
	}
	if e.OnChange != nil {
		g.h.changes.OnChange(e.OnChange)
	}
}

// Authority is the owner's side of the act gate.
func (g *Guard) Authority() *Acts { return &Acts{g: g.h.gate} }

// Release forgets the refusals counted against the session tree roots
// ids (their quarantine was lifted by the owner): the next refusal must
// not re-quarantine them at once.
func (g *Guard) Release(ids ...string) {
	for _, id := range ids {
		g.h.gate.Reset(id)
	}
}

// Close is called when the mount has ended: what the guard holds for the
// log (the counts of the refusals folded so far, of this root and of its
// further roots) is recorded.
func (g *Guard) Close() {
	g.h.gate.FlushFolds()
	for _, r := range g.h.roots {
		r.Close()
	}
}

// route returns the guard of the further root a record path names, and
// the path relative to it.
func (g *Guard) route(p string) (*Guard, string, bool) {
	if g.h.root != "" || !strings.HasPrefix(p, policy.RootPrefix) {
		return nil, "", false
	}
	name, rel, ok := policy.SplitRootPath(p)
	if !ok {
		return nil, "", false
	}
	r := g.h.roots[name]
	return r, rel, r != nil
}

// Drift is a guarded file whose content is not what aerfs last gave it.
type Drift = recovery.Drift

// AuthorityKey is the key the act gate keeps res's reads and writes
// under: its session, or the process outside sessions (an attestor's
// name).
func AuthorityKey(res *principal.Resolved) string { return flow.AuthorityKey(res) }

// SessionKey is the authority key of the session with this id.
func SessionKey(id string) string { return flow.SessionKey(id) }

// Acts is the owner's side of the act gate: what a file may cause, and
// the single-use tokens that let one action through.
type Acts struct{ g *gate.Gate }

// Monitor is the act gate's authority monitor (mint, attest, elevation).
func (a *Acts) Monitor() *authority.Monitor { return a.g.Authority() }

// Place is where rel is for the act gate (the client's machinery or not).
func (a *Acts) Place(rel string) authority.Place { return a.g.Place(rel) }

// Of returns the label of the file at rel and its authority stamp (the
// stamp's hash is the content's current SHA-256 for a regular file).
func (a *Acts) Of(rel string) (*label.Label, *authority.Stamp, error) { return a.g.Of(rel) }

// Arm lets the next action on rel through the mount present the owner
// token secret (it is spent there, once).
func (a *Acts) Arm(rel string, act authority.Action, secret string) { a.g.Arm(rel, act, secret) }

// Armed lists the actions on rel an armed owner token waits for.
func (a *Acts) Armed(rel string) []string { return a.g.Armed(rel) }

// Consume checks and spends an owner token presented by an executor
// outside the mount (the outbox pattern).
func (a *Acts) Consume(secret, rel string, act authority.Action) (authority.Rule, error) {
	return a.g.Consume(secret, rel, act)
}
