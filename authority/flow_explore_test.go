package authority

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aerfs/aerfs/policy"
)

// The label-flow explorer models how labels follow content through the
// operations of the mount — writes resolved at flush, readers holding a
// file open, copies, renames of files and directories, symlinks,
// interpreter reads, promotion of a directory and files created while
// unmounted — and drives the real policy (Classify and Decide of the
// shipped default policy) and the real act gate (Config.Base, Check) at
// every decision. Ghost state records which content truly derives from a
// WEB origin, and every transition is checked against:
//
//	no content of untrusted origin reaches a memory or control name, or
//	the shared namespace, through the mount; none is executed, by exec or
//	by an interpreter.
//
// The model is the label flow of DESIGN.md §6 ("Labels flow in one place",
// "Execution has many doors"); each flowRules field is one of its rules.
// With every rule the explorer finds no violation; with one removed it
// finds the shortest witness of the attack that rule answers.

// flowRules are the label-flow rules, one per attack they answer.
type flowRules struct {
	staleReaders   bool // writing untrusted content taints the processes holding the file open for reading
	flushResolve   bool // a plain file's label is computed at flush, from the writer as it is then, not at open
	flushTaint     bool // the label computed at flush carries the writer's taint, not only its lowered class
	dirWalk        bool // a directory rename walks every file through the gate and the act gate
	symlinkControl bool // a session cannot make a symlink at a control name
	renameKeeps    bool // a rename keeps the source's label (it may only lower it), never the renamer's
	interpGate     bool // an interpreter's read of a file it runs is an exec for the act gate
	promoteWalk    bool // promotion of a directory walks every file through the gate and the act gate
	driftLabel     bool // a guarded file found created while unmounted is drift: labelled EXTERNAL
}

var allFlowRules = flowRules{true, true, true, true, true, true, true, true, true}

// The paths of the model, classified by the shipped default policy.
const (
	fpX        = iota // notes/x: plain
	fpY               // notes/y: plain
	fpMem             // MEMORY.md: memory
	fpSkill           // skills/s: control
	fpSettings        // .claude/settings.json: control, where a symlink may be made
	fpStage           // stage/d/f: plain, in a directory a rename moves to skills/d
	fpSkillDir        // skills/d/f: control
	fpSess            // sessions/a/d/f: session a's namespace, promoted to shared/d
	fpShared          // shared/d/f: the shared namespace
	fpN
)

var fPaths = [fpN]string{"notes/x", "notes/y", "MEMORY.md", "skills/s", ".claude/settings.json", "stage/d/f", "skills/d/f", "sessions/a/d/f", "shared/d/f"}

// The subjects: a WEB session and two USER sessions; the owner (outside
// every session) only promotes.
const (
	fsWeb = iota
	fsA
	fsB
	fsN
)

var fSessNames = [fsN]string{"w", "a", "b"}

type fLabel struct {
	set    bool
	taint  policy.Taint
	origin policy.Principal
	class  Class
}

type fFile struct {
	exists  bool
	link    int8 // the path a symlink points to, or -1
	derived bool // ghost: the content derives from a WEB origin
	label   fLabel
}

type fSess struct {
	taint   policy.Taint
	floor   Class
	derived bool   // ghost: the session has seen WEB-derived content
	reads   uint16 // files it holds open for reading
	wOpen   int8   // the file it holds open for writing, or -1
	wTaint  policy.Taint
	wClass  Class
	wOrigin policy.Principal
}

type fState struct {
	files [fpN]fFile
	sess  [fsN]fSess
}

type flowModel struct {
	rules flowRules
	pol   *policy.Policy
	cfg   Config
	class [fpN]policy.Class
	ns    [fpN]policy.Namespace
	nsID  [fpN]string
}

func newFlowModel(r flowRules) *flowModel {
	m := &flowModel{rules: r, pol: policy.Default()}
	for p := range fPaths {
		m.class[p], m.ns[p], m.nsID[p] = m.pol.Classify(fPaths[p])
	}
	return m
}

