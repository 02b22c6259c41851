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
)

var topKeys = []string{keyVersion, keyClasses, keyNamespaces, keyBlocking, keyExec, keyUIDs, keyBurst, keyReview}

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
	burstN      int
	burstWindow time.Duration
	review      map[string]bool
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
	var versionNode *yaml.Node
	err := ps.mapping(root, topKeys, func(key string, k, v *yaml.Node) error {
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
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, convErr := strconv.Atoi(rest[:i]); convErr == nil {
				line = n
				msg = strings.TrimSpace(rest[i+1:])
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
	for i := 0; i+1 < len(n.Content); i += 2 {
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

func (ps *parser) version(n *yaml.Node) error {
	hint := "this aerfs reads policy files of version " + strconv.Itoa(Version) + ": write version: " + strconv.Itoa(Version)
	var v int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		return ps.errf(n, hint, "version must be an integer, found %s", kindName(n))
	}
	if v != Version {
		return ps.errf(n, hint, "unsupported policy version %d", v)
	}
	return nil
}

var classKeys = []string{"identity", "memory", "control", "secret"}

func (ps *parser) classes(n *yaml.Node, s *spec) error {
	return ps.mapping(n, classKeys, func(key string, _, v *yaml.Node) error {
		var c Class
		switch key {
		case "identity":
			c = Identity
		case "memory":
			c = Memory
		case "control":
			c = Control
		case "secret":
			c = Secret
		}
		items, err := ps.list(v, "classes."+key)
		if err != nil {
			return err
		}
		s.hasClass[c] = true
		s.classes[c] = []pattern{}
		for _, it := range items {
			src, err := ps.str(it, "a pattern")
			if err != nil {
				return err
			}
			pt, msg, hint := compileGlob(src)
			if msg != "" {
				return ps.errf(it, hint, "%s", msg)
			}
			s.classes[c] = append(s.classes[c], pt)
		}
		return nil
	})
}

func (ps *parser) namespaces(n *yaml.Node, s *spec) error {
	s.nsLine = n.Line
	return ps.mapping(n, []string{"sessions", "shared"}, func(key string, _, v *yaml.Node) error {
		root, err := ps.str(v, "namespaces."+key)
		if err != nil {
			return err
		}
		if msg := checkRoot(root); msg != "" {
			return ps.errf(v, `write a workspace-relative directory such as "sessions"`, "namespaces.%s %q %s", key, root, msg)
		}
		if key == "sessions" {
			s.sessions = root
		} else {
			s.shared = root
		}
		return nil
	})
}

// checkRoot validates a namespace root: a clean relative directory path
// without wildcards.
func checkRoot(root string) string {
	if root == "" {
		return "is empty"
	}
	if strings.ContainsAny(root, `*?[\`) {
		return "contains a wildcard"
	}
	for comp := range strings.SplitSeq(root, "/") {
		if comp == "" || comp == "." || comp == ".." {
			return "is not a clean relative path"
		}
	}
	return ""
}

func (ps *parser) blocking(n *yaml.Node, s *spec) error {
	items, err := ps.list(n, keyBlocking)
	if err != nil {
		return err
	}
	s.blocking = 0
	for _, it := range items {
		name, err := ps.str(it, "a taint flag")
		if err != nil {
			return err
		}
		t, err := ParseTaint(name)
		if err != nil {
			return ps.errf(it, taintHint, "unknown taint %q", name)
		}
		if s.blocking&t != 0 {
			return ps.errf(it, "remove the second entry", "taint %s listed twice", t)
		}
		s.blocking |= t
	}
	return nil
}

func (ps *parser) principal(n *yaml.Node) (Principal, error) {
	name, err := ps.str(n, "principal")
	if err != nil {
		return 0, err
	}
	p, err := ParsePrincipal(name)
	if err != nil {
		return 0, ps.errf(n, principalHint, "unknown principal %q", name)
	}
	return p, nil
}

// entry parses a mapping whose keys are all required.
func (ps *parser) entry(n *yaml.Node, keys []string, fn func(key string, v *yaml.Node) error) error {
	got := map[string]bool{}
	err := ps.mapping(n, keys, func(key string, _, v *yaml.Node) error {
		got[key] = true
		return fn(key, v)
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if !got[k] {
			return ps.errf(n, "each entry has the keys "+strings.Join(keys, " and "), "entry without %s", k)
		}
	}
	return nil
}

func (ps *parser) executables(n *yaml.Node, s *spec) error {
	items, err := ps.list(n, keyExec)
	if err != nil {
		return err
	}
	s.executables = []execRule{}
	for _, it := range items {
		var e execRule
		err := ps.entry(it, []string{"match", "principal"}, func(key string, v *yaml.Node) error {
			if key == "principal" {
				p, err := ps.principal(v)
				e.principal = p
				return err
			}
			src, err := ps.str(v, "match")
			if err != nil {
				return err
			}
			if strings.Contains(src, "/") && !strings.HasPrefix(src, "/") {
				return ps.errf(v, "write a bare name such as curl or an absolute path such as /usr/bin/curl", "match %q is neither a bare name nor an absolute path", src)
			}
			pt, msg, hint := compileGlob(src)
			if msg != "" {
				return ps.errf(v, hint, "%s", msg)
			}
			e.pat = pt
			return nil
		})
		if err != nil {
			return err
		}
		s.executables = append(s.executables, e)
	}
	return nil
}

func (ps *parser) uids(n *yaml.Node, s *spec) error {
	items, err := ps.list(n, keyUIDs)
	if err != nil {
		return err
	}
	s.uids = map[uint32]Principal{}
	lines := map[uint32]int{}
	for _, it := range items {
		var (
			uid  uint32
			pr   Principal
			uidN *yaml.Node
		)
		err := ps.entry(it, []string{"uid", "principal"}, func(key string, v *yaml.Node) error {
			if key == "principal" {
				p, err := ps.principal(v)
				pr = p
				return err
			}
			u, err := ps.integer(v, "uid", 0, 1<<32-1)
			uid, uidN = uint32(u), v
			return err
		})
		if err != nil {
			return err
		}
		if line, dup := lines[uid]; dup {
			return ps.errf(uidN, fmt.Sprintf("remove one of the two; the first is on line %d", line), "uid %d listed twice", uid)
		}
		lines[uid] = uidN.Line
		s.uids[uid] = pr
	}
	return nil
}

func (ps *parser) burst(n *yaml.Node, s *spec) error {
	return ps.mapping(n, []string{"denials", "window"}, func(key string, _, v *yaml.Node) error {
		if key == "denials" {
			d, err := ps.integer(v, "burst.denials", 1, 1<<20)
			s.burstN = int(d)
			return err
		}
		w, err := ps.str(v, "burst.window")
		if err != nil {
			return err
		}
		d, perr := time.ParseDuration(w)
		if perr != nil || d <= 0 {
			return ps.errf(v, `write a positive duration such as "120s" or "5m"`, "bad burst.window %q", w)
		}
		s.burstWindow = d
		return nil
	})
}

func (ps *parser) review(n *yaml.Node, s *spec) error {
	items, err := ps.list(n, keyReview)
	if err != nil {
		return err
	}
	s.review = map[string]bool{}
	for _, it := range items {
		id, err := ps.str(it, "a session id")
		if err != nil {
			return err
		}
		if id == "" || id == "." || id == ".." || strings.Contains(id, "/") {
			return ps.errf(it, "a session id is one directory name under the sessions namespace", "bad session id %q", id)
		}
		s.review[id] = true
	}
	return nil
}

// merge fills what the file does not set from base, or requires every key
// when base is nil, then checks what only the whole policy can show.
func (ps *parser) merge(root *yaml.Node, s *spec, base *spec) error {
	for _, k := range topKeys {
		if s.has[k] || base == nil && (k == keyNamespaces || k == keyBurst) {
			continue
		}
		if base == nil {
			return ps.errf(root, "the default policy must set every key", "missing %s", k)
		}
		switch k {
		case keyBlocking:
			s.blocking = base.blocking
		case keyExec:
			s.executables = base.executables
		case keyUIDs:
			s.uids = base.uids
		case keyReview:
			s.review = base.review
		}
	}
	for c := Identity; c < numClasses; c++ {
		if s.hasClass[c] {
			continue
		}
		if base == nil {
			return ps.errf(root, "the default policy must list every class", "missing classes.%s", c)
		}
		s.classes[c] = base.classes[c]
	}
	if base == nil {
		if s.sessions == "" || s.shared == "" || s.burstN == 0 || s.burstWindow == 0 {
			return ps.errf(root, "the default policy must set every key", "missing namespaces or burst entries")
		}
	} else {
		if s.sessions == "" {
			s.sessions = base.sessions
		}
		if s.shared == "" {
			s.shared = base.shared
		}
		if s.burstN == 0 {
			s.burstN = base.burstN
		}
		if s.burstWindow == 0 {
			s.burstWindow = base.burstWindow
		}
	}
	if _, in := under(s.sessions, s.shared); in {
		return &Error{File: ps.file, Line: s.nsLine, Msg: fmt.Sprintf("namespaces overlap: %q and %q", s.sessions, s.shared), Hint: "the sessions and shared roots must be distinct directories, neither inside the other"}
	}
	if _, in := under(s.shared, s.sessions); in {
		return &Error{File: ps.file, Line: s.nsLine, Msg: fmt.Sprintf("namespaces overlap: %q and %q", s.sessions, s.shared), Hint: "the sessions and shared roots must be distinct directories, neither inside the other"}
	}
	return nil
}

// compile builds the immutable Policy.
func compile(name string, s *spec) *Policy {
	p := &Policy{
		name:        name,
		literal:     map[string]Class{},
		sessions:    s.sessions,
		shared:      s.shared,
		blocking:    s.blocking,
		executables: s.executables,
		uids:        s.uids,
		burstN:      s.burstN,
		burstWindow: s.burstWindow,
		review:      s.review,
	}
	for c := Identity; c < numClasses; c++ {
		r := classRank(c)
		for _, pt := range s.classes[c] {
			p.classPatterns[c] = append(p.classPatterns[c], pt.src)
			if c.Guarded() && !pt.anchored {
				p.guardedFloating = true
			}
			if !pt.anchored && pt.segs[0].kind == segLiteral {
				if old, ok := p.literal[pt.segs[0].lit]; !ok || classRank(old) > r {
					p.literal[pt.segs[0].lit] = c
				}
				continue
			}
			p.byRank[r] = append(p.byRank[r], pt)
		}
	}
	return p
}
