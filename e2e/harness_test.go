//go:build e2e

// Package e2e drives the real agent clients (Claude Code, Codex, OpenClaw)
// under aerfs against a scripted model served on 127.0.0.1, so that each
// client's own tool code does the file operations. Run with `make e2e`
// (after e2e/install.sh); without the e2e build tag nothing here is built.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/aerfs/aerfs/e2e/fakemodel"
	"github.com/aerfs/aerfs/evidence"
)

var (
	aerfsBin string
	model    *fakemodel.Server
	logDir   string // request logs and client output, kept after the run
	extraCA  string // a PEM file the clients trust besides the system's (webServers)
)

func TestMain(m *testing.M) { os.Exit(mainRun(m)) }

func mainRun(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: must run as root (FUSE mounts)")
		return 1
	}
	// Nothing shared with the clients' sessions lives beneath /tmp: a
	// confined session has a /tmp of its own (sandbox.private_tmp), and
	// the clients' homes and the aerfs binary must be in its sight.
	if tmp := os.TempDir(); tmp == "/tmp" || strings.HasPrefix(tmp, "/tmp/") {
		d, err := os.MkdirTemp("/var/tmp", "aerfs-e2e-tmp-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		os.Chmod(d, 0o1777)
		defer os.RemoveAll(d)
		os.Setenv("TMPDIR", d)
	}
	dir, err := os.MkdirTemp("", "aerfs-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	aerfsBin = filepath.Join(dir, "aerfs")
	build := exec.Command("go", "build", "-o", aerfsBin, "../cmd/aerfs")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build:", err)
		return 1
	}
	logDir = os.Getenv("AERFS_E2E_LOGS")
	if logDir == "" {
		logDir = filepath.Join(scratch(), "logs", time.Now().UTC().Format("20060102T150405"))
	}
	os.MkdirAll(logDir, 0o755)
	model, err = fakemodel.Start(filepath.Join(logDir, "model-requests.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: model:", err)
		return 1
	}
	defer model.Close()
	code := m.Run()
	printTable()
	printTimings()
	fmt.Printf("\nlogs (model requests, client output): %s\n", logDir)
	return code
}

// scratch is where e2e/install.sh put the clients.
func scratch() string {
	if d := os.Getenv("AERFS_E2E_DIR"); d != "" {
		return d
	}
	return "/var/tmp/aerfs-e2e"
}

// ---- the scenario table ----

type row struct{ client, scenario, expected, actual, verdict string }

var (
	tableMu sync.Mutex
	table   []row
)

// report records one scenario's outcome for the closing table.
func report(t *testing.T, client, scenario, expected string, problems []string, facts string) {
	verdict := "PASS"
	actual := facts
	// Refusals first: they are usually the cause of the rest.
	sort.SliceStable(problems, func(i, j int) bool {
		return strings.Contains(problems[i], "refus") && !strings.Contains(problems[j], "refus")
	})
	if len(problems) > 0 {
		verdict = "FAIL"
		actual = strings.Join(problems, "; ")
		if facts != "" {
			actual += " [" + facts + "]"
		}
		t.Errorf("%s / %s: %s", client, scenario, actual)
	}
	tableMu.Lock()
	table = append(table, row{client, scenario, expected, actual, verdict})
	tableMu.Unlock()
}

func printTable() {
	tableMu.Lock()
	defer tableMu.Unlock()
	if len(table) == 0 {
		return
	}
	fmt.Println("\n== scenarios")
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "CLIENT\tSCENARIO\tRESULT\tEXPECTED\tACTUAL")
	for _, r := range table {
		// Each round's facts (split by " | ") are clipped on their own.
		parts := strings.Split(r.actual, roundSep)
		for i := range parts {
			parts[i] = clip(parts[i], 160/len(parts)+40)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", r.client, r.scenario, r.verdict, r.expected, strings.Join(parts, roundSep))
	}
	w.Flush()
	fmt.Println("(the whole of each ACTUAL is in the test's error above; client output and model requests in the logs)")
}

// ---- one mounted workspace ----

type env struct {
	t     *testing.T
	WS    string
	State string
}

