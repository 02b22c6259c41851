package gate

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/aerfs/aerfs/authority"
	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// # The act gate
//
// The consequential actions — an exec open and chmod +x (exec), content
// arriving under a control-class name (control), a promotion (promote) —
// ask authority.Check with the stamp of the content's label, then, only
// when it did not allow, an elevation of the exact content or an owner
// token armed for exactly that path and action (docs/authority.md). Each
// question carries the path's place: the client's machinery in a root
// whose agent profile names it, where an agent's untainted content acts.

// chainText describes the class chain of a decision for a record's reason.
func chainText(d authority.Decision) string {
	var b strings.Builder
	b.WriteString(d.Rule.Reason())
	b.WriteString(": class ")
	b.WriteString(d.Class.String())
	b.WriteString(" (")
	b.WriteString(d.Bound.ID())
	b.WriteString(")")
	for i, s := range d.Chain {
		if i == 0 {
			b.WriteString(" from ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(s.Path)
		b.WriteString(" [")
		b.WriteString(s.Class.String())
		b.WriteString("]")
	}
	return b.String()
}

// Act asks the act gate whether the content labelled l at rel may do a; a
// refusal (or quarantine) is recorded with the authority rule and the
// class chain. It returns the decision.
func (g *Gate) Act(res *principal.Resolved, op, rel string, l *label.Label, a authority.Action) authority.Decision {
	d, _ := g.act(res, op, rel, nil, l, a)
	return d
}

// Place is where rel is for the act gate: the client's machinery when the
// root's agent profile names it so (policy.Policy.Machinery), else an
// ordinary path.
func (g *Gate) Place(rel string) authority.Place {
	if g.Policy().Machinery(rel) {
		return authority.Machinery
	}
	return authority.Ordinary
}

// act is Act for the file st (nil: whatever rel holds) whose label is l.
// It also returns the hash of the content it decided on (zero when the
// class alone allowed it).
func (g *Gate) act(res *principal.Resolved, op, rel string, st *syscall.Stat_t, l *label.Label, a authority.Action) (authority.Decision, authority.Hash) {
	mon := g.Authority()
	req := authority.Request{Path: rel, Stamp: label.StampOf(l), Action: a, Place: g.Place(rel), Now: time.Now()}
	if d := authority.Check(req.Stamp, a, mon.Config(), req.Place); d.Allowed() && d.Rule == authority.RuleAct {
		return d, authority.Hash{}
	}
	// Elevations and tokens are bound to the exact content: the stamp of a
	// plain file does not carry its hash, so hash what is there now — in
	// the file whose label is decided, never another one the name holds by
	// then (a file that is not is decided without its hash: no token or
	// elevation matches).
	var hash authority.Hash
	if h, err := g.hashOf(rel, st); err == nil {
		s := *req.Stamp
		s.Hash, hash = h, h
		req.Stamp = &s
	}
	key := rel + "\x00" + a.String()
	g.tokMu.Lock()
	req.Token = g.armed[key]
	g.tokMu.Unlock()
	d := mon.Authorize(req)
	if d.Rule == authority.RuleToken || d.Rule == authority.RuleTokenReplay || d.Rule == authority.RuleTokenExpired {
		g.disarm(key, req.Token)
	}
	subj := res.Subject()
	verdict := "allow"
	if d.Outcome != authority.Allow {
		verdict = "deny"
		g.c.Ledger.Stats.Denied.Add(1)
	}
	r := &evidence.Record{Type: evidence.TypeVerdict, Principal: subj.Principal.String(), Taint: ledger.TaintNames(subj.Taint),
		Meta: evidence.Meta{Path: rel, Op: op, Verdict: verdict, Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe, UID: res.Proc.UID,
			Session: subj.Session, Rule: d.Rule.ID(), Reason: chainText(d), Class: d.Class.String()}}
	if !res.Identified {
		r.Principal = policy.External.String()
	}
	if l != nil && l.Record != "" {
		r.Parents = []string{l.Record}
	}
	g.c.Ledger.Record(r)
	if verdict == "deny" {
		g.c.Ledger.Log.Info().Str("path", rel).Str("op", op).Str("rule", d.Rule.ID()).Msg("denied by the act gate")
	}
	return d, hash
}

// hashOf is the SHA-256 of the content of rel, read from the file st
// describes (any file when st is nil): a decision on one file's label is
// never made with another file's content.
func (g *Gate) hashOf(rel string, st *syscall.Stat_t) (authority.Hash, error) {
	f, err := g.c.Dir.OpenFile(rel, syscall.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return authority.Hash{}, err
	}
	defer f.Close()
	var now syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &now); err != nil {
		return authority.Hash{}, err
	}
	if now.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return authority.Hash{}, fmt.Errorf("%s is not a regular file", rel)
	}
	if st != nil && (now.Dev != st.Dev || now.Ino != st.Ino) {
		return authority.Hash{}, fmt.Errorf("%s was replaced while it was decided", rel)
	}
	h, err := backing.HashReader(f)
	if err != nil {
		return authority.Hash{}, err
	}
	return authority.ParseHash(h)
}

