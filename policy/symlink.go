package policy

import (
	"path"
	"strings"
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
	probe := func(name string) bool {
		cl, _, _ := p.Classify(path.Join(link, name))
		ct, _, _ := p.Classify(strings.TrimPrefix(path.Join(to, name), "./"))
		return cl.Guarded() && ct != cl
	}
	if probe("x") {
		return true
	}
	for name := range p.literal {
		if probe(name) {
			return true
		}
	}
	for d := range p.dirs {
		if probe(d + "/x") {
			return true
		}
	}
	return false
}

// SymlinkUnguards reports whether a symlink at link (a path relative to the
// root) naming target would make a name the policy guards serve what it
// does not guard the same way: link itself is guarded and target is not a
// name of the same class inside the root, or a name below link is guarded
// and the same name below target is not (memory -> notes makes
// memory/prefs.md a plain file). Such a link hands the guarded name's
// content to whoever may write the target. An empty target (a FIFO, a
// socket or a device at the name) unguards any guarded name: whoever holds
// it open writes what its readers load.
func (p *Policy) SymlinkUnguards(link, target string) bool {
	probes := []string{"", "x"}
	for name := range p.literal {
		probes = append(probes, name)
	}
	for d := range p.dirs {
		probes = append(probes, d+"/x")
	}
	at := func(base, name string) Class {
		c, _, _ := p.Classify(strings.TrimPrefix(path.Join(base, name), "./"))
		return c
	}
	// Guarded at link: its own name, or a name below it that is guarded
	// there and not beside link (memory/x, .claude/x; not MEMORY.md, which
	// is memory at any depth, below any link).
	guarded := at(link, "").Guarded()
	for _, name := range probes[1:] {
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
	for _, name := range probes {
		if cl := at(link, name); cl.Guarded() && at(to, name) != cl {
			return true
		}
	}
	return false
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
