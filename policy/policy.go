package policy

import (
	"strings"
	"time"
)

// Policy is a compiled policy file. It is immutable after Parse and safe
// for concurrent use.
type Policy struct {
	name string

	// literal holds the unanchored patterns without wildcards (SOUL.md,
	// MEMORY.md, …), keyed by base name: a bit per rank (1<<classRank)
	// whose class lists the name.
	literal map[string]uint8
	// dirs holds the patterns "**/NAME/**" (.claude, .cursor, …): a path
	// with a component NAME, at any depth, is in the classes of its bits.
	dirs map[string]uint8
	// byRank holds the other patterns of each class, strongest class first
	// (see classRank).
	byRank [numRanks][]pattern
	// excl holds the exclusions ("!pattern") of each class, by rank.
	excl [numRanks][]pattern
	// held: paths kept at a class of their own (Holding).
	held map[string]Class
	// guardedFloating is true when some Identity, Memory or Control
	// pattern matches a base name at any depth.
	guardedFloating bool

	sessions, shared string // namespace roots, slash-separated, no leading slash

	blocking     Taint
	executables  []execRule
	interpreters []pattern // interpreters.go
	uids         map[uint32]Principal
	burstN       int
	burstWindow  time.Duration
	review       map[string]bool
	onDrift      DriftAction
	firstID      bool     // identity_first_create
	writable     []string // sandbox.writable as written
	privateTmp   bool
	private      []string  // sandbox.private as written
	sockets      []string  // sandbox.sockets as written
	roots        []Root    // further guarded roots (roots.go)
	machinery    []pattern // a root's machinery (machinery.go); none in the workspace

	// The network of confined sessions (network.go).
	netMode      NetworkMode
	hosts        []HostRule
	secretEgress bool

	classPatterns [numClasses][]string // as written, for Patterns

	auth AuthoritySettings // attestors, elevation, agent_scripts (authority_keys.go)
}

type execRule struct {
	pat       pattern
	principal Principal
}

// Class precedence when several patterns match one path:
// Identity > Control > Memory > Secret > Plain.
const (
	rankIdentity = iota
	rankControl
	rankMemory
	rankSecret
	numRanks
)

var rankClass = [numRanks]Class{Identity, Control, Memory, Secret}

func classRank(c Class) int {
	switch c {
	case Identity:
		return rankIdentity
	case Control:
		return rankControl
	case Memory:
		return rankMemory
	case Secret:
		return rankSecret
	}
	return numRanks
}

// Name is the file name the policy was parsed from.
func (p *Policy) Name() string { return p.name }

// Classify returns the class of the workspace-relative path rel
// (slash-separated, no leading slash, "" for the root), its namespace, and
// the session id when the namespace is NSSession (a substring of rel).
//
// Anchored patterns ("skills/**", "/SOUL.md") are matched from the
// workspace root and also from the root of each session directory and of
// the shared namespace, since an agent working in sessions/<id>/ treats it
// as its workspace. The strongest class one of whose patterns matches, and
// none of whose exclusions does, wins. Classify does not allocate.
func (p *Policy) Classify(rel string) (Class, Namespace, string) {
	ns, id, sub, hasSub := p.namespace(rel)
	if c, ok := p.held[rel]; ok {
		return c, ns, id
	}
	var named uint8 // the ranks that list rel's base name or one of its directories
	if rel != "" {
		named = p.literal[rel[strings.LastIndexByte(rel, '/')+1:]]
		for rest, more := rel, true; more; {
			var comp string
			comp, rest, more = split(rest)
			named |= p.dirs[comp]
		}
	}
	for r := 0; r < numRanks; r++ {
		if named&(1<<r) == 0 && !matchAny(p.byRank[r], rel, sub, hasSub) {
			continue
		}
		if matchAny(p.excl[r], rel, sub, hasSub) {
			continue
		}
		return rankClass[r], ns, id
	}
	return Plain, ns, id
}

// Holding is p with each path of held kept at the class it gives it (the
// class the path has under the policy in force). The daemon puts a policy
// edit in force this way while a file it would class more strictly is open
// for writing through a plain descriptor, whose writes the kernel passes on
// without asking (RW-open-writer), and the whole edit once those are
// closed.
func (p *Policy) Holding(held map[string]Class) *Policy {
	if len(held) == 0 {
		return p
	}
	q := *p
	q.held = held
	return &q
}

// Held reports whether rel is kept at a class of its own (Holding).
func (p *Policy) Held(rel string) bool {
	_, ok := p.held[rel]
	return ok
}

// HeldPaths are the paths kept at a class of their own (Holding), in no
// particular order.
func (p *Policy) HeldPaths() []string {
	out := make([]string, 0, len(p.held))
	for rel := range p.held {
		out = append(out, rel)
	}
	return out
}

// WithNamespacesOf is p with q's session and shared namespace roots. A
// mount keeps the roots it started with: a file a root's move would carry
// into a namespace may be open for writing through a plain descriptor, and
// a namespace is entered only by a session's own writes or a promotion.
func (p *Policy) WithNamespacesOf(q *Policy) *Policy {
	if p.sessions == q.sessions && p.shared == q.shared {
		return p
	}
	c := *p
	c.sessions, c.shared = q.sessions, q.shared
	return &c
}

// matchAny reports whether a pattern of pts matches rel, or, for an
// anchored one, the path sub below a session directory or the shared root.
func matchAny(pts []pattern, rel, sub string, hasSub bool) bool {
	for i := range pts {
		pt := &pts[i]
		if pt.match(rel) || (hasSub && pt.anchored && pt.match(sub)) {
			return true
		}
	}
	return false
}

