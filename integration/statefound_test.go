package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A workspace initialised with a custom --state is found from the workspace
// alone (mounted or not) and from --state alone, and a hint that cannot
// know the state directory says how to give it.
func TestStateFoundNotRemembered(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"})
	elsewhere := t.TempDir()
	at := func(args ...string) Result { return runCmd(elsewhere, nil, aerfsBin, args...) }

	// Unmounted: --workspace alone finds the state (the log is readable).
	r := at("log", "--workspace", e.WS)
	expectOK(t, "log --workspace of an unmounted workspace", r)
	r = at("status", "--state", e.State)
	if r.Code != 5 || !strings.Contains(r.Stderr, e.WS+" is not mounted") || !strings.Contains(r.Stderr, "aerfs mount "+e.WS) {
		t.Fatalf("status --state of an unmounted workspace should name it and how to mount it: %s", r)
	}
	// mount with the workspace alone.
	expectOK(t, "mount without --state", at("mount", e.WS))
	t.Cleanup(e.Unmount)
	r = at("status", "--state", e.State)
	expectOK(t, "status --state alone", r)
	if !strings.Contains(r.Stdout, e.WS) || !strings.Contains(r.Stdout, "mounted") {
		t.Fatalf("status --state: %s", r)
	}
	e.Unmount()

	// Without the pointer the state cannot be found from the workspace;
	// the error says to pass --state.
	matches, _ := filepath.Glob(filepath.Join(os.Getenv("XDG_STATE_HOME"), "aerfs", "*", "state-dir"))
	for _, m := range matches {
		if b, _ := os.ReadFile(m); strings.TrimSpace(string(b)) == e.State {
			os.Remove(m)
		}
	}
	r = at("mount", e.WS)
	if r.Code == 0 || !strings.Contains(r.Stderr, "--state") {
		t.Fatalf("mount without a findable state should say to pass --state: %s", r)
	}
}

// Shell completion offers what the daemon and the log know: session ids,
// pending ids, principals and taint flags.
func TestCompletionFromTheDaemon(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount()
	expectOK(t, "a session", e.Sh("USER", "agent-one", "true"))
	expectFail(t, "a refused WEB write", e.Sh("WEB", "web-two", "echo x >> notes.md; cat notes.md; true; echo y >> MEMORY.md"))
	complete := func(args ...string) string {
		r := e.Aerfs(append([]string{"__complete"}, args...)...)
		return r.Stdout
	}
	if out := complete("taint", "--session", "agent-one", "--workspace", e.WS, "WEB"); !strings.Contains(out, "WEB_DERIVED") {
		t.Errorf("taint flags: %q", out)
	}
	if out := complete("run", "--workspace", e.WS, "--principal", "TOOL"); !strings.Contains(out, "TOOL_AUTH") || !strings.Contains(out, "TOOL_UNAUTH") {
		t.Errorf("principals: %q", out)
	}
	if out := complete("log", "--workspace", e.WS, "--session", "agent"); !strings.Contains(out, "agent-one") || strings.Contains(out, "web-two") {
		t.Errorf("session ids: %q", out)
	}
	if out := complete("prove", "--workspace", e.WS, ""); strings.Count(out, "\n") < 3 {
		t.Errorf("record ids: %q", out)
	}
	// Refused at close (tainted between open and close): kept in quarantine.
	e.Sh("USER", "reader", "exec 3>>MEMORY.md; cat notes.md >/dev/null; echo z >&3; exec 3>&-")
	if out := complete("approve", "--workspace", e.WS, ""); !strings.Contains(out, "MEMORY.md") {
		t.Errorf("pending ids: %q", out)
	}
}

// aerfs run passes the command's exit status through and reports its own
// failures with 125/126/127, so a command's own exit 4 never reads as a
// refusal; flags end at the command, so no "--" is needed.
func TestRunExitCodes(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount()
	run := func(args ...string) Result {
		return runCmd(e.WS, nil, aerfsBin, append([]string{"run", "--workspace", e.WS}, args...)...)
	}
	if r := run("--principal", "USER", "sh", "-c", "exit 4"); r.Code != 4 {
		t.Errorf("the command's exit 4: %s", r)
	}
	if r := run("--principal", "USER", "ls", "-la"); r.Code != 0 || !strings.Contains(r.Stdout, "MEMORY.md") {
		t.Errorf("aerfs run --principal USER ls -la (no --): %s", r)
	}
	if r := run("--principal", "USER", "no-such-command-here"); r.Code != 127 || !strings.Contains(r.Stderr, "aerfs: ") {
		t.Errorf("missing command: %s", r)
	}
	if r := run("--principal", "BOGUS", "true"); r.Code != 125 {
		t.Errorf("bad principal: %s", r)
	}
	r := e.Sh("WEB", "w", aerfsBin+" run --workspace "+e.WS+" --principal USER -- true; echo rc=$?")
	if !strings.Contains(r.Stdout, "rc=125") || !strings.Contains(r.Stderr, "RG-grant") {
		t.Errorf("a refused registration: %s", r)
	}
}