// newEnv creates a workspace with files (prepare, when not nil, runs on the
// plain directory before aerfs init), initialises and mounts it.
func newEnv(t *testing.T, files map[string]string, prepare func(ws string)) *env {
	t.Helper()
	return makeEnv(t, files, prepare, nil, nil)
}

// newEnvAgent is newEnv with the policy of aerfs init --agent profile,
// its home-directory roots placed in home (the client's home for the run)
// instead of the owner's: the client's memory there is guarded by the same
// daemon and log as the workspace. rootDirs are made in home first.
func newEnvAgent(t *testing.T, files map[string]string, profile, home string, rootDirs ...string) *env {
	t.Helper()
	for _, d := range rootDirs {
		os.MkdirAll(filepath.Join(home, d), 0o755)
	}
	return makeEnv(t, files, nil, []string{"--agent", profile}, func(pol []byte) []byte {
		// The roots and the sandbox's writable places in the owner's
		// home (made as aerfs run makes them in a real one).
		s := strings.ReplaceAll(string(pol), "path: ~/", "path: "+home+"/")
		s = strings.ReplaceAll(s, "\n    - ~/", "\n    - "+home+"/")
		for _, l := range strings.Split(s, "\n") {
			if d, ok := strings.CutPrefix(l, "    - "+home+"/"); ok {
				os.MkdirAll(filepath.Join(home, d), 0o755)
			}
		}
		return []byte(s)
	})
}

