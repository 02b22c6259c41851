package policy

// The machinery of a further root: the files an agent client writes and
// then runs or loads for itself, as part of how it works rather than as
// anything its model decided — Claude Code's shell snapshots, which its
// Bash tool sources before every command, the state its plugins keep,
// the skills Codex ships in its binary and unpacks at every start. An agent
// profile names them (roots.NAME.machinery) so that the act gate can tell
// them from the agent's own scripts and configuration: content an
// untainted agent session wrote there (authority class inform) may run or
// become configuration (rule AU3-machinery); content of class none is
// refused there as anywhere. The decision is the authority package's;
// this file only says which paths are machinery.
//
// Machinery patterns are narrow by construction: each is anchored at the
// root and starts with a named directory or file, so no pattern can name
// every path of a root, or a name at any depth; exclusions are not
// accepted (a list of what the client writes is short and explicit).

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

const keyMachinery = "machinery"

// machineryHint is the hint of every refused machinery pattern.
const machineryHint = `list the files the client writes and runs or loads for itself, each anchored at a directory of the root, such as "/shell-snapshots/*": machinery is a narrow exception to the act gate`

// compileMachinery compiles one machinery pattern of the root name. The
// message and hint are empty on success.
func compileMachinery(name, src string) (pattern, string, string) {
	what := "roots." + name + "." + keyMachinery + " " + quote(src)
	if len(src) > 0 && src[0] == '!' {
		return pattern{}, what + ": an exclusion names no machinery", machineryHint
	}
	p, msg, hint := compileGlob(src)
	if msg != "" {
		return p, msg, hint
	}
	if !p.anchored || p.segs[0].kind != segLiteral {
		return p, what + " is not anchored at a named directory or file of the root", machineryHint
	}
	return p, "", ""
}

// machinery parses roots.NAME.machinery into r.
func (ps *parser) machinery(v *yaml.Node, r *rootSpec) (err error) {
	r.machinery, err = ps.patterns(v, "roots."+r.name+"."+keyMachinery, "a pattern", func(src string) (pattern, string, string) {
		return compileMachinery(r.name, src)
	})
	return err
}

// Machinery reports whether rel (relative to a further root) is the root's
// machinery: a path its agent profile names as written and run or loaded
// by the client itself. The workspace has none. It does not allocate.
func (p *Policy) Machinery(rel string) bool {
	return matchAny(p.machinery, rel, "", false)
}

// MachineryWithin reports whether rel, or a path below it, may be the
// root's machinery: a directory moved to rel puts its files there.
func (p *Policy) MachineryWithin(rel string) bool {
	for _, pt := range p.machinery {
		if prefixMayMatch(pt.segs, rel) {
			return true
		}
	}
	return false
}

// prefixMayMatch reports whether some path at or below rel can match the
// anchored segments segs.
func prefixMayMatch(segs []segment, rel string) bool {
	for i := 0; rel != ""; i++ {
		comp, rest, _ := strings.Cut(rel, "/")
		if i >= len(segs) {
			return false
		}
		if segs[i].kind == segStarStar {
			return true
		}
		if !segs[i].match(comp) {
			return false
		}
		rel = rest
	}
	return true
}

// patternSources lists the patterns as written.
func patternSources(pts []pattern) []string {
	out := make([]string, 0, len(pts))
	for _, pt := range pts {
		out = append(out, pt.src)
	}
	return out
}
