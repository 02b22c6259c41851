package policy

// Further guarded roots: directories outside the workspace (an agent's
// home-directory memory and configuration, such as ~/.claude) that the same
// daemon mounts and guards, with class rules of their own, one evidence log
// and one principal registry for all.

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// keyRoots is the top-level key of the further roots.
const keyRoots = "roots"

// MaxRoots bounds the number of further roots: each is a mount.
const MaxRoots = 16

// RootPrefix starts the record path of a file in a further root: a file
// "projects/p/memory/a.md" of the root "claude" is "@claude/projects/p/memory/a.md"
// in the evidence log. The workspace's own top-level "@<name>" is reserved
// (identity-class) so that no workspace path can take that form.
const RootPrefix = "@"

// rootSpec is one entry of roots: as written, with its own classes.
type rootSpec struct {
	name    string
	path    string // absolute, or "~/…" for the owner's home
	line    int
	classes [numClasses][]pattern
	// machinery is what the client writes and runs or loads for itself
	// (machinery.go).
	machinery []pattern
	pathNode  *yaml.Node
}

// Root is a further guarded root of a policy.
type Root struct {
	// Name is the root's name in the policy, and in records ("@Name/…").
	Name string
	// Path is the root's directory as written: absolute, or "~/…".
	Path string
	// Dir is the absolute directory, set by ResolveRoots.
	Dir string
	// Policy classes the paths of the root, relative to it; everything but
	// the classes, the namespaces (a root has none) and the machinery is
	// the policy's.
	Policy *Policy
	// Machinery lists the root's machinery patterns as written
	// (Policy.Machinery decides).
	Machinery []string
}

var rootKeys = []string{"path", "identity", "memory", "control", "secret", keyMachinery}

// checkRootName validates a root name: it becomes a path component of
// record paths ("@claude/…") and a file name in the state directory.
func checkRootName(n string) string {
	if n == "" {
		return "is empty"
	}
	if len(n) > 32 {
		return "is longer than 32 characters"
	}
	for i, c := range n {
		lower := c >= 'a' && c <= 'z'
		rest := i > 0 && (c >= '0' && c <= '9' || c == '-' || c == '_')
		if !lower && !rest {
			return "must start with a lowercase letter and hold only lowercase letters, digits, '-' and '_'"
		}
	}
	return ""
}

// checkRootPath validates a root directory as written: absolute or "~/…",
// clean, without wildcards, neither "/" nor the whole home.
func checkRootPath(p string) string {
	if p == "~" {
		return "is the whole home directory; name the agent's directory in it, such as ~/.claude"
	}
	return checkSandboxPath(p)
}

func (ps *parser) roots(n *yaml.Node, s *spec) error {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return ps.errf(n, "write {} for no further roots", "roots must be a mapping of names to roots, found nothing")
	}
	if n.Kind != yaml.MappingNode {
		return ps.errf(n, "write roots: {claude: {path: ~/.claude, memory: [...], control: [...]}}", "roots must be a mapping of names to roots, found %s", kindName(n))
	}
	s.roots = []rootSpec{}
	seen := map[string]int{}
	for i := 0; i < len(n.Content); i += 2 { // key, value pairs
		k, v := n.Content[i], n.Content[i+1]
		name, err := ps.str(k, "a root name")
		if err != nil {
			return err
		}
		if msg := checkRootName(name); msg != "" {
			return ps.errf(k, "name roots like claude, codex or gemini", "root name %q %s", name, msg)
		}
		if line, dup := seen[name]; dup {
			return ps.errf(k, fmt.Sprintf("remove one of the two; the first is on line %d", line), "duplicate root %q", name)
		}
		seen[name] = k.Line
		if len(s.roots) == MaxRoots {
			return ps.errf(k, fmt.Sprintf("guard at most %d further roots", MaxRoots), "too many roots")
		}
		r := rootSpec{name: name, line: k.Line}
		err = ps.entryOpt(v, rootKeys, []string{"path"}, func(key string, v *yaml.Node) error {
			if key == "path" {
				p, err := ps.str(v, "roots."+name+".path")
				if err != nil {
					return err
				}
				if len(p) > 1 {
					p = strings.TrimSuffix(p, "/")
				}
				if msg := checkRootPath(p); msg != "" {
					return ps.errf(v, "write an absolute directory such as /home/me/.claude, or one in the owner's home such as ~/.claude", "roots.%s.path %q %s", name, p, msg)
				}
				r.path, r.pathNode = p, v
				return nil
			}
			if key == keyMachinery {
				return ps.machinery(v, &r)
			}
			c := map[string]Class{"identity": Identity, "memory": Memory, "control": Control, "secret": Secret}[key]
			pts, err := ps.patterns(v, "roots."+name+"."+key, "a pattern", compileClassPattern)
			r.classes[c] = pts
			return err
		})
		if err != nil {
			return err
		}
		for _, o := range s.roots {
			if a, b := o.path, r.path; pathsOverlap(a, b) {
				return ps.errf(r.pathNode, "each root is its own directory, neither inside another", "roots %q (%s) and %q (%s) overlap", o.name, a, name, b)
			}
		}
		s.roots = append(s.roots, r)
	}
	return nil
}

// entryOpt parses a mapping with the allowed keys, of which required must
// be present.
func (ps *parser) entryOpt(n *yaml.Node, keys, required []string, fn func(key string, v *yaml.Node) error) error {
	got := map[string]bool{}
	err := ps.mapping(n, keys, func(key string, _, v *yaml.Node) error {
		got[key] = true
		return fn(key, v)
	})
	if err != nil {
		return err
	}
	for _, k := range required {
		if !got[k] {
			return ps.errf(n, "each root has a path and its class lists: "+strings.Join(keys, ", "), "root without %s", k)
		}
	}
	return nil
}

