package fs

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/aerfs/aerfs/authority"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Authority at the mount (docs/authority.md §6): every write binds an
// authority class to the label of what it produces, every read of a
// labelled file lowers the reader's session floor, and the consequential
// actions (exec, becoming a control-class file, promotion) ask the act
// gate. A file without a label was written by the owner (or never through
// the mount) and is act; a label without a stamp (an older label, or one
// whose binding broke) gets its class from its origin and taint.

// authState is the mount's authority monitor and the stamps of guarded
// commits between their decision and the label that carries them.
type authState struct {
	once    sync.Once
	mu      sync.Mutex
	mon     *authority.Monitor
	pending map[string]authority.Stamp // rel + "\x00" + hash → stamp
	armed   map[string]string          // rel + "\x00" + action → owner token the next such action presents
}

// Authority is the mount's authority monitor.
func (m *Monitor) Authority() *authority.Monitor {
	m.authst.once.Do(func() {
		m.authst.mon = authority.New(authority.Config{}, nil)
		m.authst.pending = map[string]authority.Stamp{}
		m.authst.armed = map[string]string{}
	})
	return m.authst.mon
}

// SetAuthorityConfig sets the configuration of the authority monitor: at
// mount, and again at each policy reload (attestors and thresholds count
// from the next decision on).
func (m *Monitor) SetAuthorityConfig(c authority.Config) { m.Authority().SetConfig(c) }

// AuthorityKey is the key the authority monitor keeps res's reads under:
// its session, or the process outside sessions.
func AuthorityKey(res *principal.Resolved) string {
	if res.Session != nil {
		return "s:" + res.Session.ID
	}
	return "p:" + res.Proc.ID.String()
}

// authWriter is the authority subject of res. Its reads and writes are kept
// under the same key as its provenance reads (its session, or the process).
func authWriter(res *principal.Resolved, subj policy.Subject) authority.Writer {
	return authority.Writer{Principal: subj.Principal, Taint: subj.Taint, Session: AuthorityKey(res), Identified: res.Identified,
		Agent: res.Session != nil && res.Session.Agent() != ""}
}

var actStamp = authority.Stamp{Class: authority.Act, Rule: authority.RuleWriteOwner, Origin: policy.User}

// StampOf is the authority stamp of the content a label describes.
func StampOf(l *Label) *authority.Stamp {
	if l == nil {
		st := actStamp
		return &st
	}
	if l.Stamp != nil {
		return l.Stamp
	}
	st := authority.Stamp{Class: authority.Act, Rule: authority.RuleWriteOwner, Origin: l.Origin, Session: l.Session}
	switch {
	case !l.Origin.Valid():
		st.Class, st.Rule = authority.None, authority.RuleWriteUnidentified
	case !l.Origin.Trusted() && l.Origin != policy.ToolAuth:
		st.Class, st.Rule = authority.None, authority.RuleWriteUntrusted
	case l.Taint&authority.DefaultNoneTaint != 0:
		st.Class, st.Rule = authority.None, authority.RuleWriteTainted
	case l.Origin == policy.ToolAuth:
		st.Rule = authority.RuleWriteTool
	}
	if l.Hash != "" {
		st.Hash, _ = authority.ParseHash(l.Hash)
	}
	return &st
}

// ClassOf names the class of a label's content ("act" for no label).
func ClassOf(l *Label) string { return StampOf(l).Class.String() }

// authRead lowers the reader's floor to the class of what it read.
func (m *Monitor) authRead(res *principal.Resolved, rel string, l *Label) {
	if l == nil {
		return
	}
	m.Authority().Read(AuthorityKey(res), rel, StampOf(l))
}

// stampWrite binds the class of a write by res to rel (hash "" for a plain
// file, whose content is not hashed). prev is the label of the content the
// write extends (nil for a new or truncated file): the result is at most
// its class. The result is nil when the content is act and nothing else
// needs a label.
func (m *Monitor) stampWrite(res *principal.Resolved, rel, hash string, nl, prev *Label) *Label {
	subj := res.Subject()
	var h authority.Hash
	if hash != "" {
		h, _ = authority.ParseHash(hash)
	}
	st := m.Authority().Write(authWriter(res, subj), rel, h)
	st.Session = subj.Session
	if prev != nil {
		if p := StampOf(prev); p.Class < st.Class {
			st.Class, st.Rule, st.Sources = p.Class, authority.RuleWriteSource, append([]authority.Source(nil), p.Sources...)
		}
	}
	if nl == nil {
		if st.Class == authority.Act {
			return nil
		}
		nl = &Label{Origin: subj.Principal, Session: subj.Session}
	}
	nl.Stamp = &st
	return nl
}

