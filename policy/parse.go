package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aerfs/aerfs/configs"
	"go.yaml.in/yaml/v3"
)

// Error is a policy file error, with the line it was found on (0 when it
// concerns the whole file) and an actionable hint.
type Error struct {
	File string
	Line int
	Msg  string
	Hint string
}

// Error reads like "aerfs.yaml:12: unknown principal "ADMIN"".
func (e *Error) Error() string {
	if e.Line > 0 {
		return e.File + ":" + strconv.Itoa(e.Line) + ": " + e.Msg
	}
	return e.File + ": " + e.Msg
}

// Version is the policy file format this package reads.
const Version = 1

// maxPolicySize bounds what Parse reads: a policy is a page of YAML.
const maxPolicySize = 1 << 20

// The top-level keys, in the order the default file uses.
const (
	keyVersion    = "version"
	keyClasses    = "classes"
	keyNamespaces = "namespaces"
	keyBlocking   = "blocking_taint"
	keyExec       = "executables"
	keyUIDs       = "uids"
	keyBurst      = "burst"
	keyReview     = "review_sessions"
	keyOnDrift    = "on_drift"
	keySandbox    = "sandbox"
	keyFirstID    = "identity_first_create"
	keyNetwork    = "network"
)

var topKeys = []string{keyVersion, keyClasses, keyNamespaces, keyBlocking, keyExec, keyUIDs, keyBurst, keyReview, keyOnDrift, keySandbox, keyFirstID, keyRoots, keyNetwork}

// spec is a parsed but not yet merged policy file. has records which keys
// the file sets; the others come from the default policy.
type spec struct {
	has         map[string]bool
	classes     [numClasses][]pattern
	hasClass    [numClasses]bool
	sessions    string
	shared      string
	nsLine      int
	blocking    Taint
	executables []execRule
	uids        map[uint32]Principal
	// interpreters (interpreters.go)
	interpreters    []pattern
	hasInterpreters bool
	burstN          int
	burstWindow     time.Duration
	review          map[string]bool
	onDrift         DriftAction
	sandbox         sandboxSpec
	firstID         bool
	auth            AuthoritySettings // policy/authority_keys.go
	roots           []rootSpec
	network         networkSpec // network.go
}

var (
	defaultOnce sync.Once
	defaultSpec *spec
	defaultErr  error
)

// defaults parses the embedded default policy once. It must set every key:
// it is what a user file falls back to.
func defaults() (*spec, error) {
	defaultOnce.Do(func() {
		defaultSpec, defaultErr = parseSpec("aerfs.yaml (embedded default)", configs.DefaultPolicy, nil)
	})
	return defaultSpec, defaultErr
}

// Default returns the embedded default policy. It panics if the embedded
// file is broken, which a test rules out.
// It parses the file on each call; callers keep the result.
func Default() *Policy { return mustDefault(configs.DefaultPolicy) }

func mustDefault(data []byte) *Policy {
	p, err := parseWith("aerfs.yaml (embedded default)", data, nil)
	if err != nil {
		panic("aerfs: embedded default policy: " + err.Error())
	}
	return p
}

// Parse reads a policy file strictly: unknown or duplicate keys, values of
// the wrong type, unknown principal or taint names, bad globs and a missing
// or unsupported version are errors of type *Error. A key the file does not
// set keeps its default; a class the file does not list keeps its default
// patterns, and an empty list ([]) empties it.
func Parse(name string, data []byte) (*Policy, error) {
	d, err := defaults()
	if err != nil {
		return nil, err
	}
	return parseWith(name, data, d)
}

func parseWith(name string, data []byte, base *spec) (*Policy, error) {
	s, err := parseSpec(name, data, base)
	if err != nil {
		return nil, err
	}
	return compile(name, s), nil
}

// parser walks the YAML node tree, so that every error has a line.
type parser struct {
	file string
}

func (ps *parser) errf(n *yaml.Node, hint, format string, args ...any) *Error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{File: ps.file, Line: line, Msg: fmt.Sprintf(format, args...), Hint: hint}
}

