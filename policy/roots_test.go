package policy

import (
	"errors"
	"strings"
	"testing"
)

const claudeRoot = `version: 1
roots:
  claude:
    path: ~/.claude
    memory: ["projects/*/memory/**"]
    control: [/CLAUDE.md, "/settings*.json", "skills/**", "agents/**", "commands/**", "hooks/**"]
  codex:
    path: /home/me/.codex
    memory: [/AGENTS.md]
`

func TestRootsParse(t *testing.T) {
	p, err := Parse("p.yaml", []byte(claudeRoot))
	if err != nil {
		t.Fatal(err)
	}
	rs := p.Roots()
	if len(rs) != 2 || rs[0].Name != "claude" || rs[0].Path != "~/.claude" || rs[1].Name != "codex" {
		t.Fatalf("roots = %+v", rs)
	}
	cp := rs[0].Policy
	for rel, want := range map[string]Class{
		"projects/-work-x/memory/notes.md": Memory,
		"projects/-work-x/memory":          Memory,
		"projects/-work-x/session.jsonl":   Plain,
		"CLAUDE.md":                        Control,
		"settings.json":                    Control,
		"settings.local.json":              Control,
		"skills/a/SKILL.md":                Control,
		"hooks":                            Control,
		"plugins/x/CLAUDE.md":              Plain, // anchored: only the root's own
		"MEMORY.md":                        Plain, // the workspace's classes do not apply
		"sessions/x/MEMORY.md":             Plain,
		"":                                 Plain,
	} {
		c, ns, _ := cp.Classify(rel)
		if c != want || ns != NSNone {
			t.Errorf("claude %q = %v, %v; want %v, no namespace", rel, c, ns, want)
		}
	}
	// The rest of the policy is the parent's.
	if cp.Blocking() != p.Blocking() {
		t.Error("a root's blocking taint differs from its policy's")
	}
	// The workspace keeps its own classes, and reserves "@<name>".
	for rel, want := range map[string]Class{"MEMORY.md": Memory, "CLAUDE.md": Memory, "@claude": Identity,
		"@claude/projects/p/memory/a.md": Identity, "@codex": Identity, "x/@claude": Plain, "@other": Plain} {
		if c, _, _ := p.Classify(rel); c != want {
			t.Errorf("workspace %q = %v, want %v", rel, c, want)
		}
	}
	// No roots unless asked.
	if len(Default().Roots()) != 0 {
		t.Error("the default policy has roots")
	}
	if r, ok := p.Root("codex"); !ok || r.Path != "/home/me/.codex" {
		t.Errorf("Root(codex) = %+v, %v", r, ok)
	}
}

