package daemon

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aerfs/aerfs/authority"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard"
	"github.com/aerfs/aerfs/policy"
)

// AuthorityInfo is what `aerfs authority FILE --json` prints: what the
// file's content may cause and why (docs/authority.md).
type AuthorityInfo struct {
	Path    string              `json:"path"`
	Class   string              `json:"class"`
	Rule    string              `json:"rule"` // why the content has the class
	Origin  string              `json:"origin"`
	Session string              `json:"session,omitempty"`
	Hash    string              `json:"hash,omitempty"`
	Record  string              `json:"record,omitempty"` // the write record that bound it
	Labeled bool                `json:"labeled"`          // false: no label, written by the owner or outside the mount
	Sources []authority.Source  `json:"sources"`          // the lowest-class sources its writer read
	May     map[string]ActCheck `json:"may"`              // exec, control, promote
	Tokens  []string            `json:"tokens"`           // actions an unspent owner token is armed for
}

// ActCheck is the act gate's answer for one action, with its elevation.
type ActCheck struct {
	Outcome      string                  `json:"outcome"` // allow, refuse, quarantine
	Rule         string                  `json:"rule"`
	K            int                     `json:"k"`
	Domains      []string                `json:"domains"`
	Attestations []authority.Attestation `json:"attestations"`
}

// AuthorizeResult is the answer to a mint: the secret is shown once.
type AuthorizeResult struct {
	Token  string `json:"token"`
	Path   string `json:"path"`
	Hash   string `json:"hash"`
	Action string `json:"action"`
	Expiry string `json:"expiry"`
}

func (s *controlServer) authorityOp(pid int, req Request) *Response {
	rel := filepath.ToSlash(filepath.Clean(req.Path))
	if rel == "." || strings.HasPrefix(rel, "../") || rel == ".." || filepath.IsAbs(rel) {
		return &Response{Error: fmt.Sprintf("%s is not inside the workspace", req.Path)}
	}
	switch req.Op {
	case "authority":
		return s.authorityInfo(rel)
	case "authorize":
		return s.authorize(pid, rel, req)
	case "attest":
		return s.attest(pid, rel)
	}
	return s.authorizeCheck(pid, rel, req)
}

func (s *controlServer) authorityInfo(rel string) *Response {
	l, st, err := s.m.Authority().Of(rel)
	if err != nil {
		return &Response{Error: err.Error()}
	}
	mon := s.m.Authority().Monitor()
	info := AuthorityInfo{Path: rel, Class: st.Class.String(), Rule: st.Rule.ID(), Origin: st.Origin.String(),
		Session: st.Session, Hash: st.Hash.String(), Labeled: l != nil, Sources: st.Sources, May: map[string]ActCheck{},
		Tokens: s.m.Authority().Armed(rel)}
	if l != nil {
		info.Record = l.Record
	}
	if info.Sources == nil {
		info.Sources = []authority.Source{}
	}
	if info.Tokens == nil {
		info.Tokens = []string{}
	}
	for a := authority.Action(0); a < authority.NumActions; a++ {
		d := authority.Check(st, a, mon.Config(), s.m.Authority().Place(rel))
		e := mon.Elevation(st.Hash, a)
		c := ActCheck{Outcome: d.Outcome.String(), Rule: d.Rule.ID(), K: e.K, Domains: e.Domains, Attestations: e.All}
		if !d.Allowed() && e.Elevated {
			c.Outcome, c.Rule = authority.Allow.String(), authority.RuleElevated.ID()
		}
		if c.Domains == nil {
			c.Domains = []string{}
		}
		if c.Attestations == nil {
			c.Attestations = []authority.Attestation{}
		}
		info.May[a.String()] = c
	}
	b, _ := json.Marshal(info)
	return &Response{OK: true, Data: b}
}

