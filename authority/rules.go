package authority

import "fmt"

// Rule names why a class was bound, an attestation counted or ignored, a
// token minted or refused, or an action decided. The ids are stable: they
// go into evidence records and tests match them. The zero Rule is RuleUnset.
type Rule uint8

const (
	RuleUnset Rule = iota

	// Binding a class at write time (M1, M2).
	RuleWriteOwner        // act: written by the owner outside every agent session
	RuleWriteTool         // act: written by a TOOL_AUTH principal from untainted input
	RuleWriteAgent        // inform: written by an agent session from untainted input
	RuleWriteUntrusted    // none: written by an untrusted principal
	RuleWriteUnidentified // none: the writer could not be identified
	RuleWriteTainted      // none: the writer carries untrusted taint
	RuleWriteSource       // lowered to the class of a source the writer's session read

	// The act gate.
	RuleAct           // the content's class is act
	RuleElevated      // k trusted attestations of distinct domains for this hash
	RuleToken         // a fresh owner token for this path, hash and action, now spent
	RuleInformExec    // inform content runs: the policy allows agents' scripts
	RuleInformPromote // inform content is promoted by the owner; it stays inform
	RuleExecNone      // none content is never executed
	RuleExecInform    // inform content is not executed unless the policy allows agents' scripts
	RuleControlNone   // none content never becomes a control file
	RuleControlInform // inform content goes to quarantine for the owner instead of becoming a control file
	RuleMachinery     // inform content runs or becomes configuration at the client's own machinery
	RulePromoteNone   // none content is never promoted (rule 7)
	RuleInvalid       // an invalid class or action: refused

	// Attestations (M3).
	RuleAttestCounted      // counted for its domain
	RuleAttestSameDomain   // accepted, but its domain was already counted
	RuleAttestUnregistered // ignored: the attestor is not registered with a domain
	RuleAttestUntrusted    // ignored: the attestor is not a trusted principal outside agent sessions
	RuleAttestTainted      // ignored: the attestor read untrusted or non-act input
	RuleAttestSelf         // ignored: the attestor wrote this content itself
	RuleAttestRepeat       // ignored: this attestor already attested this hash

	// Owner tokens.
	RuleMint         // minted on the owner channel
	RuleMintSession  // refused: minted from inside a session
	RuleMintNotOwner // refused: the minter is not a trusted, identified principal
	RuleMintBad      // refused: invalid action or time to live
	RuleTokenUnknown // refused: no such token
	RuleTokenReplay  // refused: the token was already spent
	RuleTokenPath    // refused: the token is for another file
	RuleTokenAction  // refused: the token is for another action
	RuleTokenContent // refused: the content changed since the token was minted
	RuleTokenExpired // refused: the token expired
	numRules
)

var ruleIDs = [numRules]string{
	RuleUnset:              "AU-unset",
	RuleWriteOwner:         "AU1-owner",
	RuleWriteTool:          "AU1-tool",
	RuleWriteAgent:         "AU1-agent",
	RuleWriteUntrusted:     "AU1-untrusted",
	RuleWriteUnidentified:  "AU1-unidentified",
	RuleWriteTainted:       "AU2-tainted",
	RuleWriteSource:        "AU2-source",
	RuleAct:                "AU3-act",
	RuleElevated:           "AU4-elevated",
	RuleToken:              "AU5-token",
	RuleInformExec:         "AU3-inform-exec",
	RuleInformPromote:      "AU3-inform-promote",
	RuleExecNone:           "AU3-exec-none",
	RuleExecInform:         "AU3-exec-inform",
	RuleControlNone:        "AU3-control-none",
	RuleControlInform:      "AU3-control-quarantine",
	RuleMachinery:          "AU3-machinery",
	RulePromoteNone:        "AU3-promote-none",
	RuleInvalid:            "AU-invalid",
	RuleAttestCounted:      "AU4-attest",
	RuleAttestSameDomain:   "AU4-same-domain",
	RuleAttestUnregistered: "AU4-unregistered",
	RuleAttestUntrusted:    "AU4-untrusted",
	RuleAttestTainted:      "AU4-tainted",
	RuleAttestSelf:         "AU4-self",
	RuleAttestRepeat:       "AU4-repeat",
	RuleMint:               "AU5-mint",
	RuleMintSession:        "AU5-mint-session",
	RuleMintNotOwner:       "AU5-mint-not-owner",
	RuleMintBad:            "AU5-mint-bad",
	RuleTokenUnknown:       "AU5-unknown",
	RuleTokenReplay:        "AU5-replay",
	RuleTokenPath:          "AU5-other-file",
	RuleTokenAction:        "AU5-other-action",
	RuleTokenContent:       "AU5-content-changed",
	RuleTokenExpired:       "AU5-expired",
}