func TestRootsParseErrors(t *testing.T) {
	tests := []struct {
		name, src string
		line      int
		msg, hint string
	}{
		{"not a mapping", "version: 1\nroots: [a]\n", 2, "roots must be a mapping", "claude"},
		{"null", "version: 1\nroots:\n", 2, "found nothing", "{}"},
		{"bad name", "version: 1\nroots:\n  Claude: {path: /a}\n", 3, `root name "Claude"`, "claude"},
		{"name with slash", "version: 1\nroots:\n  a/b: {path: /a}\n", 3, `root name "a/b"`, "claude"},
		{"duplicate", "version: 1\nroots:\n  a: {path: /a}\n  a: {path: /b}\n", 4, `duplicate root "a"`, "line 3"},
		{"no path", "version: 1\nroots:\n  a: {memory: [x]}\n", 3, "root without path", "path"},
		{"unknown key", "version: 1\nroots:\n  a: {path: /a, memroy: [x]}\n", 3, `unknown key "memroy"`, "memory"},
		{"relative", "version: 1\nroots:\n  a: {path: .claude}\n", 3, `roots.a.path ".claude" is relative`, "~/.claude"},
		{"dotdot", "version: 1\nroots:\n  a: {path: /home/x/../y}\n", 3, "is not a clean path", "absolute"},
		{"whole home", "version: 1\nroots:\n  a: {path: \"~\"}\n", 3, "whole home", "~/.claude"},
		{"other user", "version: 1\nroots:\n  a: {path: ~bob/.claude}\n", 3, "another user", "~/.claude"},
		{"root dir", "version: 1\nroots:\n  a: {path: /}\n", 3, "whole file system", "absolute"},
		{"wildcard", "version: 1\nroots:\n  a: {path: /home/*/.claude}\n", 3, "wildcard", "absolute"},
		{"path not string", "version: 1\nroots:\n  a: {path: 3}\n", 3, "must be a string", "quote"},
		{"overlap", "version: 1\nroots:\n  a: {path: ~/.claude}\n  b: {path: ~/.claude/projects}\n", 4, `roots "a" (~/.claude) and "b" (~/.claude/projects) overlap`, "neither inside"},
		{"same", "version: 1\nroots:\n  a: {path: /x/y}\n  b: {path: /x/y/}\n", 4, "overlap", "neither inside"},
		{"bad glob", "version: 1\nroots:\n  a: {path: /a, control: [\"skills/\"]}\n", 3, "trailing slash", "skills/**"},
		{"class not list", "version: 1\nroots:\n  a: {path: /a, memory: x}\n", 3, "roots.a.memory must be a list", "[a, b]"},
		{"machinery not list", "version: 1\nroots:\n  a: {path: /a, machinery: /x/*}\n", 3, "roots.a.machinery must be a list", "[a, b]"},
		{"machinery null", "version: 1\nroots:\n  a:\n    path: /a\n    machinery:\n", 5, "roots.a.machinery must be a list, found nothing", "[]"},
		{"machinery not string", "version: 1\nroots:\n  a: {path: /a, machinery: [[x]]}\n", 3, "must be a string", "quote"},
		{"machinery exclusion", "version: 1\nroots:\n  a: {path: /a, machinery: [\"!/x/*\"]}\n", 3, `roots.a.machinery "!/x/*": an exclusion`, "/shell-snapshots/*"},
		{"machinery any depth", "version: 1\nroots:\n  a: {path: /a, machinery: [\"*.sh\"]}\n", 3, `roots.a.machinery "*.sh" is not anchored`, `"/shell-snapshots/*"`},
		{"machinery every path", "version: 1\nroots:\n  a: {path: /a, machinery: [\"/**\"]}\n", 3, `roots.a.machinery "/**" is not anchored`, "narrow"},
		{"machinery any dir", "version: 1\nroots:\n  a: {path: /a, machinery: [\"/*/x.sh\"]}\n", 3, `roots.a.machinery "/*/x.sh" is not anchored`, "directory"},
		{"machinery deep any dir", "version: 1\nroots:\n  a: {path: /a, machinery: [\"**/x/*\"]}\n", 3, "is not anchored", "directory"},
		{"machinery bad glob", "version: 1\nroots:\n  a: {path: /a, machinery: [\"/x/\"]}\n", 3, "trailing slash", "x/**"},
		{"machinery at top", "version: 1\nmachinery: [/x/*]\n", 2, `unknown key "machinery"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tt.src))
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if pe.Line != tt.line || !strings.Contains(pe.Msg, tt.msg) || !strings.Contains(pe.Hint, tt.hint) {
				t.Errorf("got line %d %q (hint %q); want line %d, %q, hint with %q", pe.Line, pe.Msg, pe.Hint, tt.line, tt.msg, tt.hint)
			}
		})
	}
}

// TestRootsMachinery: a root names the client's own machinery, the files
// the client writes and runs or loads for itself, by anchored patterns; the
// workspace has none, and a root without the key has none.
func TestRootsMachinery(t *testing.T) {
	p, err := Parse("p.yaml", []byte(`version: 1
roots:
  claude:
    path: ~/.claude
    control: ["/settings*.json", "/plugins/**"]
    machinery: ["/shell-snapshots/*", "/plugins/store/*"]
  codex:
    path: ~/.codex
    control: ["/skills/**"]
    machinery: [/skills/.system/**]
  other:
    path: ~/.other
    control: ["**"]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]bool{
		"claude": {
			"shell-snapshots/snapshot-bash-1.sh":        true,
			"shell-snapshots":                           false,
			"shell-snapshots/a/b.sh":                    false, // "*" is one component
			"x/shell-snapshots/a.sh":                    false, // anchored at the root
			"plugins/store/cc-plugin-x.json":            true,
			"plugins/store/cc-plugin-x.json.tmp.1a2b":   true,
			"plugins/cache/m/p/1.0/hooks/hooks.json":    false,
			"plugins/installed_plugins.json":            false,
			"settings.json":                             false,
			"":                                          false,
			"projects/p/memory/shell-snapshots/evil.sh": false,
		},
		"codex": {
			"skills/.system":                   true,
			"skills/.system/imagegen/SKILL.md": true,
			"skills/.system/.marker":           true,
			"skills/mine/SKILL.md":             false,
			"skills/.systemx/SKILL.md":         false,
			"skills":                           false,
		},
		"other": {"shell-snapshots/a.sh": false, "x": false},
	}
	for name, paths := range want {
		r, ok := p.Root(name)
		if !ok {
			t.Fatalf("no root %s", name)
		}
		for rel, m := range paths {
			if got := r.Policy.Machinery(rel); got != m {
				t.Errorf("%s: Machinery(%q) = %v, want %v", name, rel, got, m)
			}
		}
	}
	// MachineryWithin: a directory moved to the path puts its files at
	// machinery paths.
	within := map[string]map[string]bool{
		"claude": {
			"shell-snapshots":                    true,
			"plugins":                            true,
			"plugins/store":                      true,
			"plugins/cache":                      false,
			"shell-snapshots/snapshot-bash-1.sh": true,
			"shell-snapshots/a/b":                false,
			"projects":                           false,
			"x/shell-snapshots":                  false,
		},
		"codex": {
			"skills":              true,
			"skills/.system":      true,
			"skills/.system/a/b/": true,
			"skills/mine":         false,
			"memories":            false,
		},
		"other": {"shell-snapshots": false, "x": false},
	}
	for name, paths := range within {
		r, _ := p.Root(name)
		for rel, m := range paths {
			if got := r.Policy.MachineryWithin(strings.TrimSuffix(rel, "/")); got != m {
				t.Errorf("%s: MachineryWithin(%q) = %v, want %v", name, rel, got, m)
			}
		}
	}
	if r, _ := p.Root("claude"); strings.Join(r.Machinery, " ") != "/shell-snapshots/* /plugins/store/*" {
		t.Errorf("claude machinery as written: %q", r.Machinery)
	}
	if r, _ := p.Root("other"); len(r.Machinery) != 0 {
		t.Errorf("a root without machinery lists %q", r.Machinery)
	}
	// The workspace has no machinery, not even under the root's names.
	for _, rel := range []string{"shell-snapshots/a.sh", "@claude/shell-snapshots/a.sh", "skills/.system/a/SKILL.md"} {
		if p.Machinery(rel) || Default().Machinery(rel) {
			t.Errorf("workspace Machinery(%q) = true", rel)
		}
	}
	if n := testing.AllocsPerRun(100, func() { p.Roots()[0].Policy.Machinery("plugins/store/cc-plugin-x.json") }); n > 1 {
		t.Errorf("Machinery allocates %v times", n)
	}
}

func TestResolveRoots(t *testing.T) {
	p, err := Parse("p.yaml", []byte(claudeRoot))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := p.ResolveRoots("/home/me", "/work/ws", "/var/lib/aerfs/ws")
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Dir != "/home/me/.claude" || rs[1].Dir != "/home/me/.codex" {
		t.Errorf("dirs = %q, %q", rs[0].Dir, rs[1].Dir)
	}
	for _, tt := range []struct{ home, ws, state, msg string }{
		{"", "/w", "/s", "home, whose directory is unknown"},
		{"relative", "/w", "/s", "home, whose directory is unknown"},
		{"/home/me", "/home/me/.claude/projects/x", "/s", "root claude (/home/me/.claude) overlaps the workspace /home/me/.claude/projects/x"},
		{"/home/me", "/home", "/s", "overlaps the workspace /home"},
		{"/home/me", "/w", "/home/me/.codex/state", "root codex (/home/me/.codex) overlaps the state directory"},
		{"/home/me/.codex", "/w", "/s", "root codex: /home/me/.codex is the whole home directory"},
	} {
		_, err := p.ResolveRoots(tt.home, tt.ws, tt.state)
		if err == nil {
			t.Errorf("ResolveRoots(%q, %q, %q) = nil", tt.home, tt.ws, tt.state)
			continue
		}
		if !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ResolveRoots(%q, %q, %q) = %v, want %q", tt.home, tt.ws, tt.state, err, tt.msg)
		}
	}
	for in, want := range map[string][3]string{
		"@claude/projects/a.md": {"claude", "projects/a.md", "ok"},
		"@claude":               {"claude", "", "ok"},
		"claude/a":              {"", "", ""},
		"@Bad/a":                {"", "", ""},
	} {
		n, r, ok := SplitRootPath(in)
		if n != want[0] || r != want[1] || ok != (want[2] == "ok") {
			t.Errorf("SplitRootPath(%q) = %q, %q, %v", in, n, r, ok)
		}
	}
}

// TestRootNames: a root name becomes a path component of records
// ("@name/…") and a file name in the state directory: a lowercase letter
// first, then lowercase letters, digits, '-' and '_', at most 32.
func TestRootNames(t *testing.T) {
	for _, ok := range []string{"a", "z", "claude", "a0", "z9", "open-claw_2", "a-", strings.Repeat("x", 32)} {
		if msg := checkRootName(ok); msg != "" {
			t.Errorf("root name %q refused: %s", ok, msg)
		}
		if n, _, found := SplitRootPath("@" + ok + "/f"); !found || n != ok {
			t.Errorf("SplitRootPath(@%s/f) = %q, %v", ok, n, found)
		}
	}
	for _, bad := range []string{"", "0a", "9", "-a", "_a", "A", "aB", "a.b", "a/b", "a b", "`", "{", "a/", "a:", "é", strings.Repeat("x", 33)} {
		if checkRootName(bad) == "" {
			t.Errorf("root name %q accepted", bad)
		}
	}
}
