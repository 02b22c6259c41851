package policy

import (
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/aerfs/aerfs/configs"
)

// FuzzParse: Parse never panics, every error is a *Error with a hint, and a
// policy that parses gives verdicts without panicking.
func FuzzParse(f *testing.F) {
	f.Add(configs.DefaultPolicy)
	f.Add([]byte("version: 1\n"))
	f.Add([]byte("version: 1\nclasses: {memory: [\"a/**/b\", \"[!x]y\"]}\nnamespaces: {sessions: s, shared: p}\n"))
	f.Add([]byte("version: 1\nroots:\n  c: {path: ~/.c, control: [\"/p/**\"], machinery: [\"/s/*\", \"/p/st/*\", /k/.system/**]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Msg == "" || pe.Hint == "" || pe.Line < 0 || p != nil {
				t.Fatalf("bad error %T %#v", err, err)
			}
			return
		}
		for _, rel := range []string{"", "SOUL.md", "a/b", "sessions/x/y", "shared", "s/x/MEMORY.md", "p/.env"} {
			c, ns, id := p.Classify(rel)
			p.MayContainGuarded(rel)
			tg := Target{Class: c, Namespace: ns, Session: id, LabelTaint: Untrusted}
			for op := Op(0); op < numOps; op++ {
				v := p.Decide(Subject{Principal: User, Identified: true, Session: "x"}, op, tg)
				if v.Rule == RuleUnset || v.Rule >= numRules {
					t.Fatalf("verdict without a rule: %v", v)
				}
				if c == Identity && op.Mutates() && v.Allow {
					t.Fatalf("identity mutated under %q", data)
				}
			}
		}
		// A root's machinery never names the root itself, and is anchored
		// at a named directory or file.
		for _, r := range p.Roots() {
			if r.Policy.Machinery("") {
				t.Fatalf("root %s: machinery %q names the root", r.Name, r.Machinery)
			}
			for _, pt := range r.Policy.machinery {
				if !pt.anchored || pt.exclude || pt.segs[0].kind != segLiteral {
					t.Fatalf("root %s: machinery pattern %q is not narrow", r.Name, pt.src)
				}
			}
		}
		p.ExecPrincipal("/usr/bin/curl")
		p.UIDPrincipal(1000)
		for _, h := range []string{"api.anthropic.com", "example.org", "127.0.0.1", "::1"} {
			c, why := p.HostChannel(h, 443, nil)
			if why == "" {
				t.Fatalf("channel %v of %s without a reason", c, h)
			}
			if v := p.DecideConnect(SecretRisk|Untrusted, c); v.Rule == RuleUnset || v.Allow && c == ChannelDeny {
				t.Fatalf("connect to %v: %v", c, v)
			}
		}
	})
}

// FuzzClassify checks the compiled matcher against a direct reading of the
// glob rules, and Classify's namespace answer against the path.
func FuzzClassify(f *testing.F) {
	for _, s := range [][2]string{
		{"skills/**", "skills/a/b"}, {"*.pem", "a/b.pem"}, {"a/**/b", "a/x/y/b"}, {"/crontab", "crontab"},
		{"**/x", "x"}, {"[!a]?", "bc"}, {".env*", "d/.env.local"}, {"a/*/c", "a/b/c"}, {"**", ""},
		{"sessions/*/MEMORY.md", "sessions/a/MEMORY.md"}, {"x", "sessions/a"},
	} {
		f.Add(s[0], s[1])
	}
	p := Default()
	f.Fuzz(func(t *testing.T, pat, rel string) {
		c, ns, id := p.Classify(rel)
		if c >= numClasses {
			t.Fatalf("class %v", c)
		}
		switch ns {
		case NSSession:
			// An unclean path ("sessions//x") gives an empty id, which
			// Decide refuses.
			if (id == "" && cleanRel(rel)) || !strings.HasPrefix(rel, "sessions/"+id) {
				t.Fatalf("Classify(%q): session %q", rel, id)
			}
		case NSSessionsRoot:
			if rel != "sessions" {
				t.Fatalf("Classify(%q): sessions root", rel)
			}
		case NSShared:
			if rel != "shared" && !strings.HasPrefix(rel, "shared/") {
				t.Fatalf("Classify(%q): shared", rel)
			}
		}
		if c.Guarded() {
			dir := ""
			if i := strings.LastIndexByte(rel, '/'); i >= 0 {
				dir = rel[:i]
			}
			if !p.MayContainGuarded(dir) {
				t.Fatalf("%q is %v but MayContainGuarded(%q) is false", rel, c, dir)
			}
		}

		pt, msg, hint := compileGlob(pat)
		if msg != "" {
			if hint == "" {
				t.Fatalf("compileGlob(%q): %s without a hint", pat, msg)
			}
			return
		}
		if !cleanRel(rel) {
			pt.match(rel) // must not panic
			return
		}
		if got, want := pt.match(rel), refMatch(pat, rel); got != want {
			t.Fatalf("pattern %q on %q: match %v, reference %v", pat, rel, got, want)
		}
		if pt.match(rel) && rel != "" {
			// Whatever matches lies below a directory that may contain it.
			dir := ""
			if i := strings.LastIndexByte(rel, '/'); i >= 0 {
				dir = rel[:i]
			}
			if !pt.canExtend(dir) {
				t.Fatalf("pattern %q matches %q but canExtend(%q) is false", pat, rel, dir)
			}
		}
	})
}

// cleanRel reports whether rel is a path Classify is specified for.
func cleanRel(rel string) bool {
	if rel == "" {
		return true
	}
	for _, c := range strings.Split(rel, "/") {
		if c == "" {
			return false
		}
	}
	return true
}

// refMatch is the reference reading of the glob rules, written plainly
// with path.Match over the split path.
func refMatch(pat, rel string) bool {
	var comps []string
	if rel != "" {
		comps = strings.Split(rel, "/")
	}
	pat = strings.ReplaceAll(pat, "[!", "[^")
	if !strings.Contains(pat, "/") && pat != "**" {
		if len(comps) == 0 {
			return false
		}
		ok, _ := path.Match(pat, comps[len(comps)-1])
		return ok
	}
	return refSegs(strings.Split(strings.TrimPrefix(pat, "/"), "/"), comps)
}

func refSegs(segs, comps []string) bool {
	if len(segs) == 0 {
		return len(comps) == 0
	}
	if segs[0] == "**" {
		for i := 0; i <= len(comps); i++ {
			if refSegs(segs[1:], comps[i:]) {
				return true
			}
		}
		return false
	}
	if len(comps) == 0 {
		return false
	}
	ok, _ := path.Match(segs[0], comps[0])
	return ok && refSegs(segs[1:], comps[1:])
}
