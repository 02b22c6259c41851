package policy

// Decide is the monitor's whole decision for subject s asking op on the
// target t (DESIGN.md §4). It is pure and does not allocate. The rules are
// checked in the order of the package documentation; the first that
// refuses decides.
func (p *Policy) Decide(s Subject, op Op, t Target) Verdict {
	if op >= numOps || t.Class >= numClasses || t.Namespace > NSSessionsRoot {
		// A caller bug, not an attack we can reason about: refuse.
		return deny(RuleUnidentified)
	}
	mut := op.Mutates()
	blocking := p.blocking
	trusted := s.Principal.Valid() && s.Principal.Trusted()
	clean := s.Taint&blocking == 0
	owner := trusted && s.Session == "" // the human's channel: outside every session

	// R9: default deny on doubt. Plain requests of an unidentified caller
	// pass: the kernel sends some (pid 0) on its own behalf.
	if !s.Identified || !s.Principal.Valid() {
		// Refused: anything in a session, on a secret, a promotion, a
		// read or run of labelled content with blocking taint (its taint
		// would reach no subject: a process of another mount's session
		// would carry it back there clean), and every mutation of a
		// guarded class, of the shared namespace or of the sessions
		// directory.
		private := t.Namespace == NSSession || t.Class == Secret || op == OpPromote ||
			(op == OpRead || op == OpExec) && t.LabelTaint&blocking != 0
		if private || mut && (t.Class.Guarded() || t.Namespace == NSShared || t.Namespace == NSSessionsRoot) {
			return deny(RuleUnidentified)
		}
	}

	// R4: sessions do not see each other.
	switch t.Namespace {
	case NSSession:
		if t.Session == "" {
			return deny(RuleNamespace)
		}
		if t.Session == LinkedSession && (s.Session != "" || !trusted) {
			return deny(RuleLinkedNamespaces)
		}
		if s.Session == "" {
			if !trusted {
				return deny(RuleNamespace)
			}
		} else if s.Session != t.Session {
			return deny(RuleNamespace)
		}
	case NSSessionsRoot:
		if mut && !owner {
			return deny(RuleNamespace)
		}
	}

	// R5: promotion, the only way into the shared namespace.
	guardedMut := mut && (t.Class == Memory || t.Class == Control)
	if op == OpPromote {
		if t.Namespace != NSSession || !owner || !clean || t.LabelTaint&blocking != 0 {
			return deny(RulePromotion)
		}
	} else if mut && t.Namespace == NSShared {
		if !owner || !clean {
			return deny(RulePromotion)
		}
		guardedMut = true
	}

	// R7 for content arriving under a name that only trusted, untainted
	// content may take.
	badSource := (op == OpRenameTo || op == OpLink) && t.HasSource &&
		(!t.SourceOrigin.Valid() || !t.SourceOrigin.Trusted() || t.SourceTaint&blocking != 0)

	// RW: a file open for writing through a plain descriptor keeps
	// taking that descriptor's writes, which no gate sees, under its new
	// name: it takes no guarded name while open (whoever asks).
	if (op == OpRenameTo || op == OpLink) && t.HasSource && t.SourceWriting && (t.Class.Guarded() || guardedMut || t.Class == Secret) {
		return deny(RuleOpenWriter)
	}

	// R1: identity is immutable, whoever asks — except, when the policy
	// says so, its first creation by a trusted, untainted subject from
	// trusted, untainted content (an agent's first run writes SOUL.md).
	if mut && t.Class == Identity {
		first := p.firstID && t.Absent && t.Namespace != NSShared &&
			(op == OpCreate || op == OpWrite || op == OpRenameTo || op == OpLink && t.HasSource)
		if !first {
			return deny(RuleImmutable)
		}
		if !trusted {
			return deny(RulePrincipal)
		}
		if !clean {
			return deny(RuleTaint)
		}
		if badSource {
			return deny(RuleAuthority)
		}
		return Verdict{Allow: true, Rule: RuleFirstIdentity}
	}

	// R8: secrets.
	if t.Class == Secret {
		if !trusted && op != OpLookup {
			return deny(RuleSecret)
		}
		// A secret file is also loaded as configuration (.env files set
		// the environment of every command a client runs): as for memory
		// and control, no tainted writer changes it and no content of
		// untrusted origin arrives under its name.
		if mut && !clean {
			return deny(RuleTaint)
		}
		if mut && badSource {
			return deny(RuleAuthority)
		}
		v := Verdict{Allow: true, Rule: RuleSecret}
		switch op {
		case OpRead, OpExec:
			v.AddTaint = SecretRisk | t.LabelTaint
		case OpWrite:
			v.AddTaint = SecretRisk
		}
		if op == OpPromote {
			v.Rule = RulePromotion
		}
		return v
	}

	// R3, R2, R7: memory, control and the shared namespace.
	if guardedMut {
		if !trusted {
			return deny(RulePrincipal)
		}
		if !clean {
			return deny(RuleTaint)
		}
		if badSource {
			return deny(RuleAuthority)
		}
		if op == OpPromote {
			return Verdict{Allow: true, Rule: RulePromotion}
		}
		return Verdict{Allow: true, Rule: RuleAllowed}
	}
	if op == OpPromote {
		return Verdict{Allow: true, Rule: RulePromotion}
	}

	// R6: reading propagates the label's taint.
	if (op == OpRead || op == OpExec) && t.LabelTaint != 0 {
		return Verdict{Allow: true, Rule: RulePropagate, AddTaint: t.LabelTaint}
	}
	return Verdict{Allow: true, Rule: RulePlain}
}

func deny(r Rule) Verdict { return Verdict{Rule: r} }

// CanGrant decides whether granter may hand principal p to a process it
// starts (aerfs run --principal P): only an identified caller, and only at
// or below its own level, since trust is only ever lowered.
func CanGrant(granter Subject, p Principal) Verdict {
	if !granter.Identified || !granter.Principal.Valid() || !p.Valid() {
		return deny(RuleUnidentified)
	}
	if p.Level() > granter.Principal.Level() {
		return deny(RuleGrant)
	}
	return Verdict{Allow: true, Rule: RuleGrant}
}
