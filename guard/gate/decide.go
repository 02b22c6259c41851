package gate

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aerfs/aerfs/authority"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Ask is the choke point: it decides op on rel for the caller, records
// every verdict that is not a plain allow, and returns the errno to answer
// with (0 when allowed). What a read brings (the verdict's AddTaint) is
// for the caller to let flow (guard/flow).
func (g *Gate) Ask(res *principal.Resolved, op policy.Op, rel string, t policy.Target) (policy.Verdict, syscall.Errno) {
	return g.ask(res, op, rel, t, false)
}

// ask is Ask; durable: an allowed change is allowed only once its record
// is durable (Check.Durable).
func (g *Gate) ask(res *principal.Resolved, op policy.Op, rel string, t policy.Target, durable bool) (policy.Verdict, syscall.Errno) {
	subj := res.Subject()
	v := g.Policy().DecideHeld(subj, res.Session.Quarantined(), op, t)
	if !v.Allow && op == policy.OpLookup && v.Rule == policy.RuleNamespace {
		// Another session's namespace is invisible, not refused: a lookup
		// there is answered ENOENT like any absent name, with no record
		// and no count (ripgrep and git look for .git, .gitignore …
		// in every directory, sessions/ included).
		return v, syscall.ENOENT
	}
	if v.Allow {
		g.c.Ledger.Stats.Allowed.Add(1)
		if v.Rule == policy.RulePlain || op == policy.OpLookup {
			return v, 0
		}
	} else {
		g.c.Ledger.Stats.Denied.Add(1)
	}
	r := ledger.Verdict(res, subj, op, rel, v)
	recorded := v.Allow
	if !recorded {
		var counts []*evidence.Record
		recorded, counts = g.fold.admit(r, time.Now())
		for _, s := range counts {
			g.c.Ledger.Record(s)
		}
	}
	if recorded && durable && v.Allow {
		if _, err := g.c.Ledger.Must(r); err != nil {
			g.c.Ledger.Log.Error().Err(err).Str("path", rel).Str("op", ledger.OpName(op)).Msg("change not recorded: refused")
			return v, syscall.EIO
		}
	} else if recorded {
		g.c.Ledger.Record(r)
	}
	if v.Allow {
		return v, 0
	}
	if recorded {
		g.c.Ledger.Log.Info().Str("path", rel).Str("op", ledger.OpName(op)).Str("principal", subj.Principal.String()).
			Str("session", subj.Session).Str("rule", v.Rule.ID()).Msg("denied")
	}
	if op.Mutates() {
		// Only refused changes count: a lookup, listing or read answered
		// ENOENT by namespace invisibility is not an attack.
		g.Denied(res)
	}
	if v.Rule == policy.RuleNamespace {
		return v, syscall.ENOENT
	}
	return v, syscall.EACCES
}

// Held is the taint reading t adds to res when res already holds it open
// (a descriptor a session starts with): what an open to read would add,
// decided but not recorded, since refusing it would change nothing. A
// secret held this way is a secret read.
func (g *Gate) Held(res *principal.Resolved, t policy.Target) policy.Taint {
	v := g.Policy().DecideHeld(res.Subject(), res.Session.Quarantined(), policy.OpRead, t)
	add := v.AddTaint
	if t.Class == policy.Secret {
		add |= policy.SecretRisk
	}
	return add
}

// Check is one decision a change needs.
type Check struct {
	Op  policy.Op
	Rel string
	T   policy.Target
	L   *label.Label
	// V is the verdict, set by All (unset for a trivial check it did not
	// need to decide).
	V policy.Verdict
	// Durable: an allowed change of a guarded name that no transaction
	// records (a mode, an owner, times, an extended attribute, a symlink,
	// FIFO or directory made there) is allowed only once its verdict is
	// durable; a log that cannot be written refuses it with EIO.
	Durable bool
}