// authorize mints a single-use owner token for one action on the file's
// current content. Only the owner channel may (policy.DecideOwner).
func (s *controlServer) authorize(pid int, rel string, req Request) *Response {
	a, err := authority.ParseAction(req.For)
	if err != nil {
		return &Response{Error: err.Error(), Hint: "aerfs authorize FILE --for exec|control|promote"}
	}
	ttl := 10 * time.Minute
	if req.TTL != "" {
		if ttl, err = time.ParseDuration(req.TTL); err != nil || ttl <= 0 || ttl > authority.MaxTTL {
			return &Response{Error: fmt.Sprintf("bad --ttl %q: a duration up to %s", req.TTL, authority.MaxTTL)}
		}
	}
	peer := s.resolveCaller(pid)
	subj := peer.Subject()
	rec := &evidence.Record{Type: evidence.TypeVerdict, Principal: subj.Principal.String(), Taint: nonNil(subj.Taint.Names()),
		Meta: evidence.Meta{Path: rel, Op: "authorize", Session: subj.Session, Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID}}
	if v := policy.DecideOwner(subj); !v.Allow {
		rec.Meta.Verdict, rec.Meta.Rule = "deny", v.Rule.ID()
		rec.Meta.Reason = "minting a token for " + a.String() + ": " + v.Rule.Reason()
		s.m.Record(rec)
		r := refused(v, "authorization of "+rel+" refused")
		r.Hint = "only the owner, at a terminal outside every aerfs session, authorizes an action"
		if v.Rule == policy.RuleOwnerTaint {
			r.Hint = "authorize from a fresh terminal that has read nothing an agent or the web wrote"
		}
		return r
	}
	_, st, err := s.m.Authority().Of(rel)
	if err != nil {
		return &Response{Error: err.Error()}
	}
	w := authority.Writer{Principal: subj.Principal, Taint: subj.Taint, Identified: subj.Identified}
	tok, rule := s.m.Authority().Monitor().Mint(w, rel, st.Hash, a, time.Now(), ttl)
	rec.Meta.Rule = rule.ID()
	rec.Meta.Class = st.Class.String()
	rec.Meta.Reason = fmt.Sprintf("owner token for %s of content %.12s until %s", a, st.Hash, tok.Expiry.UTC().Format(time.RFC3339))
	if rule != authority.RuleMint {
		rec.Meta.Verdict, rec.Meta.Reason = "deny", rule.Reason()
		s.m.Record(rec)
		return &Response{Refused: true, Rule: rule.ID(), Error: "authorization of " + rel + " refused: " + rule.Reason()}
	}
	rec.Meta.Verdict = "allow"
	if _, err := s.m.Record(rec); err != nil {
		return &Response{Error: "the authorization could not be recorded: " + err.Error()}
	}
	s.m.Authority().Arm(rel, a, tok.Secret)
	b, _ := json.Marshal(AuthorizeResult{Token: tok.Secret, Path: rel, Hash: st.Hash.String(), Action: a.String(),
		Expiry: tok.Expiry.UTC().Format(time.RFC3339)})
	return &Response{OK: true, Data: b}
}

// authorizeCheck verifies and spends a token for an executor outside the
// mount.
func (s *controlServer) authorizeCheck(pid int, rel string, req Request) *Response {
	a, err := authority.ParseAction(req.For)
	if err != nil {
		return &Response{Error: err.Error(), Hint: "aerfs authorize --check TOKEN FILE --for exec|control|promote"}
	}
	peer := s.resolveCaller(pid)
	subj := peer.Subject()
	rule, err := s.m.Authority().Consume(req.Token, rel, a)
	if err != nil {
		return &Response{Error: err.Error()}
	}
	rec := &evidence.Record{Type: evidence.TypeVerdict, Principal: subj.Principal.String(), Taint: nonNil(subj.Taint.Names()),
		Meta: evidence.Meta{Path: rel, Op: "authorize-check", Verdict: "allow", Session: subj.Session, Pid: peer.Proc.ID.Tgid,
			Exe: peer.Proc.Exe, UID: peer.Proc.UID, Rule: rule.ID(), Reason: "owner token for " + a.String() + ": " + rule.Reason()}}
	if rule != authority.RuleToken {
		rec.Meta.Verdict = "deny"
		s.m.Record(rec)
		return &Response{Refused: true, Rule: rule.ID(), Error: "token refused for " + a.String() + " of " + rel + ": " + rule.Reason()}
	}
	if _, err := s.m.Record(rec); err != nil {
		return &Response{Error: "the use could not be recorded: " + err.Error()}
	}
	b, _ := json.Marshal(map[string]string{"path": rel, "action": a.String(), "rule": rule.ID()})
	return &Response{OK: true, Data: b}
}