// needsPlainRecord reports whether a plain write labelled nl is recorded:
// a labelled writer's, or one whose content cannot act.
func needsPlainRecord(subj policy.Subject, nl *Label) bool {
	return labelForWriter(subj) != nil || (nl != nil && nl.Stamp != nil && nl.Stamp.Class != authority.Act)
}

// stampCommit computes the stamp of a guarded commit of hash to rel by res
// and keeps it until bindWrite labels the new version.
func (m *Monitor) stampCommit(res *principal.Resolved, rel, hash string) {
	l := m.stampWrite(res, rel, hash, &Label{}, nil)
	m.authst.mu.Lock()
	m.authst.pending[rel+"\x00"+hash] = *l.Stamp
	m.authst.mu.Unlock()
}

// pendingStamp returns the stamp stampCommit kept for rel and hash (nil
// if none), forgetting it when take is set.
func (m *Monitor) pendingStamp(rel, hash string, take bool) *authority.Stamp {
	m.Authority()
	m.authst.mu.Lock()
	defer m.authst.mu.Unlock()
	st, ok := m.authst.pending[rel+"\x00"+hash]
	if !ok {
		return nil
	}
	if take {
		delete(m.authst.pending, rel+"\x00"+hash)
	}
	return &st
}

// recordClass is the class a write record of hash at rel carries: the
// commit's stamp, or the writer's own base class.
func (m *Monitor) recordClass(subj policy.Subject, rel, hash string) string {
	if st := m.pendingStamp(rel, hash, false); st != nil {
		return st.Class.String()
	}
	w := authority.Writer{Principal: subj.Principal, Taint: subj.Taint, Identified: true}
	c, _ := m.Authority().Config().Base(&w)
	return c.String()
}

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

// actGate asks the act gate whether the content labelled l at rel may do
// a; a refusal (or quarantine) is recorded with the authority rule and the
// class chain. It returns the decision.
func (m *Monitor) actGate(res *principal.Resolved, op, rel string, l *Label, a authority.Action) authority.Decision {
	req := authority.Request{Path: rel, Stamp: StampOf(l), Action: a, Now: time.Now()}
	if d := authority.Check(req.Stamp, a, m.Authority().Config()); d.Allowed() && d.Rule == authority.RuleAct {
		return d
	}
	// Elevations and tokens are bound to the exact content: the stamp of a
	// plain file does not carry its hash, so hash what is there now.
	if h, err := m.hashRel(rel); err == nil {
		st := *req.Stamp
		st.Hash, _ = authority.ParseHash(h)
		req.Stamp = &st
	}
	key := rel + "\x00" + a.String()
	m.authst.mu.Lock()
	req.Token = m.authst.armed[key]
	m.authst.mu.Unlock()
	d := m.Authority().Authorize(req)
	if d.Rule == authority.RuleToken || d.Rule == authority.RuleTokenReplay || d.Rule == authority.RuleTokenExpired {
		m.authst.mu.Lock()
		if m.authst.armed[key] == req.Token {
			delete(m.authst.armed, key)
		}
		m.authst.mu.Unlock()
	}
	subj := res.Subject()
	verdict := "allow"
	if d.Outcome != authority.Allow {
		verdict = "deny"
		m.Stats.Denied.Add(1)
	}
	r := &evidence.Record{Type: evidence.TypeVerdict, Principal: subj.Principal.String(), Taint: taintNames(subj.Taint),
		Meta: evidence.Meta{Path: rel, Op: op, Verdict: verdict, Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe, UID: res.Proc.UID,
			Session: subj.Session, Rule: d.Rule.ID(), Reason: chainText(d), Class: d.Class.String()}}
	if !res.Identified {
		r.Principal = policy.External.String()
	}
	if l != nil && l.Record != "" {
		r.Parents = []string{l.Record}
	}
	m.record(r)
	if verdict == "deny" {
		m.log.Info().Str("path", rel).Str("op", op).Str("rule", d.Rule.ID()).Msg("denied by the act gate")
	}
	return d
}

