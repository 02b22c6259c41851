package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func mustParse(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

func TestClassifyDefaults(t *testing.T) {
	p := Default()
	tests := []struct {
		rel string
		c   Class
		ns  Namespace
		id  string
	}{
		{"", Plain, NSNone, ""},
		{"SOUL.md", Identity, NSNone, ""},
		{"IDENTITY.md", Identity, NSNone, ""},
		// Identity is anchored at the root (and session roots): a staging
		// copy deeper down is an ordinary file.
		{"docs/SOUL.md", Plain, NSNone, ""},
		{"openclaw-bootstrap-x1/IDENTITY.md", Plain, NSNone, ""},
		{"sessions/a/SOUL.md", Identity, NSSession, "a"},
		{"soul.md", Plain, NSNone, ""},
		{"SOUL.md.bak", Plain, NSNone, ""},
		{"MEMORY.md", Memory, NSNone, ""},
		{"a/b/c/CLAUDE.md", Memory, NSNone, ""},
		{"AGENTS.md", Memory, NSNone, ""},
		{"TOOLS.md", Memory, NSNone, ""},
		{"USER.md", Memory, NSNone, ""},
		{"HEARTBEAT.md", Memory, NSNone, ""},
		{"memory", Memory, NSNone, ""},
		{"memory/2024-05-01.md", Memory, NSNone, ""},
		{"memory/deep/er/x", Memory, NSNone, ""},
		{"memoryx/y", Plain, NSNone, ""},
		{"src/memory/x", Plain, NSNone, ""},
		{"skills", Control, NSNone, ""},
		{"skills/web/SKILL.md", Control, NSNone, ""},
		{"lib/skills/x", Plain, NSNone, ""},
		{".claude/settings.json", Control, NSNone, ""},
		// Agents' directories are guarded at any depth: a client working
		// in pkg/ loads pkg/.claude/settings.json.
		{"pkg/.claude/settings.json", Control, NSNone, ""},
		{"a/b/.claude", Control, NSNone, ""},
		{"a/b/.claude/commands/x.md", Control, NSNone, ""},
		{"a/.claudex/y", Plain, NSNone, ""},
		{"GEMINI.md", Memory, NSNone, ""},
		{"docs/AGENTS.override.md", Memory, NSNone, ""},
		{".github/copilot-instructions.md", Memory, NSNone, ""},
		{"sub/.github/instructions/go.instructions.md", Memory, NSNone, ""},
		{".github/workflows/ci.yml", Control, NSNone, ""},
		{".github/ISSUE_TEMPLATE/bug.md", Plain, NSNone, ""},
		// Build configuration the owner's tools execute.
		{"Makefile", Control, NSNone, ""},
		{"lib/Makefile", Control, NSNone, ""},
		{"rules.mk", Control, NSNone, ""},
		{"package.json", Control, NSNone, ""},
		{"vite.config.ts", Control, NSNone, ""},
		{"tests/conftest.py", Control, NSNone, ""},
		{"tests/test_x.py", Plain, NSNone, ""},
		// …but not what a package manager unpacks.
		{"node_modules/left-pad/package.json", Plain, NSNone, ""},
		{"web/node_modules/x/Makefile", Plain, NSNone, ""},
		{"node_modules/x/CLAUDE.md", Memory, NSNone, ""},
		{"node_modules/x/.env", Secret, NSNone, ""},
		{".gitattributes", Control, NSNone, ""},
		{"a/.gitattributes", Control, NSNone, ""},
		{".git/info/attributes", Control, NSNone, ""},
		{".git/info/exclude", Plain, NSNone, ""},
		{".git/commondir", Control, NSNone, ""},
		{".git/worktrees/w1/config.worktree", Control, NSNone, ""},
		{".git/modules/lib/a/config", Control, NSNone, ""},
		{".git/modules/lib/hooks/pre-commit", Control, NSNone, ""},
		{".git/refs/heads/config", Plain, NSNone, ""},
		{".mcp.json", Control, NSNone, ""},
		{"sub/.mcp.json", Control, NSNone, ""},
		{".git/hooks/pre-commit", Control, NSNone, ""},
		{".git/config", Control, NSNone, ""},
		{".git", Control, NSNone, ""},
		{"sub/.git/config", Control, NSNone, ""},
		{"sub/.git/hooks/post-checkout", Control, NSNone, ""},
		{".git/index", Plain, NSNone, ""},
		{".gitmodules", Control, NSNone, ""},
		{".vscode/tasks.json", Control, NSNone, ""},
		{".idea/workspace.xml", Control, NSNone, ""},
		{".husky/pre-commit", Control, NSNone, ""},
		// direnv runs .envrc: control wins over the ".env*" secret.
		{".envrc", Control, NSNone, ""},
		{"crontab", Control, NSNone, ""},
		{"cron/daily", Control, NSNone, ""},
		{"jobs/backup.cron", Control, NSNone, ""},
		{"x.timer", Control, NSNone, ""},
		{".env", Secret, NSNone, ""},
		{".env.local", Secret, NSNone, ""},
		{"app/.env.production", Secret, NSNone, ""},
		{"tls/server.pem", Secret, NSNone, ""},
		{"a.key", Secret, NSNone, ""},
		{"keyring", Plain, NSNone, ""},
		{".ssh/id_rsa", Secret, NSNone, ""},
		{".ssh/id_rsa.pub", Secret, NSNone, ""},
		{"id_ed25519", Secret, NSNone, ""},
		{"credentials.json", Secret, NSNone, ""},
		{".netrc", Secret, NSNone, ""},
		{"main.go", Plain, NSNone, ""},
		// Precedence: control > memory > secret.
		{"skills/MEMORY.md", Control, NSNone, ""},
		{"memory/.env", Memory, NSNone, ""},
		{"skills/deploy.key", Control, NSNone, ""},
		{"memory/SOUL.md", Memory, NSNone, ""},
		// Namespaces.
		{"sessions", Plain, NSSessionsRoot, ""},
		{"sessions/a", Plain, NSSession, "a"},
		{"sessions/a/notes.md", Plain, NSSession, "a"},
		{"sessions/a/MEMORY.md", Memory, NSSession, "a"},
		{"sessions/a/skills/x", Control, NSSession, "a"},
		{"sessions/a/memory", Memory, NSSession, "a"},
		{"sessions/a/b/skills/x", Plain, NSSession, "a"},
		{"sessions/b/.env", Secret, NSSession, "b"},
		{"sessionsx", Plain, NSNone, ""},
		{"sessionsx/a", Plain, NSNone, ""},
		{"shared", Plain, NSShared, ""},
		{"shared/report.md", Plain, NSShared, ""},
		{"shared/.claude/x", Control, NSShared, ""},
		{"sharedx/y", Plain, NSNone, ""},
		{"a/sessions/b", Plain, NSNone, ""},
	}
	for _, tc := range tests {
		c, ns, id := p.Classify(tc.rel)
		if c != tc.c || ns != tc.ns || id != tc.id {
			t.Errorf("Classify(%q) = %v, %v, %q; want %v, %v, %q", tc.rel, c, ns, id, tc.c, tc.ns, tc.id)
		}
	}
}

func TestGlobs(t *testing.T) {
	tests := []struct {
		pat string
		yes []string
		no  []string
	}{
		{"SOUL.md", []string{"SOUL.md", "a/SOUL.md", "a/b/SOUL.md"}, []string{"", "SOUL.mdx", "SOUL.md/x", "xSOUL.md"}},
		{"*.pem", []string{"a.pem", "x/y/a.pem", ".pem"}, []string{"a.pem/b", "a.pem.bak", "apem"}},
		{".env*", []string{".env", ".env.local", "d/.envrc"}, []string{"env", "x.env"}},
		{"/crontab", []string{"crontab"}, []string{"etc/crontab"}},
		{"etc/crontab", []string{"etc/crontab"}, []string{"x/etc/crontab", "crontab"}},
		{"skills/**", []string{"skills", "skills/a", "skills/a/b/c"}, []string{"skillsx", "x/skills/a", ""}},
		{"**/journal", []string{"journal", "a/journal", "a/b/journal"}, []string{"journal/x", "journalx"}},
		{"a/**/b", []string{"a/b", "a/x/b", "a/x/y/b"}, []string{"a", "b", "a/b/c", "x/a/b"}},
		{"a/**/**/b", []string{"a/b", "a/x/y/b"}, []string{"a/b/c"}},
		{"**", []string{"", "a", "a/b"}, nil},
		{"n?tes.txt", []string{"notes.txt", "d/nates.txt"}, []string{"ntes.txt", "nootes.txt"}},
		{"log[0-9].md", []string{"log1.md"}, []string{"logx.md", "log10.md"}},
		{"x[!a-c].md", []string{"xd.md"}, []string{"xa.md", "xc.md"}},
		{"a/*/c", []string{"a/b/c"}, []string{"a/c", "a/b/b/c"}},
		{"a*b*c", []string{"abc", "axxbyyc"}, []string{"ab"}},
		{"*tmp*", []string{"tmp", "a.tmp.b", "d/x.tmp"}, []string{"tm", "t/mp"}},
		{"x*y*", []string{"xy", "xaya"}, []string{"ax", "yx"}},
		{`\*lit`, []string{"*lit"}, []string{"xlit"}},
	}
	for _, tc := range tests {
		pt, msg, _ := compileGlob(tc.pat)
		if msg != "" {
			t.Fatalf("compileGlob(%q): %s", tc.pat, msg)
		}
		for _, y := range tc.yes {
			if !pt.match(y) {
				t.Errorf("%q should match %q", tc.pat, y)
			}
		}
		for _, n := range tc.no {
			if pt.match(n) {
				t.Errorf("%q should not match %q", tc.pat, n)
			}
		}
	}
}

func TestBadGlobs(t *testing.T) {
	for _, pat := range []string{"", "/", "skills/", "a//b", "../x", "a/./b", "**.md", "a/b**", "[", "a/[z-a", `x\`} {
		if _, msg, hint := compileGlob(pat); msg == "" || hint == "" {
			t.Errorf("compileGlob(%q) accepted, or without a hint", pat)
		}
	}
}

func TestClassifyCustomNamespacesAndAnchors(t *testing.T) {
	p := mustParse(t, `version: 1
classes:
  identity: ["/top/ID.md"]
  memory: ["notes/*.md"]
  control: ["**/journal"]
  secret: ["*.gpg"]
namespaces: {sessions: var/sess, shared: pub}
`)
	tests := []struct {
		rel string
		c   Class
		ns  Namespace
		id  string
	}{
		{"top/ID.md", Identity, NSNone, ""},
		{"x/top/ID.md", Plain, NSNone, ""},
		{"SOUL.md", Plain, NSNone, ""},
		{"notes/a.md", Memory, NSNone, ""},
		{"notes/a/b.md", Plain, NSNone, ""},
		{"var", Plain, NSNone, ""},
		{"var/sess", Plain, NSSessionsRoot, ""},
		{"var/sess/s1", Plain, NSSession, "s1"},
		{"var/sess/s1/notes/x.md", Memory, NSSession, "s1"},
		{"var/sess/s1/top/ID.md", Identity, NSSession, "s1"},
		{"var/sess/s1/a/journal", Control, NSSession, "s1"},
		{"pub/notes/x.md", Memory, NSShared, ""},
		{"pub/k.gpg", Secret, NSShared, ""},
		{"sessions/a", Plain, NSNone, ""},
	}
	for _, tc := range tests {
		c, ns, id := p.Classify(tc.rel)
		if c != tc.c || ns != tc.ns || id != tc.id {
			t.Errorf("Classify(%q) = %v, %v, %q; want %v, %v, %q", tc.rel, c, ns, id, tc.c, tc.ns, tc.id)
		}
	}
	if s, sh := p.Namespaces(); s != "var/sess" || sh != "pub" {
		t.Errorf("Namespaces() = %q, %q", s, sh)
	}
}

func TestMayContainGuarded(t *testing.T) {
	if !Default().MayContainGuarded("src/deep") {
		t.Error("with MEMORY.md guarded at any depth, every directory may contain guarded files")
	}
	p := mustParse(t, `version: 1
classes:
  identity: ["/id/SOUL.md"]
  memory: ["notes/**"]
  control: ["a/*/hooks/**", "x/**/cfg"]
  secret: ["*.pem", "vault/**"]
`)
	tests := []struct {
		dir  string
		want bool
	}{
		{"", true},
		{"id", true},
		{"id/sub", false},
		{"id/SOUL.md", false}, // the guarded file itself: nothing below it
		{"notes", true},
		{"notes/x/y", true},
		{"a", true},
		{"a/b", true},
		{"a/b/hooks", true},
		{"a/b/other", false},
		{"x", true},
		{"x/y/z", true},
		{"vault", false}, // secret is a read guard, not a guarded class
		{"src", false},
		{"sessions", true},
		{"sessions/s1", true},
		{"sessions/s1/notes", true},
		{"sessions/s1/src", false},
		{"sessions/s1/a/q/hooks", true},
		{"shared", true},
		{"shared/src", false},
		{"shared/notes", true},
	}
	if n := testing.AllocsPerRun(100, func() { p.MayContainGuarded("sessions/s1/a/q/hooks") }); n != 0 {
		t.Errorf("MayContainGuarded allocates %v times per run", n)
	}
	for _, tc := range tests {
		if got := p.MayContainGuarded(tc.dir); got != tc.want {
			t.Errorf("MayContainGuarded(%q) = %v, want %v", tc.dir, got, tc.want)
		}
	}
	// Everything a guarded pattern matches lies below a directory for
	// which MayContainGuarded is true.
	for _, rel := range []string{"id/SOUL.md", "notes/a/b", "a/b/hooks/x", "x/cfg", "x/1/2/cfg", "sessions/s/notes/n", "shared/a/b/hooks/h"} {
		c, _, _ := p.Classify(rel)
		if !c.Guarded() {
			t.Fatalf("%q should be guarded", rel)
		}
		for dir := rel; ; {
			i := lastSlash(dir)
			if i < 0 {
				dir = ""
			} else {
				dir = dir[:i]
			}
			if !p.MayContainGuarded(dir) {
				t.Errorf("MayContainGuarded(%q) = false, but %q below it is %v", dir, rel, c)
			}
			if dir == "" {
				break
			}
		}
	}
}

func lastSlash(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			return i
		}
	}
	return -1
}

func TestExecPrincipal(t *testing.T) {
	p := Default()
	tests := []struct {
		exe  string
		want Principal
		ok   bool
	}{
		{"/usr/bin/curl", Web, true},
		{"/usr/local/bin/wget", Web, true},
		{"/usr/lib/chromium/chromium", Web, true},
		{"/opt/google/chrome/chrome", Web, true},
		{"/usr/bin/http", Web, true},
		{"curl", Web, true},
		{"/usr/bin/curlx", 0, false},
		{"/usr/bin/git", 0, false},
		{"", 0, false},
	}
	for _, tc := range tests {
		got, ok := p.ExecPrincipal(tc.exe)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ExecPrincipal(%q) = %v, %v; want %v, %v", tc.exe, got, ok, tc.want, tc.ok)
		}
	}
	q := mustParse(t, `version: 1
executables:
  - {match: "/opt/agent/bin/*", principal: TOOL_AUTH}
  - {match: "/opt/agent/bin/fetch", principal: WEB}
  - {match: "py*", principal: tool_unauth}
  - {match: "/opt/**/scrape", principal: CHANNEL}
  - {match: "/opt/skills/*", principal: SKILL}
  - {match: "/opt/skills/fetch*", principal: WEB}
`)
	for _, tc := range []struct {
		exe  string
		want Principal
		ok   bool
	}{
		{"/opt/agent/bin/run", ToolAuth, true},
		{"/opt/agent/bin/fetch", Web, true}, // the least trusted match wins
		{"/usr/bin/python3", ToolUnauth, true},
		{"/opt/agent/bin/sub/run", 0, false},
		{"/opt/x/y/scrape", Channel, true},
		{"/opt/skills/fetcher", Skill, true}, // equally trusted: the first listed names the channel
		{"opt/agent/bin/run", 0, false},
		{"/usr/bin/curl", 0, false}, // a file that sets executables replaces the list
	} {
		got, ok := q.ExecPrincipal(tc.exe)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ExecPrincipal(%q) = %v, %v; want %v, %v", tc.exe, got, ok, tc.want, tc.ok)
		}
	}
}

func TestClassifyDoesNotAllocate(t *testing.T) {
	p := Default()
	n := testing.AllocsPerRun(1000, func() {
		p.Classify("sessions/a/skills/web/SKILL.md")
		p.Classify("src/pkg/main.go")
		p.Classify("MEMORY.md")
		p.ExecPrincipal("/usr/bin/curl")
		p.MayContainGuarded("src")
	})
	if n != 0 {
		t.Errorf("Classify allocates %v times per run", n)
	}
}

func BenchmarkClassify(b *testing.B) {
	p := Default()
	paths := []string{"src/pkg/internal/main.go", "MEMORY.md", "sessions/a/skills/web/SKILL.md", "shared/report/.env.local"}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p.Classify(paths[i&3])
	}
}

// TestMatchDeepPaths bounds the matcher's work: patterns with several
// "**" against a path as deep as PATH_MAX allows must not backtrack
// exponentially, or an agent could stall every Classify with one mkdir -p.
func TestMatchDeepPaths(t *testing.T) {
	deep := strings.Repeat("x/", 2047) + "z"
	for _, pat := range []string{"**/x/**/x/**/x/**/y", "x/**/x/**/x/**/x/**/x/**/y/**/q", "**/x/**/z/w"} {
		pt, msg, _ := compileGlob(pat)
		if msg != "" {
			t.Fatal(msg)
		}
		start := time.Now()
		if pt.match(deep) {
			t.Errorf("%q matches", pat)
		}
		if d := time.Since(start); d > 200*time.Millisecond {
			t.Errorf("%q took %v on a deep path", pat, d)
		}
	}
}

// TestClassExclusions: a "!" pattern takes paths out of its own class only,
// wherever it is written, so a weaker class may still claim them; "**/NAME"
// means NAME at any depth; "**/NAME/**" a directory at any depth.
func TestClassExclusions(t *testing.T) {
	p := mustParse(t, `version: 1
classes:
  identity: []
  memory: ["notes/**", "**/journal"]
  control: ["!notes/draft/**", "notes/**", "**/.tool/**", "!**/vendor/**", "Makefile", "etc/cfg/**", "**/*.d/**"]
  secret: ["*.pem", "!public.pem"]
`)
	for _, tc := range []struct {
		rel string
		c   Class
	}{
		{"notes/a.md", Control},
		{"notes/draft/a.md", Memory},
		{"notes/draft", Memory}, // "notes/draft/**" matches the directory itself
		{"journal", Memory},
		{"x/y/journal", Memory},
		{"journal/x", Plain},
		{".tool", Control},
		{"a/.tool/cfg", Control},
		{"vendor/a/.tool/cfg", Plain},
		{"Makefile", Control},
		{"src/Makefile", Control},
		{"vendor/Makefile", Plain},
		{"k.pem", Secret},
		{"public.pem", Plain},
		{"sessions/s/notes/draft/x", Memory},
		// Only "**/NAME/**" is a directory at any depth.
		{"etc/cfg/a", Control},
		{"x/cfg/a", Plain},
		{"x/etc/cfg/a", Plain},
		{"a/b.d/c", Control},
		{"b.d", Control},
		{"a/bd/c", Plain},
		{"sessions/s/notes/x", Control},
	} {
		if c, _, _ := p.Classify(tc.rel); c != tc.c {
			t.Errorf("Classify(%q) = %v, want %v", tc.rel, c, tc.c)
		}
	}
	if got := strings.Join(p.Patterns(Control), " "); got != "!notes/draft/** notes/** **/.tool/** !**/vendor/** Makefile etc/cfg/** **/*.d/**" {
		t.Errorf("Patterns(control) = %s", got)
	}
	if !p.MayContainGuarded("src") {
		t.Error(`"**/.tool/**" may match below any directory`)
	}
	for _, bad := range []string{`"!"`, `"!/"`, `"!a//b"`} {
		_, err := Parse("x.yaml", []byte("version: 1\nclasses:\n  control: ["+bad+"]\n"))
		var pe *Error
		if !errors.As(err, &pe) || pe.Line != 3 || pe.Hint == "" {
			t.Errorf("control: [%s]: %v", bad, err)
		}
	}
}

// TestPatternNeed: an anchored pattern's first literal component is what
// every path it matches contains, and match rejects a path without it
// before walking it; a pattern with no literal needs nothing.
func TestPatternNeed(t *testing.T) {
	for pat, want := range map[string]string{
		"**/.git/config":    ".git",
		"skills/**":         "skills",
		"/SOUL.md":          "SOUL.md",
		"a/*/hooks/**":      "a",
		"**/*.d/**":         "",
		"**":                "",
		"*.pem":             "", // unanchored: the base name is compared anyway
		"**/journal":        "", // the same as journal
		"x/**/cfg":          "x",
		"**/.github/a/**":   ".github",
		"[ab]/**/.cargo/**": ".cargo",
	} {
		pt, msg, _ := compileGlob(pat)
		if msg != "" {
			t.Fatal(msg)
		}
		if pt.need != want {
			t.Errorf("compileGlob(%q).need = %q, want %q", pat, pt.need, want)
		}
	}
}