func (m *flowModel) initState() fState {
	var s fState
	for p := range s.files {
		s.files[p].link = -1
	}
	for _, p := range []int{fpX, fpMem, fpSkill} {
		s.files[p].exists = true // the owner's, unlabelled
	}
	for i := range s.sess {
		s.sess[i].floor, s.sess[i].wOpen = Act, -1
	}
	return s
}

func principalOf(si int) policy.Principal {
	if si == fsWeb {
		return policy.Web
	}
	return policy.User
}

func (m *flowModel) subject(s *fState, si int) policy.Subject {
	return policy.Subject{Principal: principalOf(si), Taint: s.sess[si].taint, Session: fSessNames[si], Identified: true}
}

// writerLabel is the label a write by session si binds now: its taint and
// origin's, and the class the act gate's Base gives it, lowered to what the
// session read.
func (m *flowModel) writerLabel(s *fState, si int) fLabel {
	pr := principalOf(si)
	w := Writer{Principal: pr, Taint: s.sess[si].taint, Session: fSessNames[si], Identified: true}
	c, _ := m.cfg.Base(&w)
	return fLabel{set: true, taint: s.sess[si].taint | policy.OriginTaint(pr), origin: pr, class: Min(c, s.sess[si].floor)}
}

func (m *flowModel) target(s *fState, p int) policy.Target {
	t := policy.Target{Class: m.class[p], Namespace: m.ns[p], Session: m.nsID[p]}
	if l := s.files[p].label; l.set {
		t.LabelTaint = l.taint
	}
	return t
}

// stamp is what the act gate sees for path p: an unlabelled file is act.
func stampOf(f *fFile) *Stamp {
	if !f.label.set {
		return &Stamp{Class: Act}
	}
	return &Stamp{Class: f.label.class}
}

func (m *flowModel) resolve(s *fState, p int) int {
	if l := s.files[p].link; l >= 0 {
		return int(l)
	}
	return p
}

// read is a read open of p by si: the label's taint and class flow into
// the session, and the content into its ghost.
func (m *flowModel) read(s *fState, si, p int) bool {
	t := m.resolve(s, p)
	if !s.files[t].exists {
		return false
	}
	v := m.pol.Decide(m.subject(s, si), policy.OpRead, m.target(s, t))
	if !v.Allow {
		return false
	}
	ss := &s.sess[si]
	ss.taint |= v.AddTaint
	if l := s.files[t].label; l.set {
		ss.floor = Min(ss.floor, l.class)
	}
	ss.derived = ss.derived || s.files[t].derived
	return true
}

// put places content with label l at t by an operation of the mount, and
// returns the paths whose content changed (t and the symlinks to it).
func (m *flowModel) put(s *fState, t int, derived bool, l fLabel) []int {
	f := &s.files[t]
	f.exists, f.derived, f.label, f.link = true, derived, l, -1
	if m.rules.staleReaders && l.taint != 0 {
		for i := range s.sess {
			if s.sess[i].reads&(1<<t) != 0 {
				s.sess[i].taint |= l.taint
				s.sess[i].floor = Min(s.sess[i].floor, l.class)
			}
		}
	}
	changed := []int{t}
	for p := range s.files {
		if s.files[p].link == int8(t) {
			changed = append(changed, p)
		}
	}
	return changed
}

// write is an open, write and close of p by si.
func (m *flowModel) write(s *fState, si, p int) ([]int, bool) {
	t := m.resolve(s, p)
	op := policy.OpWrite
	if !s.files[t].exists {
		op = policy.OpCreate
	}
	tg := m.target(s, t)
	tg.Absent = !s.files[t].exists
	if !m.pol.Decide(m.subject(s, si), op, tg).Allow {
		return nil, false
	}
	l := m.writerLabel(s, si)
	if m.class[t] == policy.Control && !Check(&Stamp{Class: l.class}, Control, &m.cfg, Ordinary).Allowed() {
		return nil, false
	}
	return m.put(s, t, s.sess[si].derived || si == fsWeb, l), true
}

