package policy

import (
	"path"
	"strconv"
	"strings"
)

// segKind says how one path component of a pattern is matched, so that the
// common shapes (SOUL.md, *.pem, .env*) never reach the general matcher.
type segKind uint8

const (
	segLiteral  segKind = iota // exact name
	segPrefix                  // "id_rsa*": lit is the prefix
	segSuffix                  // "*.pem": lit is the suffix
	segAny                     // "*"
	segGlob                    // anything else with *, ? or [...]: path.Match on lit
	segStarStar                // "**": zero or more whole components
)

type segment struct {
	kind segKind
	lit  string
}

func (s *segment) match(name string) bool {
	switch s.kind {
	case segLiteral:
		return name == s.lit
	case segPrefix:
		return strings.HasPrefix(name, s.lit)
	case segSuffix:
		return strings.HasSuffix(name, s.lit)
	case segAny:
		return true
	case segGlob:
		ok, _ := path.Match(s.lit, name) // validated when compiled
		return ok
	}
	return false
}

// pattern is a compiled gitignore-like glob.
type pattern struct {
	src      string // as written, for messages
	anchored bool   // contains a "/": matched from the root, component by component
	exclude  bool   // written "!…" in a class list: removes what it matches from the class
	segs     []segment
	// need is the first literal component of an anchored pattern, which
	// every path it matches contains ("**/.git/config" needs ".git"): a
	// path without it as a substring is rejected before the component
	// walk, as most paths are for most patterns. "" needs nothing.
	need string
}

// compileClassPattern compiles one entry of a class list: a glob, or "!"
// and a glob that takes the paths it matches out of the class again
// (gitignore's negation, without its order: an exclusion applies to every
// pattern of its class wherever it is written).
func compileClassPattern(src string) (pattern, string, string) {
	rest, excl := strings.CutPrefix(src, "!")
	if excl && rest == "" {
		return pattern{src: src}, `pattern "!" excludes nothing`, `write "!" and a pattern, as in "!**/node_modules/**"`
	}
	p, msg, hint := compileGlob(rest)
	p.src, p.exclude = src, excl
	return p, msg, hint
}

// anyDir reports whether p is "**/NAME/**" with a literal NAME: every path
// with a component NAME, which Classify finds by looking each component up.
func (p *pattern) anyDir() bool {
	return len(p.segs) == 3 && p.segs[0].kind == segStarStar && p.segs[1].kind == segLiteral && p.segs[2].kind == segStarStar
}

// compileGlob compiles one pattern. The rules, gitignore-like:
//   - a pattern without "/" matches the base name at any depth;
//   - a pattern with "/" is anchored at the root (a leading "/" only anchors);
//     "**/NAME" is the same as NAME;
//   - "**" as a whole component matches zero or more components, so
//     "skills/**" matches skills itself and everything below it;
//   - "*", "?", "[...]" ("[!...]" negates) match within one component.
//
// The returned message and hint are empty on success.
func compileGlob(src string) (p pattern, msg, hint string) {
	p.src = src
	s := src
	if s == "" {
		return p, "empty pattern", "remove the entry or write a file name such as MEMORY.md"
	}
	if strings.HasPrefix(s, "/") {
		p.anchored = true
		s = s[1:]
		if s == "" {
			return p, `pattern "/" matches nothing`, `write "**" to match every path`
		}
	}
	if strings.HasSuffix(s, "/") {
		return p, "bad glob " + quote(src) + ": trailing slash", "write " + quote(strings.TrimRight(s, "/")+"/**") + " to match a directory and everything below it"
	}
	if strings.Contains(s, "/") {
		p.anchored = true
	}
	for comp := range strings.SplitSeq(s, "/") {
		if comp == "" {
			return p, "bad glob " + quote(src) + ": empty path component", "remove the doubled slash"
		}
		if comp == "." || comp == ".." {
			return p, "bad glob " + quote(src) + ": " + quote(comp) + " component", "patterns are workspace-relative paths without . or .. components"
		}
		if comp == "**" {
			// Consecutive "**" mean the same as one.
			if n := len(p.segs); n == 0 || p.segs[n-1].kind != segStarStar {
				p.segs = append(p.segs, segment{kind: segStarStar})
			}
			continue
		}
		if strings.Contains(comp, "**") {
			return p, "bad glob " + quote(src) + `: "**" inside a name`, `"**" must be a whole path component, as in "memory/**/*.md"; use "*" within a name`
		}
		seg, ok := compileSegment(comp)
		if !ok {
			return p, "bad glob " + quote(src), "check the brackets and backslashes: * ? [a-z] [!a-z] match within one path component"
		}
		p.segs = append(p.segs, seg)
	}
	lead := p.segs[0].kind == segStarStar
	if lead && !p.anchored {
		// "**" alone: every path at any depth, including the root.
		p.anchored = true
	} else if lead && len(p.segs) == 2 {
		// "**/NAME" matches the name at any depth, as NAME does (a second
		// "**" was folded into the first).
		p.anchored, p.segs = false, p.segs[1:]
	}
	for _, sg := range p.segs {
		if sg.kind == segLiteral && p.anchored {
			p.need = sg.lit
			break
		}
	}
	return p, "", ""
}