func (c Check) trivial() bool {
	return c.T.Class == policy.Plain && c.T.Namespace == policy.NSNone && c.L == nil
}

// All decides every check; the first refusal wins. When every check is
// about a plain, unlabelled path outside the namespaces, the caller is not
// even resolved (nil).
func (g *Gate) All(c Caller, checks []Check) (*principal.Resolved, syscall.Errno) {
	g.renames.note(checks)
	all := true
	for _, ch := range checks {
		all = all && ch.trivial()
	}
	if all && !g.anyHeld.Load() {
		return nil, 0
	}
	res := g.Resolve(c)
	if all && !res.Session.Quarantined() {
		return res, 0
	}
	for _, ch := range checks {
		if ch.Op.Mutates() && ch.T.Class.Guarded() {
			// What res read is decided as it is now.
			g.c.Opens.Settle(res)
			break
		}
	}
	for i, ch := range checks {
		v, errno := g.ask(res, ch.Op, ch.Rel, ch.T, ch.Durable && ch.T.Class.Guarded())
		checks[i].V = v
		if errno != 0 {
			return res, errno
		}
	}
	return res, 0
}

// Visible decides whether a listing shows a name to subj (a lookup that
// records nothing: listing sessions/ shows the caller its own directory
// only).
func (g *Gate) Visible(subj policy.Subject, t policy.Target) bool {
	return g.Policy().Decide(subj, policy.OpLookup, t).Allow
}

// Promote decides a promotion requested on the control channel: the
// policy (R5), then the act gate. The verdict record is returned for the
// change to carry (allowed) or recorded here (refused).
func (g *Gate) Promote(res *principal.Resolved, rel string, t policy.Target, l *label.Label) (policy.Verdict, *evidence.Record, error) {
	subj := res.Subject()
	v := g.Policy().DecideHeld(subj, res.Session.Quarantined(), policy.OpPromote, t)
	r := ledger.Verdict(res, subj, policy.OpPromote, rel, v)
	if l != nil && l.Record != "" {
		r.Parents = []string{l.Record}
	}
	if !v.Allow {
		g.c.Ledger.Stats.Denied.Add(1)
		g.c.Ledger.Record(r)
		return v, nil, nil
	}
	if l == nil {
		return v, r, nil
	}
	d := g.Act(res, "promote", rel, l, authority.Promote)
	if d.Allowed() {
		return v, r, nil
	}
	return v, nil, fmt.Errorf("promotion of %s refused by the act gate (%s): %s; "+
		"hint: `aerfs authority %s` shows where the content came from", rel, d.Rule.ID(), chainText(d), rel)
}

// Deny refuses what the gate refuses by a rule of its own (not the
// policy's): recorded with rule and reason, and a refused change counted
// against the caller's session tree (as Ask counts: a refused read, such
// as a symlink not followed, is no attempt to change anything). It returns
// EACCES.
func (g *Gate) Deny(res *principal.Resolved, op policy.Op, rel, rule, reason string) syscall.Errno {
	r := ledger.Verdict(res, res.Subject(), op, rel, policy.Verdict{})
	r.Meta.Rule, r.Meta.Reason = rule, reason
	g.c.Ledger.Stats.Denied.Add(1)
	g.c.Ledger.Record(r)
	g.c.Ledger.Log.Info().Str("path", rel).Str("op", ledger.OpName(op)).Str("rule", rule).Msg("denied")
	if op.Mutates() {
		g.Denied(res)
	}
	return syscall.EACCES
}