// authExec decides an exec open of rel.
func (m *Monitor) authExec(res *principal.Resolved, rel string, l *Label) syscall.Errno {
	if l == nil {
		return 0
	}
	if !m.actGate(res, "exec", rel, l, authority.Exec).Allowed() {
		return syscall.EACCES
	}
	return 0
}

// authChmod decides a setattr that adds an execute bit to a regular file.
func (m *Monitor) authChmod(ctx context.Context, res *principal.Resolved, rel string, in *fuse.SetAttrIn, st *syscall.Stat_t, l *Label) syscall.Errno {
	mode, ok := in.GetMode()
	if !ok || st == nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || l == nil {
		return 0
	}
	if mode&0o111&^(st.Mode&0o111) == 0 {
		return 0
	}
	if res == nil {
		res = m.caller(ctx)
	}
	if !m.actGate(res, "chmod", rel, l, authority.Exec).Allowed() {
		return syscall.EACCES
	}
	return 0
}

// authControl decides content labelled l arriving at the control-class
// name rel (rename, link). Quarantine is refused here with the rule that
// says so: the owner approves by authorising the content.
func (m *Monitor) authControl(ctx context.Context, res *principal.Resolved, op, rel string, l *Label) syscall.Errno {
	if l == nil {
		return 0
	}
	if c, _, _ := m.Policy().Classify(rel); c != policy.Control {
		return 0
	}
	if res == nil {
		res = m.caller(ctx)
	}
	if !m.actGate(res, op, rel, l, authority.Control).Allowed() {
		return syscall.EACCES
	}
	return 0
}

// authRename decides a rename of the regular file src (stat sst) to dst:
// a control-class destination asks the act gate with the source's stamp.
func (m *Monitor) authRename(ctx context.Context, res *principal.Resolved, src, dst string, sst *syscall.Stat_t) syscall.Errno {
	if sst == nil || sst.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0
	}
	if c, _, _ := m.Policy().Classify(dst); c != policy.Control {
		return 0
	}
	return m.authControl(ctx, res, "rename", dst, m.effectiveLabel(sst, src))
}

// authPromoteErr decides the promotion of the item labelled l after the
// policy allowed it: a refusal is an error naming the rule.
func (m *Monitor) authPromoteErr(res *principal.Resolved, rel string, l *Label) error {
	if l == nil {
		return nil
	}
	d := m.actGate(res, "promote", rel, l, authority.Promote)
	if d.Allowed() {
		return nil
	}
	return fmt.Errorf("promotion of %s refused by the act gate (%s): %s; "+
		"hint: `aerfs authority %s` shows where the content came from", rel, d.Rule.ID(), chainText(d), rel)
}

// authTracked reports whether a plain write by res is followed to its
// close: the class of what it writes can still drop while the file is
// open (a shell opens the output of `cat page > out` before cat reads).
// Every identified writer is followed.
func authTracked(res *principal.Resolved) bool { return res != nil && res.Identified }

// Flush binds the class of a plain file's content at each close: below
// the class its label has, when the writer's session read lower content
// since the open, the label gets the lower stamp and a write record says
// so.
func (p *plainFile) Flush(ctx context.Context) syscall.Errno {
	errno := p.LoopbackFile.Flush(ctx)
	if p.res != nil {
		if fd, ok := p.LoopbackFile.PassthroughFd(); ok {
			var st syscall.Stat_t
			if syscall.Fstat(fd, &st) == nil {
				p.m.authRestamp(p.res, p.rel, p.key, &st)
			}
		}
	}
	return errno
}

