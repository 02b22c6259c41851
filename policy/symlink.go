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
