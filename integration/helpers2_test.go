package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Helpers shared by the attack, route and program tests. Everything that
// touches the mount runs in a child process; the test binary only looks at
// what those children print and at the evidence log.

var (
	pyOnce sync.Once
	pyBin  string // the real python3 interpreter (not a pyenv shim: shims are slow)
	opsPy  string // testdata/ops.py, absolute
)

// toolEnv is the environment every session script gets: $PY and $OPS.
func toolEnv(t testing.TB) []string {
	t.Helper()
	pyOnce.Do(func() {
		out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
		if err == nil {
			pyBin = strings.TrimSpace(string(out))
		}
		opsPy, _ = filepath.Abs("testdata/ops.py")
	})
	if pyBin == "" {
		t.Skip("python3 is not installed")
	}
	return []string{"PY=" + pyBin, "OPS=" + opsPy}
}

// ShT runs script under principal in session with $PY and $OPS set.
func (e *Env) ShT(principal, session, script string) Result {
	args := []string{"run", "--workspace", e.WS, "--principal", principal, "--session", session, "--", "sh", "-c", script}
	return runT(e.WS, toolEnv(e.t), aerfsBin, args...)
}

// OwnerT runs script as the owner outside every session with $PY and $OPS set.
func (e *Env) OwnerT(script string) Result {
	return runT(e.WS, toolEnv(e.t), "sh", "-c", script)
}

// TryRead returns a file's content as a fresh owner process reads it, and
// whether it could be read at all.
func (e *Env) TryRead(rel string) (string, bool) {
	r := runT(e.WS, nil, "cat", "--", rel)
	return r.Stdout, r.Code == 0
}

// Exists reports whether rel exists (without following a final symlink),
// as the owner sees it.
func (e *Env) Exists(rel string) bool {
	return runT(e.WS, nil, "sh", "-c", `test -e "$1" || test -L "$1"`, "sh", rel).Code == 0
}

// Stat returns `stat -c FORMAT rel` as the owner sees it.
func (e *Env) Stat(format, rel string) string {
	r := runT(e.WS, nil, "stat", "-c", format, "--", rel)
	return strings.TrimSpace(r.Stdout)
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// logIndex is a read of the whole evidence log, indexed by session.
type logIndex struct {
	all       []LogEntry
	bySession map[string][]LogEntry
}

func (e *Env) index() *logIndex {
	e.t.Helper()
	li := &logIndex{all: e.Log(), bySession: map[string][]LogEntry{}}
	for _, le := range li.all {
		li.bySession[le.Record.Meta.Session] = append(li.bySession[le.Record.Meta.Session], le)
	}
	return li
}

// denials returns the deny verdicts of session whose path is one of paths
// (any path when paths is empty).
func (li *logIndex) denials(session string, paths ...string) []LogEntry {
	var out []LogEntry
	for _, le := range li.bySession[session] {
		if le.Record.Meta.Verdict != "deny" {
			continue
		}
		if len(paths) == 0 {
			out = append(out, le)
			continue
		}
		for _, p := range paths {
			if le.Record.Meta.Path == p {
				out = append(out, le)
				break
			}
		}
	}
	return out
}

// rules returns the rule ids of entries, sorted and deduplicated.
func rules(les []LogEntry) []string {
	m := map[string]bool{}
	for _, le := range les {
		m[le.Record.Meta.Rule] = true
	}
	var out []string
	for r := range m {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

func hasRule(les []LogEntry, rule string) bool {
	for _, le := range les {
		if le.Record.Meta.Rule == rule {
			return true
		}
	}
	return false
}

// describe summarises log entries for a failure message.
func describe(les []LogEntry) string {
	var b strings.Builder
	for _, le := range les {
		m := le.Record.Meta
		b.WriteString("\n  " + le.Record.Type + " " + m.Op + " " + m.Path + " " + m.Verdict + " " + m.Rule + " session=" + m.Session + " principal=" + le.Record.Principal)
	}
	return b.String()
}

// ancestors lists the directories above rel ("a/b/c" → "a/b", "a").
func ancestors(rel string) []string {
	var out []string
	for d := filepath.Dir(rel); d != "." && d != "/"; d = filepath.Dir(d) {
		out = append(out, d)
	}
	return out
}

// bugf marks a failure that is aerfs's fault, not the test's.
func bugf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("AERFS BUG: "+format, args...)
}

// bugErrorf is bugf without stopping the test.
func bugErrorf(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Errorf("AERFS BUG: "+format, args...)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// cmdTimeout bounds every command these tests run: a daemon that blocks
// (on a FIFO, on a lock) must fail one test, not hang the package.
const cmdTimeout = 20 * time.Second

// runT is runCmd with cmdTimeout. A command that times out reports code
// -2 and says so on stderr.
func runT(dir string, env []string, name string, args ...string) Result {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	var o, er bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &er
	err := cmd.Run()
	code := 0
	if ctx.Err() != nil {
		code = -2
		er.WriteString("TIMEOUT: " + name + " " + strings.Join(args, " ") + " did not finish in " + cmdTimeout.String())
	} else if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
		er.WriteString(err.Error())
	}
	return Result{o.String(), er.String(), code}
}
