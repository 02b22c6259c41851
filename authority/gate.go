package authority

import (
	"fmt"

	"github.com/aerfs/aerfs/policy"
)

// DefaultNoneTaint is the taint that makes whatever its bearer writes none:
// every flag that says the bearer read something an untrusted principal
// wrote. TOOL_OUTPUT (a vetted tool's output), SECRET_RISK (a confidentiality
// mark) and CROSS_SESSION say nothing about integrity and do not lower.
const DefaultNoneTaint = policy.Untrusted | policy.InjectionSuspect | policy.ProxyDerived |
	policy.SkillOutput | policy.WebDerived

// DefaultK is the number of distinct attestation domains that elevate a
// content when the configuration names none.
const DefaultK = 2

// Config is the authority part of the policy. The zero Config is usable:
// k = 2 for every action, agents' scripts do not run, DefaultNoneTaint.
type Config struct {
	// K is the number of distinct domains whose trusted attestations of a
	// content hash elevate it to act for the action. 0 means DefaultK.
	K [NumActions]int
	// AgentScripts lets inform content (an agent's own scripts) be executed.
	AgentScripts bool
	// NoneTaint overrides DefaultNoneTaint when non-zero.
	NoneTaint policy.Taint
	// Attestors maps a registered attestor's name to its domain.
	Attestors map[string]string
}

// k returns the elevation threshold for a, never below 1.
func (c *Config) k(a Action) int {
	if a >= NumActions || c.K[a] <= 0 {
		return DefaultK
	}
	return c.K[a]
}

func (c *Config) noneTaint() policy.Taint {
	if c.NoneTaint == 0 {
		return DefaultNoneTaint
	}
	return c.NoneTaint
}

// Writer is the subject of a write, an attestation or a mint, as principal/
// resolved it.
type Writer struct {
	Principal  policy.Principal
	Taint      policy.Taint // session taint ∪ the process's own
	Session    string       // the session its reads are recorded under; "" = outside every session
	Agent      bool         // the session runs an agent (aerfs run --agent, or a policy-declared agent principal)
	Identified bool
	Name       string // the registered tool or attestor name, "" when none
}

// Owner reports whether w speaks on the owner channel: an identified,
// trusted principal outside every session.
func (w *Writer) Owner() bool {
	return w.Identified && w.Principal.Valid() && w.Principal.Trusted() && w.Session == "" && !w.Agent
}

// Base is the class w's own origin allows, before the sources it read
// (M1): the owner and vetted tools act, agent sessions inform, untrusted or
// tainted writers bind none.
func (c *Config) Base(w *Writer) (Class, Rule) {
	switch {
	case !w.Identified || !w.Principal.Valid():
		return None, RuleWriteUnidentified
	case !w.Principal.Trusted() && w.Principal != policy.ToolAuth:
		return None, RuleWriteUntrusted
	case w.Taint&c.noneTaint() != 0:
		return None, RuleWriteTainted
	case w.Agent:
		return Inform, RuleWriteAgent
	case w.Principal == policy.ToolAuth:
		return Act, RuleWriteTool
	}
	return Act, RuleWriteOwner
}

// Source is a content a writer's session read that bounded the class of
// what it wrote.
type Source struct {
	Path  string `json:"path"`
	Hash  Hash   `json:"hash"`
	Class Class  `json:"class"`
}

// Stamp is the authority part of a file's label, bound at write time. fs
// keeps it in the label next to origin and taint; rename and hard link keep
// the label and so the stamp.
type Stamp struct {
	Class   Class            `json:"class"`
	Rule    Rule             `json:"rule"` // why the write got this class
	Hash    Hash             `json:"hash"` // the content the class is bound to
	Origin  policy.Principal `json:"origin"`
	Session string           `json:"session,omitempty"`
	Sources []Source         `json:"sources,omitempty"` // the lowest-class sources read, when they lowered the class
}

// MarshalText writes a Rule by its ID.
func (r Rule) MarshalText() ([]byte, error) { return []byte(r.ID()), nil }

// UnmarshalText reads a Rule from its ID; an unknown ID is RuleUnset.
func (r *Rule) UnmarshalText(b []byte) error {
	*r = RuleUnset
	for i, id := range ruleIDs {
		if id == string(b) {
			*r = Rule(i)
		}
	}
	return nil
}

// Decision is the act gate's verdict with what decided it.
type Decision struct {
	Outcome Outcome
	Rule    Rule
	Action  Action
	Class   Class    // the content's bound class
	Bound   Rule     // why the content has that class (the stamp's rule)
	Chain   []Source // the sources and their classes that bound it (shared with the stamp; do not modify)
	Hash    Hash
}

// Allowed reports whether the action goes ahead.
func (d Decision) Allowed() bool { return d.Outcome == Allow }

// Place is what the policy says of the path an action happens at, as far
// as the act gate cares. The zero Place is Ordinary.
type Place uint8

const (
	Ordinary  Place = iota // a path the agent profile does not name as machinery
	Machinery              // the client's own machinery (roots.NAME.machinery in the policy)
	numPlaces
)

var placeNames = [numPlaces]string{Ordinary: "ordinary", Machinery: "machinery"}

// String names the place for messages.
func (p Place) String() string {
	if p < numPlaces {
		return placeNames[p]
	}
	return fmt.Sprintf("Place(%d)", uint8(p))
}

// Check is the hot act-gate decision for content whose class is known,
// without elevation or tokens: pure, constant time, no allocation. A nil
// stamp (an unlabelled file) is refused: the caller labels before it asks.
//
// At the client's machinery (p == Machinery), inform content — what an
// untainted agent session wrote — may run and become configuration
// (RuleMachinery): the client writes these files for itself and runs or
// loads them at every start, and sending each to the owner's review would
// stop the client on its second day. none content is refused there as
// anywhere, and promotion does not care where it happens.
func Check(st *Stamp, a Action, c *Config, p Place) Decision {
	if st == nil || !st.Class.Valid() || a >= NumActions || p >= numPlaces {
		d := Decision{Rule: RuleInvalid, Action: a}
		if st != nil {
			d.Class, d.Bound, d.Chain, d.Hash = None, st.Rule, st.Sources, st.Hash
		}
		return d
	}
	d := Decision{Action: a, Class: st.Class, Bound: st.Rule, Chain: st.Sources, Hash: st.Hash}
	if st.Class == Act {
		d.Outcome, d.Rule = Allow, RuleAct
		return d
	}
	if st.Class == Inform && p == Machinery && a != Promote {
		d.Outcome, d.Rule = Allow, RuleMachinery
		return d
	}
	switch a {
	case Exec:
		switch {
		case st.Class == None:
			d.Rule = RuleExecNone
		case c.AgentScripts:
			d.Outcome, d.Rule = Allow, RuleInformExec
		default:
			d.Rule = RuleExecInform
		}
	case Control:
		if st.Class == None {
			d.Rule = RuleControlNone
		} else {
			d.Outcome, d.Rule = Quarantine, RuleControlInform
		}
	case Promote:
		if st.Class == None {
			d.Rule = RulePromoteNone
		} else {
			d.Outcome, d.Rule = Allow, RuleInformPromote
		}
	}
	return d
}