// move renames the file src to dst, deciding like the mount: the source
// name, the destination as a write of the source's content, the act gate
// when dst is a control name.
func (m *flowModel) move(s *fState, si, src, dst int, walk bool) ([]int, bool) {
	f := s.files[src]
	if !f.exists || f.link >= 0 || src == dst || s.files[dst].link >= 0 {
		return nil, false
	}
	subj := m.subject(s, si)
	if !m.pol.Decide(subj, policy.OpRenameFrom, m.target(s, src)).Allow {
		return nil, false
	}
	if walk {
		tg := m.target(s, dst)
		tg.HasSource, tg.SourceOrigin, tg.SourceTaint = true, policy.User, 0
		if f.label.set {
			tg.SourceOrigin, tg.SourceTaint = f.label.origin, f.label.taint
		}
		if !m.pol.Decide(subj, policy.OpRenameTo, tg).Allow {
			return nil, false
		}
		if m.class[dst] == policy.Control && !Check(stampOf(&f), Control, &m.cfg, Ordinary).Allowed() {
			return nil, false
		}
	} else if !m.pol.Decide(subj, policy.OpRenameTo, policy.Target{Class: m.class[dst], Namespace: m.ns[dst], Session: m.nsID[dst]}).Allow {
		// A directory: only its own name is decided.
		return nil, false
	}
	l := f.label
	if !m.rules.renameKeeps {
		l = m.writerLabel(s, si)
	}
	s.files[src] = fFile{link: -1}
	return m.put(s, dst, f.derived, l), true
}

// act decides an exec (or an interpreter's read, interp) of p by si and
// reports whether it ran.
func (m *flowModel) act(s *fState, si, p int, interp bool) bool {
	t := m.resolve(s, p)
	if !s.files[t].exists {
		return false
	}
	op := policy.OpExec
	if interp {
		op = policy.OpRead
	}
	if !m.pol.Decide(m.subject(s, si), op, m.target(s, t)).Allow {
		return false
	}
	if interp && !m.rules.interpGate {
		return true
	}
	return Check(stampOf(&s.files[t]), Exec, &m.cfg, Ordinary).Allowed()
}

type fStep struct {
	label   string
	next    fState
	changed []int // paths whose content the mount changed
	exec    int   // a path whose content ran, or -1
}

