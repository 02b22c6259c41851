package daemon

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard"
	"github.com/aerfs/aerfs/guard/explain"
	"github.com/aerfs/aerfs/logindex"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// # Sessions, explanations and the owner's changes
//
// session-list, why and the sessions of status: any identified caller may
// ask; a session sees only itself and the sessions started from within it,
// the owner's channel everything. session-release, session-end, edit-get, edit and adopt: the
// owner's channel only (RO-owner), recorded either way.

// RuleOwner is the rule id of the owner's channel requests: refused from
// anywhere else, and the rule the owner's own changes are recorded under.
var RuleOwner = policy.RuleOwner.ID()

// SessionInfo is one session as `aerfs session list` shows it.
type SessionInfo struct {
	ID          string               `json:"id"`
	Principal   string               `json:"principal"`
	Parent      string               `json:"parent,omitempty"`
	Taint       []string             `json:"taint"`
	TaintCauses []explain.TaintCause `json:"taint_causes"`
	Quarantined bool                 `json:"quarantined"`
	Quarantine  string               `json:"quarantine,omitempty"`
	Confinement string               `json:"confinement,omitempty"`
	Started     time.Time            `json:"started"`
	Ended       time.Time            `json:"ended,omitempty"`
	Live        int                  `json:"live_processes"`
	Refusals    int                  `json:"recent_refusals"`
	LastRefusal *explain.Refusal     `json:"last_refusal,omitempty"`
}

// EditFile is what edit-get answers: the content the owner edits.
type EditFile struct {
	Path    string `json:"path"`
	Class   string `json:"class"`
	Content []byte `json:"content"`
	Hash    string `json:"hash"` // "" = absent
}

func (s *controlServer) ownerRequest(pid int, req Request) *Response {
	switch req.Op {
	case "session-list":
		return s.sessionList(pid, req.All)
	case "why":
		return s.why(pid, req)
	}
	peer, refusal := s.ownerChannel(pid, req.Op)
	if refusal != nil {
		return refusal
	}
	switch req.Op {
	case "session-release":
		return s.sessionRelease(peer, req)
	case "session-end":
		return s.sessionEnd(peer, req)
	case "edit-get":
		return s.editGet(req)
	case "edit":
		return s.edit(peer, req)
	case "adopt":
		return s.adopt(peer, req)
	}
	return &Response{Error: fmt.Sprintf("unknown request %q", req.Op)}
}

// visibleTo says whether the caller may see session x: the owner's
// channel every session, a session itself and those started from it.
func visibleTo(peer *principal.Resolved, x *principal.Session) bool {
	subj := peer.Subject()
	if !subj.Identified {
		return false
	}
	if peer.Session == nil || peer.Session.Implicit {
		return subj.Principal.Trusted()
	}
	return x.Within(peer.Session)
}

