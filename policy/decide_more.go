package policy

// The decisions around Decide: a session held after a burst of refusals,
// a commit of a session under review, a request only the owner may make,
// and content found changed behind the mount. Each is pure, like Decide,
// and each verdict carries its rule.

// DecideHeld is Decide for a subject whose session may be held (quarantined
// after a burst of refusals): a held session changes nothing (RB-burst);
// everything else is Decide's.
func (p *Policy) DecideHeld(s Subject, held bool, op Op, t Target) Verdict {
	if held && op.Mutates() {
		return deny(RuleBurst)
	}
	return p.Decide(s, op, t)
}

// DecideCommit decides the commit of new content to t: the write decision
// (DecideHeld), and for a guarded path written by a session the policy
// reviews, a refusal that sends the content to the owner (RR-review).
func (p *Policy) DecideCommit(s Subject, held bool, t Target) Verdict {
	v := p.DecideHeld(s, held, OpWrite, t)
	if v.Allow && t.Class.Guarded() && s.Session != "" && p.ReviewSession(s.Session) {
		return deny(RuleReview)
	}
	return v
}

// DecideOwner decides a request only the owner's channel may make
// (restore, approve, reject, gc, …): an identified process of a trusted
// principal outside every session.
func DecideOwner(s Subject) Verdict {
	if !s.Identified || !s.Principal.Valid() {
		return deny(RuleUnidentified)
	}
	if s.Session != "" || !s.Principal.Trusted() {
		return deny(RuleOwner)
	}
	if s.Taint != 0 {
		// An owner process outside every session that read what a
		// session or the web wrote (its implicit session) may be
		// following that text: it approves, restores and authorizes
		// nothing. The owner runs the request from a clean shell.
		return deny(RuleOwnerTaint)
	}
	return Verdict{Allow: true, Rule: RuleOwner}
}

// DecideDrift is the verdict on content found changed behind the mount: it
// is recorded as drift (RD-drift) and labelled EXTERNAL, so whoever reads
// it becomes UNTRUSTED; restore says whether the policy puts the last
// version aerfs committed back.
func (p *Policy) DecideDrift() (v Verdict, label Taint, restore bool) {
	return Verdict{Allow: true, Rule: RuleDrift}, Untrusted, p.OnDrift() == DriftRestore
}
