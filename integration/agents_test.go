package integration

import (
	"strings"
	"testing"
)

// What ripgrep and git do at an agent's start — look for .git, .ignore,
// .gitignore in every directory, sessions/ included, and list sessions/ —
// leaves no refusal record and quarantines nothing: another session's
// namespace is invisible, not refused. The session sees its own directory.
func TestNamespaceLookupsAreNotRefusals(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n", "sessions/other/plan.txt": "p\n"}).Mount()
	script := `mkdir -p sessions/agent
for i in 1 2 3 4 5 6 7 8; do
  for f in .git .rgignore .ignore .gitignore other/.git other/plan.txt; do
    test -e sessions/$f; cat sessions/$f 2>/dev/null
  done
done
ls sessions
echo '- still trusted' >> MEMORY.md`
	r := e.Sh("USER", "agent", script)
	expectOK(t, "lookups in sessions/, then a memory edit", r)
	if strings.TrimSpace(r.Stdout) != "agent" {
		t.Errorf("the session's listing of sessions/: %q, want only its own directory", r.Stdout)
	}
	for _, le := range e.Log() {
		if le.Record.Meta.Verdict == "deny" {
			t.Errorf("a refusal record for an invisible name: %s %s %s", le.Record.Meta.Rule, le.Record.Meta.Op, le.Record.Meta.Path)
		}
	}
	if !strings.Contains(e.Read("MEMORY.md"), "- still trusted") {
		t.Fatal("the session's memory edit is missing")
	}
	// The namespace still holds: another session's file is not readable.
	if r := e.Sh("USER", "agent", "cat sessions/other/plan.txt"); r.Code == 0 {
		bugf(t, "session agent read sessions/other: %s", r)
	}
}

// Identity files are anchored at the root and may be created once, by a
// trusted, untainted process, when absent — an agent's first run (OpenClaw
// stages SOUL.md and IDENTITY.md in a temporary directory and links them
// into place). After that they are immutable; untrusted or tainted
// creators are refused for their own reason.
func TestIdentityFirstCreation(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount()
	// OpenClaw's bootstrap, in a clean USER session.
	expectOK(t, "staged identity linked into place", e.Sh("USER", "boot",
		"d=$(mktemp -d openclaw-bootstrap-XXXXXX) && printf '# IDENTITY\\nname: claw\\n' > $d/IDENTITY.md && ln $d/IDENTITY.md IDENTITY.md && rm -r $d"))
	if e.Read("IDENTITY.md") != "# IDENTITY\nname: claw\n" {
		t.Fatalf("IDENTITY.md: %q", e.Read("IDENTITY.md"))
	}
	// The owner writes SOUL.md the first time.
	expectOK(t, "owner creates SOUL.md", e.Owner("echo '# SOUL' > SOUL.md"))
	var firsts int
	for _, le := range e.Log() {
		if le.Record.Meta.Rule == "R1-first" {
			firsts++
		}
	}
	if firsts == 0 {
		t.Errorf("no R1-first record for the first creations")
	}
	// Once there, immutable — for the owner too.
	r := e.Owner("echo changed > SOUL.md")
	if r.Code == 0 || e.Read("SOUL.md") != "# SOUL\n" {
		bugf(t, "SOUL.md changed after its creation: %s", r)
	}
	if !hasRule(e.index().denials("", "SOUL.md"), "R1-immutable") {
		bugf(t, "the change of an existing SOUL.md was not refused as R1-immutable: %v", describe(e.index().denials("", "SOUL.md")))
	}
	// Absent identity files: a WEB session and a tainted USER session are
	// refused for their own reasons.
	expectOK(t, "a nested SOUL.md is an ordinary file", e.Sh("WEB", "w", "mkdir -p sub && echo x > sub/SOUL.md"))
	e2 := newEnv(t, map[string]string{"MEMORY.md": "m\n", "page.txt": "p\n"}).Mount()
	r = e2.Sh("WEB", "w", "echo evil > SOUL.md")
	if r.Code == 0 || e2.Exists("SOUL.md") && e2.Read("SOUL.md") != "" {
		bugf(t, "WEB created SOUL.md: %s", r)
	}
	if !hasRule(e2.index().denials("w", "SOUL.md"), "R3-principal") {
		bugf(t, "WEB's creation of SOUL.md: want R3-principal, got %v", describe(e2.index().denials("w", "SOUL.md")))
	}
	expectOK(t, "WEB writes a page", e2.Sh("WEB", "w", "echo poison > page2.txt"))
	r = e2.Sh("USER", "u", "cat page2.txt >/dev/null; echo soul > SOUL.md")
	if r.Code == 0 {
		bugf(t, "a tainted USER session created SOUL.md: %s", r)
	}
	if !hasRule(e2.index().denials("u", "SOUL.md"), "R2-taint") {
		bugf(t, "tainted creation of SOUL.md: want R2-taint, got %v", describe(e2.index().denials("u", "SOUL.md")))
	}
}