// namespace splits rel by namespace. sub is the path below the session
// directory or the shared root, reported when hasSub.
func (p *Policy) namespace(rel string) (ns Namespace, id, sub string, hasSub bool) {
	if rest, ok := under(rel, p.sessions); ok {
		if rel == p.sessions {
			return NSSessionsRoot, "", "", false
		}
		id, sub, _ = split(rest)
		return NSSession, id, sub, true
	}
	if rest, ok := under(rel, p.shared); ok {
		return NSShared, "", rest, true
	}
	return NSNone, "", "", false
}

// under reports whether rel is root or below it, and what follows root.
func under(rel, root string) (string, bool) {
	if rel == root {
		return "", true
	}
	if len(rel) > len(root) && rel[len(root)] == '/' && rel[:len(root)] == root {
		return rel[len(root)+1:], true
	}
	return "", false
}

// MayContainGuarded reports whether some Identity, Memory or Control
// pattern could match a path strictly below the directory relDir. It
// over-approximates (true when unsure), and it is true for every directory
// as soon as a guarded pattern matches at any depth, as the default
// MEMORY.md does: the caller then looks at what the directory holds before
// an rmdir or a rename of it.
func (p *Policy) MayContainGuarded(relDir string) bool {
	if p.guardedFloating {
		return true
	}
	_, _, sub, hasSub := p.namespace(relDir)
	// A directory above a namespace root, or the sessions root itself,
	// holds whole workspaces, whose anchored patterns apply.
	_, aboveSessions := under(p.sessions, relDir)
	_, aboveShared := under(p.shared, relDir)
	aboveRoot := relDir == "" || aboveSessions || aboveShared
	for _, r := range [...]int{rankIdentity, rankControl, rankMemory} {
		for i := range p.byRank[r] {
			pt := &p.byRank[r][i]
			if aboveRoot || pt.canExtend(relDir) || (hasSub && pt.canExtend(sub)) {
				return true
			}
		}
	}
	return false
}

// Patterns returns the patterns of class c as written in the policy.
func (p *Policy) Patterns(c Class) []string {
	if c >= numClasses {
		return nil
	}
	return append([]string(nil), p.classPatterns[c]...)
}

// ExecPrincipal returns the principal the policy assigns to the executable
// exe (an absolute path as found in /proc/<pid>/exe), and whether any rule
// matched. A bare-name rule matches the base name; an absolute rule matches
// the whole path. When several match, the least trusted wins, and of
// equally trusted ones (WEB and SKILL) the first listed. The caller
// applies the result with Lower: executable rules only lower trust.
func (p *Policy) ExecPrincipal(exe string) (Principal, bool) {
	var (
		best  Principal
		found bool
	)
	abs := strings.HasPrefix(exe, "/")
	for i := range p.executables {
		e := &p.executables[i]
		var ok bool
		if e.pat.anchored {
			ok = abs && e.pat.match(exe[1:])
		} else {
			ok = e.pat.match(exe)
		}
		if ok && (!found || e.principal.Level() < best.Level()) {
			best, found = e.principal, true
		}
	}
	return best, found
}

// UIDPrincipal returns the principal the policy maps uid to, if any.
func (p *Policy) UIDPrincipal(uid uint32) (Principal, bool) {
	pr, ok := p.uids[uid]
	return pr, ok
}

// Blocking is the set of taint flags that block memory and control
// mutations (rule 2) and promotions.
func (p *Policy) Blocking() Taint { return p.blocking }

// Burst is the number of denials within window after which a session is
// quarantined.
func (p *Policy) Burst() (n int, window time.Duration) { return p.burstN, p.burstWindow }

// ReviewSession reports whether guarded writes of session id go to owner
// review.
func (p *Policy) ReviewSession(id string) bool { return p.review[id] }

// Namespaces returns the workspace-relative roots of the session and shared
// namespaces.
func (p *Policy) Namespaces() (sessions, shared string) { return p.sessions, p.shared }

// DriftAction says what aerfs does when a guarded file changed behind its
// back (in the backing directory, not through the mount).
type DriftAction uint8

const (
	// DriftRecord records the drift and labels the file EXTERNAL.
	DriftRecord DriftAction = iota
	// DriftRestore also puts back the last version aerfs committed.
	DriftRestore
)

// OnDrift is the policy's drift action.
func (p *Policy) OnDrift() DriftAction { return p.onDrift }

// SandboxWritable returns the paths a confined session may change besides
// the workspace, absolute, with a leading "~" replaced by home (the
// workspace owner's home directory).
func (p *Policy) SandboxWritable(home string) []string { return expandHome(p.writable, home) }

// SandboxSockets returns the path sockets beyond its own that a confined
// session may connect to (besides the control socket), absolute, "~"
// expanded as for SandboxWritable.
func (p *Policy) SandboxSockets(home string) []string { return expandHome(p.sockets, home) }

// expandHome replaces a leading "~" of each path by home; a path in a home
// that is not known is left out.
func expandHome(paths []string, home string) []string {
	out := make([]string, 0, len(paths))
	for _, w := range paths {
		if rest, ok := strings.CutPrefix(w, "~"); ok {
			if home == "" || !strings.HasPrefix(home, "/") {
				continue
			}
			w = strings.TrimSuffix(home, "/") + rest
		}
		out = append(out, w)
	}
	return out
}

// SandboxPrivate returns the directories a confined session gets empty
// and its own (a tmpfs over each in its mount namespace) and may write:
// places a client needs to write whose content the owner's own processes
// may later use, so that nothing a session leaves there reaches them.
// Paths as for SandboxWritable.
func (p *Policy) SandboxPrivate(home string) []string { return expandHome(p.private, home) }

// SandboxPrivateTmp reports whether a session gets a /tmp of its own
// instead of the shared one.
func (p *Policy) SandboxPrivateTmp() bool { return p.privateTmp }
