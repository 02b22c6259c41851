package policy

// The interpreters key: programs that run a file they read — shells,
// language interpreters, the dynamic loader. A read open of a file by one
// of them that names the file on its command line as the program to run
// (python3 x, sh x, . x, ld.so x) is an exec for the act gate: content of
// class none does not run through an interpreter any more than as ./x.
// The key is optional; a file that does not set it gets the built-in
// list (DefaultInterpreters).

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

const keyInterpreters = "interpreters"

// DefaultInterpreters are the interpreters of a policy that names none:
// base names of shells, language interpreters and dynamic loaders.
var DefaultInterpreters = []string{
	"sh", "bash", "dash", "zsh", "ksh", "mksh", "yash", "fish", "busybox",
	"python", "python[0-9]*", "pypy*", "node", "nodejs", "deno", "bun",
	"perl", "perl5*", "ruby", "ruby[0-9]*", "php", "php[0-9]*", "lua", "lua[0-9]*", "luajit",
	"tclsh*", "wish*", "awk", "gawk", "mawk", "Rscript", "osascript", "sed", "gsed",
	"ld.so", "ld-linux*", "ld-musl*",
}

// interpreters parses the interpreters key: bare names (matched against a
// program's base name) or absolute paths, globs allowed, as executables'
// match.
func (ps *parser) interpreters(n *yaml.Node, s *spec) error {
	pts, err := ps.patterns(n, keyInterpreters, "an interpreter", func(src string) (pattern, string, string) {
		if src == "" || strings.Contains(src, "/") && !strings.HasPrefix(src, "/") {
			return pattern{}, fmt.Sprintf("interpreter %q is neither a bare name nor an absolute path", src),
				"write a bare name such as python3 or an absolute path such as /usr/bin/python3"
		}
		return compileGlob(src)
	})
	if err != nil {
		return err
	}
	s.interpreters, s.hasInterpreters = pts, true
	return nil
}

// mergeInterpreters takes the base's list when the file sets none, and the
// built-in one when neither does.
func mergeInterpreters(s, base *spec) {
	switch {
	case s.hasInterpreters:
	case base != nil && base.hasInterpreters:
		s.interpreters, s.hasInterpreters = base.interpreters, true
	default:
		for _, src := range DefaultInterpreters {
			pt, _, _ := compileGlob(src)
			s.interpreters = append(s.interpreters, pt)
		}
	}
}

// Interpreter reports whether the program exe (an absolute path, as
// /proc/PID/exe names it) runs files it reads: a bare-name entry matches
// its base name, an absolute one the whole path.
func (p *Policy) Interpreter(exe string) bool {
	base := exe[strings.LastIndexByte(exe, '/')+1:]
	for i := range p.interpreters {
		pt := &p.interpreters[i]
		if pt.anchored {
			if strings.HasPrefix(exe, "/") && pt.match(exe[1:]) {
				return true
			}
		} else if pt.match(base) {
			return true
		}
	}
	return false
}