// steps lists every transition from s.
func (m *flowModel) steps(s *fState) []fStep {
	var out []fStep
	add := func(label string, n fState, changed []int, ok bool) {
		if ok {
			out = append(out, fStep{label: label, next: n, changed: changed, exec: -1})
		}
	}
	for si := 0; si < fsN; si++ {
		name := fSessNames[si]
		for _, p := range []int{fpX, fpY, fpMem, fpSkill, fpStage, fpSess} {
			n := *s
			ch, ok := m.write(&n, si, p)
			add(fmt.Sprintf("write(%s, %s)", name, fPaths[p]), n, ch, ok)
		}
		if si == fsWeb {
			continue // a WEB session is tainted by its origin; the rest is the USER sessions'
		}
		for _, p := range []int{fpX, fpY} {
			if s.sess[si].wOpen < 0 && s.files[p].link < 0 {
				n := *s
				ss := &n.sess[si]
				l := m.writerLabel(&n, si)
				ss.wOpen, ss.wTaint, ss.wClass, ss.wOrigin = int8(p), l.taint, l.class, l.origin
				add(fmt.Sprintf("open-write(%s, %s)", name, fPaths[p]), n, nil, true)
			}
		}
		if w := s.sess[si].wOpen; w >= 0 {
			n := *s
			ss := &n.sess[si]
			l := m.writerLabel(&n, si)
			if !m.rules.flushResolve {
				l = fLabel{set: true, taint: ss.wTaint, origin: ss.wOrigin, class: ss.wClass}
			} else if !m.rules.flushTaint {
				l.taint = ss.wTaint
			}
			ss.wOpen = -1
			ch := m.put(&n, int(w), ss.derived, l)
			add(fmt.Sprintf("close(%s, %s)", name, fPaths[w]), n, ch, true)
		}
		{
			n := *s
			n.sess[si].taint |= policy.OriginTaint(policy.Web)
			n.sess[si].floor = None
			n.sess[si].derived = true
			add(fmt.Sprintf("curl(%s)", name), n, nil, n != *s)
		}
		for p := 0; p < fpN; p++ {
			if !s.files[p].exists {
				continue
			}
			n := *s
			add(fmt.Sprintf("read(%s, %s)", name, fPaths[p]), n, nil, m.read(&n, si, p) && n != *s)
			if p == fpX && s.sess[si].reads&(1<<fpX) == 0 {
				n := *s
				ok := m.read(&n, si, p)
				n.sess[si].reads |= 1 << fpX
				add(fmt.Sprintf("open-read(%s, %s)", name, fPaths[p]), n, nil, ok)
			}
			for _, interp := range []bool{false, true} {
				if m.act(s, si, p, interp) {
					what := "exec"
					if interp {
						what = "sh"
					}
					out = append(out, fStep{label: fmt.Sprintf("%s(%s, %s)", what, name, fPaths[p]), next: *s, exec: m.resolve(s, p)})
				}
			}
			for _, dst := range []int{fpX, fpY, fpMem, fpSkill} {
				if p != fpX && p != fpY {
					break
				}
				n := *s
				ok := m.read(&n, si, p)
				var ch []int
				if ok {
					ch, ok = m.write(&n, si, dst)
				}
				add(fmt.Sprintf("copy(%s, %s → %s)", name, fPaths[p], fPaths[dst]), n, ch, ok && dst != p)
				n = *s
				ch, ok = m.move(&n, si, p, dst, true)
				add(fmt.Sprintf("mv(%s, %s → %s)", name, fPaths[p], fPaths[dst]), n, ch, ok)
			}
		}
		// The held descriptor: reads through it are never seen again.
		if s.sess[si].reads&(1<<fpX) != 0 {
			n := *s
			n.sess[si].derived = n.sess[si].derived || n.files[fpX].derived
			add(fmt.Sprintf("read-again(%s, %s)", name, fPaths[fpX]), n, nil, n != *s)
		}
		// A symlink at a control name, to a plain file.
		if !s.files[fpSettings].exists {
			for _, to := range []int{fpX, fpY} {
				n := *s
				ok := !(m.rules.symlinkControl && m.class[fpSettings].Guarded())
				tg := m.target(&n, fpSettings)
				tg.Absent = true
				ok = ok && m.pol.Decide(m.subject(&n, si), policy.OpCreate, tg).Allow
				var ch []int
				if ok {
					n.files[fpSettings] = fFile{exists: true, link: int8(to)}
					ch = []int{fpSettings}
				}
				add(fmt.Sprintf("ln -s(%s, %s → %s)", name, fPaths[fpSettings], fPaths[to]), n, ch, ok)
			}
		}
		// mv stage/d skills/d.
		{
			n := *s
			ch, ok := m.move(&n, si, fpStage, fpSkillDir, m.rules.dirWalk)
			add(fmt.Sprintf("mv(%s, stage/d → skills/d)", name), n, ch, ok && !s.files[fpSkillDir].exists)
		}
	}
	// The owner promotes sessions/a/d into shared/.
	if s.files[fpSess].exists && !s.files[fpShared].exists {
		n := *s
		owner := policy.Subject{Principal: policy.User, Identified: true}
		tg := policy.Target{Class: m.class[fpSess], Namespace: policy.NSSession, Session: "a"}
		ok := true
		if m.rules.promoteWalk {
			tg.LabelTaint = n.files[fpSess].label.taint
			ok = Check(stampOf(&n.files[fpSess]), Promote, &m.cfg, Ordinary).Allowed()
		}
		ok = ok && m.pol.Decide(owner, policy.OpPromote, tg).Allow
		var ch []int
		if ok {
			f := n.files[fpSess]
			n.files[fpSess] = fFile{link: -1}
			ch = m.put(&n, fpShared, f.derived, f.label)
		}
		add("promote(owner, sessions/a/d)", n, ch, ok)
	}
	// A guarded file created in the backing directory while unmounted.
	if !s.files[fpSkillDir].exists {
		n := *s
		n.files[fpSkillDir] = fFile{exists: true, link: -1, derived: true}
		if m.rules.driftLabel {
			_, taint, _ := m.pol.DecideDrift()
			n.files[fpSkillDir].label = fLabel{set: true, taint: taint, origin: policy.External, class: None}
		}
		out = append(out, fStep{label: "created-while-unmounted(skills/d/f)", next: n, exec: -1})
	}
	return out
}

