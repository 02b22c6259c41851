//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fm "github.com/aerfs/aerfs/e2e/fakemodel"
)

// noise is what a tool result or the client's own output must not say on a
// clean day's work: a refusal the scenario did not cause (confinement
// keeping the client out of its own caches and state, or printing its
// refusals into every command's output).
var noise = []string{"oom_score_adj", "Permission denied", "EACCES", "Operation not permitted", "Read-only file system", "EROFS"}

// The client as its owner runs it every day: the workspace initialised with
// its agent profile (aerfs init --agent), run under aerfs run --agent, its
// home laid out as a real one (outside every place a session may write, the
// profile's roots and writable caches and state in it), and run twice in
// the same home and state: what the first run left (caches, state
// databases, transcripts) must not stop the second. Both runs edit memory,
// write a plain file and run a shell command: no refusal, no refusal noise
// in what the model reads.
func scenarioDaily(t *testing.T, c *client) {
	c.require(t)
	hm := homeMemory[c.name]
	expected := "two runs in one home and state under --agent " + hm.profile + ": exit 0, committed, 0 refusals, no refusal noise"
	home := realHome(t)
	e := newEnvAgent(t, map[string]string{"MEMORY.md": memOld, c.memory: memOld}, hm.profile, home, hm.dir)
	var p []string
	facts := []string{}
	mem := memOld
	for day, add := range []string{"- tests need root\n", "- the owner reviews on Fridays\n"} {
		session := fmt.Sprintf("day%d", day+1)
		final := strings.ToUpper(session) + "-DONE"
		steps := []fm.Step{
			{Kind: fm.Read, Path: "MEMORY.md"},
			{Kind: fm.Edit, Path: "MEMORY.md", Old: mem, New: mem + add},
			{Kind: fm.Write, Path: "src/" + session + ".txt", Content: session + "\n"},
			{Kind: fm.Shell, Command: "echo SHELL-" + session},
			{Kind: fm.Final, Text: final},
		}
		r := runClientAgent(t, c, e.WS, "USER", session, "Update the memory and note the day.", steps, false, home, hm.profile)
		for _, q := range clientOK(c, r, final) {
			p = append(p, session+": "+q)
		}
		mem += add
		if got, _ := e.read("MEMORY.md"); got != mem {
			p = append(p, fmt.Sprintf("%s: MEMORY.md is %q", session, got))
		}
		if got, _ := e.read("src/" + session + ".txt"); got != session+"\n" {
			p = append(p, fmt.Sprintf("%s: src/%s.txt is %q", session, session, got))
		}
		if !model.Saw("SHELL-" + session) {
			p = append(p, session+": the shell command's output never reached the model")
		}
		for _, n := range r.noise {
			p = append(p, fmt.Sprintf("%s: %s: %s", session, n, oneLine(r.tail(), 300)))
		}
		facts = append(facts, fmt.Sprintf("%s exit %d, %d turns", session, r.code, r.turns))
	}
	les := e.log()
	if d := denials(les); len(d) > 0 {
		p = append(p, fmt.Sprintf("%d refusals: %s", len(d), summary(d)))
	}
	if len(p) > 0 {
		saveLog(t, les)
	}
	report(t, c.name, "daily", expected, p, strings.Join(facts, "; "))
}

// saveLog writes a failed scenario's evidence log (aerfs log --json) beside
// the clients' output in the log directory, for reading after the run has
// removed the state directory.
func saveLog(t *testing.T, les []logEntry) {
	var b strings.Builder
	for _, le := range les {
		j, _ := json.Marshal(le)
		b.Write(j)
		b.WriteByte('\n')
	}
	name := strings.ReplaceAll(t.Name(), "/", "_") + ".log.json"
	os.WriteFile(filepath.Join(logDir, name), []byte(b.String()), 0o644)
}

// realHome makes a home directory where a real one is: outside /tmp and
// /var/tmp, which confined sessions may write, so that only what the
// agent profile grants is writable to the client.
func realHome(t *testing.T) string {
	t.Helper()
	os.MkdirAll("/var/lib/aerfs-e2e", 0o755)
	home, err := os.MkdirTemp("/var/lib/aerfs-e2e", "home-")
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the mount: removed after the unmount.
	t.Cleanup(func() { os.RemoveAll(home) })
	return home
}
