package policy

// The rules of DESIGN.md §4, plus the few ids that say why something was
// allowed. The zero Rule is RuleUnset so that a zero Verdict denies and
// says that nothing decided it.
const (
	RuleUnset            Rule = iota // no rule decided (a zero Verdict); never returned by Decide
	RulePlain                        // R0-plain: allowed, nothing guarded
	RuleImmutable                    // R1-immutable: identity files never change through the mount
	RuleTaint                        // R2-taint: a blocking taint prevents memory/control mutations
	RulePrincipal                    // R3-principal: a principal below USER cannot mutate memory/control
	RuleNamespace                    // R4-namespace: sessions do not see each other
	RulePromotion                    // R5-promotion: the shared namespace is entered only by promotion
	RulePropagate                    // R6-propagate: an allowed read adds the file's taint
	RuleAuthority                    // R7-authority: untrusted or tainted content cannot take a guarded name
	RuleSecret                       // R8-secret: secrets are for trusted readers, who become SECRET_RISK
	RuleUnidentified                 // R9-unidentified: a caller that cannot be identified is refused
	RuleGrant                        // RG-grant: trust is only lowered when a principal is handed out
	RuleAllowed                      // RA-allowed: a guarded mutation by a trusted, untainted subject
	RuleSession                      // RS-session: a session id belongs to the registration that created it
	RuleControl                      // RC-control: a session's control requests act only on its own session tree
	RuleFirstIdentity                // R1-first: the first creation of an absent identity file by a trusted, untainted subject
	RuleBurst                        // RB-burst: a session quarantined after a burst of refusals changes nothing
	RuleOwner                        // RO-owner: owner-only requests come from the owner's channel, outside every session
	RuleReview                       // RR-review: the policy sends a session's guarded changes to the owner for review
	RuleDrift                        // RD-drift: content that changed behind the mount is EXTERNAL, and untrusted to read
	RuleSocket                       // RU-socket: a confined session connects to no path socket but the control socket and its own
	RuleNetModel                     // RN-model: a connection to the session's model API, which does not taint
	RuleNetTrusted                   // RN-trusted: a connection to a host the owner trusts, which does not taint
	RuleNetWeb                       // RN-web: a connection to a web host, whose bytes taint the session
	RuleNetDeny                      // RN-deny: the policy denies the host
	RuleNetSecret                    // RN-secret: a session that read a secret reaches only model and trusted hosts
	RuleOpenWriter                   // RW-open-writer: content open for writing through a plain descriptor takes no guarded name
	RuleSymlinkEscape                // RX-symlink-escape: a labelled symlink that leads out of the policy's sight is not followed
	RuleOwnerTaint                   // RO-tainted: a tainted process is never the owner's channel
	RuleNetLocal                     // RN-local: the proxy reaches the host's own addresses only for a host the policy names
	RuleHostLock                     // RH-hostlock: no process is moved between cgroups without the host's lock
	RuleLinkedPromote                // RX-linked-promote: a file with another name is not promoted
	RuleLinkedNamespaces             // RX-linked-namespaces: a file with names in two namespaces is the owner's alone
	numRules
)

var ruleIDs = [numRules]string{
	RuleUnset:            "R-unset",
	RulePlain:            "R0-plain",
	RuleImmutable:        "R1-immutable",
	RuleTaint:            "R2-taint",
	RulePrincipal:        "R3-principal",
	RuleNamespace:        "R4-namespace",
	RulePromotion:        "R5-promotion",
	RulePropagate:        "R6-propagate",
	RuleAuthority:        "R7-authority",
	RuleSecret:           "R8-secret",
	RuleUnidentified:     "R9-unidentified",
	RuleGrant:            "RG-grant",
	RuleAllowed:          "RA-allowed",
	RuleSession:          "RS-session",
	RuleControl:          "RC-control",
	RuleFirstIdentity:    "R1-first",
	RuleBurst:            "RB-burst",
	RuleOwner:            "RO-owner",
	RuleReview:           "RR-review",
	RuleDrift:            "RD-drift",
	RuleSocket:           "RU-socket",
	RuleNetModel:         "RN-model",
	RuleNetTrusted:       "RN-trusted",
	RuleNetWeb:           "RN-web",
	RuleNetDeny:          "RN-deny",
	RuleNetSecret:        "RN-secret",
	RuleOpenWriter:       "RW-open-writer",
	RuleSymlinkEscape:    "RX-symlink-escape",
	RuleOwnerTaint:       "RO-tainted",
	RuleNetLocal:         "RN-local",
	RuleHostLock:         "RH-hostlock",
	RuleLinkedPromote:    "RX-linked-promote",
	RuleLinkedNamespaces: "RX-linked-namespaces",
}

