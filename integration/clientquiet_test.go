package integration

import (
	"strings"
	"testing"
)

// OpenClaw runs each command of its exec tool through a shell that first
// raises the command's oom_score_adj (src/process/linux-oom-score.ts),
// unless OPENCLAW_CHILD_OOM_SCORE_ADJ turns it off. A confined session may
// not write /proc, and dash prints the refused redirection before its
// 2>/dev/null applies: every tool result the model reads started with
// "cannot create /proc/self/oom_score_adj: Permission denied". A confined
// session's clients are told not to try; the write itself stays refused.
func TestConfinedClientsQuiet(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount()
	// OpenClaw's wrapper, with its opt-out as OpenClaw reads it.
	wrapper := `case "$(printf %s "${OPENCLAW_CHILD_OOM_SCORE_ADJ:-}" | tr A-Z a-z)" in 0|false|no|off) ;; *) echo 1000 > /proc/self/oom_score_adj 2>/dev/null ;; esac; exec echo ran`
	r := e.Run("USER", "quiet", "/bin/sh", "-c", wrapper)
	expectOK(t, "a command through the wrapper", r)
	if strings.TrimSpace(r.Stdout) != "ran" || strings.Contains(r.Stderr, "oom_score_adj") {
		t.Errorf("the wrapper's output carries confinement noise: %s", r)
	}
	// The owner's own choice is kept.
	r = runCmd(e.WS, []string{"OPENCLAW_CHILD_OOM_SCORE_ADJ=1"}, aerfsBin, "run", "--workspace", e.WS, "--principal", "USER", "--session", "quiet",
		"--", "sh", "-c", `echo "$OPENCLAW_CHILD_OOM_SCORE_ADJ"`)
	if strings.TrimSpace(r.Stdout) != "1" {
		t.Errorf("the owner's OPENCLAW_CHILD_OOM_SCORE_ADJ was replaced: %s", r)
	}
	// Confinement is unchanged: the session still may not write /proc.
	r = e.Sh("USER", "quiet", "echo 1000 > /proc/self/oom_score_adj")
	expectFail(t, "a confined session writing its oom_score_adj", r)
	if !strings.Contains(r.Stderr, "Permission denied") {
		t.Errorf("the write was refused for another reason: %s", r)
	}
}
