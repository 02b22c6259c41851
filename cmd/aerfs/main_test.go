package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/evidence"
)

// captureStderr runs fn with os.Stderr redirected and returns what it wrote.
func captureStderr(t *testing.T, fn func()) string {
	t.Helper()
	r, w, _ := os.Pipe()
	old := os.Stderr
	os.Stderr = w
	fn()
	w.Close()
	os.Stderr = old
	var b bytes.Buffer
	b.ReadFrom(r)
	return b.String()
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("version: 1\nclasses:\n  memory: [MEMORY.md]\nexecutables:\n  - {match: curl, principal: ADMIN}\n"), 0o644)

	cases := []struct {
		name string
		err  error
		code int
		msg  string
	}{
		{"ok", nil, exitOK, ""},
		{"bad policy", runPolicyCheck(&bytes.Buffer{}, bad), exitPolicy, "bad.yaml:5"},
		{"missing workspace", runInit(filepath.Join(dir, "nope"), "", &bytes.Buffer{}), exitNoWorkspace, "does not exist"},
		{"unknown principal", runRun(runOptions{principal: "ROOT"}, []string{"true"}), exitUsage, "unknown principal"},
		{"integrity", &evidence.VerifyError{Kind: evidence.KindIntegrity, What: "record 3: id mismatch"}, exitIntegrity, "id mismatch"},
		{"signature", &evidence.VerifyError{Kind: evidence.KindSignature, What: "checkpoint"}, exitSignature, "checkpoint"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var code int
			out := captureStderr(t, func() { code = report(c.err) })
			if code != c.code {
				t.Fatalf("exit %d, want %d (%q)", code, c.code, out)
			}
			if c.err == nil {
				return
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if !strings.HasPrefix(lines[0], "aerfs: ") || !strings.Contains(lines[0], c.msg) {
				t.Fatalf("first line %q, want 'aerfs: …%s…'", lines[0], c.msg)
			}
			if len(lines) > 2 || (len(lines) == 2 && !strings.HasPrefix(lines[1], "hint: ")) {
				t.Fatalf("output is not one error line and an optional hint: %q", out)
			}
		})
	}
}

func TestInitRefusesStateInsideWorkspace(t *testing.T) {
	ws := t.TempDir()
	err := runInit(ws, filepath.Join(ws, ".state"), &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "inside the workspace") {
		t.Fatalf("state inside workspace: %v", err)
	}
}

func TestVersion(t *testing.T) {
	var b bytes.Buffer
	if err := printVersion(&b, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"aerfs ", "go1.", "go-fuse  v2.", "kernel   "} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("aerfs version lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := printVersion(&b, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"go_fuse":"v2.`) {
		t.Errorf("aerfs version --json: %s", b.String())
	}
}

// Every command's --help shows at least one example, and each example
// invokes that command.
func TestEveryCommandHasAnExample(t *testing.T) {
	root := newRootCommand()
	if missing := commandsWithoutExample(root); len(missing) > 0 {
		t.Fatalf("commands without an example in --help: %v", missing)
	}
	for path, ex := range examples {
		if !strings.Contains(ex, path) && !strings.Contains(ex, strings.Join(strings.Fields(path)[:len(strings.Fields(path))-1], " ")) {
			t.Errorf("the example of %q does not invoke it: %s", path, ex)
		}
	}
	// What a user types: each command's --help, as printed.
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() != "help" && !c.Hidden {
			r := newRootCommand()
			var b bytes.Buffer
			r.SetOut(&b)
			r.SetArgs(append(strings.Fields(c.CommandPath())[1:], "--help"))
			if err := r.Execute(); err != nil {
				t.Errorf("%s --help: %v", c.CommandPath(), err)
			}
			if !strings.Contains(b.String(), "Examples:\n  "+"aerfs") {
				t.Errorf("%s --help shows no example:\n%s", c.CommandPath(), b.String())
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}