func (s *controlServer) sessionList(pid int, all bool) *Response {
	peer := s.resolveCaller(pid)
	out := []SessionInfo{}
	listed := map[string]bool{}
	for _, x := range s.reg.Sessions() {
		if !visibleTo(peer, x) {
			continue
		}
		listed[x.ID] = true
		e := s.m.Explain(guard.Question{Session: x})
		// What aerfs run reported and the kernel shows (status's view),
		// never only what the registration announced: a process that
		// speaks the protocol itself can announce anything.
		conf := s.shared.conf.describe(x.ID)
		if strings.HasPrefix(conf, "unknown") && e.Confinement != "" {
			conf = "announced " + e.Confinement + " (registered before this mount: not verified)"
		}
		si := SessionInfo{ID: x.ID, Principal: x.Principal.String(), Taint: e.Taint, TaintCauses: e.TaintCauses,
			Quarantined: e.Quarantined, Quarantine: e.Quarantine, Confinement: conf,
			Started: x.Started, Ended: e.Ended, Live: s.reg.Live(x), Refusals: len(e.Refusals)}
		if p := x.Parent(); p != nil && !p.Implicit {
			si.Parent = p.ID
		}
		if len(e.Refusals) > 0 {
			si.LastRefusal = &e.Refusals[0]
		}
		out = append(out, si)
	}
	if all {
		out = append(out, s.retiredSessions(peer, listed)...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	b, _ := json.Marshal(out)
	return &Response{OK: true, Data: b}
}

// retiredSessions lists, from the log's index, the sessions the registry
// does not hold (ended and retired, or registered by an earlier mount)
// that the caller may see: the owner's channel every one, a session those
// started from within it.
func (s *controlServer) retiredSessions(peer *principal.Resolved, listed map[string]bool) []SessionInfo {
	if s.index == nil {
		return nil
	}
	var out []SessionInfo
	s.index.EachSession(func(x *logindex.Session) error {
		if listed[x.ID] || !visibleArchived(peer, s.index, x) {
			return nil
		}
		si := SessionInfo{ID: x.ID, Principal: x.Principal, Parent: x.Parent, Taint: nonNil(x.Taint),
			TaintCauses: []explain.TaintCause{}, Started: time.Unix(0, x.Started).UTC(),
			Confinement: "announced " + strings.TrimPrefix(x.Detail, "sandbox: ") + " (ended: not verified)"}
		if x.Ended != 0 {
			si.Ended = time.Unix(0, x.Ended).UTC()
		}
		out = append(out, si)
		return nil
	})
	return out
}

// visibleArchived is visibleTo for a session the registry does not hold.
func visibleArchived(peer *principal.Resolved, x *logindex.Index, a *logindex.Session) bool {
	subj := peer.Subject()
	if !subj.Identified {
		return false
	}
	if peer.Session == nil || peer.Session.Implicit {
		return subj.Principal.Trusted()
	}
	for i, id := 0, a.ID; id != "" && i < 64; i++ {
		if id == peer.Session.ID {
			return true
		}
		p, ok := x.Session(id)
		if !ok {
			return false
		}
		id = p.Parent
	}
	return false
}

func (s *controlServer) lookupSession(id string) (*principal.Session, *Response) {
	if id == "" {
		return nil, &Response{Error: "no session named", Hint: "aerfs session list shows them"}
	}
	x := s.reg.Session(id)
	if x == nil {
		return nil, &Response{Error: fmt.Sprintf("no session %q", id), Hint: "aerfs session list shows them"}
	}
	return x, nil
}

// ownerRecord is a record of the owner's channel acting.
func ownerRecord(peer *principal.Resolved, typ, op, session, path, reason string) *evidence.Record {
	subj := peer.Subject()
	return &evidence.Record{Type: typ, Principal: subj.Principal.String(), Taint: nonNil(subj.Taint.Names()),
		Meta: evidence.Meta{Op: op, Verdict: "allow", Rule: RuleOwner, Session: session, Path: path,
			Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID, Reason: reason}}
}

func (s *controlServer) sessionRelease(peer *principal.Resolved, req Request) *Response {
	x, errResp := s.lookupSession(req.Session)
	if errResp != nil {
		return errResp
	}
	if !x.Quarantined() {
		return &Response{Error: fmt.Sprintf("session %s is not quarantined", x.ID), Hint: "aerfs session list shows which are"}
	}
	released := x.Release()
	s.m.Release(released...)
	// The refusals are counted against the root of the session tree.
	s.m.Release(x.TreeRoot().ID)
	reason := "the owner lifted the burst quarantine of " + strings.Join(released, ", ") +
		"; what the burst rolled back stays rolled back, and the taint stays"
	if _, err := s.m.Record(ownerRecord(peer, evidence.TypeVerdict, "session-release", x.ID, "", reason)); err != nil {
		return &Response{Error: "cannot record the release: " + err.Error()}
	}
	b, _ := json.Marshal(map[string]any{"session": x.ID, "released": released, "taint": nonNil(x.Taint().Names())})
	return &Response{OK: true, Data: b}
}

func (s *controlServer) sessionEnd(peer *principal.Resolved, req Request) *Response {
	x, errResp := s.lookupSession(req.Session)
	if errResp != nil {
		return errResp
	}
	left, err := s.reg.End(x, 5*time.Second)
	if err != nil {
		return &Response{Error: fmt.Sprintf("cannot end session %s: %v", x.ID, err)}
	}
	reason := "the owner ended the session: its processes and those of the sessions started from it were killed"
	if left > 0 {
		reason += fmt.Sprintf(" (%d still exiting)", left)
	}
	rec := ownerRecord(peer, evidence.TypeSessionEnd, "session-end", x.ID, "", reason)
	rec.Taint = nonNil(x.Taint().Names())
	_, err = s.m.Record(rec)
	x.MarkEnded(time.Now()) // after its record: retired only once its end is recorded
	if err != nil {
		return &Response{Error: "cannot record the end: " + err.Error()}
	}
	b, _ := json.Marshal(map[string]any{"session": x.ID, "left": left})
	return &Response{OK: true, Data: b}
}

// why explains the caller itself, a session (--session) or a path.
func (s *controlServer) why(pid int, req Request) *Response {
	peer := s.resolveCaller(pid)
	var e *explain.Explanation
	switch {
	case req.Session != "":
		x, errResp := s.lookupSession(req.Session)
		if errResp != nil {
			return errResp
		}
		if !visibleTo(peer, x) {
			return s.refuseOwner(peer, "why", "a session sees only itself and the sessions started from within it; the owner's channel every session")
		}
		e = s.m.Explain(guard.Question{Session: x})
	case req.Path != "":
		rel, errResp := cleanRel(req.Path)
		if errResp != nil {
			return errResp
		}
		if subj := peer.Subject(); !subj.Identified || subj.Session != "" || !subj.Principal.Trusted() {
			return s.refuseOwner(peer, "why", "only the owner's channel (outside every session) may ask about a path; a session reads .aerfs/status")
		}
		e = s.m.Explain(guard.Question{Path: rel})
		s.addTaintCauses(e)
	default:
		e = s.m.Explain(guard.Question{Process: peer})
	}
	b, _ := json.Marshal(e)
	return &Response{OK: true, Data: b}
}

// refuseOwner records and refuses a request a session may not make.
func (s *controlServer) refuseOwner(peer *principal.Resolved, what, why string) *Response {
	subj := peer.Subject()
	s.m.Record(&evidence.Record{Type: evidence.TypeVerdict, Principal: subj.Principal.String(), Taint: nonNil(subj.Taint.Names()),
		Meta: evidence.Meta{Op: what, Verdict: "deny", Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID,
			Session: subj.Session, Rule: RuleOwner, Reason: why}})
	return &Response{Refused: true, Rule: RuleOwner, Error: what + " refused: " + why,
		Hint: "run it from your own terminal, not from an agent session"}
}

func cleanRel(p string) (string, *Response) {
	rel := path.Clean(strings.TrimPrefix(p, "./"))
	if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || strings.HasPrefix(rel, "/") {
		return "", &Response{Error: fmt.Sprintf("%s is not inside the workspace", p)}
	}
	return rel, nil
}

func (s *controlServer) editGet(req Request) *Response {
	rel, errResp := cleanRel(req.Path)
	if errResp != nil {
		return errResp
	}
	c, _, _ := s.m.Policy().Classify(rel)
	if !c.Guarded() {
		return &Response{Error: fmt.Sprintf("%s is not guarded (class %s): edit it directly", rel, c)}
	}
	h, err := s.m.hashOf(rel)
	if err != nil {
		return &Response{Error: err.Error()}
	}
	f := EditFile{Path: rel, Class: c.String(), Hash: h, Content: []byte{}}
	if h != "" {
		if f.Content, err = s.m.Blob(h); err != nil {
			return &Response{Error: err.Error()}
		}
	}
	b, _ := json.Marshal(f)
	return &Response{OK: true, Data: b}
}

func (s *controlServer) edit(peer *principal.Resolved, req Request) *Response {
	rel, errResp := cleanRel(req.Path)
	if errResp != nil {
		return errResp
	}
	recoveryMu.Lock()
	defer recoveryMu.Unlock()
	base := req.BaseHash
	res, err := s.m.Change(guard.Change{Path: rel, Data: req.Content, Base: &base, Record: func(f guard.Found) *evidence.Record {
		rec := ownerRecord(peer, evidence.TypeWrite, "owner-edit", "", rel, "the owner changed it with aerfs edit, from outside every session")
		rec.Payload = &evidence.Payload{OldHash: f.Old, NewHash: f.New}
		return rec
	}})
	h, id := res.New, res.ID
	if err != nil {
		return &Response{Error: err.Error(), Hint: "run aerfs edit " + rel + " again"}
	}
	b, _ := json.Marshal(map[string]string{"path": rel, "old_hash": req.BaseHash, "new_hash": h, "record": id})
	return &Response{OK: true, Data: b}
}

func (s *controlServer) adopt(peer *principal.Resolved, req Request) *Response {
	rel, errResp := cleanRel(req.Path)
	if errResp != nil {
		return errResp
	}
	recoveryMu.Lock()
	defer recoveryMu.Unlock()
	res, err := s.m.Change(guard.Change{Kind: guard.Adopt, Path: rel, Record: func(f guard.Found) *evidence.Record {
		old := f.Label
		rec := ownerRecord(peer, evidence.TypeDeclassify, "adopt", "", rel,
			fmt.Sprintf("the owner adopted the current content as theirs: label origin %s taint %s removed", old.Origin, orNone(old.Taint)))
		rec.Taint = nonNil(old.Taint.Names())
		rec.Payload = &evidence.Payload{NewHash: f.New, Detail: "adopted"}
		return rec
	}})
	old, h, id := res.Label, res.New, res.ID
	if err != nil {
		return &Response{Error: err.Error(), Hint: "aerfs why " + rel + " shows its label"}
	}
	b, _ := json.Marshal(map[string]string{"path": rel, "hash": h, "origin": old.Origin.String(), "taint": orNone(old.Taint), "record": id})
	return &Response{OK: true, Data: b}
}

func orNone(t policy.Taint) string {
	if t == 0 {
		return "none"
	}
	return t.String()
}

// registerNoting is register, answering also whether the session existed
// and, if so, what it already carries: aerfs run says so when it joins a
// tainted or quarantined session.
func (s *controlServer) registerNoting(pid int, req Request) *Response {
	existed := req.Session != "" && s.reg.Session(req.Session) != nil
	resp := s.register(pid, req)
	if !resp.OK {
		return resp
	}
	var d map[string]any
	if json.Unmarshal(resp.Data, &d) != nil {
		return resp
	}
	x := s.reg.Session(fmt.Sprint(d["session"]))
	if x == nil {
		return resp
	}
	if !existed {
		x.SetConfinement(req.Sandbox)
	}
	d["joined"] = existed
	d["taint"] = nonNil(x.Taint().Names())
	d["quarantined"] = x.Quarantined()
	resp.Data, _ = json.Marshal(d)
	return resp
}

// addTaintCauses says, in each R2-taint refusal of a path's explanation,
// where its session's taint came from ("tainted by example.org via the
// proxy", "read a labelled file (page.txt)"): the owner reading aerfs why
// MEMORY.md sees the source, not only the rule.
func (s *controlServer) addTaintCauses(e *explain.Explanation) {
	causes := map[string]string{}
	for i := range e.Verdicts {
		v := &e.Verdicts[i]
		if v.Rule != policy.RuleTaint.ID() || v.Session == "" {
			continue
		}
		c, ok := causes[v.Session]
		if !ok {
			c = s.taintCauses(v.Session)
			causes[v.Session] = c
		}
		if c != "" {
			v.Reason += "; where its taint came from: " + c
		}
	}
}

// taintCauses says, in the log's words, what tainted session id (at most
// four distinct causes; "" when the session is unknown or untainted).
func (s *controlServer) taintCauses(id string) string {
	x := s.reg.Session(id)
	if x == nil {
		return ""
	}
	var seen []string
	for _, tc := range s.m.Explain(guard.Question{Session: x}).TaintCauses {
		why := tc.Reason
		if tc.Path != "" {
			why += " (" + tc.Path + ")"
		}
		if !slices.Contains(seen, why) && len(seen) < 4 {
			seen = append(seen, why)
		}
	}
	return strings.Join(seen, "; ")
}