// authRestamp lowers the stamp of the plain file key (at rel, written by
// res) to the floor of what res has read.
func (m *Monitor) authRestamp(res *principal.Resolved, rel string, k fileKey, st *syscall.Stat_t) {
	floor, sources := m.Authority().Floor(AuthorityKey(res))
	l := m.Labels.Get(k)
	cur := StampOf(l)
	if floor >= cur.Class {
		return
	}
	subj := res.Subject()
	ns := *cur
	ns.Class, ns.Rule, ns.Sources = floor, authority.RuleWriteSource, sources
	if l == nil {
		l = &Label{Origin: subj.Principal, Session: subj.Session}
		ns.Origin, ns.Session = subj.Principal, subj.Session
	}
	l.Stamp = &ns
	l.bindFingerprint(st)
	l.Record = m.record(&evidence.Record{Type: evidence.TypeWrite, Principal: subj.Principal.String(),
		Taint: taintNames(subj.Taint), Parents: m.parentsFor(res, rel),
		Meta: evidence.Meta{Path: rel, Op: "close", Verdict: "allow", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe,
			UID: res.Proc.UID, Session: subj.Session, Rule: ns.Rule.ID(), Reason: "the writer read content of a lower class while the file was open",
			Class: ns.Class.String()}})
	if err := m.Labels.Set(k, l); err != nil {
		m.log.Error().Err(err).Str("path", rel).Msg("label not stored")
	}
}

// AuthorityOf returns the label of the file at rel and its authority stamp
// (the stamp's hash is the content's current SHA-256 for a regular file).
func (m *Monitor) AuthorityOf(rel string) (*Label, *authority.Stamp, error) {
	st, err := m.lstatRel(rel)
	if err != nil {
		return nil, nil, err
	}
	_, l := m.target(rel, st)
	s := *StampOf(l)
	if st.Mode&syscall.S_IFMT == syscall.S_IFREG {
		h, err := m.hashRel(rel)
		if err != nil {
			return nil, nil, err
		}
		s.Hash, _ = authority.ParseHash(h)
	}
	return l, &s, nil
}

// ArmToken lets the next action a on rel through the mount present the
// owner token secret (it is spent there, once).
func (m *Monitor) ArmToken(rel string, a authority.Action, secret string) {
	m.Authority()
	m.authst.mu.Lock()
	m.authst.armed[rel+"\x00"+a.String()] = secret
	m.authst.mu.Unlock()
}

// Armed lists the actions on rel an armed owner token waits for.
func (m *Monitor) Armed(rel string) []string {
	m.Authority()
	m.authst.mu.Lock()
	defer m.authst.mu.Unlock()
	var out []string
	for a := authority.Action(0); a < authority.NumActions; a++ {
		if m.authst.armed[rel+"\x00"+a.String()] != "" {
			out = append(out, a.String())
		}
	}
	return out
}

// ConsumeToken checks and spends an owner token for action a on rel
// presented by an executor outside the mount (the outbox pattern).
func (m *Monitor) ConsumeToken(secret, rel string, a authority.Action) (authority.Rule, error) {
	_, st, err := m.AuthorityOf(rel)
	if err != nil {
		return authority.RuleUnset, err
	}
	r := m.Authority().Consume(secret, rel, st.Hash, a, time.Now())
	if r == authority.RuleToken {
		key := rel + "\x00" + a.String()
		m.authst.mu.Lock()
		if m.authst.armed[key] == secret {
			delete(m.authst.armed, key)
		}
		m.authst.mu.Unlock()
	}
	return r, nil
}

// quarantineBelowAct keeps a commit of content below act to a control-class
// name for the owner instead of committing it, even where the policy would
// allow the write: configuration (skills, hooks, settings …) acts, and an
// agent's note (inform) or anything an untrusted source shaped (none) does
// not become configuration without the owner (aerfs pending, aerfs approve).
// It reports whether it did.
func (m *Monitor) quarantineBelowAct(res *principal.Resolved, subj policy.Subject, rel string, t policy.Target, staged *os.File, hash string) (syscall.Errno, bool) {
	if t.Class != policy.Control {
		return 0, false
	}
	st := m.pendingStamp(rel, hash, false)
	if st == nil || st.Class == authority.Act {
		return 0, false
	}
	m.pendingStamp(rel, hash, true)
	if _, err := m.rec.PutBlobFile(fdPath(staged)); err != nil {
		m.log.Error().Err(err).Msg("cannot store staged content")
		return syscall.EIO, true
	}
	rule := authority.RuleControlInform
	if st.Class == authority.None {
		rule = authority.RuleControlNone
		m.noteDenial(res)
	}
	r := m.verdictRecord(res, subj, policy.OpWrite, rel, policy.Verdict{})
	r.Meta.Rule, r.Meta.Reason, r.Meta.Class = rule.ID(), rule.Reason(), st.Class.String()
	return m.keepInQuarantine(r, rel, hash, t.Absent), true
}