// Exec decides an exec open of the file st at rel (a setattr adding an x
// bit when op is "chmod").
// The content an exec open let through is remembered for the process by
// file and hash, for the read of its interpreter (interp.go).
func (g *Gate) Exec(res *principal.Resolved, op, rel string, st *syscall.Stat_t, l *label.Label) syscall.Errno {
	if l == nil {
		return 0
	}
	d, h := g.act(res, op, rel, st, l, authority.Exec)
	if !d.Allowed() {
		return syscall.EACCES
	}
	if op == "exec" {
		g.execd.allow(res.Proc.ID, st, h)
	}
	return 0
}

// Control decides content labelled l arriving at rel (rename, link): at a
// control-class name the act gate decides. Quarantine is refused here with
// the rule that says so: the owner approves by authorising the content.
func (g *Gate) Control(c Caller, res *principal.Resolved, op, rel string, l *label.Label) syscall.Errno {
	if l == nil {
		return 0
	}
	if cl, _, _ := g.Policy().Classify(rel); cl != policy.Control {
		return 0
	}
	if res == nil {
		res = g.Resolve(c)
	}
	if !g.Act(res, op, rel, l, authority.Control).Allowed() {
		return syscall.EACCES
	}
	return 0
}

// Of returns the label of the file at rel and its authority stamp (the
// stamp's hash is the content's current SHA-256 for a regular file).
func (g *Gate) Of(rel string) (*label.Label, *authority.Stamp, error) {
	st, err := g.c.Dir.Lstat(rel)
	if err != nil {
		return nil, nil, err
	}
	_, l := g.Target(rel, st)
	s := *label.StampOf(l)
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		if s.Hash, err = g.hashOf(rel, st); err != nil {
			return nil, nil, err
		}
	}
	return l, &s, nil
}

// Arm lets the next action a on rel through the mount present the owner
// token secret (it is spent there, once).
func (g *Gate) Arm(rel string, a authority.Action, secret string) {
	g.tokMu.Lock()
	g.armed[rel+"\x00"+a.String()] = secret
	g.tokMu.Unlock()
}

// Armed lists the actions on rel an armed owner token waits for.
func (g *Gate) Armed(rel string) []string {
	g.tokMu.Lock()
	defer g.tokMu.Unlock()
	var out []string
	for a := authority.Action(0); a < authority.NumActions; a++ {
		if g.armed[rel+"\x00"+a.String()] != "" {
			out = append(out, a.String())
		}
	}
	return out
}

// Consume checks and spends an owner token for action a on rel presented
// by an executor outside the mount (the outbox pattern).
func (g *Gate) Consume(secret, rel string, a authority.Action) (authority.Rule, error) {
	_, st, err := g.Of(rel)
	if err != nil {
		return authority.RuleUnset, err
	}
	r := g.Authority().Consume(secret, rel, st.Hash, a, time.Now())
	if r == authority.RuleToken {
		g.disarm(rel+"\x00"+a.String(), secret)
	}
	return r, nil
}

func (g *Gate) disarm(key, secret string) {
	g.tokMu.Lock()
	if g.armed[key] == secret {
		delete(g.armed, key)
	}
	g.tokMu.Unlock()
}
