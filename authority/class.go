// Package authority is aerfs's non-malleable authority core (TMA-NM,
// DESIGN.md §4 rule 7): what the content of a file may cause.
//
// Every write binds an authority class to the content it produces, from the
// writer's origin and from everything the writer had read, never from the
// bytes:
//
//	none < inform < act
//
// act is content written by the owner or by a vetted tool (TOOL_AUTH) from
// untainted input; inform is content written by an agent session from
// untainted input; none is content written by an untrusted principal or by
// anyone whose input included untrusted or none content. The class of a
// write is the minimum of the writer's base class and the class of every
// source its session read (M2), so a copy, a paraphrase or a trusted tool's
// echo of none content is none, and a rename or hard link keeps the class.
//
// The act gate (Check, Monitor.Authorize) decides the consequential
// actions — exec, becoming a control-class file, promotion — from that
// class, and for inform content from where the action happens: at the
// client's own machinery (Place Machinery, a path its agent profile names)
// an agent's untainted content may run and become configuration. Authority over one exact content hash rises only by attestations
// from k registered trusted attestors of distinct domains (M3) or by a
// single-use owner token bound to (path, hash, action).
//
// The package is pure: no file system, no clock (callers pass the time), no
// process inspection. It imports policy/ only for its Principal and Taint
// types. docs/authority.md describes how fs/ and daemon/ call it.
package authority

import (
	"encoding/hex"
	"fmt"
)

// Class is the authority of a content: what it may cause. The zero Class is
// None, so a missing class fails closed.
type Class uint8

const (
	None   Class = iota // may be read; never acts
	Inform              // an agent's own note: informs, acts only where policy allows
	Act                 // the owner's or a vetted tool's: may act
	numClasses
)

var classNames = [numClasses]string{None: "none", Inform: "inform", Act: "act"}

// String is the lower-case name used in labels, records and policy files.
func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// ParseClass returns the class named s.
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if s == n {
			return Class(i), nil
		}
	}
	return None, fmt.Errorf("unknown authority class %q (classes are none, inform, act)", s)
}

// Valid reports whether c is one of the three classes.
func (c Class) Valid() bool { return c < numClasses }

// Min returns the lower of a and b; an invalid class counts as None.
func Min(a, b Class) Class {
	if !a.Valid() || !b.Valid() {
		return None
	}
	if a < b {
		return a
	}
	return b
}

// Action is a consequential action the act gate decides.
type Action uint8

const (
	Exec    Action = iota // run the file (exec open, chmod +x)
	Control               // the content becomes a control-class file (write, rename, link, promote into a control path)
	Promote               // aerfs promote into the shared namespace
	NumActions
)

var actionNames = [NumActions]string{Exec: "exec", Control: "control", Promote: "promote"}

// String names the action as in `aerfs authorize --for`.
func (a Action) String() string {
	if a < NumActions {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// ParseAction returns the action named s.
func ParseAction(s string) (Action, error) {
	for i, n := range actionNames {
		if s == n {
			return Action(i), nil
		}
	}
	return 0, fmt.Errorf("unknown action %q (actions are exec, control, promote)", s)
}

// Outcome is what the gate says to do. The zero Outcome refuses.
type Outcome uint8

const (
	Refuse     Outcome = iota
	Allow              // the action goes ahead
	Quarantine         // kept for the owner's review, not applied and not lost
)

// String names the outcome for records.
func (o Outcome) String() string {
	switch o {
	case Refuse:
		return "refuse"
	case Allow:
		return "allow"
	case Quarantine:
		return "quarantine"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Hash is the SHA-256 of a content. Elevations and tokens are bound to it.
type Hash [32]byte

// String is the lower-case hex form used in records.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash reads the hex form.
func ParseHash(s string) (Hash, error) {
	var h Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("bad content hash %q: want 64 hex digits", s)
	}
	copy(h[:], b)
	return h, nil
}

// MarshalText and UnmarshalText let labels carry a Hash as hex in JSON.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

func (h *Hash) UnmarshalText(b []byte) error {
	v, err := ParseHash(string(b))
	if err != nil {
		return err
	}
	*h = v
	return nil
}

// MarshalText and UnmarshalText let labels carry a Class by name.
func (c Class) MarshalText() ([]byte, error) {
	if !c.Valid() {
		return nil, fmt.Errorf("invalid authority class %d", uint8(c))
	}
	return []byte(c.String()), nil
}

func (c *Class) UnmarshalText(b []byte) error {
	v, err := ParseClass(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}