// parseSpec parses data and fills what it does not set from base. With a
// nil base every key is required.
func parseSpec(name string, data []byte, base *spec) (*spec, error) {
	ps := &parser{file: name}
	if len(data) > maxPolicySize {
		return nil, &Error{File: name, Msg: fmt.Sprintf("policy file is larger than %d bytes", maxPolicySize), Hint: "a policy is a page of YAML; check that the right file is named"}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: name, Line: 1, Msg: "empty policy file", Hint: "start the file with: version: 1"}
		}
		return nil, ps.syntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, ps.errf(&extra, `keep one policy per file`, "more than one YAML document")
	} else if !errors.Is(err, io.EOF) {
		return nil, ps.syntaxError(err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if err := ps.plain(root); err != nil {
		return nil, err
	}
	if root.Kind != yaml.MappingNode {
		return nil, ps.errf(root, "start the file with: version: 1", "the policy must be a mapping of keys, found %s", kindName(root))
	}

	s := &spec{has: map[string]bool{}}
	// A session's /tmp is its own unless the policy says otherwise: its
	// sockets there are its own to reach (daemon/sockets.go), and the
	// owner's files and sockets in /tmp are out of its sight.
	s.sandbox.privateTmp = true
	var versionNode *yaml.Node
	err := ps.mapping(root, append(append(topKeys[:len(topKeys):len(topKeys)], authorityKeys...), keyInterpreters), func(key string, k, v *yaml.Node) error {
		s.has[key] = true
		switch key {
		case keyVersion:
			versionNode = v
			return ps.version(v)
		case keyClasses:
			return ps.classes(v, s)
		case keyNamespaces:
			return ps.namespaces(v, s)
		case keyBlocking:
			return ps.blocking(v, s)
		case keyExec:
			return ps.executables(v, s)
		case keyUIDs:
			return ps.uids(v, s)
		case keyBurst:
			return ps.burst(v, s)
		case keyReview:
			return ps.review(v, s)
		case keyOnDrift:
			return ps.onDrift(v, s)
		case keySandbox:
			return ps.sandbox(v, s)
		case keyFirstID:
			return ps.firstIdentity(v, s)
		case keyAttestors, keyElevation, keyAgentScripts:
			return ps.authorityKey(key, v, s)
		case keyRoots:
			return ps.roots(v, s)
		case keyNetwork:
			return ps.network(v, s)
		case keyInterpreters:
			return ps.interpreters(v, s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if versionNode == nil {
		return nil, ps.errf(root, "start the file with: version: 1", "missing version")
	}
	if err := ps.merge(root, s, base); err != nil {
		return nil, err
	}
	return s, nil
}

// syntaxError turns a YAML library error into an *Error with its line.
func (ps *parser) syntaxError(err error) *Error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, text, found := strings.Cut(rest, ":"); found {
			if n, convErr := strconv.Atoi(num); convErr == nil {
				line, msg = n, strings.TrimSpace(text)
			}
		}
	}
	return &Error{File: ps.file, Line: line, Msg: "invalid YAML: " + msg,
		Hint: `quote patterns that start with "*", "[", "!", "&" or "{", as in "*.pem"`}
}

// plain rejects anchors, aliases and merge keys anywhere in the tree: a
// policy is read by people, and what it says must be where it is written.
func (ps *parser) plain(n *yaml.Node) error {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return ps.errf(n, `write the value out; quote patterns that start with "*" or "&", as in "*.pem"`, "anchors and aliases are not supported in a policy file")
	}
	for _, c := range n.Content {
		if err := ps.plain(c); err != nil {
			return err
		}
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return "the " + strings.TrimPrefix(n.ShortTag(), "!!") + " " + strconv.Quote(n.Value)
	}
	return "a YAML node of kind " + strconv.Itoa(int(n.Kind))
}

// mapping calls fn for each key of n, in order, rejecting unknown and
// duplicate keys.
func (ps *parser) mapping(n *yaml.Node, allowed []string, fn func(key string, k, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return ps.errf(n, "expected keys: "+strings.Join(allowed, ", "), "expected a mapping, found %s", kindName(n))
	}
	seen := map[string]int{}
	for i := 0; i < len(n.Content); i += 2 { // key, value pairs
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			return ps.errf(k, "keys are plain words: "+strings.Join(allowed, ", "), "unexpected key %s", kindName(k))
		}
		if line, dup := seen[k.Value]; dup {
			return ps.errf(k, fmt.Sprintf("remove one of the two; the first is on line %d", line), "duplicate key %q", k.Value)
		}
		seen[k.Value] = k.Line
		known := false
		for _, a := range allowed {
			known = known || a == k.Value
		}
		if !known {
			return ps.errf(k, "known keys here are "+strings.Join(allowed, ", "), "unknown key %q", k.Value)
		}
		if err := fn(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

// str returns the string value of a scalar. Only YAML strings are
// accepted, so a pattern or name the YAML reader would turn into a number,
// a boolean or null is an error instead of a surprise.
func (ps *parser) str(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return "", ps.errf(n, "quote the value if it is meant as text", "%s must be a string, found %s", what, kindName(n))
	}
	return n.Value, nil
}

func (ps *parser) list(n *yaml.Node, what string) ([]*yaml.Node, error) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil, ps.errf(n, "write [] for an empty list", "%s must be a list, found nothing", what)
	}
	if n.Kind != yaml.SequenceNode {
		return nil, ps.errf(n, "write a YAML list: [a, b] or one \"- a\" per line", "%s must be a list, found %s", what, kindName(n))
	}
	return n.Content, nil
}

// patterns parses the list n (what names it in messages) of strings, each
// an item (such as "a pattern") compiled by compile, which returns a
// message and a hint when it refuses one. An empty list is an empty,
// non-nil slice.
func (ps *parser) patterns(n *yaml.Node, what, item string, compile func(string) (pattern, string, string)) ([]pattern, error) {
	items, err := ps.list(n, what)
	if err != nil {
		return nil, err
	}
	out := []pattern{}
	for _, it := range items {
		src, err := ps.str(it, item)
		if err != nil {
			return nil, err
		}
		pt, msg, hint := compile(src)
		if msg != "" {
			return nil, ps.errf(it, hint, "%s", msg)
		}
		out = append(out, pt)
	}
	return out, nil
}

func (ps *parser) integer(n *yaml.Node, what string, lo, hi int64) (int64, error) {
	var v int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		return 0, ps.errf(n, fmt.Sprintf("write a whole number from %d to %d", lo, hi), "%s must be an integer, found %s", what, kindName(n))
	}
	if v < lo || v > hi {
		return 0, ps.errf(n, fmt.Sprintf("write a whole number from %d to %d", lo, hi), "%s %d is out of range", what, v)
	}
	return v, nil
}