var ruleReasons = [numRules]string{
	RuleUnset:              "no rule decided",
	RuleWriteOwner:         "written by the owner outside every agent session",
	RuleWriteTool:          "written by a vetted tool from untainted input",
	RuleWriteAgent:         "written by an agent session from untainted input",
	RuleWriteUntrusted:     "written by an untrusted principal",
	RuleWriteUnidentified:  "the writer could not be identified",
	RuleWriteTainted:       "the writer had read untrusted input",
	RuleWriteSource:        "derived from a lower-class source the writer read",
	RuleAct:                "the content's class is act",
	RuleElevated:           "corroborated by k trusted attestors of distinct domains for this exact content",
	RuleToken:              "a single-use owner token for this file, content and action",
	RuleInformExec:         "the policy lets agents' scripts run",
	RuleInformPromote:      "the owner promotes an agent's note; it stays inform",
	RuleExecNone:           "content of class none is never executed",
	RuleExecInform:         "an agent's content is not executed unless the policy allows agents' scripts",
	RuleControlNone:        "content of class none never becomes a control file",
	RuleControlInform:      "an agent's content becomes a control file only after the owner's review",
	RuleMachinery:          "the client's own machinery: what an untainted agent session wrote at a path its profile names as machinery runs or loads",
	RulePromoteNone:        "content of class none is never promoted",
	RuleInvalid:            "invalid class or action",
	RuleAttestCounted:      "counted for its domain",
	RuleAttestSameDomain:   "its domain was already counted",
	RuleAttestUnregistered: "the attestor is not registered with a domain",
	RuleAttestUntrusted:    "the attestor is not a trusted principal outside agent sessions",
	RuleAttestTainted:      "the attestor had read untrusted or non-act input",
	RuleAttestSelf:         "a content cannot attest itself",
	RuleAttestRepeat:       "this attestor already attested this content",
	RuleMint:               "minted on the owner channel",
	RuleMintSession:        "tokens are minted only on the owner channel, outside every session",
	RuleMintNotOwner:       "only the identified owner mints tokens",
	RuleMintBad:            "invalid action or time to live",
	RuleTokenUnknown:       "no such token",
	RuleTokenReplay:        "the token was already spent",
	RuleTokenPath:          "the token is for another file",
	RuleTokenAction:        "the token is for another action",
	RuleTokenContent:       "the content changed since the token was minted",
	RuleTokenExpired:       "the token expired",
}

// ID is the stable identifier written to the evidence log.
func (r Rule) ID() string {
	if r < numRules {
		return ruleIDs[r]
	}
	return fmt.Sprintf("AU-invalid(%d)", uint8(r))
}

// RuleByID is the rule whose ID is id (as records carry it).
func RuleByID(id string) (Rule, bool) {
	for r, x := range ruleIDs {
		if x == id && x != "" {
			return Rule(r), true
		}
	}
	return RuleUnset, false
}

// Reason is a short explanation: lower case, no trailing period.
func (r Rule) Reason() string {
	if r < numRules {
		return ruleReasons[r]
	}
	return "invalid rule"
}

// String is the rule's ID.
func (r Rule) String() string { return r.ID() }
