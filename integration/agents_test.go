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
