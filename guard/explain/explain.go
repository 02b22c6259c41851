package explain

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aerfs/aerfs/authority"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

const (
	keepRefusals = 10 // refusals kept per session or process
	keepVerdicts = 10 // records kept per path
	keepCauses   = 16 // taint causes kept per session or process
	maxPaths     = 1 << 16
)

// TaintCause says when and why a session or process gained taint.
type TaintCause struct {
	Time   time.Time `json:"time"`
	Taint  []string  `json:"taint"`
	Path   string    `json:"path,omitempty"`
	Exe    string    `json:"exe,omitempty"`
	Reason string    `json:"reason"`
	Record string    `json:"record"`
}

// Refusal is one refused operation, and where its content went.
type Refusal struct {
	Time    time.Time `json:"time"`
	Op      string    `json:"op"`
	Path    string    `json:"path,omitempty"`
	Rule    string    `json:"rule"`
	Reason  string    `json:"reason"`
	Record  string    `json:"record"`
	Pending string    `json:"pending,omitempty"` // the quarantined content's id (aerfs pending)
	Approve string    `json:"approve,omitempty"` // the command the owner would run
	Kept    string    `json:"kept"`              // where the refused content went, in words
}

// PathVerdict is one record about a path.
type PathVerdict struct {
	Time      time.Time `json:"time"`
	Type      string    `json:"type"`
	Op        string    `json:"op,omitempty"`
	Verdict   string    `json:"verdict,omitempty"`
	Rule      string    `json:"rule,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Principal string    `json:"principal"`
	Session   string    `json:"session,omitempty"`
	Pid       int       `json:"pid,omitempty"`
	Record    string    `json:"record"`
}

// Explanation is what .aerfs/status tells a caller about itself, and what
// `aerfs why` tells the owner about a session or a path.
type Explanation struct {
	Pid         int          `json:"pid,omitempty"`
	Session     string       `json:"session,omitempty"`
	Principal   string       `json:"principal"`
	Identified  bool         `json:"identified"`
	Started     time.Time    `json:"started,omitempty"`
	Ended       time.Time    `json:"ended,omitempty"`
	Confinement string       `json:"confinement,omitempty"`
	Taint       []string     `json:"taint"`
	TaintCauses []TaintCause `json:"taint_causes"`
	Quarantined bool         `json:"quarantined"`
	Quarantine  string       `json:"quarantine,omitempty"` // why, when quarantined
	Blocked     []string     `json:"blocked"`              // what the caller cannot do now, and why
	Refusals    []Refusal    `json:"refusals"`             // newest first

	// For a path (aerfs why PATH).
	Path      string `json:"path,omitempty"`
	Class     string `json:"class,omitempty"`
	Machinery bool   `json:"machinery,omitempty"` // the agent profile names the path as the client's own machinery
	Label     string `json:"label,omitempty"`
	// LabelRecord is the record that gave the file its label ("" for the
	// owner's clean content): aerfs restore --set-aside moves a file only
	// when it is one of the scope's.
	LabelRecord string        `json:"label_record,omitempty"`
	Verdicts    []PathVerdict `json:"verdicts,omitempty"` // newest first
}

// subjectLog is what the log says about one session or one process.
type subjectLog struct {
	causes      []TaintCause
	refusals    []Refusal
	confinement string
	burst       string // the burst record's reason, "" after a release
	burstSet    bool   // a burst or a release was seen
}

// Index follows the evidence log for the status file and aerfs why.
type Index struct {
	stateDir string
	flush    func() error

	mu      sync.Mutex
	next    int64
	subj    map[string]*subjectLog // "s:" session id or "p:" pid
	paths   map[string][]PathVerdict
	pending map[string]bool // quarantined ids still undecided
	// With a source (source.go), the log is followed from the mount on
	// (start) and what came before is read from the source when asked
	// for; paths are not kept at all.
	src    Source
	start  int64
	loaded map[string]bool // sessions whose records before start were read
}

// New follows the evidence log in stateDir; flush makes everything queued
// so far readable first.
func New(stateDir string, flush func() error) *Index {
	return &Index{stateDir: stateDir, flush: flush, subj: map[string]*subjectLog{}, paths: map[string][]PathVerdict{}, pending: map[string]bool{}}
}

// update reads what was appended to the log since the last update. Called
// with x.mu held.
func (x *Index) update() {
	x.flush()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one pass over what is there, no waiting for more
	evidence.Follow(ctx, x.stateDir, x.next, func(idx int64, id string, r *evidence.Record) error {
		x.add(id, r)
		x.next = idx + 1
		return nil
	})
	if x.src != nil && len(x.subj) > maxSubjects {
		x.sweep()
	}
}

func subjKey(session string, pid int) string {
	if session != "" {
		return "s:" + session
	}
	return fmt.Sprintf("p:%d", pid)
}

func (x *Index) get(k string) *subjectLog {
	s := x.subj[k]
	if s == nil {
		s = &subjectLog{}
		x.subj[k] = s
	}
	return s
}

func (x *Index) add(id string, r *evidence.Record) {
	t, _ := evidence.ParseTime(r.Meta.Time)
	m := r.Meta
	path := m.FilePath()
	switch {
	case r.Type == evidence.TypeSessionStart && m.Verdict == "allow":
		s := x.get(subjKey(m.Session, 0))
		if r.Payload != nil {
			s.confinement = strings.TrimPrefix(r.Payload.Detail, "sandbox: ")
		}
		if len(r.Taint) > 0 {
			s.causes = appendCause(s.causes, TaintCause{Time: t, Taint: r.Taint, Exe: m.ExePath(), Record: id,
				Reason: "the session started as " + r.Principal + " carrying this taint (its principal's origin, or what the starting process carried)"})
		}
	case r.Type == evidence.TypeTaint:
		s := x.get(subjKey(m.Session, m.Pid))
		s.causes = appendCause(s.causes, TaintCause{Time: t, Taint: r.Taint, Path: path, Exe: m.ExePath(), Reason: m.Reason, Record: id})
	case m.Op == "burst" && m.Rule == policy.RuleBurst.ID():
		s := x.get(subjKey(m.Session, 0))
		s.burst, s.burstSet = m.Time+": "+m.Reason, true
	case m.Op == "session-release" && m.Verdict == "allow":
		s := x.get(subjKey(m.Session, 0))
		s.burst, s.burstSet = "", true
	case (r.Type == evidence.TypeVerdict || r.Type == evidence.TypeQuarantine) && m.Verdict == "deny" && m.Rule != "":
		if m.Op == "burst" {
			break
		}
		ref := Refusal{Time: t, Op: m.Op, Path: path, Rule: m.Rule, Reason: m.Reason, Record: id,
			Kept: "nothing was kept: the operation was refused before any content reached aerfs"}
		if r.Type == evidence.TypeQuarantine && r.Payload != nil && r.Payload.NewHash != "" {
			ref.Pending = id
			ref.Approve = "aerfs approve " + id[:12]
			ref.Kept = "the refused content is kept in quarantine as pending " + id[:12] +
				"; the owner reviews it with 'aerfs pending' and commits it with '" + ref.Approve + "'"
			x.pending[id] = true
		}
		s := x.get(subjKey(m.Session, m.Pid))
		if n := len(s.refusals); n > 0 && sameRefusal(s.refusals[n-1], ref) {
			// One refusal, two records (the verdict, and the quarantine
			// that kept its content): show it once, with where it went.
			if ref.Pending != "" {
				s.refusals[n-1] = ref
			}
			break
		}
		s.refusals = append(s.refusals, ref)
		if len(s.refusals) > keepRefusals {
			s.refusals = s.refusals[len(s.refusals)-keepRefusals:]
		}
	case r.Type == evidence.TypeApprove || r.Type == evidence.TypeReject:
		if len(r.Parents) > 0 {
			delete(x.pending, r.Parents[0])
		}
	}
	if path == "" && r.Payload != nil {
		path = r.Payload.ToPath()
	}
	if path == "" || strings.HasPrefix(path, "/") || x.src != nil || x.paths == nil {
		return
	}
	if _, ok := x.paths[path]; !ok && len(x.paths) >= maxPaths {
		return
	}
	pv := PathVerdict{Time: t, Type: r.Type, Op: m.Op, Verdict: m.Verdict, Rule: m.Rule, Reason: m.Reason,
		Principal: r.Principal, Session: m.Session, Pid: m.Pid, Record: id}
	v := append(x.paths[path], pv)
	if len(v) > keepVerdicts {
		v = v[len(v)-keepVerdicts:]
	}
	x.paths[path] = v
}

func appendCause(c []TaintCause, tc TaintCause) []TaintCause {
	c = append(c, tc)
	if len(c) > keepCauses {
		c = c[len(c)-keepCauses:]
	}
	return c
}

// explainLog fills e from what the log says about key: its taint causes,
// and its refusals when own (the session itself, not one it was started
// from).
func (x *Index) explainLog(e *Explanation, key string, own bool) {
	x.loadBefore(key)
	s := x.subj[key]
	if s == nil {
		return
	}
	if e.Confinement == "" {
		e.Confinement = s.confinement
	}
	e.TaintCauses = append(e.TaintCauses, s.causes...)
	for i := len(s.refusals) - 1; own && i >= 0; i-- {
		ref := s.refusals[i]
		if ref.Pending != "" && !x.pending[ref.Pending] {
			ref.Kept = "the refused content was kept as pending " + ref.Pending[:12] + "; the owner has decided it since (approved or rejected)"
			ref.Approve = ""
		}
		e.Refusals = append(e.Refusals, ref)
	}
	if e.Quarantined && s.burst != "" {
		e.Quarantine = s.burst
	}
}

// Process tells res about itself: what .aerfs/status shows it.
func (x *Index) Process(res *principal.Resolved, pol *policy.Policy) *Explanation {
	subj := res.Subject()
	e := &Explanation{Identified: subj.Identified, Principal: subj.Principal.String(), Taint: ledger.TaintNames(subj.Taint),
		TaintCauses: []TaintCause{}, Refusals: []Refusal{}, Blocked: []string{}}
	if !subj.Identified {
		e.Principal = policy.External.String()
		e.Blocked = append(e.Blocked, "every change of a guarded file: this process could not be identified ("+res.Reason+") (R9-unidentified)")
		return e
	}
	e.Pid = res.Proc.ID.Tgid
	x.mu.Lock()
	defer x.mu.Unlock()
	x.update()
	if s := res.Session; s != nil {
		e.Quarantined = s.Quarantined()
		if !s.Implicit {
			e.Session, e.Started, e.Ended = s.ID, s.Started, s.Ended()
			e.Confinement = s.Confinement()
			for p := s; p != nil; p = p.Parent() {
				x.explainLog(e, subjKey(p.ID, 0), p == s)
			}
		} else {
			x.explainLog(e, subjKey("", s.Root.Tgid), true)
		}
	}
	if res.Session == nil || (res.Session.Implicit && res.Session.Root.Tgid != e.Pid) {
		x.explainLog(e, subjKey("", e.Pid), true)
	}
	sortCauses(e.TaintCauses)
	sortRefusals(e.Refusals)
	fillBlocked(e, subj, pol)
	return e
}

// Session is Process for a session, from the owner's channel.
func (x *Index) Session(s *principal.Session, pol *policy.Policy) *Explanation {
	subj := policy.Subject{Principal: s.Principal, Session: s.ID, Taint: s.Taint(), Identified: true}
	e := &Explanation{Identified: true, Session: s.ID, Principal: s.Principal.String(), Taint: ledger.TaintNames(s.Taint()),
		Started: s.Started, Ended: s.Ended(), Confinement: s.Confinement(), Quarantined: s.Quarantined(),
		TaintCauses: []TaintCause{}, Refusals: []Refusal{}, Blocked: []string{}}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.update()
	for p := s; p != nil; p = p.Parent() {
		x.explainLog(e, subjKey(p.ID, 0), p == s)
	}
	sortCauses(e.TaintCauses)
	fillBlocked(e, subj, pol)
	return e
}

// Path tells the owner about rel: its class, whether it is the client's
// machinery, its label (l; present: the file exists), and the last records
// about it.
func (x *Index) Path(rel string, class policy.Class, machinery bool, l *label.Label, present bool) *Explanation {
	e := &Explanation{Path: rel, Taint: []string{}, TaintCauses: []TaintCause{}, Refusals: []Refusal{}, Blocked: []string{}, Verdicts: []PathVerdict{}}
	e.Class, e.Machinery = class.String(), machinery
	if present && l != nil {
		e.LabelRecord = l.Record
	}
	switch {
	case !present:
		e.Label = "absent"
	case l.Clean():
		e.Label = "the owner's or a clean writer's: whoever reads it gains no taint"
	default:
		e.Label = fmt.Sprintf("origin %s, taint %s: whoever reads it gains %s", l.Origin, orNone(l.ReadTaint()), orNone(l.ReadTaint()))
		if l.Origin == policy.External {
			e.Label += "; it changed outside the mount: after reviewing it, 'aerfs adopt " + rel + "' accepts it as the owner's"
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.update()
	if x.src != nil {
		e.Verdicts = x.pathVerdicts(rel)
		return e
	}
	v := x.paths[rel]
	for i := len(v) - 1; i >= 0; i-- {
		e.Verdicts = append(e.Verdicts, v[i])
	}
	return e
}

func orNone(t policy.Taint) string {
	if t == 0 {
		return "none"
	}
	return t.String()
}

// fillBlocked says, in words, what the caller cannot do now.
func fillBlocked(e *Explanation, subj policy.Subject, pol *policy.Policy) {
	if e.Quarantined {
		e.Blocked = append(e.Blocked, "every change, plain files included: the session is quarantined after a burst of refusals ("+policy.RuleBurst.ID()+"); only the owner can lift it (aerfs session release "+e.Session+")")
	}
	// Words, not a decision (only the gate decides): rules 2 and 3 as the
	// policy states them.
	if t := subj.Taint & pol.Blocking(); t != 0 {
		e.Blocked = append(e.Blocked, fmt.Sprintf("changing memory and control files: %s (%s, this session carries %s)", policy.RuleTaint.Reason(), policy.RuleTaint.ID(), t))
	}
	if !subj.Principal.Trusted() {
		e.Blocked = append(e.Blocked, fmt.Sprintf("changing memory and control files: %s (%s)", policy.RulePrincipal.Reason(), policy.RulePrincipal.ID()))
	}
	e.Blocked = append(e.Blocked, "changing identity files (SOUL.md, IDENTITY.md): "+policy.RuleImmutable.Reason()+" ("+policy.RuleImmutable.ID()+"); the owner changes them with 'aerfs edit'")
}

// Text renders e for people and agents.
func (e *Explanation) Text() string {
	var b strings.Builder
	when := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	if e.Path != "" {
		fmt.Fprintf(&b, "path:        %s\nclass:       %s\n", e.Path, e.Class)
		if e.Machinery {
			fmt.Fprintf(&b, "machinery:   yes: the agent profile names this path as the client's own; what an untainted agent session writes here runs and becomes configuration (%s), what a session that read untrusted content writes here is refused as anywhere\n", authority.RuleMachinery.ID())
		}
		fmt.Fprintf(&b, "label:       %s\n", e.Label)
		if len(e.Verdicts) == 0 {
			b.WriteString("records:     none\n")
			return b.String()
		}
		b.WriteString("last records (newest first):\n")
		for _, v := range e.Verdicts {
			fmt.Fprintf(&b, "  %s  %-10s %-12s %-6s %-14s by %s", when(v.Time), v.Type, v.Op, v.Verdict, v.Rule, v.Principal)
			if v.Session != "" {
				fmt.Fprintf(&b, " session %s", v.Session)
			}
			if v.Reason != "" {
				fmt.Fprintf(&b, ": %s", v.Reason)
			}
			fmt.Fprintf(&b, "  [%.12s]\n", v.Record)
		}
		return b.String()
	}
	if e.Pid != 0 {
		fmt.Fprintf(&b, "aerfs: what this workspace's guard knows about the process reading this (pid %d)\n", e.Pid)
	}
	sess := e.Session
	if sess == "" {
		sess = "none (outside every agent session)"
	}
	fmt.Fprintf(&b, "session:     %s\nprincipal:   %s\n", sess, e.Principal)
	if !e.Started.IsZero() {
		fmt.Fprintf(&b, "started:     %s\n", when(e.Started))
	}
	if !e.Ended.IsZero() {
		fmt.Fprintf(&b, "ended:       %s (by the owner)\n", when(e.Ended))
	}
	if e.Confinement != "" {
		fmt.Fprintf(&b, "confinement: %s\n", e.Confinement)
	}
	if len(e.Taint) == 0 {
		b.WriteString("taint:       none\n")
	} else {
		fmt.Fprintf(&b, "taint:       %s\n", strings.Join(e.Taint, "|"))
		for _, c := range e.TaintCauses {
			fmt.Fprintf(&b, "  %s  +%s: %s", when(c.Time), strings.Join(c.Taint, "|"), c.Reason)
			if c.Path != "" {
				fmt.Fprintf(&b, " (%s)", c.Path)
			} else if c.Exe != "" {
				fmt.Fprintf(&b, " (%s)", c.Exe)
			}
			b.WriteString("\n")
		}
	}
	if e.Quarantined {
		fmt.Fprintf(&b, "quarantine:  QUARANTINED %s\n", e.Quarantine)
	} else {
		b.WriteString("quarantine:  no\n")
	}
	if len(e.Blocked) > 0 {
		b.WriteString("refused now:\n")
		for _, s := range e.Blocked {
			fmt.Fprintf(&b, "  - %s\n", s)
		}
	}
	if len(e.Refusals) == 0 {
		b.WriteString("refusals:    none\n")
		return b.String()
	}
	b.WriteString("last refusals (newest first):\n")
	for _, r := range e.Refusals {
		fmt.Fprintf(&b, "  %s  %s %s refused, rule %s: %s\n", when(r.Time), r.Op, r.Path, r.Rule, r.Reason)
		fmt.Fprintf(&b, "      %s\n", r.Kept)
	}
	return b.String()
}

// sortRefusals orders refusals newest first (several keys merged).
func sortRefusals(r []Refusal) {
	sort.SliceStable(r, func(i, j int) bool { return r[i].Time.After(r[j].Time) })
}

func sortCauses(c []TaintCause) {
	sort.SliceStable(c, func(i, j int) bool { return c[i].Time.Before(c[j].Time) })
}

// sameRefusal reports whether a and b are records of one refusal.
func sameRefusal(a, b Refusal) bool {
	d := a.Time.Sub(b.Time)
	return a.Op == b.Op && a.Path == b.Path && a.Rule == b.Rule && (a.Pending == "") != (b.Pending == "") && d < time.Second && d > -time.Second
}
