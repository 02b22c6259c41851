package policy

import (
	"path"
	"strings"
	"sync"
)

// systemDirs are the directories outside the workspace whose files only
// the system's package manager installs: a symlink into them (a virtual
// environment's python -> /usr/bin/python3) leads to nothing a session
// wrote.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/nix/store", "/gnu/store"}

// SymlinkEscapes reports whether a symlink at link (a path relative to the
// root) naming target leads out of what the policy sees: outside the root
// (an absolute target beyond the system's directories, a relative one that
// climbs above the root), or into a directory where a name the policy
// guards below link is not guarded the same way (an excluded directory
// such as node_modules/: proj -> node_modules/p makes proj/Makefile a
// control name whose file is no control file).
func (p *Policy) SymlinkEscapes(link, target string) bool {
	if target == "" {
		return false
	}
	if path.IsAbs(target) {
		t := path.Clean(target)
		for _, d := range systemDirs {
			if t == d || strings.HasPrefix(t, d+"/") {
				return false
			}
		}
		return true
	}
	if climbsThroughName(target) {
		return true
	}
	to := path.Join(path.Dir(link), target)
	if to == ".." || strings.HasPrefix(to, "../") {
		return true
	}
	for _, name := range p.probesBelow(link) {
		cl, _, _ := p.Classify(path.Join(link, name))
		ct, _, _ := p.Classify(strings.TrimPrefix(path.Join(to, name), "./"))
		if cl.Guarded() && ct != cl {
			return true
		}
	}
	return false
}

// probesBelow is a name below link for each way a pattern of the policy
// can guard a name below it (probeIndex): any name ("x"), the rest of
// every pattern past a component link's own name matches, and every name
// guarded at any depth.
func (p *Policy) probesBelow(link string) []string {
	x := p.probeIndex()
	out := append([]string{"x"}, x.rests(path.Base(link))...)
	return append(out, x.anyDepth...)
}

// SymlinkUnguards reports whether a symlink at link (a path relative to the
// root) naming target would make a name the policy guards serve what it
// does not guard the same way: link itself is guarded and target is not a
// name of the same class inside the root, or a name below link is guarded
// there and not beside it (memory -> notes makes memory/prefs.md a plain
// file; .github -> gh makes .github/copilot-instructions.md one) and the
// same name below target is not. Such a link hands the guarded name's
// content to whoever may write the target. An empty target (a FIFO, a
// socket or a device at the name) unguards any guarded name: whoever holds
// it open writes what its readers load. It is asked at every follow of a
// symlink, so the common answer (nothing guarded at or below link) costs a
// few classifications.
func (p *Policy) SymlinkUnguards(link, target string) bool {
	at := func(base, name string) Class {
		c, _, _ := p.Classify(strings.TrimPrefix(path.Join(base, name), "./"))
		return c
	}
	below := append([]string{"x"}, p.probeIndex().rests(path.Base(link))...)
	// Guarded at link: its own name, or a name below it that is guarded
	// there and not beside link (memory/x, .claude/x; not MEMORY.md, which
	// is memory at any depth, below any link).
	guarded := at(link, "").Guarded()
	for _, name := range below {
		cl := at(link, name)
		guarded = guarded || cl.Guarded() && cl != at(path.Dir(link), name)
	}
	if !guarded {
		return false
	}
	if target == "" || path.IsAbs(target) || climbsThroughName(target) {
		return true
	}
	to := path.Join(path.Dir(link), target)
	if to == "." || to == ".." || strings.HasPrefix(to, "../") {
		return true
	}
	probes := append([]string{""}, below...)
	probes = append(probes, p.probeIndex().anyDepth...)
	for _, name := range probes {
		if cl := at(link, name); cl.Guarded() && at(to, name) != cl {
			return true
		}
	}
	return false
}

// probeIndex is, for each way a pattern of the policy guards a name below
// another, a name to probe: rests, by the name of the directory the
// pattern names ("**/.github/copilot-instructions.md" guards
// copilot-instructions.md below .github, ".git/worktrees/*/commondir"
// x/commondir below worktrees), its wildcards read as the name x; and
// anyDepth, the names guarded at any depth (MEMORY.md, .claude/x), which
// an excluded directory a link leads into may not guard.
type probeIndex struct {
	byName map[string][]string
	glob   []globRest
	// anyDepth: every base name and "**/NAME/**" directory the policy
	// guards at any depth.
	anyDepth []string
}

type globRest struct{ comp, rest string }

func (x *probeIndex) rests(base string) []string {
	out := x.byName[base]
	for _, g := range x.glob {
		if ok, _ := path.Match(g.comp, base); ok {
			out = append(out[:len(out):len(out)], g.rest)
		}
	}
	return out
}

// probeIndexes holds each policy's index, made at its first use (a policy
// is never changed once made; an edit makes a new one).
var probeIndexes sync.Map // *Policy → *probeIndex

func (p *Policy) probeIndex() *probeIndex {
	if x, ok := probeIndexes.Load(p); ok {
		return x.(*probeIndex)
	}
	x := &probeIndex{byName: map[string][]string{}}
	for name := range p.literal {
		x.anyDepth = append(x.anyDepth, name)
	}
	for d := range p.dirs {
		x.anyDepth = append(x.anyDepth, d+"/x")
	}
	for c := range p.classPatterns {
		for _, src := range p.classPatterns[c] {
			comps := strings.Split(strings.TrimPrefix(strings.TrimPrefix(src, "!"), "/"), "/")
			for i, comp := range comps[:len(comps)-1] {
				if comp == "**" {
					continue // any name, as beside the link
				}
				rest := make([]string, 0, len(comps)-i-1)
				for _, r := range comps[i+1:] {
					if strings.ContainsAny(r, "*?[") {
						r = strings.NewReplacer("**", "x", "*", "x", "?", "x").Replace(r)
						if strings.Contains(r, "[") {
							r = "x"
						}
					}
					rest = append(rest, r)
				}
				if strings.ContainsAny(comp, "*?[") {
					x.glob = append(x.glob, globRest{comp, path.Join(rest...)})
				} else {
					x.byName[comp] = append(x.byName[comp], path.Join(rest...))
				}
			}
		}
	}
	v, _ := probeIndexes.LoadOrStore(p, x)
	return v.(*probeIndex)
}

// climbsThroughName reports whether a relative target has a ".." after a
// name (x/../memory/notes.md): the kernel climbs out of what x is when it
// is followed, a symlink that anyone may replace, while the name read as
// text (path.Join) drops x and its "..". Leading ".." steps climb out of
// the link's own directory, which the link's path names as it is.
func climbsThroughName(target string) bool {
	named := false
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if named {
				return true
			}
		default:
			named = true
		}
	}
	return false
}