// makeEnv writes files, runs prepare, runs aerfs init with initArgs,
// passes the policy through edit (when not nil) and mounts.
func makeEnv(t *testing.T, files map[string]string, prepare func(ws string), initArgs []string, edit func([]byte) []byte) *env {
	t.Helper()
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	state := filepath.Join(root, "state")
	os.MkdirAll(ws, 0o755)
	for rel, content := range files {
		p := filepath.Join(ws, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if prepare != nil {
		prepare(ws)
	}
	e := &env{t: t, WS: ws, State: state}
	e.must(append(append([]string{"init"}, initArgs...), "--state", state, ws)...)
	if edit != nil {
		pol := filepath.Join(state, "aerfs.yaml")
		b, err := os.ReadFile(pol)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(pol, edit(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.must("mount", "--state", state, ws)
	t.Cleanup(e.unmount)
	return e
}

// nameHost returns a policy edit adding a network.hosts entry: the tests'
// page servers listen on the host's 127.0.0.1, which the proxy reaches only
// for a host the policy names (RN-local).
func nameHost(match, channel string) func([]byte) []byte {
	return func(pol []byte) []byte {
		s := strings.Replace(string(pol), "network:\n  hosts:\n", "network:\n  hosts:\n    - {match: '"+match+"', channel: "+channel+"}\n", 1)
		if s == string(pol) {
			panic("the policy has no network.hosts list to add " + match + " to")
		}
		return []byte(s)
	}
}

func (e *env) must(args ...string) string {
	e.t.Helper()
	out, err := e.aerfs(args...)
	if err != nil {
		e.t.Fatalf("aerfs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (e *env) aerfs(args ...string) (string, error) {
	cmd := exec.Command(aerfsBin, args...)
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (e *env) unmount() {
	for i := 0; i < 50; i++ {
		if !mounted(e.WS) {
			return
		}
		cmd := exec.Command(aerfsBin, "unmount", e.WS)
		cmd.Dir = "/"
		if cmd.Run() == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	syscall.Unmount(e.WS, syscall.MNT_DETACH)
	e.t.Errorf("unmount %s failed; detached", e.WS)
}

func mounted(ws string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == ws && strings.Contains(line, "fuse") {
			return true
		}
	}
	return false
}

// read returns a file's content as a fresh owner process reads it (the test
// binary itself never reads labelled files: it would taint itself).
func (e *env) read(rel string) (string, bool) {
	cmd := exec.Command("cat", "--", rel)
	cmd.Dir = e.WS
	out, err := cmd.Output()
	return string(out), err == nil
}

type logEntry struct {
	Idx    int64           `json:"idx"`
	Record evidence.Record `json:"record"`
}

func (e *env) log() []logEntry {
	e.t.Helper()
	cmd := exec.Command(aerfsBin, "log", "--json", "--state", e.State, "--workspace", e.WS)
	cmd.Dir = "/"
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("aerfs log: %v", err)
	}
	var les []logEntry
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var le logEntry
		if err := json.Unmarshal(sc.Bytes(), &le); err != nil {
			e.t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		les = append(les, le)
	}
	return les
}

// denials returns the deny verdicts (all, or those about paths).
func denials(les []logEntry, paths ...string) []logEntry {
	var out []logEntry
	for _, le := range les {
		m := le.Record.Meta
		if m.Verdict != "deny" {
			continue
		}
		if len(paths) == 0 {
			out = append(out, le)
			continue
		}
		for _, p := range paths {
			if m.Path == p {
				out = append(out, le)
				break
			}
		}
	}
	return out
}

// summary renders refusals as "R4-namespace lookup sessions/.git ×5, …"
// (rule, operation, path; a refused commit kept for approval has the
// operation "commit").
func summary(les []logEntry) string {
	count := map[string]int{}
	var keys []string
	for _, le := range les {
		m := le.Record.Meta
		k := fmt.Sprintf("%s %s %s", m.Rule, m.Op, m.Path)
		if count[k] == 0 {
			keys = append(keys, k)
		}
		count[k]++
	}
	var parts []string
	for _, k := range keys {
		if count[k] > 1 {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, count[k]))
		} else {
			parts = append(parts, k)
		}
	}
	if len(parts) > 6 {
		parts = append(parts[:6], fmt.Sprintf("… (%d kinds)", len(keys)))
	}
	return strings.Join(parts, ", ")
}

func rulesOf(les []logEntry) []string {
	m := map[string]bool{}
	for _, le := range les {
		if r := le.Record.Meta.Rule; r != "" {
			m[r] = true
		}
	}
	var out []string
	for r := range m {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

func hasRule(les []logEntry, rule string) bool {
	for _, le := range les {
		if le.Record.Meta.Rule == rule {
			return true
		}
	}
	return false
}

// pendingItem is one refused write kept for approval.
type pendingItem struct {
	Path    string `json:"path"`
	Hash    string `json:"hash"` // the refused content's
	Session string `json:"session"`
}

// pendingItems lists the refused writes kept for approval.
func (e *env) pendingItems() []pendingItem {
	out, err := e.aerfs("pending", "--json", "--state", e.State, "--workspace", e.WS)
	if err != nil {
		return nil
	}
	var items []pendingItem
	json.Unmarshal([]byte(out), &items)
	return items
}

// pendingHashes is the content hashes of the pending quarantined items.
func (e *env) pendingHashes() map[string]bool {
	m := map[string]bool{}
	for _, it := range e.pendingItems() {
		m[it.Hash] = true
	}
	return m
}

// hasOp reports whether a refusal was of operation op.
func hasOp(les []logEntry, op string) bool {
	for _, le := range les {
		if le.Record.Meta.Op == op {
			return true
		}
	}
	return false
}

// ---- running a client ----

type result struct {
	code           int
	stdout, stderr string
	dur            time.Duration
	turns          int
	modelErrors    []string
	// noise is where the run's tool results (as the model read them) or
	// the client's own output mention a refusal (noise in daily_test.go).
	noise []string
}

func (r result) tail() string {
	s := strings.TrimSpace(r.stdout + "\n" + r.stderr)
	if len(s) > 600 {
		s = "…" + s[len(s)-600:]
	}
	return s
}

// runClient runs the client in dir with the script. With principal != "" it
// runs under `aerfs run --principal P --session S`; with "" directly (a
// plain directory, for timings).
func runClient(t *testing.T, c *client, dir, principal, session, prompt string, steps []fakemodel.Step) result {
	t.Helper()
	return runClientMode(t, c, dir, principal, session, prompt, steps, false)
}

// runClientMode runs the client's first-run command when first is set.
func runClientMode(t *testing.T, c *client, dir, principal, session, prompt string, steps []fakemodel.Step, first bool) result {
	t.Helper()
	return runClientHome(t, c, dir, principal, session, prompt, steps, first, t.TempDir())
}

// runClientHome is runClientMode with the client's home directory given.
func runClientHome(t *testing.T, c *client, dir, principal, session, prompt string, steps []fakemodel.Step, first bool, home string) result {
	t.Helper()
	return runClientAgent(t, c, dir, principal, session, prompt, steps, first, home, "")
}

// runClientAgent is runClientHome under aerfs run --agent agent (when not "").
func runClientAgent(t *testing.T, c *client, dir, principal, session, prompt string, steps []fakemodel.Step, first bool, home, agent string) result {
	t.Helper()
	model.SetScript(dir, steps)
	envv, argv := c.commandFor(t, home, dir, prompt, first)
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	if session != "" {
		name += "_" + session // a scenario's runs, each in its own file
	}
	if os.Getenv("AERFS_E2E_STRACE") != "" {
		// For diagnosis: every system call of the client's process tree.
		argv = append([]string{"strace", "-f", "-qq", "-o", filepath.Join(logDir, name+".strace"), "--"}, argv...)
	}
	if principal != "" {
		// --model: the fake model on the host's 127.0.0.1 is the session's
		// model channel (Claude Code's ANTHROPIC_BASE_URL says it too;
		// Codex and OpenClaw name it in their configuration files).
		run := []string{aerfsBin, "run", "--principal", principal, "--session", session, "--model", model.URL}
		if agent != "" {
			run = append(run, "--agent", agent)
		}
		argv = append(append(run, "--"), argv...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = mergeEnv(baseEnv(home), envv)
	if extraCA != "" {
		// The test CA of an HTTPS page the scenario serves (Node and
		// Claude Code read it; Python and curl are told in the command).
		cmd.Env = append(cmd.Env, "NODE_EXTRA_CA_CERTS="+extraCA)
	}
	cmd.Stdin = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var o, er bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &er
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: o.String(), stderr: er.String(), dur: time.Since(start), turns: model.Turns(), modelErrors: model.Errors()}
	for _, n := range noise {
		if model.Saw(n) {
			r.noise = append(r.noise, fmt.Sprintf("a tool result the model read says %q", n))
		}
		if strings.Contains(r.stdout+r.stderr, n) {
			r.noise = append(r.noise, fmt.Sprintf("the client printed %q", n))
		}
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		r.code = -1
		r.stderr += err.Error()
	}
	os.WriteFile(filepath.Join(logDir, name+".out"), []byte(fmt.Sprintf("argv: %q\ndir: %s\nexit %d after %v, %d turns\n--- stdout\n%s\n--- stderr\n%s\n",
		argv, dir, r.code, r.dur, r.turns, r.stdout, r.stderr)), 0o644)
	return r
}

// baseEnv is a small, predictable environment: the client's home is a fresh
// temporary directory so that no earlier run's memory or settings leak in.
func baseEnv(home string) []string {
	env := []string{
		"HOME=" + home,
		"PATH=" + os.Getenv("PATH"),
		"TERM=dumb",
		"LANG=C.UTF-8",
		"NO_COLOR=1",
		"CI=true",
	}
	if tmp := os.Getenv("TMPDIR"); tmp != "" {
		env = append(env, "TMPDIR="+tmp)
	}
	return env
}

// mergeEnv appends extra to base, an entry of extra replacing one of base
// with the same name.
func mergeEnv(base, extra []string) []string {
	out := []string{}
	for _, b := range base {
		name := b[:strings.IndexByte(b, '=')+1]
		replaced := false
		for _, x := range extra {
			if strings.HasPrefix(x, name) {
				replaced = true
			}
		}
		if !replaced {
			out = append(out, b)
		}
	}
	return append(out, extra...)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// leftovers lists temporary files a client left in the workspace (names
// with ".tmp"), found by an owner process.
func (e *env) leftovers() []string {
	cmd := exec.Command("find", ".", "-path", "./.git", "-prune", "-o", "-path", "./sessions", "-prune", "-o",
		"-path", "./shared", "-prune", "-o", "-name", "*.tmp*", "-print")
	cmd.Dir = e.WS
	out, _ := cmd.Output()
	return strings.Fields(string(out))
}
