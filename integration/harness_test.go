// Package integration mounts a real aerfs over a real workspace and runs
// real programs in it. Nothing here mocks the filesystem or /proc.
//
// The test binary itself never touches a mount it reads labelled files
// from: it is a process of the owner, and reading would taint it. Every
// access goes through a child process (sh, cat, python3, node …).
package integration

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aerfs/aerfs/evidence"
)

var aerfsBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if msg := fuseUnavailable(); msg != "" {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "integration: FUSE is required in CI: %s\n", msg)
			return 1
		}
		fmt.Fprintf(os.Stderr, "integration: skipping, FUSE unavailable: %s\n", msg)
		return 0
	}
	// Nothing the tests share with sessions lives beneath /tmp: a
	// confined session has a /tmp of its own (sandbox.private_tmp). The
	// tests' temporary directories (workspaces, files a session reads or
	// writes outside its workspace) move to /var/tmp, which sessions share.
	if tmp := os.TempDir(); tmp == "/tmp" || strings.HasPrefix(tmp, "/tmp/") {
		d, err := os.MkdirTemp("/var/tmp", "aerfs-it-tmp-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		os.Chmod(d, 0o1777) // like /tmp: the confinement tests run aerfs as an unprivileged owner
		defer os.RemoveAll(d)
		os.Setenv("TMPDIR", d)
	}
	dir, err := os.MkdirTemp("", "aerfs-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// aerfs init leaves a pointer to a custom --state in the user's
	// default state area; keep the tests' pointers out of root's home.
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "xdg-state"))
	aerfsBin = filepath.Join(dir, "aerfs")
	// AERFS_RACE=1 builds the daemon with the race detector: make test
	// runs a selection of these tests that way (the whole package would
	// take too long under it on a small machine).
	build := exec.Command("go", "build", "-o", aerfsBin, "../cmd/aerfs")
	if os.Getenv("AERFS_RACE") != "" {
		build = exec.Command("go", "build", "-race", "-o", aerfsBin, "../cmd/aerfs")
	}
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "integration: build:", err)
		return 1
	}
	code := m.Run()
	if left := leftoverMounts(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "integration: mounts left behind: %v\n", left)
		for _, mp := range left {
			syscall.Unmount(mp, syscall.MNT_DETACH)
		}
		return 1
	}
	return code
}

func fuseUnavailable() string {
	if os.Geteuid() != 0 {
		return "not running as root"
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return err.Error()
	}
	f.Close()
	return ""
}

var (
	envsMu sync.Mutex
	envs   = map[string]bool{} // every workspace this test binary created
)

// leftoverMounts lists FUSE mounts still at a workspace this test binary
// created.
func leftoverMounts() []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	envsMu.Lock()
	defer envsMu.Unlock()
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && envs[f[4]] && strings.Contains(line, "fuse") {
			out = append(out, f[4])
		}
	}
	return out
}

// Env is one mounted workspace.
type Env struct {
	t     testing.TB
	WS    string
	State string
}