var ruleReasons = [numRules]string{
	RuleUnset:            "no rule decided",
	RulePlain:            "nothing guarded",
	RuleImmutable:        "identity files are immutable through the mount",
	RuleTaint:            "a tainted subject cannot change memory or control files",
	RulePrincipal:        "a principal below USER cannot change memory or control files",
	RuleNamespace:        "a session cannot see another session's files",
	RulePromotion:        "the shared namespace is entered only by promotion",
	RulePropagate:        "reading a file adds its taint to the session",
	RuleAuthority:        "content from an untrusted or tainted origin cannot take a guarded name",
	RuleSecret:           "secrets are opened only by trusted principals, who become SECRET_RISK",
	RuleUnidentified:     "the caller could not be identified",
	RuleGrant:            "trust is only lowered, never raised",
	RuleAllowed:          "trusted, untainted subject",
	RuleSession:          "a session id belongs to the registration that created it",
	RuleControl:          "a session may only act on itself and the sessions started from within it",
	RuleFirstIdentity:    "the first creation of an absent identity file by a trusted, untainted subject (identity_first_create)",
	RuleBurst:            "the session is quarantined after a burst of refusals",
	RuleOwner:            "only the owner's channel (a process outside every session) may do this",
	RuleReview:           "the policy sends this session's changes to the owner for review",
	RuleDrift:            "changed in the backing directory, not through the mount: labelled EXTERNAL",
	RuleSocket:           "a confined session reaches no path socket but the control socket and its own",
	RuleNetModel:         "the session's model API: its bytes do not taint",
	RuleNetTrusted:       "a host the owner trusts: its bytes do not taint",
	RuleNetWeb:           "a web host: what it sends taints the session UNTRUSTED|WEB_DERIVED",
	RuleNetDeny:          "the policy denies this host to every session",
	RuleNetSecret:        "a session that read a secret reaches only model and trusted hosts (network.secret_egress: restrict)",
	RuleOpenWriter:       "a file open for writing through a plain descriptor cannot take a guarded name: its later writes would reach the guarded file with no commit decision",
	RuleSymlinkEscape:    "a symlink an untrusted or tainted session made is not followed out of the mount or into a directory where the names the policy guards are not guarded: what it reaches is not content the gate sees",
	RuleOwnerTaint:       "a tainted process is never the owner's channel, whatever it read it from",
	RuleNetLocal:         "the proxy does not reach this host's own loopback, link-local or interface addresses unless the policy's network.hosts or the session's model endpoint names the host",
	RuleHostLock:         "the host's cgroup lock was not taken in time: no process is moved between sessions without it",
	RuleLinkedPromote:    "a file with another name is not promoted: what the session writes through that name would change the shared file with no promotion",
	RuleLinkedNamespaces: "a file with names in two namespaces (a hard link made before the mount) is the owner's alone, through every name: copy it to break the link",
}

// ID is the stable identifier of the rule, as written to the evidence log.
func (r Rule) ID() string {
	if r < numRules {
		return ruleIDs[r]
	}
	return "R-invalid"
}

// Reason is a short human explanation: lowercase, no trailing period.
func (r Rule) Reason() string {
	if r < numRules {
		return ruleReasons[r]
	}
	return "invalid rule"
}

// String is the rule's ID.
func (r Rule) String() string { return r.ID() }

// Deny reports whether the verdict refuses the operation.
func (v Verdict) Deny() bool { return !v.Allow }

// String renders the verdict for logs: "allow R0-plain", "deny R1-immutable",
// with "+TAINT" when the operation adds taint.
func (v Verdict) String() string {
	s := "deny "
	if v.Allow {
		s = "allow "
	}
	s += v.Rule.ID()
	if v.AddTaint != 0 {
		s += " +" + v.AddTaint.String()
	}
	return s
}
