package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aerfs/aerfs/configs"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		line int
		msg  string // the message must contain this
		hint string // and the hint this
	}{
		{"empty", "", 1, "empty policy file", "version: 1"},
		{"comment only", "# nothing\n", 1, "empty policy file", "version: 1"},
		{"missing version", "classes: {}\n", 1, "missing version", "version: 1"},
		{"version 2", "version: 2\n", 1, "unsupported policy version 2", "version 1"},
		{"version string", "version: \"1\"\n", 1, "version must be an integer", "version 1"},
		{"not a mapping", "- version\n", 1, "must be a mapping", "version: 1"},
		{"unknown top key", "version: 1\nclases: {}\n", 2, `unknown key "clases"`, "classes"},
		{"duplicate key", "version: 1\nuids: []\n\nuids: []\n", 4, `duplicate key "uids"`, "line 2"},
		{"unknown class", "version: 1\nclasses:\n  idenity: [SOUL.md]\n", 3, `unknown key "idenity"`, "identity, memory, control, secret"},
		{"duplicate class", "version: 1\nclasses:\n  memory: []\n  memory: []\n", 4, `duplicate key "memory"`, "line 3"},
		{"class not a list", "version: 1\nclasses:\n  memory: MEMORY.md\n", 3, "classes.memory must be a list", "[a, b]"},
		{"class null", "version: 1\nclasses:\n  memory:\n", 3, "must be a list, found nothing", "[]"},
		{"pattern not a string", "version: 1\nclasses:\n  memory:\n    - {a: b}\n", 4, "a pattern must be a string", "quote"},
		{"pattern a number", "version: 1\nclasses:\n  memory: [2024]\n", 3, "a pattern must be a string", "quote"},
		{"bad glob", "version: 1\nclasses:\n  secret:\n    - ok\n    - \"[x\"\n", 5, `bad glob "[x"`, "brackets"},
		{"trailing slash", "version: 1\nclasses:\n  control: [\"skills/\"]\n", 3, "trailing slash", `"skills/**"`},
		{"starstar in name", "version: 1\nclasses:\n  control: [\"**.md\"]\n", 3, `"**" inside a name`, "whole path component"},
		{"dotdot", "version: 1\nclasses:\n  control: [\"../x\"]\n", 3, `".." component`, "workspace-relative"},
		{"unquoted star", "version: 1\nclasses:\n  secret: [*.pem]\n", 3, "invalid YAML", `"*.pem"`},
		{"alias", "version: 1\nblocking_taint: &b [UNTRUSTED]\nuids: *b\n", 2, "anchors and aliases", "write the value out"},
		{"syntax", "version: 1\nclasses: [\n", 2, "invalid YAML", "quote"},
		{"tab indent", "version: 1\nclasses:\n\tmemory: []\n", 3, "invalid YAML", "quote"},
		{"two documents", "version: 1\n---\nversion: 1\n", 2, "more than one YAML document", "one policy per file"},
		{"unknown principal", "version: 1\nexecutables:\n  - {match: curl, principal: WEB}\n  - {match: wget, principal: ADMIN}\n", 4, `unknown principal "ADMIN"`, "principals are SYS, USER, TOOL_AUTH, TOOL_UNAUTH, WEB, SKILL, CHANNEL, EXTERNAL"},
		{"unknown taint", "version: 1\nblocking_taint:\n  - UNTRUSTED\n  - WEB\n", 4, `unknown taint "WEB"`, "taint flags are UNTRUSTED"},
		{"duplicate taint", "version: 1\nblocking_taint: [UNTRUSTED, untrusted]\n", 2, "listed twice", "remove"},
		{"taint not a list", "version: 1\nblocking_taint: UNTRUSTED\n", 2, "blocking_taint must be a list", "[a, b]"},
		{"exec unknown key", "version: 1\nexecutables:\n  - {match: curl, principal: WEB, why: net}\n", 3, `unknown key "why"`, "match, principal"},
		{"exec missing principal", "version: 1\nexecutables:\n  - match: curl\n", 3, "entry without principal", "match and principal"},
		{"exec relative path", "version: 1\nexecutables:\n  - {match: bin/curl, principal: WEB}\n", 3, "neither a bare name nor an absolute path", "/usr/bin/curl"},
		{"uid not a number", "version: 1\nuids:\n  - {uid: alice, principal: WEB}\n", 3, "uid must be an integer", "whole number"},
		{"uid negative", "version: 1\nuids:\n  - {uid: -1, principal: WEB}\n", 3, "out of range", "whole number"},
		{"uid too large", "version: 1\nuids:\n  - {uid: 4294967296, principal: WEB}\n", 3, "out of range", "whole number"},
		{"uid twice", "version: 1\nuids:\n  - {uid: 1001, principal: WEB}\n  - {uid: 1001, principal: SKILL}\n", 4, "uid 1001 listed twice", "line 3"},
		{"uid principal", "version: 1\nuids:\n  - {uid: 1001, principal: root}\n", 3, `unknown principal "root"`, "principals are"},
		{"burst zero", "version: 1\nburst: {denials: 0}\n", 2, "out of range", "whole number"},
		{"burst too many", "version: 1\nburst: {denials: 1048577}\n", 2, "burst.denials 1048577 is out of range", "from 1 to 1048576"},
		{"burst window zero", "version: 1\nburst:\n  window: 0s\n", 3, "bad burst.window", "positive"},
		{"version null", "version:\n", 1, "version must be an integer, found nothing", "version 1"},
		{"namespace null", "version: 1\nnamespaces: {sessions: }\n", 2, "namespaces.sessions must be a string, found nothing", "quote"},
		{"namespace number", "version: 1\nnamespaces: {sessions: 7}\n", 2, `namespaces.sessions must be a string, found the int "7"`, "quote"},
		{"yaml syntax", "version: 1\nclasses: [\n", 2, "invalid YAML: did not find expected node content", "quote"},
		{"burst window", "version: 1\nburst:\n  window: soon\n", 3, `bad burst.window "soon"`, "120s"},
		{"burst window negative", "version: 1\nburst:\n  window: -5s\n", 3, "bad burst.window", "positive"},
		{"burst window number", "version: 1\nburst:\n  window: 120\n", 3, "burst.window must be a string", "quote"},
		{"burst unknown", "version: 1\nburst:\n  denial: 5\n", 3, `unknown key "denial"`, "denials, window"},
		{"namespace wildcard", "version: 1\nnamespaces:\n  shared: \"pub*\"\n", 3, "contains a wildcard", "workspace-relative"},
		{"namespace unclean", "version: 1\nnamespaces:\n  sessions: /abs\n", 3, "not a clean relative path", "workspace-relative"},
		{"namespace overlap", "version: 1\nnamespaces:\n  sessions: work\n  shared: work/pub\n", 3, "namespaces overlap", "distinct"},
		{"namespace same", "version: 1\nnamespaces: {sessions: x, shared: x}\n", 2, "namespaces overlap", "distinct"},
		{"namespace default overlap", "version: 1\nnamespaces: {shared: sessions/pub}\n", 2, "namespaces overlap", "distinct"},
		{"review bad id", "version: 1\nreview_sessions: [a, b/c]\n", 2, `bad session id "b/c"`, "one directory name"},
		{"key not a string", "version: 1\n1: x\n", 2, "unexpected key", "plain words"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("aerfs.yaml", []byte(tc.src))
			if err == nil {
				t.Fatalf("Parse accepted %q", tc.src)
			}
			if p != nil {
				t.Errorf("Parse returned a policy with an error")
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T %v is not a *policy.Error", err, err)
			}
			if pe.File != "aerfs.yaml" || pe.Line != tc.line || !strings.Contains(pe.Msg, tc.msg) || !strings.Contains(pe.Hint, tc.hint) {
				t.Errorf("got %s (line %d, hint %q)\nwant line %d, message with %q, hint with %q", err, pe.Line, pe.Hint, tc.line, tc.msg, tc.hint)
			}
			if want := "aerfs.yaml:" + itoa(tc.line) + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Error() = %q, want prefix %q", err.Error(), want)
			}
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

func TestErrorString(t *testing.T) {
	e := &Error{File: "aerfs.yaml", Line: 12, Msg: `unknown principal "ADMIN"`, Hint: principalHint}
	if got := e.Error(); got != `aerfs.yaml:12: unknown principal "ADMIN"` {
		t.Errorf("Error() = %q", got)
	}
	e.Line = 0
	if got := e.Error(); got != `aerfs.yaml: unknown principal "ADMIN"` {
		t.Errorf("Error() = %q", got)
	}
}

func TestParseTooLarge(t *testing.T) {
	_, err := Parse("big.yaml", []byte("version: 1\n"+strings.Repeat("#", maxPolicySize)))
	var pe *Error
	if !errors.As(err, &pe) || !strings.Contains(pe.Msg, "larger than") {
		t.Errorf("got %v", err)
	}
}

func TestParseMergesDefaults(t *testing.T) {
	p := mustParse(t, `version: 1
classes:
  memory: [NOTES.md]
  secret: []
uids:
  - {uid: 1001, principal: TOOL_UNAUTH}
  - {uid: 0x3ea, principal: channel}
burst: {window: 5m}
review_sessions: [s1]
`)
	check := func(rel string, want Class) {
		t.Helper()
		if c, _, _ := p.Classify(rel); c != want {
			t.Errorf("Classify(%q) = %v, want %v", rel, c, want)
		}
	}
	check("NOTES.md", Memory)
	check("MEMORY.md", Plain)  // memory was replaced
	check("SOUL.md", Identity) // identity kept its default
	check("skills/x", Control)
	check(".env", Plain) // secret emptied on purpose
	if got := p.Patterns(Memory); len(got) != 1 || got[0] != "NOTES.md" {
		t.Errorf("Patterns(Memory) = %q", got)
	}
	if p.Blocking() != Default().Blocking() {
		t.Errorf("blocking %v, want the default", p.Blocking())
	}
	if n, w := p.Burst(); n != 5 || w != 5*time.Minute {
		t.Errorf("Burst() = %d, %v", n, w)
	}
	if pr, ok := p.UIDPrincipal(1001); !ok || pr != ToolUnauth {
		t.Errorf("UIDPrincipal(1001) = %v, %v", pr, ok)
	}
	if pr, ok := p.UIDPrincipal(1002); !ok || pr != Channel {
		t.Errorf("UIDPrincipal(1002) = %v, %v", pr, ok)
	}
	if _, ok := p.UIDPrincipal(1003); ok {
		t.Error("UIDPrincipal(1003) mapped")
	}
	if !p.ReviewSession("s1") || p.ReviewSession("s2") {
		t.Error("ReviewSession")
	}
	if pr, ok := p.ExecPrincipal("/usr/bin/wget"); !ok || pr != Web {
		t.Error("executables should keep their default")
	}
	if p.Name() != "test.yaml" {
		t.Errorf("Name() = %q", p.Name())
	}
}

func TestParseEmptyBlocking(t *testing.T) {
	p := mustParse(t, "version: 1\nblocking_taint: []\n")
	if p.Blocking() != 0 {
		t.Errorf("Blocking() = %v", p.Blocking())
	}
	if v := p.Decide(subj(User, AllTaint, ""), OpWrite, Target{Class: Memory}); !v.Allow {
		t.Errorf("with nothing blocking a tainted USER may write memory: %v", v)
	}
}

func TestDefault(t *testing.T) {
	p := Default()
	if p.Blocking() != Untrusted|InjectionSuspect|ProxyDerived|CrossSession|ToolOutput|SkillOutput|WebDerived {
		t.Errorf("Blocking() = %v", p.Blocking())
	}
	if n, w := p.Burst(); n != 5 || w != 120*time.Second {
		t.Errorf("Burst() = %d, %v", n, w)
	}
	if s, sh := p.Namespaces(); s != "sessions" || sh != "shared" {
		t.Errorf("Namespaces() = %q, %q", s, sh)
	}
	if _, ok := p.UIDPrincipal(0); ok {
		t.Error("default maps a uid")
	}
	if p.ReviewSession("a") {
		t.Error("default reviews a session")
	}
	for c, want := range map[Class][]string{
		Identity: {"/SOUL.md", "/IDENTITY.md"},
		Secret:   {".env*", "*.pem", "*.key", "id_rsa*", "id_ed25519*", "credentials*", ".netrc"},
	} {
		if got := p.Patterns(c); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("Patterns(%v) = %q, want %q", c, got, want)
		}
	}
	// Memory and control list every known client's files (the table in
	// docs/agents.md is checked row by row in configs/); the patterns are
	// returned as written, exclusions included.
	for c, some := range map[Class][]string{
		Memory:  {"MEMORY.md", "AGENTS.md", "CLAUDE.md", "GEMINI.md", "memory/**"},
		Control: {"skills/**", "**/.claude/**", ".mcp.json", ".git", "**/.git/config", "**/.git/hooks/**", "Makefile", "package.json", "!**/node_modules/**"},
	} {
		got := " " + strings.Join(p.Patterns(c), " ") + " "
		for _, w := range some {
			if !strings.Contains(got, " "+w+" ") {
				t.Errorf("Patterns(%v) lacks %q: %s", c, w, got)
			}
		}
	}
	if p.Patterns(numClasses) != nil {
		t.Error("Patterns of an invalid class")
	}
	// Parsing the embedded file as a user file gives the same policy.
	q, err := Parse("aerfs.yaml", configs.DefaultPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if q.Blocking() != p.Blocking() || len(q.executables) != len(p.executables) {
		t.Error("the embedded default parses differently as a user file")
	}
}

func TestDefaultMustSetEveryKey(t *testing.T) {
	// The embedded default is what user files fall back to: parsed without
	// a base, a file that leaves a key out is refused, and Default panics.
	if _, err := parseSpec("x.yaml", []byte("version: 1\n"), nil); err == nil {
		t.Error("a default without keys was accepted")
	}
	full := string(configs.DefaultPolicy)
	for _, k := range []string{"\nuids:", "\nburst:", "\nnamespaces:"} {
		broken := strings.Replace(full, k, "\nx_"+k[1:], 1)
		if _, err := parseSpec("x.yaml", []byte(broken), nil); err == nil {
			t.Errorf("a default without %s was accepted", k)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Default did not panic on a broken embedded file")
		}
	}()
	mustDefault([]byte("version: 1\n"))
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "aerfs.yaml")
	if err := os.WriteFile(good, configs.DefaultPolicy, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(good); err != nil {
		t.Errorf("Load: %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nuids:\n  - {uid: 1, principal: ADMIN}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(bad)
	if err == nil || err.Error() != bad+`:3: unknown principal "ADMIN"` {
		t.Errorf("Load(bad) = %v", err)
	}
	_, err = Load(filepath.Join(dir, "missing.yaml"))
	var pe *Error
	if !errors.As(err, &pe) || pe.Hint == "" {
		t.Errorf("Load(missing) = %v", err)
	}
}

// The bounds of burst.denials are inclusive.
func TestBurstBounds(t *testing.T) {
	for _, n := range []int{1, 1 << 20} {
		p, err := Parse("b.yaml", []byte(fmt.Sprintf("version: 1\nburst: {denials: %d, window: 1ns}\n", n)))
		if err != nil {
			t.Fatalf("denials %d: %v", n, err)
		}
		if got, w := p.Burst(); got != n || w != time.Nanosecond {
			t.Errorf("Burst() = %d, %v", got, w)
		}
	}
}