// violation says what a step broke, or "".
func (m *flowModel) violation(st *fStep) string {
	if st.exec >= 0 && st.next.files[st.exec].derived {
		return "WEB-derived content ran"
	}
	for _, p := range st.changed {
		if !st.next.files[m.resolve(&st.next, p)].derived {
			continue
		}
		switch {
		case m.class[p] == policy.Memory:
			return "WEB-derived content committed as memory: " + fPaths[p]
		case m.class[p] == policy.Control:
			return "WEB-derived content at a control name: " + fPaths[p]
		case m.ns[p] == policy.NSShared:
			return "WEB-derived content in the shared namespace: " + fPaths[p]
		}
	}
	return ""
}

type flowStats struct {
	states, transitions, violations int
	witness                         []string
	why                             string
	// The legitimate paths the model took: clean content committed to a
	// memory or control name or promoted, and content run.
	guarded, promoted, ran int
}

// exploreFlow runs breadth first over every state reachable in fewer than
// depth steps and checks every transition out of them. With stop, it ends
// with the level on which it found the first violation: the witness is
// then one of the shortest.
func exploreFlow(r flowRules, depth int, stop bool) flowStats {
	m := newFlowModel(r)
	init := m.initState()
	nodes := []xNode{{parent: -1}}
	seen := map[fState]struct{}{init: {}}
	frontier, ids := []fState{init}, []int{0}
	var st flowStats
	for d := 0; d < depth && len(frontier) > 0; d++ {
		var next []fState
		var nextIDs []int
		for fi := range frontier {
			s := &frontier[fi]
			for _, step := range m.steps(s) {
				st.transitions++
				if why := m.violation(&step); why != "" {
					st.violations++
					if st.witness == nil {
						st.witness, st.why = xTrace(nodes, ids[fi], step.label), why
					}
					continue
				}
				if step.exec >= 0 {
					st.ran++
				}
				for _, p := range step.changed {
					switch {
					case m.class[p].Guarded():
						st.guarded++
					case m.ns[p] == policy.NSShared:
						st.promoted++
					}
				}
				if _, ok := seen[step.next]; ok {
					continue
				}
				seen[step.next] = struct{}{}
				nodes = append(nodes, xNode{parent: ids[fi], label: step.label})
				next = append(next, step.next)
				nextIDs = append(nextIDs, len(nodes)-1)
			}
		}
		frontier, ids = next, nextIDs
		if stop && st.witness != nil {
			break
		}
	}
	st.states = len(seen)
	return st
}

// flowDepth: every trace of six steps (five under -race or -short).
func flowDepth() int {
	if raceEnabled || testing.Short() {
		return 5
	}
	return 6
}