// authorityConfig is the authority part of the policy for the mount.
func authorityConfig(p *policy.Policy) authority.Config {
	a := p.Authority()
	c := authority.Config{AgentScripts: a.AgentScripts, Attestors: a.Attestors}
	for x := authority.Action(0); x < authority.NumActions; x++ {
		c.K[x] = a.K
		if k := a.KFor[x.String()]; k > 0 {
			c.K[x] = k
		}
	}
	return c
}

// attest records the caller's attestation of the file's current content.
// The attestor is named by the id of the session it runs in (a TOOL_AUTH
// session the owner started: `aerfs run --principal TOOL_AUTH --session
// NAME -- aerfs attest FILE`), never by anything in the request.
func (s *controlServer) attest(pid int, rel string) *Response {
	peer := s.resolveCaller(pid)
	subj := peer.Subject()
	_, st, err := s.m.Authority().Of(rel)
	if err != nil {
		return &Response{Error: err.Error()}
	}
	w := authority.Writer{Principal: subj.Principal, Taint: subj.Taint, Identified: subj.Identified, Name: subj.Session}
	w.Session = guard.AuthorityKey(peer)
	// Attestors are the owner's tools, started outside every session: one
	// started from inside another session (an agent's, or any other) is
	// that session vouching for what it can write, not an independent
	// domain (AU4-untrusted).
	w.Agent = peer.Session != nil && (peer.Session.Agent() != "" || peer.Session.Parent() != nil)
	mon := s.m.Authority().Monitor()
	if st.Session != "" {
		// The label names the session that wrote the content, across
		// restarts; attestors are named by their session's id.
		mon.Produced(st.Hash, guard.SessionKey(st.Session), st.Session)
	}
	ar := mon.Attest(w, st.Hash)
	verdict := "allow"
	if !ar.Counted {
		verdict = "deny"
	}
	rec := &evidence.Record{Type: evidence.TypeVerdict, Principal: subj.Principal.String(), Taint: nonNil(subj.Taint.Names()),
		Meta: evidence.Meta{Path: rel, Op: "attest", Verdict: verdict, Session: subj.Session, Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe,
			UID: peer.Proc.UID, Rule: ar.Rule.ID(), Class: st.Class.String(),
			Reason: fmt.Sprintf("attestation of content %.12s by %q (domain %q): %s", st.Hash, subj.Session, ar.Domain, ar.Rule.Reason())},
		// What the next mount replays (replayAttestations).
		Payload: &evidence.Payload{Detail: attestDetail(st.Hash, ar.Domain)}}
	if _, err := s.m.Record(rec); err != nil {
		return &Response{Error: "the attestation could not be recorded: " + err.Error()}
	}
	b, _ := json.Marshal(map[string]any{"path": rel, "hash": st.Hash.String(), "rule": ar.Rule.ID(), "counted": ar.Counted, "domain": ar.Domain})
	if !ar.Counted {
		return &Response{Refused: true, Rule: ar.Rule.ID(), Error: "attestation of " + rel + " not counted: " + ar.Rule.Reason(), Data: b}
	}
	return &Response{OK: true, Data: b}
}

// attestDetail is an attestation record's payload detail: the content hash
// and the attestor's domain, which the next mount replays.
func attestDetail(h authority.Hash, domain string) string {
	return "sha256=" + h.String() + " domain=" + strconv.Quote(domain)
}

func parseAttestDetail(d string) (authority.Hash, string, bool) {
	hs, dom, ok := strings.Cut(d, " domain=")
	if !ok || !strings.HasPrefix(hs, "sha256=") {
		return authority.Hash{}, "", false
	}
	h, err := authority.ParseHash(strings.TrimPrefix(hs, "sha256="))
	if err != nil {
		return authority.Hash{}, "", false
	}
	dom, err = strconv.Unquote(dom)
	return h, dom, err == nil
}

// replayAttestation replays one attestation record into the mount's
// authority monitor (replayAttestations, state.go); a record whose detail
// does not parse is skipped.
func replayAttestation(mon *guarded, r *evidence.Record) bool {
	if r.Type != evidence.TypeVerdict || r.Meta.Op != "attest" || r.Payload == nil {
		return false
	}
	h, dom, ok := parseAttestDetail(r.Payload.Detail)
	rule, rok := authority.RuleByID(r.Meta.Rule)
	if !ok || !rok {
		return false
	}
	mon.Authority().Monitor().Replay(h, authority.Attestation{Name: r.Meta.Session, Domain: dom, Rule: rule, Counted: r.Meta.Verdict == "allow"})
	return true
}
