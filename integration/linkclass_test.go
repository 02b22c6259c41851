package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// A name linked to a file while both were plain is decided as the file's
// class once a policy edit guards the file.
func TestPolicyEditGuardsLinkedNames(t *testing.T) {
	e := newEnv(t, map[string]string{"notes.md": "my notes\n"}).Mount()
	expectOK(t, "WEB links notes.md", e.Sh("WEB", "w", "ln notes.md x.txt"))
	editPolicy(t, e, "\n    - MEMORY.md\n", "\n    - MEMORY.md\n    - notes.md\n")
	waitClass(t, e, "notes.md", "memory", 5*time.Second, "the policy edit guarding notes.md did not take effect")
	e.Sh("WEB", "w2", "echo INJECTED >> x.txt")
	if got := e.Read("notes.md"); got != "my notes\n" {
		t.Fatalf("a WEB session changed the now guarded notes.md through a name linked while it was plain: %q", got)
	}
	if d := e.Denials("x.txt"); lastRule(d) != "R3-principal" {
		t.Fatalf("the write through x.txt: %s, want it refused as memory's (R3-principal)", describe(recordsFor(e.Log(), "", "", "x.txt")))
	}
}

// A file known under more guarded names than the index keeps is decided
// as the strictest class: which class a name past the bound had is not
// known. Links made before the mount, the control file's name among the
// last the walk finds.
func TestManyNamesDecidedStrictest(t *testing.T) {
	files := map[string]string{"Makefile": "all:\n\ttrue\n"}
	e := newEnv(t, files)
	for i := 0; i < 70; i++ {
		d := filepath.Join(e.WS, fmt.Sprintf("d%02d", i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(filepath.Join(e.WS, "Makefile"), filepath.Join(d, "CLAUDE.md")); err != nil {
			t.Fatal(err)
		}
	}
	e.Mount()
	runCmd(e.WS, nil, aerfsBin, "run", "--workspace", e.WS, "--agent", "claude-code", "--principal", "USER",
		"--session", "ag", "--", "sh", "-c", "for i in 00 35 69; do echo 'x: ; touch /tmp/pwned' >> d$i/CLAUDE.md; done")
	if got := e.Read("Makefile"); got != files["Makefile"] {
		t.Fatalf("an agent changed the Makefile through one of its 70 memory names: %q", got)
	}
	if d := recordsFor(e.Log(), "verdict", "write", "d35/CLAUDE.md"); lastRule(d) != "R1-immutable" {
		t.Fatalf("the write through d35/CLAUDE.md: %s, want it refused as an identity file's (R1-immutable)", describe(d))
	}
}