// pathsOverlap reports whether a and b are the same directory or one is
// inside the other (as strings: both clean).
func pathsOverlap(a, b string) bool {
	_, in1 := under(a, b)
	_, in2 := under(b, a)
	return in1 || in2
}

// compileRoots builds the policy of each root from its parent: the root's
// classes, no namespaces. The parent's top-level "@<name>" is reserved.
func compileRoots(p *Policy, s *spec) {
	for _, r := range s.roots {
		rp := *p
		rp.name = p.name + " (root " + r.name + ")"
		rp.literal, rp.dirs = map[string]uint8{}, map[string]uint8{}
		rp.byRank, rp.excl = [numRanks][]pattern{}, [numRanks][]pattern{}
		rp.classPatterns = [numClasses][]string{}
		rp.guardedFloating = false
		rp.roots = nil
		rp.machinery = r.machinery
		// No path of a root is in a namespace: no clean relative path
		// holds a NUL byte.
		rp.sessions, rp.shared = "\x00sessions", "\x00shared"
		addClasses(&rp, r.classes)
		p.roots = append(p.roots, Root{Name: r.name, Path: r.path, Policy: &rp, Machinery: patternSources(r.machinery)})
		pt, _, _ := compileGlob("/" + RootPrefix + r.name + "/**")
		p.byRank[rankIdentity] = append(p.byRank[rankIdentity], pt)
	}
}

// addClasses adds the patterns of each class to p.
func addClasses(p *Policy, classes [numClasses][]pattern) {
	for c := Identity; c < numClasses; c++ {
		r := classRank(c)
		for _, pt := range classes[c] {
			p.classPatterns[c] = append(p.classPatterns[c], pt.src)
			if pt.exclude {
				p.excl[r] = append(p.excl[r], pt)
				continue
			}
			if lit := !pt.anchored && pt.segs[0].kind == segLiteral; lit {
				p.literal[pt.segs[0].lit] |= 1 << r
			} else if pt.anyDir() {
				p.dirs[pt.segs[1].lit] |= 1 << r
			} else {
				p.byRank[r] = append(p.byRank[r], pt)
			}
			if c.Guarded() && (!pt.anchored || pt.anyDir()) {
				p.guardedFloating = true
			}
		}
	}
}

// Roots returns the further roots as written, in the policy's order, with
// Dir unset (see ResolveRoots).
func (p *Policy) Roots() []Root { return append([]Root(nil), p.roots...) }

// Root returns the root called name.
func (p *Policy) Root(name string) (Root, bool) {
	for _, r := range p.roots {
		if r.Name == name {
			return r, true
		}
	}
	return Root{}, false
}

// ResolveRoots returns the further roots with Dir set: "~" replaced by home
// (the workspace owner's home directory). It refuses, with a message that
// names both, a root that overlaps another, the workspace or the state
// directory (all absolute, clean), and a "~" root when home is unknown.
func (p *Policy) ResolveRoots(home, workspace, stateDir string) ([]Root, error) {
	out := make([]Root, 0, len(p.roots))
	for _, r := range p.roots {
		d := r.Path
		if rest, ok := strings.CutPrefix(d, "~"); ok {
			if home == "" || !strings.HasPrefix(home, "/") {
				return nil, fmt.Errorf("root %s: %s is in the owner's home, whose directory is unknown", r.Name, r.Path)
			}
			d = path.Clean(strings.TrimSuffix(home, "/") + rest)
		}
		if d == "/" {
			return nil, fmt.Errorf("root %s: %s is the whole file system", r.Name, d)
		}
		if d == path.Clean(home) {
			return nil, fmt.Errorf("root %s: %s is the whole home directory", r.Name, d)
		}
		for _, o := range []struct{ what, dir string }{{"the workspace", workspace}, {"the state directory", stateDir}} {
			if o.dir != "" && pathsOverlap(strings.TrimPrefix(d, "/"), strings.TrimPrefix(path.Clean(o.dir), "/")) {
				return nil, fmt.Errorf("root %s (%s) overlaps %s %s: a root is a directory of its own, neither inside nor around it", r.Name, d, o.what, o.dir)
			}
		}
		for _, q := range out {
			if pathsOverlap(strings.TrimPrefix(d, "/"), strings.TrimPrefix(q.Dir, "/")) {
				return nil, fmt.Errorf("roots %s (%s) and %s (%s) overlap: each root is its own directory, neither inside another", q.Name, q.Dir, r.Name, d)
			}
		}
		r.Dir = d
		out = append(out, r)
	}
	return out, nil
}

// SplitRootPath splits a record path "@name/rel" into the root name and the
// path relative to it ("" for the root itself); ok is false for a
// workspace path.
func SplitRootPath(p string) (name, rel string, ok bool) {
	rest, found := strings.CutPrefix(p, RootPrefix)
	if !found {
		return "", "", false
	}
	name, rel, _ = strings.Cut(rest, "/")
	if checkRootName(name) != "" {
		return "", "", false
	}
	return name, rel, true
}

// RootNames lists the root names, sorted.
func (p *Policy) RootNames() []string {
	out := make([]string, 0, len(p.roots))
	for _, r := range p.roots {
		out = append(out, r.Name)
	}
	sort.Strings(out)
	return out
}
