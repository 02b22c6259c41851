package policy

import (
	"fmt"
	"strings"
)

// principalNames is indexed by Principal.
var principalNames = [numPrincipals]string{
	External:   "EXTERNAL",
	Channel:    "CHANNEL",
	Web:        "WEB",
	Skill:      "SKILL",
	ToolUnauth: "TOOL_UNAUTH",
	ToolAuth:   "TOOL_AUTH",
	User:       "USER",
	Sys:        "SYS",
}

// principalHint lists the names from the most to the least trusted, the
// order in which users think of them.
const principalHint = "principals are SYS, USER, TOOL_AUTH, TOOL_UNAUTH, WEB, SKILL, CHANNEL, EXTERNAL"

// String returns the upper-case name used in policy files and records.
func (p Principal) String() string {
	if p.Valid() {
		return principalNames[p]
	}
	return fmt.Sprintf("Principal(%d)", uint8(p))
}

// ParsePrincipal returns the principal named s, ignoring case.
func ParsePrincipal(s string) (Principal, error) {
	for p, name := range principalNames {
		if strings.EqualFold(s, name) {
			return Principal(p), nil
		}
	}
	return 0, fmt.Errorf("unknown principal %q (%s)", s, principalHint)
}

// Principals returns every named principal, from the most to the least
// trusted.
func Principals() []Principal {
	return []Principal{Sys, User, ToolAuth, ToolUnauth, Web, Skill, Channel, External}
}

// Lower returns the less trusted of cur and to: trust only goes down. When
// both have the same level (WEB and SKILL, CHANNEL and EXTERNAL) it returns
// to, so that an executable rule such as curl → WEB names the channel the
// data really comes through and OriginTaint reflects it. An invalid
// principal on either side yields External: default deny on doubt.
func Lower(cur, to Principal) Principal {
	if !cur.Valid() || !to.Valid() {
		return External
	}
	if cur.Level() < to.Level() {
		return cur
	}
	return to
}

// taintNames is indexed by bit number.
var taintNames = [numTaintBits]string{
	"UNTRUSTED",
	"INJECTION_SUSPECT",
	"PROXY_DERIVED",
	"SECRET_RISK",
	"CROSS_SESSION",
	"TOOL_OUTPUT",
	"SKILL_OUTPUT",
	"WEB_DERIVED",
}

const taintHint = "taint flags are UNTRUSTED, INJECTION_SUSPECT, PROXY_DERIVED, SECRET_RISK, CROSS_SESSION, TOOL_OUTPUT, SKILL_OUTPUT, WEB_DERIVED"

// ParseTaint returns the single flag named s, ignoring case.
func ParseTaint(s string) (Taint, error) {
	for i, name := range taintNames {
		if strings.EqualFold(s, name) {
			return 1 << i, nil
		}
	}
	return 0, fmt.Errorf("unknown taint %q (%s)", s, taintHint)
}

// Names returns the names of the flags in t, ordered by bit. Bits that name
// no flag are reported as one hexadecimal entry at the end rather than
// dropped, so a corrupted label is visible.
func (t Taint) Names() []string {
	var names []string
	for i, name := range taintNames {
		if t&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	if rest := t &^ AllTaint; rest != 0 {
		names = append(names, fmt.Sprintf("0x%x", uint16(rest)))
	}
	return names
}

// String joins the flag names with "|"; the empty set is "none".
func (t Taint) String() string {
	if t == 0 {
		return "none"
	}
	return strings.Join(t.Names(), "|")
}

// OriginTaint is the taint a file carries because of who wrote it, on top
// of the writer's own taint. Only USER and SYS leave no mark. An invalid
// principal is treated as untrusted.
func OriginTaint(p Principal) Taint {
	switch p {
	case Sys, User:
		return 0
	case ToolAuth:
		return ToolOutput
	case ToolUnauth:
		return ToolOutput | Untrusted
	case Web:
		return WebDerived | Untrusted
	case Skill:
		return SkillOutput | Untrusted
	default: // Channel, External, invalid
		return Untrusted
	}
}

// String returns the lower-case name used in policy files.
func (c Class) String() string {
	switch c {
	case Plain:
		return "plain"
	case Identity:
		return "identity"
	case Memory:
		return "memory"
	case Control:
		return "control"
	case Secret:
		return "secret"
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// String names the namespace for logs.
func (n Namespace) String() string {
	switch n {
	case NSNone:
		return "none"
	case NSSession:
		return "session"
	case NSShared:
		return "shared"
	case NSSessionsRoot:
		return "sessions-root"
	}
	return fmt.Sprintf("Namespace(%d)", uint8(n))
}

var opNames = [numOps]string{
	OpLookup:     "lookup",
	OpRead:       "read",
	OpWrite:      "write",
	OpCreate:     "create",
	OpUnlink:     "unlink",
	OpRenameFrom: "rename-from",
	OpRenameTo:   "rename-to",
	OpLink:       "link",
	OpSetattr:    "setattr",
	OpXattr:      "xattr",
	OpExec:       "exec",
	OpPromote:    "promote",
}

// String names the operation for logs.
func (o Op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}