// newEnv creates a workspace with files, initialises and mounts it, and
// unmounts it when the test ends.
func newEnv(t testing.TB, files map[string]string) *Env {
	t.Helper()
	root := t.TempDir()
	// TempDir names contain the test name; keep a fixed marker for the
	// leftover check.
	ws := filepath.Join(root, "aerfs-it-ws")
	state := filepath.Join(root, "state")
	for rel, content := range files {
		p := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	envsMu.Lock()
	envs[ws] = true
	envsMu.Unlock()
	e := &Env{t: t, WS: ws, State: state}
	e.mustAerfs("init", "--state", state, ws)
	return e
}

// Mount mounts the workspace and registers the unmount.
func (e *Env) Mount(flags ...string) *Env {
	e.t.Helper()
	e.mustAerfs(append([]string{"mount", "--state", e.State, e.WS}, flags...)...)
	e.t.Cleanup(e.Unmount)
	return e
}

// Unmount unmounts with retries (a process may still be leaving the
// workspace) and fails the test if the mount stays.
func (e *Env) Unmount() {
	e.t.Helper()
	if !e.Mounted() {
		return
	}
	var out []byte
	var err error
	for i := 0; i < 20; i++ {
		cmd := exec.Command(aerfsBin, "unmount", e.WS)
		cmd.Dir = "/"
		out, err = cmd.CombinedOutput()
		if err == nil {
			e.checkDaemonLog()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	syscall.Unmount(e.WS, syscall.MNT_DETACH)
	e.t.Errorf("unmount %s: %v\n%s", e.WS, err, out)
}

// checkDaemonLog fails the test when the daemon logged an error (an
// evidence append that failed, a label that could not be stored …): such
// failures do not always surface as a failed syscall.
func (e *Env) checkDaemonLog() {
	e.t.Helper()
	// daemon.log: the daemon's JSON lines; daemon.stderr: whatever else
	// the process printed (a panic, the race detector's reports).
	for _, name := range []string{"daemon.log", "daemon.stderr"} {
		b, err := os.ReadFile(filepath.Join(e.State, name))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"level":"error"`) || strings.Contains(line, "panic") || strings.Contains(line, "DATA RACE") {
				e.t.Errorf("daemon logged an error in %s: %s", name, line)
			}
		}
	}
}

// Mounted reports whether an aerfs mount is at the workspace.
func (e *Env) Mounted() bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == e.WS && strings.Contains(line, "fuse.aerfs") {
			return true
		}
	}
	return false
}

// Result is what a command did.
type Result struct {
	Stdout, Stderr string
	Code           int
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
}

func runCmd(dir string, env []string, name string, args ...string) Result {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var o, er bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &er
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
		er.WriteString(err.Error())
	}
	return Result{o.String(), er.String(), code}
}

// Aerfs runs the aerfs binary.
func (e *Env) Aerfs(args ...string) Result {
	return runCmd(e.WS, nil, aerfsBin, args...)
}

func (e *Env) mustAerfs(args ...string) Result {
	e.t.Helper()
	r := runCmd("/", nil, aerfsBin, args...)
	if r.Code != 0 {
		e.t.Fatalf("aerfs %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// Run runs argv inside the workspace under principal in session (a new
// session when session is "").
func (e *Env) Run(principal, session string, argv ...string) Result {
	args := []string{"run", "--workspace", e.WS}
	if principal != "" {
		args = append(args, "--principal", principal)
	}
	if session != "" {
		args = append(args, "--session", session)
	}
	args = append(append(args, "--"), argv...)
	return runCmd(e.WS, nil, aerfsBin, args...)
}

// Sh runs a shell script under principal in session.
func (e *Env) Sh(principal, session, script string) Result {
	return e.Run(principal, session, "sh", "-c", script)
}

// Owner runs a shell script as the owner at the terminal: outside every
// session.
func (e *Env) Owner(script string) Result {
	return runCmd(e.WS, nil, "sh", "-c", script)
}

// Read returns a file's content, read by a fresh owner process.
func (e *Env) Read(rel string) string {
	e.t.Helper()
	r := runCmd(e.WS, nil, "cat", "--", rel)
	if r.Code != 0 {
		e.t.Fatalf("cat %s: %s", rel, r)
	}
	return r.Stdout
}

// Hash is the SHA-256 of a file, read by a fresh owner process.
func (e *Env) Hash(rel string) string {
	sum := sha256.Sum256([]byte(e.Read(rel)))
	return hex.EncodeToString(sum[:])
}

// LogEntry is one line of `aerfs log --json`.
type LogEntry struct {
	Idx    int64           `json:"idx"`
	ID     string          `json:"id"`
	Record evidence.Record `json:"record"`
}

// Log reads the evidence log.
func (e *Env) Log() []LogEntry {
	e.t.Helper()
	r := runCmd("/", nil, aerfsBin, "log", "--json", "--state", e.State, "--workspace", e.WS)
	if r.Code != 0 {
		e.t.Fatalf("aerfs log: %s", r)
	}
	var out []LogEntry
	sc := bufio.NewScanner(strings.NewReader(r.Stdout))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var le LogEntry
		if err := json.Unmarshal(sc.Bytes(), &le); err != nil {
			e.t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		out = append(out, le)
	}
	return out
}

// Denials returns the deny verdicts about path.
func (e *Env) Denials(path string) []LogEntry {
	var out []LogEntry
	for _, le := range e.Log() {
		if le.Record.Meta.Verdict == "deny" && le.Record.Meta.Path == path {
			out = append(out, le)
		}
	}
	return out
}

// refusals is how many refusals the records les stand for: a record of one
// refusal counts one, a summary of refusals folded into a count (a caller
// repeating a refusal of one kind) counts its meta.folded.
func refusals(les []LogEntry) int {
	n := 0
	for _, le := range les {
		if le.Record.Meta.Verdict != "deny" {
			continue
		}
		if f := le.Record.Meta.Folded; f > 0 {
			n += f
		} else {
			n++
		}
	}
	return n
}

// sharedTempDir is a temporary directory that a confined session sees
// too: not beneath /tmp, which is a session's own (sandbox.private_tmp).
func sharedTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/var/tmp", "aerfs-it-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// expectOK fails the test unless r succeeded.
func expectOK(t testing.TB, what string, r Result) {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("%s: expected success, got %s", what, r)
	}
}

// expectFail fails the test unless r failed.
func expectFail(t testing.TB, what string, r Result) {
	t.Helper()
	if r.Code == 0 {
		t.Fatalf("%s: expected refusal, got %s", what, r)
	}
}