func compileSegment(comp string) (segment, bool) {
	g := comp
	if strings.HasPrefix(g, "[!") || strings.Contains(g, "[!") {
		g = strings.ReplaceAll(g, "[!", "[^")
	}
	if _, err := path.Match(g, ""); err != nil {
		return segment{}, false
	}
	if !strings.ContainsAny(g, `*?[\`) {
		return segment{kind: segLiteral, lit: g}, true
	}
	if g == "*" {
		return segment{kind: segAny}, true
	}
	if strings.Count(g, "*") == 1 && !strings.ContainsAny(g, `?[\`) {
		if strings.HasSuffix(g, "*") {
			return segment{kind: segPrefix, lit: g[:len(g)-1]}, true
		}
		if strings.HasPrefix(g, "*") {
			return segment{kind: segSuffix, lit: g[1:]}, true
		}
	}
	return segment{kind: segGlob, lit: g}, true
}

// match reports whether rel (slash-separated, no leading slash, "" for the
// root) matches p. It does not allocate.
func (p *pattern) match(rel string) bool {
	if !p.anchored {
		if rel == "" {
			return false
		}
		return p.segs[0].match(rel[strings.LastIndexByte(rel, '/')+1:])
	}
	if !strings.Contains(rel, p.need) {
		return false
	}
	return matchSegs(p.segs, rel, rel != "")
}

// matchSegs matches the components of rest (more says whether any remain)
// against segs. It is the classic wildcard algorithm lifted to path
// components: each segment other than "**" consumes exactly one component,
// so on a mismatch it is enough to let the most recent "**" absorb one more
// component. That bounds the work by len(segs) × the path's depth, whatever
// the patterns and however deep the paths an adversary creates.
func matchSegs(segs []segment, rest string, more bool) bool {
	// After the last "**" seen: the index of the segment that follows it,
	// and the rest of the path it may still absorb (starMore: whether it
	// may absorb one more component; false too before any "**").
	var (
		si, star int
		starRest string
		starMore bool
	)
	for {
		if si < len(segs) && segs[si].kind == segStarStar {
			si++
			if si == len(segs) {
				return true
			}
			star, starRest, starMore = si, rest, more
			continue
		}
		if si < len(segs) && more {
			comp, tail, tailMore := split(rest)
			if segs[si].match(comp) {
				si, rest, more = si+1, tail, tailMore
				continue
			}
		} else if si == len(segs) && !more {
			return true
		}
		if !starMore {
			return false
		}
		starRest, starMore = next(starRest)
		si, rest, more = star, starRest, starMore
	}
}

// split returns the first component of rest, what follows it, and whether
// anything follows.
func split(rest string) (comp, tail string, more bool) {
	return strings.Cut(rest, "/")
}

func next(rest string) (string, bool) {
	_, tail, more := split(rest)
	return tail, more
}

// canExtend reports whether some path strictly below the directory dir
// could match p. It over-approximates: a remaining segment is assumed to
// match some name.
func (p *pattern) canExtend(dir string) bool {
	if !p.anchored {
		return true
	}
	segs, rest, more := p.segs, dir, dir != ""
	for ; len(segs) > 0; segs = segs[1:] {
		if segs[0].kind == segStarStar {
			return true
		}
		if !more {
			return true
		}
		var comp string
		comp, rest, more = split(rest)
		if !segs[0].match(comp) {
			return false
		}
	}
	return false
}

func quote(s string) string { return strconv.Quote(s) }
