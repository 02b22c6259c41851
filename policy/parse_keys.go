package policy

// The keys of a policy file, one function each, then merging with the
// defaults and compiling.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

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
		pts, err := ps.patterns(v, "classes."+key, "a pattern", compileClassPattern)
		if err != nil {
			return err
		}
		s.hasClass[c] = true
		s.classes[c] = pts
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
	mergeAuthority(s, base)
	mergeNetwork(s, base)
	mergeInterpreters(s, base)
	for _, k := range topKeys {
		if s.has[k] || k == keyRoots || k == keyNetwork {
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
		case keyOnDrift:
			s.onDrift = base.onDrift
		case keySandbox:
			s.sandbox = base.sandbox
		case keyFirstID:
			s.firstID = base.firstID
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
	if s.has[keySandbox] && s.sandbox.writable == nil {
		if base == nil {
			return ps.errf(root, "the default policy must set every key", "missing sandbox.writable")
		}
		s.sandbox.writable = base.sandbox.writable
	}
	if s.has[keySandbox] && s.sandbox.network == "" {
		if base == nil {
			return ps.errf(root, "the default policy must set every key", "missing sandbox.network")
		}
		s.sandbox.network = base.sandbox.network
	}
	if base == nil && !s.network.hasHosts {
		return ps.errf(root, "the default policy must set every key", "missing network.hosts")
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
		name:         name,
		literal:      map[string]uint8{},
		dirs:         map[string]uint8{},
		sessions:     s.sessions,
		shared:       s.shared,
		blocking:     s.blocking,
		executables:  s.executables,
		interpreters: s.interpreters,
		uids:         s.uids,
		burstN:       s.burstN,
		burstWindow:  s.burstWindow,
		review:       s.review,
		onDrift:      s.onDrift,
		firstID:      s.firstID,
		auth:         s.auth,
		writable:     s.sandbox.writable,
		privateTmp:   s.sandbox.privateTmp,
		private:      s.sandbox.private,
		sockets:      s.sandbox.sockets,

		hosts:        s.network.hosts,
		secretEgress: s.network.secretEgress,
	}
	if s.sandbox.network == "open" {
		p.netMode = NetworkOpen
	}
	defer compileRoots(p, s)
	addClasses(p, s.classes)
	return p
}

func (ps *parser) firstIdentity(n *yaml.Node, s *spec) error {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&s.firstID) != nil {
		return ps.errf(n, "identity_first_create is true or false", "identity_first_create must be true or false, found %q", n.Value)
	}
	return nil
}

func (ps *parser) onDrift(n *yaml.Node, s *spec) error {
	v, err := ps.str(n, keyOnDrift)
	if err != nil {
		return err
	}
	switch v {
	case "record":
		s.onDrift = DriftRecord
	case "restore":
		s.onDrift = DriftRestore
	default:
		return ps.errf(n, "on_drift is record or restore", "unknown on_drift action %q", v)
	}
	return nil
}

// sandboxSpec is the sandbox key: what a confined session may change
// outside the workspace.
type sandboxSpec struct {
	writable   []string // absolute, or "~" and "~/…" for the owner's home
	privateTmp bool
	private    []string // directories a session gets empty and its own (as writable)
	sockets    []string // path sockets a confined session may connect to, as writable
	network    string   // proxy or open; "" when the file does not say
}

func (ps *parser) sandbox(n *yaml.Node, s *spec) error {
	return ps.mapping(n, []string{"writable", "private", "private_tmp", "network", "sockets"}, func(key string, _, v *yaml.Node) error {
		if key == "private_tmp" {
			if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!bool" || v.Decode(&s.sandbox.privateTmp) != nil {
				return ps.errf(v, "write private_tmp: true or private_tmp: false", "sandbox.private_tmp must be true or false, found %s", kindName(v))
			}
			return nil
		}
		if key == "network" {
			net, err := ps.str(v, "sandbox.network")
			if err != nil {
				return err
			}
			if net != "proxy" && net != "open" {
				return ps.errf(v, "write network: proxy (a session's only way out is aerfs's proxy) or network: open (the host's network, unrecorded)", "unknown sandbox.network %q", net)
			}
			s.sandbox.network = net
			return nil
		}
		list, err := ps.sandboxPaths(v, "sandbox."+key)
		if key == "sockets" {
			s.sandbox.sockets = list
		} else if key == "private" {
			s.sandbox.private = list
		} else {
			s.sandbox.writable = list
		}
		return err
	})
}

// sandboxPaths reads a list of sandbox paths (sandbox.writable,
// sandbox.sockets).
func (ps *parser) sandboxPaths(v *yaml.Node, what string) ([]string, error) {
	items, err := ps.list(v, what)
	if err != nil {
		return nil, err
	}
	out := []string{}
	seen := map[string]int{}
	for _, it := range items {
		p, err := ps.str(it, "a path")
		if err != nil {
			return nil, err
		}
		if msg := checkSandboxPath(p); msg != "" {
			return nil, ps.errf(it, `write an absolute path such as /tmp, or one in the owner's home such as ~/scratch`, "%s %q %s", what, p, msg)
		}
		if msg := ownerCache(p); msg != "" && what == "sandbox.writable" {
			return nil, ps.errf(it, "remove it: each confined session gets build and package caches of its own (docs/confinement.md)",
				"%s %q %s: a session that writes it has the owner's own builds run its code", what, p, msg)
		}
		if line, dup := seen[p]; dup {
			return nil, ps.errf(it, fmt.Sprintf("remove one of the two; the first is on line %d", line), "%s %q listed twice", what, p)
		}
		seen[p] = it.Line
		out = append(out, p)
	}
	return out, nil
}

// checkSandboxPath validates a sandbox path: absolute or below "~", clean,
// without wildcards, and not the whole file system.
func checkSandboxPath(p string) string {
	rest := p
	if p == "~" {
		return "is the whole home directory, where the owner's shell and tools keep what they run"
	}
	if strings.HasPrefix(p, "~/") {
		rest = p[1:]
	} else if strings.HasPrefix(p, "~") {
		return "names another user's home; only ~ (the owner's) is expanded"
	} else if !strings.HasPrefix(p, "/") {
		return "is relative"
	}
	if rest == "/" {
		return "is the whole file system"
	}
	if strings.ContainsAny(rest, "*?[\\") {
		return "contains a wildcard"
	}
	for comp := range strings.SplitSeq(rest[1:], "/") {
		if comp == "" || comp == "." || comp == ".." {
			return "is not a clean path"
		}
	}
	return ""
}
