package integration

import (
	"bytes"
	"encoding/json"
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
	if out := complete("session", "end", "--workspace", e.WS, "agent"); !strings.Contains(out, "agent-one") {
		t.Errorf("session end: %q", out)
	}
	if out := complete("session", "release", "--workspace", e.WS, ""); !strings.Contains(out, "agent-one") {
		t.Errorf("session release: %q", out)
	}
	if out := complete("init", "--agent", "c"); !strings.Contains(out, "claude-code") || !strings.Contains(out, "codex") || strings.Contains(out, "gemini") {
		t.Errorf("init --agent: %q", out)
	}
	if out := complete("run", "--workspace", e.WS, "--agent", ""); !strings.Contains(out, "openclaw") {
		t.Errorf("run --agent: %q", out)
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

// aerfs log: fixed columns, -n, --refused, an unknown --type refused;
// restore names the flag it could not read; reject says "rejected".
func TestLogAndCLIPolish(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount()
	expectOK(t, "owner write", e.Owner("echo a >> MEMORY.md"))
	expectFail(t, "WEB write", e.Sh("WEB", "w", "echo x >> MEMORY.md"))
	log := func(args ...string) Result {
		return e.Aerfs(append([]string{"log", "--workspace", e.WS}, args...)...)
	}
	all := log()
	expectOK(t, "log", all)
	for _, l := range strings.Split(strings.TrimSpace(all.Stdout), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 {
			t.Fatalf("a log line without its six fixed columns: %q", l)
		}
		if strings.Contains(l, " )") {
			t.Errorf("stray parenthesis: %q", l)
		}
	}
	if r := log("-n", "2"); strings.Count(strings.TrimSpace(r.Stdout), "\n") != 1 {
		t.Errorf("-n 2: %s", r)
	}
	r := log("--refused")
	if r.Code != 0 || r.Stdout == "" {
		t.Fatalf("--refused: %s", r)
	}
	for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		if strings.Fields(l)[3] != "deny" {
			t.Errorf("--refused printed %q", l)
		}
	}
	if r := log("--type", "verdikt"); r.Code != 2 || !strings.Contains(r.Stderr, `unknown record type "verdikt"`) {
		t.Errorf("--type verdikt: %s", r)
	}
	if r := e.Aerfs("restore", "--workspace", e.WS, "--before", "tomorrow"); r.Code != 2 || !strings.Contains(r.Stderr, "bad --before") {
		t.Errorf("restore --before tomorrow: %s", r)
	}
	expectOK(t, "WEB page", e.Sh("WEB", "w", "echo page > page.txt"))
	e.Sh("USER", "reader", "exec 3>>MEMORY.md; cat page.txt >/dev/null; echo z >&3; exec 3>&-")
	p := e.Aerfs("pending", "--workspace", e.WS, "--json")
	var items []struct{ ID string }
	if err := json.Unmarshal([]byte(p.Stdout), &items); err != nil || len(items) != 1 {
		t.Fatalf("pending: %v %s", err, p)
	}
	if r := e.Aerfs("reject", "--workspace", e.WS, items[0].ID); r.Code != 0 || !strings.HasPrefix(r.Stdout, "rejected ") {
		t.Errorf("reject: %s", r)
	}
}

// init, mount and restore plans answer in JSON for scripts.
func TestJSONOutputs(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	state := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "MEMORY.md"), []byte("m\n"), 0o644)
	envsMu.Lock()
	envs[ws] = true
	envsMu.Unlock()
	e := &Env{t: t, WS: ws, State: state}
	var ini struct{ Workspace, State, Policy, Key string }
	r := e.Aerfs("init", "--json", "--state", state, ws)
	if err := json.Unmarshal([]byte(r.Stdout), &ini); err != nil || ini.State != state || ini.Key == "" {
		t.Fatalf("init --json: %v %s", err, r)
	}
	var mnt struct {
		Workspace string
		PID       int
	}
	r = e.Aerfs("mount", "--json", "--state", state, ws)
	t.Cleanup(e.Unmount)
	if err := json.Unmarshal([]byte(r.Stdout), &mnt); err != nil || mnt.Workspace != ws || mnt.PID == 0 {
		t.Fatalf("mount --json: %v %s", err, r)
	}
	expectOK(t, "snapshot", e.Aerfs("snapshot", "--workspace", ws))
	expectOK(t, "owner write", e.Owner("echo first >> MEMORY.md"))
	expectOK(t, "owner write", e.Owner("echo later >> MEMORY.md"))
	var plan struct {
		DryRun bool `json:"dry_run"`
		Steps  []struct {
			Path, Action, Diff string
		}
	}
	r = e.Aerfs("restore", "--workspace", ws, "MEMORY.md", "--to", "1", "--dry-run", "--json")
	if err := json.Unmarshal([]byte(r.Stdout), &plan); err != nil || !plan.DryRun || len(plan.Steps) != 1 ||
		plan.Steps[0].Action != "change" || !strings.Contains(plan.Steps[0].Diff, "-later") {
		t.Fatalf("restore --dry-run --json: %v %s", err, r)
	}
	// export and verify answer in JSON too, a failed verification
	// included (with its exit code).
	bundle := filepath.Join(t.TempDir(), "bundle")
	var man struct {
		Output      string
		RecordCount int64  `json:"record_count"`
		RootHash    string `json:"root_hash"`
	}
	r = e.Aerfs("export", "--workspace", ws, "-o", bundle, "--json")
	if err := json.Unmarshal([]byte(r.Stdout), &man); err != nil || man.Output != bundle || man.RecordCount == 0 || man.RootHash == "" {
		t.Fatalf("export --json: %v %s", err, r)
	}
	type verified struct {
		OK             bool   `json:"ok"`
		OriginVerified bool   `json:"origin_verified"`
		Records        int64  `json:"records"`
		Failure        string `json:"failure"`
		ExitCode       int    `json:"exit_code"`
	}
	var v verified
	key := e.Aerfs("key", "--state", state)
	expectOK(t, "key", key)
	r = e.Aerfs("verify", "--json", "--key", strings.TrimSpace(key.Stdout), bundle)
	if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil || r.Code != 0 || !v.OK || !v.OriginVerified || v.Records != man.RecordCount {
		t.Fatalf("verify --json --key: %v %s", err, r)
	}
	v = verified{}
	r = e.Aerfs("verify", "--json", bundle)
	if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil || r.Code != 14 || !v.OK || v.OriginVerified || v.ExitCode != 14 {
		t.Fatalf("verify --json without --key: %v %s", err, r)
	}
	recs, _ := filepath.Glob(filepath.Join(bundle, "records*"))
	if len(recs) == 0 {
		t.Fatalf("no records file in the bundle %s", bundle)
	}
	b, _ := os.ReadFile(recs[0])
	os.WriteFile(recs[0], bytes.Replace(b, []byte(`"MEMORY.md"`), []byte(`"MEMORX.md"`), 1), 0o644)
	v = verified{}
	r = e.Aerfs("verify", "--json", "--key", strings.TrimSpace(key.Stdout), bundle)
	if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil || r.Code == 0 || v.OK || v.Failure == "" || v.ExitCode != r.Code {
		t.Fatalf("verify --json of a tampered bundle: %v %s", err, r)
	}
}
