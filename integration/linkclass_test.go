package integration

import (
	"strings"
	"testing"
)

// A hard link shares one file between its names, so a file has one class:
// a link that would give a guarded file a name of another guarded class
// is refused (RX-link-classes), and a file that reached such a name some
// other way (a directory renamed over a plain link) is decided as the
// strictest class any of its guarded names has. Otherwise an agent's
// session, which may write memory but whose skill or settings changes wait
// for the owner (AU3-control-quarantine), would change a skill, Claude's
// settings or git's configuration by writing a memory name linked to it.
func TestLinkAcrossGuardedClassesRefused(t *testing.T) {
	e := newEnv(t, map[string]string{
		"skills/x/SKILL.md": "skill v1\n",
		"MEMORY.md":         "memory\n",
		"memory/keep.md":    "k\n",
	}).Mount()
	agent := func(session, script string) Result {
		return runCmd(e.WS, nil, aerfsBin, "run", "--workspace", e.WS, "--agent", "claude-code", "--principal", "USER",
			"--session", session, "--", "sh", "-c", script)
	}
	agent("ag", "ln skills/x/SKILL.md memory/s.md; echo LINK-MARK >> memory/s.md")
	if got := e.Read("skills/x/SKILL.md"); got != "skill v1\n" {
		t.Fatalf("an agent changed a skill through a memory name linked to it: %q", got)
	}
	if !e.logHas("verdict", "link", "deny", "RX-link-classes", "ag") {
		t.Fatalf("the link of a skill to a memory name: %s, want a refusal RX-link-classes", describe(recordsFor(e.Log(), "", "link", "memory/s.md")))
	}
	// The other way round, by the owner: refused all the same.
	expectFail(t, "the owner links MEMORY.md to a skill's name", e.Owner("ln MEMORY.md skills/x/NOTES.md"))
	if !e.logHas("verdict", "link", "deny", "RX-link-classes", "") {
		t.Fatalf("the link of MEMORY.md to a skill's name: %s, want a refusal RX-link-classes", describe(recordsFor(e.Log(), "", "link", "skills/x/NOTES.md")))
	}
	// A plain name linked to the skill, its directory then renamed to a
	// memory directory: the memory name still writes the skill.
	r := agent("ag2", "mkdir notes && ln skills/x/SKILL.md notes/s.md && mv notes memory/sub && echo DIR-MARK >> memory/sub/s.md")
	if got := e.Read("skills/x/SKILL.md"); strings.Contains(got, "DIR-MARK") {
		t.Fatalf("an agent changed a skill through a plain link moved under a memory directory: %q\n%s", got, r)
	}
	d := recordsFor(e.Log(), "", "", "memory/sub/s.md")
	if len(d) == 0 || !strings.HasPrefix(lastRule(d), "AU3-control") {
		t.Fatalf("the write through memory/sub/s.md: %s, want it decided as the skill's (AU3-control-…)", describe(d))
	}
}