// TestFlowExplore: with every label-flow rule the model holds the
// invariant in every reachable state.
func TestFlowExplore(t *testing.T) {
	start := time.Now()
	d := flowDepth()
	st := exploreFlow(allFlowRules, d, false)
	t.Logf("label flow, depth %d: %d distinct states, %d transitions, %d violations, %v",
		d, st.states, st.transitions, st.violations, time.Since(start).Round(time.Millisecond))
	if st.violations != 0 {
		t.Fatalf("%d violations; first: %s (%s)", st.violations, strings.Join(st.witness, " → "), st.why)
	}
	t.Logf("legitimate paths: %d guarded commits, %d promotions, %d runs", st.guarded, st.promoted, st.ran)
	if st.states < 1000 || st.guarded == 0 || st.promoted == 0 || st.ran == 0 {
		t.Fatalf("the explorer did not reach the legitimate paths: %+v", st)
	}
}

// flowWitness removes one rule and returns the shortest witness the
// explorer finds.
func flowWitness(t *testing.T, off func(*flowRules), wantSteps []string) {
	t.Helper()
	r := allFlowRules
	off(&r)
	st := exploreFlow(r, flowDepth(), true)
	if st.witness == nil {
		t.Fatalf("no violation found without the rule (%d states)", st.states)
	}
	t.Logf("%d violating transitions; shortest witness: %s (%s)", st.violations, strings.Join(st.witness, " → "), st.why)
	for _, w := range wantSteps {
		found := false
		for _, s := range st.witness {
			found = found || strings.HasPrefix(s, w)
		}
		if !found {
			t.Errorf("the witness has no step %q", w)
		}
	}
}

// Finding 1: a reader that opened a file before an untrusted write reads
// the new content through its old descriptor and stays clean.
func TestFlowWitnessStaleReader(t *testing.T) {
	flowWitness(t, func(r *flowRules) { r.staleReaders = false }, []string{"open-read(", "write(w, notes/x)", "read-again("})
}

// Finding 2: the label of `curl URL > f` is fixed when the shell opens f,
// before curl's exec taints the session.
func TestFlowWitnessLabelAtOpen(t *testing.T) {
	flowWitness(t, func(r *flowRules) { r.flushResolve = false }, []string{"open-write(", "curl(", "close("})
}

// Finding 3: `cat web > f` restamps f as none but gives it no taint: the
// next reader stays clean and its copy into a memory file is committed.
func TestFlowWitnessRestampWithoutTaint(t *testing.T) {
	flowWitness(t, func(r *flowRules) { r.flushTaint = false }, []string{"open-write(", "curl(", "close(", "copy("})
}

// Finding 4: a directory rename into skills/ skips the act gate that each
// of its files would meet on its own.
func TestFlowWitnessDirectoryRename(t *testing.T) {
	flowWitness(t, func(r *flowRules) { r.dirWalk = false }, []string{"write(w, stage/d/f)", "mv(a, stage/d → skills/d)"})
}

// Finding 5: a symlink at a control name to a plain file, which a WEB
// session then writes.
func TestFlowWitnessSymlinkAtControlName(t *testing.T) {
	flowWitness(t, func(r *flowRules) { r.symlinkControl = false }, []string{"ln -s(", "write(w, notes/"})
}

// Finding 6: a rename replaces the file's label with the renamer's.
func TestFlowWitnessRenameRelabels(t *testing.T) {
	flowWitness(t, func(r *flowRules) { r.renameKeeps = false }, []string{"write(w, notes/", "mv("})
}

// Finding 7: none content refused as ./x runs as sh x.
func TestFlowWitnessInterpreter(t *testing.T) {
	flowWitness(t, func(r *flowRules) { r.interpGate = false }, []string{"write(w, notes/", "sh("})
}

// Finding 8: promotion of a directory moves untrusted files into the
// shared namespace.
func TestFlowWitnessPromoteDirectory(t *testing.T) {
	flowWitness(t, func(r *flowRules) { r.promoteWalk = false }, []string{"promote(owner, sessions/a/d)"})
}

// Finding 9: a guarded file created while unmounted gets no label.
func TestFlowWitnessCreatedWhileUnmounted(t *testing.T) {
	flowWitness(t, func(r *flowRules) { r.driftLabel = false }, []string{"created-while-unmounted("})
}
