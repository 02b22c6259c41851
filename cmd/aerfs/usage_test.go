package main

import (
	"bytes"
	"strings"
	"testing"
)

// Every way of calling aerfs wrongly is a usage error (exit 2) whose hint
// names the help to read: a bare "aerfs" that printed its help and exited 0
// let scripts take a typo for success.
func TestUsageErrorsHaveExitTwoAndAHint(t *testing.T) {
	cases := []struct {
		args []string
		msg  string
		hint string
	}{
		{nil, "a command is needed", "'aerfs --help'"},
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "aerfs"`, "'aerfs --help'"},
		{[]string{"sesion"}, "did you mean session", "'aerfs --help'"},
		{[]string{"session"}, "a command is needed", "'aerfs session --help'"},
		{[]string{"session", "lst"}, "did you mean list", "'aerfs session --help'"},
		{[]string{"history"}, "accepts 1 arg(s), received 0", "'aerfs history --help'"},
		{[]string{"restore", "a", "b"}, "accepts at most 1 arg(s)", "'aerfs restore --help'"},
		{[]string{"log", "--no-such-flag"}, "unknown flag", "'aerfs log --help'"},
		{[]string{"export"}, `required flag(s) "output" not set`, "'aerfs export --help'"},
		{[]string{"gc", "--keep-last", "x"}, "invalid argument", "'aerfs gc --help'"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			root := newRootCommand()
			root.SetFlagErrorFunc(flagError)
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(c.args)
			var code int
			stderr := captureStderr(t, func() { code = report(execute(root)) })
			if code != exitUsage {
				t.Fatalf("exit %d, want %d: %s", code, exitUsage, stderr)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "aerfs: ") || !strings.Contains(lines[0], c.msg) ||
				!strings.HasPrefix(lines[1], "hint: ") || !strings.Contains(lines[1], c.hint) {
				t.Fatalf("want 'aerfs: …%s…' and 'hint: …%s…', got:\n%s", c.msg, c.hint, stderr)
			}
		})
	}
}

// Every record type the evidence format knows can be asked for by name,
// gc included (it was refused).
func TestLogTypeFilterKnowsEveryRecordType(t *testing.T) {
	for _, typ := range []string{"gc", "reads", "verdict", "write"} {
		if _, err := (logOptions{typ: typ}).filter(); err != nil {
			t.Errorf("--type %s: %v", typ, err)
		}
	}
}