// Link decides a symlink, FIFO, socket or device node arriving at rel
// (made there, or renamed there) by res: at a control-class name, only
// the owner outside every session may put one (RX-control-symlink): what
// it points to, or what passes through it, is not content the act gate
// can see — a WEB session could write the target a symlink names. At any
// other name, a session's symlink may not make a guarded name serve what
// the policy does not guard the same way, nor may a session put a FIFO,
// socket or device at a guarded name (RX-guarded-symlink,
// policy.SymlinkUnguards): AGENTS.md -> notes.txt would let whoever writes
// notes.txt write what every agent loads, unrecorded. target is what a
// symlink names (symlink true).
func (g *Gate) Link(res *principal.Resolved, op policy.Op, rel, target string, symlink bool) syscall.Errno {
	pol := g.Policy()
	owner := res.Identified && (res.Session == nil || res.Session.Implicit) && res.Subject().Principal.Trusted()
	if c, _, _ := pol.Classify(rel); c == policy.Control && !owner {
		return g.Deny(res, op, rel, RuleControlLink,
			"a session may not put a symlink, FIFO, socket or device at a control name: what it points to is not content the act gate sees; the owner may, outside every session")
	}
	if !symlink {
		target = ""
	}
	unguards, inside := g.LinkUnguards(rel, target)
	// The owner's links out of the workspace (a dotfiles manager's) and
	// special objects are the owner's; one into the workspace that
	// unguards the name would not be followed (Door.Readlink).
	if !unguards || owner && (!symlink || !inside) {
		return 0
	}
	what := "a FIFO, socket or device"
	if symlink {
		what = "a symlink to " + target
	}
	return g.Deny(res, op, rel, RuleGuardedLink,
		"a guarded name may not serve what the policy does not guard the same way ("+what+"): whoever may write that would write what the name's readers load; link to a name of the same class, or class the target in the policy")
}

// LinkUnguards reports whether a symlink at rel naming target (a FIFO,
// socket or device: target "") would make a guarded name serve what the
// policy does not guard the same way (policy.SymlinkUnguards), and whether
// target leads into the root (inside). A target that leaves the root's
// directory (absolute, or climbing above it) is resolved outside the mount,
// symlink by symlink, as the kernel would: one that comes back under the
// root's path (through /alias -> the workspace's parent) is read as the
// root-relative name it reaches; one through /proc or /dev/fd, whose
// meaning depends on the follower, counts as inside.
func (g *Gate) LinkUnguards(rel, target string) (unguards, inside bool) {
	pol := g.Policy()
	if !pol.SymlinkUnguards(rel, "/") {
		return false, false // no name the policy guards at rel or below it
	}
	abs := target
	if !path.IsAbs(target) {
		to := path.Join(path.Dir(rel), target)
		if to != ".." && !strings.HasPrefix(to, "../") || g.c.Path == "" {
			return pol.SymlinkUnguards(rel, target), true
		}
		abs = path.Join(g.c.Path, path.Dir(rel), target)
	}
	in, ok := underRoot(g.c.Path, abs)
	if !ok {
		return pol.SymlinkUnguards(rel, target), false
	}
	if in == "" {
		return pol.SymlinkUnguards(rel, "/"), true // unknown: a guarded name unguarded
	}
	// The same name, relative to the link's directory.
	up := 0
	if d := path.Dir(rel); d != "." {
		up = strings.Count(d, "/") + 1
	}
	return pol.SymlinkUnguards(rel, strings.Repeat("../", up)+in), true
}

