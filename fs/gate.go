package fs

import (
	"context"
	"syscall"

	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// The gate: every decision the FUSE layer acts on is made in this file
// (TestOnlyTheGateDecides checks that no other file of the package calls
// the policy's decision functions).

// gate is the choke point. It decides op on rel for the caller, applies
// the taint a read brings, records every verdict that is not a plain
// allow, and returns the errno to answer with (0 when allowed).
func (m *Monitor) gate(ctx context.Context, res *principal.Resolved, op policy.Op, rel string, t policy.Target, l *Label) (policy.Verdict, syscall.Errno) {
	if res == nil {
		res = m.caller(ctx)
	}
	subj := res.Subject()
	v := m.Policy().DecideHeld(subj, res.Session.Quarantined(), op, t)
	if !v.Allow && op == policy.OpLookup && v.Rule == policy.RuleNamespace {
		// Another session's namespace is invisible, not refused: a lookup
		// there is answered ENOENT like any absent name, with no record
		// and no count (ripgrep and git look for .git, .gitignore …
		// in every directory, sessions/ included).
		return v, syscall.ENOENT
	}
	if v.Allow {
		m.Stats.Allowed.Add(1)
		if v.AddTaint != 0 && res.AddTaint(v.AddTaint) {
			m.noteTaint(res, v.AddTaint, rel)
		}
		if l != nil && (op == policy.OpRead || op == policy.OpExec) && l.Record != "" {
			m.noteRead(res, l.Record)
		}
		if v.Rule == policy.RulePlain {
			return v, 0
		}
	} else {
		m.Stats.Denied.Add(1)
	}
	if op == policy.OpLookup && v.Allow {
		return v, 0
	}
	m.record(m.verdictRecord(res, subj, op, rel, v))
	if v.Allow {
		return v, 0
	}
	m.log.Info().Str("path", rel).Str("op", opName(op)).Str("principal", subj.Principal.String()).
		Str("session", subj.Session).Str("rule", v.Rule.ID()).Msg("denied")
	if op.Mutates() {
		// Only refused changes count: a lookup, listing or read answered
		// ENOENT by namespace invisibility is not an attack.
		m.noteDenial(res)
	}
	if v.Rule == policy.RuleNamespace {
		return v, syscall.ENOENT
	}
	return v, syscall.EACCES
}

// gateCommit decides a commit of staged content to t: the policy's commit
// decision (a held session changes nothing, a reviewed session's guarded
// change goes to the owner).
func (m *Monitor) gateCommit(res *principal.Resolved, subj policy.Subject, t policy.Target) policy.Verdict {
	return m.Policy().DecideCommit(subj, res.Session.Quarantined(), t)
}

// gatePromote decides a promotion requested on the control channel.
func (m *Monitor) gatePromote(res *principal.Resolved, subj policy.Subject, t policy.Target) policy.Verdict {
	return m.Policy().DecideHeld(subj, res.Session.Quarantined(), policy.OpPromote, t)
}

// gateVisible decides whether a listing shows a name to subj (a lookup
// that records nothing: listing sessions/ shows the caller its own
// directory only).
func (m *Monitor) gateVisible(subj policy.Subject, t policy.Target) bool {
	return m.Policy().Decide(subj, policy.OpLookup, t).Allow
}
