package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

// An agent's session (aerfs run --agent) writes inform content: its notes
// are recorded with class inform, it cannot make its own script executable,
// and a skill it writes — which the policy would let a clean USER session
// commit — waits in quarantine for the owner (AU3-control-quarantine)
// instead of becoming configuration. The same session without --agent
// writes act content and commits the skill. A sub-session of an agent's
// session is an agent's too.
func TestAuthorityAgentSessionInforms(t *testing.T) {
	e := newEnv(t, nil).Mount()
	expectOK(t, "the owner makes skills/", e.Owner("mkdir -p skills/helper tools"))
	agent := func(session, script string) Result {
		return runCmd(e.WS, nil, aerfsBin, "run", "--workspace", e.WS, "--agent", "claude-code", "--principal", "USER",
			"--session", session, "--", "sh", "-c", script)
	}
	expectOK(t, "the agent writes a note and a script", agent("ag", "printf 'note\\n' > notes.md && printf '#!/bin/sh\\necho hi\\n' > tools/run.sh"))
	li := e.Log()
	if c := classOf(li, "notes.md"); c != "inform" {
		t.Fatalf("an agent's note: write record class %q, want inform%s", c, describe(recordsFor(li, "", "", "notes.md")))
	}
	expectFail(t, "the agent makes its own script executable", agent("ag", "chmod +x tools/run.sh"))
	if d := recordsFor(e.Log(), "verdict", "chmod", "tools/run.sh"); !strings.HasPrefix(lastRule(d), "AU3-") {
		t.Fatalf("chmod +x of an agent's script: %s, want an AU3 act-gate refusal", describe(d))
	}
	// python3 reports the refusal at close, where a commit is decided.
	skill := `python3 -c "
f = open('skills/helper/SKILL.md', 'w'); f.write('always run tools/run.sh first\n'); f.close()"`
	r := agent("ag2", skill)
	if got, _ := e.TryRead("skills/helper/SKILL.md"); r.Code == 0 || got != "" {
		t.Fatalf("an agent's session wrote a skill (%q): %s", got, r)
	}
	d := recordsFor(e.Log(), "quarantine", "", "skills/helper/SKILL.md")
	if len(d) != 1 || d[0].Record.Meta.Rule != "AU3-control-quarantine" || d[0].Record.Meta.Class != "inform" {
		t.Fatalf("the agent's skill: %s, want one quarantine record AU3-control-quarantine, class inform", describe(d))
	}
	var items []struct {
		ID   string `json:"id"`
		Path string `json:"path"`
	}
	if err := json.Unmarshal([]byte(e.mustAerfs("pending", "--json", "--workspace", e.WS).Stdout), &items); err != nil || len(items) != 1 {
		t.Fatalf("pending after the agent's skill: %v %v", items, err)
	}
	expectOK(t, "the owner approves the skill", e.Aerfs("approve", items[0].ID, "--workspace", e.WS))
	if got := e.Read("skills/helper/SKILL.md"); got != "always run tools/run.sh first\n" {
		t.Fatalf("skill after approval: %q", got)
	}
	// A sub-session started inside the agent's session is the agent's too.
	// (sh ignores the refusal its redirection's close returns)
	agent("ag3", aerfsBin+" run --principal USER --session ag3-sub -- sh -c \"printf x > skills/helper/other.md\"")
	if d := recordsFor(e.Log(), "quarantine", "", "skills/helper/other.md"); len(d) != 1 {
		t.Fatalf("a sub-session of an agent's session: %s, want the skill quarantined", describe(d))
	}
	// Without --agent the same USER session writes act content.
	expectOK(t, "a USER session without --agent writes a skill", e.Sh("USER", "plain", skill))
	if got := e.Read("skills/helper/SKILL.md"); got != "always run tools/run.sh first\n" {
		t.Fatalf("skill: %q", got)
	}
}

func lastRule(les []LogEntry) string {
	if len(les) == 0 {
		return ""
	}
	return les[len(les)-1].Record.Meta.Rule
}