// underRoot resolves the absolute path abs outside the mount, as the kernel
// would follow it, until it reaches root (the path the root is mounted at): in is the
// root-relative name it leads to (inside true), or "" with inside true when
// where it leads depends on the follower (/proc, /dev/fd) or cannot be
// told (a loop, an unreadable link). Nothing under the root is looked at:
// that would be a request to this very mount.
func underRoot(root, abs string) (in string, inside bool) {
	roots := []string{root}
	if r, err := filepath.EvalSymlinks(path.Dir(root)); err == nil {
		roots = append(roots, path.Join(r, path.Base(root)))
	}
	cur, comps, links := "/", strings.Split(path.Clean(abs), "/"), 0
	for len(comps) > 0 {
		c := comps[0]
		comps = comps[1:]
		if c == "" || c == "." {
			continue
		}
		next := path.Join(cur, c)
		for _, r := range roots {
			if next == r || strings.HasPrefix(next, r+"/") {
				rest := path.Join(append([]string{next}, comps...)...)
				return strings.TrimPrefix(strings.TrimPrefix(rest, r), "/"), true
			}
		}
		if next == "/proc" || strings.HasPrefix(next, "/proc/") || next == "/dev/fd" || strings.HasPrefix(next, "/dev/fd/") {
			return "", true
		}
		fi, err := os.Lstat(next)
		if err != nil {
			return "", false // nothing there now; looked at again at every follow
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > 40 {
			return "", true
		}
		t, err := os.Readlink(next)
		if err != nil {
			return "", true
		}
		if path.IsAbs(t) {
			cur = "/"
		}
		comps = append(strings.Split(t, "/"), comps...)
	}
	for _, r := range roots {
		if cur == r {
			return ".", true
		}
	}
	return "", false
}

// RuleGuardedLink is the rule id of a symlink at a guarded name (or at a
// name below which the policy guards names) that leads where the policy
// does not guard the same way, or of a FIFO, socket or device at a
// guarded name, made or moved there by a session.
const RuleGuardedLink = "RX-guarded-symlink"

// RuleControlLink is the rule id of a symlink (or another special object)
// refused at a control-class name.
const RuleControlLink = "RX-control-symlink"

// Refuse records a refusal the gate makes without the policy (a change
// inside aerfs's own reserved names) and returns EACCES.
func (g *Gate) Refuse(c Caller, op policy.Op, rel, rule, reason string) syscall.Errno {
	res := g.Resolve(c)
	r := ledger.Verdict(res, res.Subject(), op, rel, policy.Verdict{})
	r.Meta.Rule, r.Meta.Reason = rule, reason
	g.c.Ledger.Stats.Denied.Add(1)
	g.c.Ledger.Record(r)
	return syscall.EACCES
}

// Denied counts a refused change against the root of the caller's session
// tree (the session the caller's sub-sessions were started from):
// refusals spread over nested sub-sessions add up. At the policy's burst
// threshold the root is quarantined, and with it the whole tree. Implicit
// sessions (processes outside sessions that read labelled content) are
// not counted.
func (g *Gate) Denied(res *principal.Resolved) {
	if res == nil || res.Session == nil || res.Session.Implicit {
		return
	}
	root := res.Session.TreeRoot()
	n, window := g.Policy().Burst()
	now := time.Now()
	id := root.ID
	g.mu.Lock()
	ts := append(g.burst[id], now)
	for len(ts) > 0 && now.Sub(ts[0]) > window {
		ts = ts[1:]
	}
	g.burst[id] = ts
	hit := n > 0 && len(ts) >= n
	g.mu.Unlock()
	if hit && root.Quarantine() {
		g.anyHeld.Store(true)
		g.c.Ledger.Record(&evidence.Record{Type: evidence.TypeVerdict, Principal: root.Principal.String(), Taint: ledger.TaintNames(root.Taint()),
			Meta: evidence.Meta{Session: id, Op: "burst", Verdict: "deny", Rule: policy.RuleBurst.ID(), UID: res.Proc.UID,
				Reason: fmt.Sprintf("%d refusals within %s in the session tree: session quarantined with its sub-sessions, its guarded changes are rolled back", len(ts), window)}})
		g.c.Ledger.Log.Warn().Str("session", id).Msg("burst of refusals: session quarantined")
		if g.c.OnBurst != nil {
			go g.c.OnBurst(root)
		}
	}
}

// Reset forgets the refusals counted against the session tree root id:
// after the owner lifts a quarantine, the next refusal must not
// re-quarantine it at once.
func (g *Gate) Reset(id string) {
	g.mu.Lock()
	delete(g.burst, id)
	g.mu.Unlock()
}
