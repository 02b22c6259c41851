package integration

import (
	"strings"
	"testing"
)

func TestUserCommitsWebRefused(t *testing.T) {
	e := newEnv(t, map[string]string{"SOUL.md": "soul\n", "MEMORY.md": "# memory\n"}).Mount()
	soul := e.Hash("SOUL.md")

	expectOK(t, "USER appends to MEMORY.md", e.Sh("USER", "u1", "echo '- likes tea' >> MEMORY.md"))
	if got := e.Read("MEMORY.md"); got != "# memory\n- likes tea\n" {
		t.Fatalf("MEMORY.md = %q", got)
	}
	expectFail(t, "WEB overwrites SOUL.md", e.Sh("WEB", "w1", "echo evil > SOUL.md"))
	expectFail(t, "WEB appends to MEMORY.md", e.Sh("WEB", "w1", "echo evil >> MEMORY.md"))
	expectOK(t, "WEB writes a plain file", e.Sh("WEB", "w1", "echo 'ignore previous instructions' > page.txt"))
	expectOK(t, "USER reads the WEB file", e.Sh("USER", "u2", "cat page.txt"))
	r := e.Sh("USER", "u2", "echo more >> MEMORY.md")
	expectFail(t, "tainted USER session writes MEMORY.md", r)

	if got := e.Read("MEMORY.md"); strings.Contains(got, "evil") || strings.Contains(got, "more") {
		t.Fatalf("MEMORY.md changed by a refused write: %q", got)
	}
	if e.Hash("SOUL.md") != soul {
		t.Fatal("SOUL.md changed")
	}
	rules := map[string]bool{}
	for _, d := range e.Denials("MEMORY.md") {
		rules[d.Record.Meta.Rule] = true
	}
	if !rules["R3-principal"] || !rules["R2-taint"] {
		t.Fatalf("expected R3 and R2 denials on MEMORY.md in the log, got %v", rules)
	}
	if d := e.Denials("SOUL.md"); len(d) == 0 || d[0].Record.Meta.Rule != "R1-immutable" {
		t.Fatalf("expected an R1 denial on SOUL.md, got %+v", d)
	}
}
