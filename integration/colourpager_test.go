package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// On a terminal, log, diff and status are coloured (NO_COLOR turns it
// off, --json never has it) and log and diff go through $PAGER
// (--no-pager turns it off); on a pipe there is neither.
func TestColourAndPagerOnTerminalOnly(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "# memory\n"}).Mount()
	expectOK(t, "owner edits MEMORY.md", e.Owner("echo '- likes tea' >> MEMORY.md"))
	expectFail(t, "WEB appends to MEMORY.md", e.Sh("WEB", "w1", "echo evil >> MEMORY.md"))
	dir := t.TempDir()
	paged := filepath.Join(dir, "paged")
	tty := func(env []string, args ...string) Result {
		t.Helper()
		os.Remove(paged)
		cmd := aerfsBin + " --workspace " + e.WS + " " + strings.Join(args, " ")
		return runCmd(e.WS, append([]string{"TERM=xterm", "PAGER=cat > " + paged}, env...), "script", "-qfec", cmd, "/dev/null")
	}
	const red, green = "\x1b[31mdeny\x1b[m", "\x1b[32m"

	r := tty(nil, "log", "--no-pager")
	if !strings.Contains(r.Stdout, red) || !strings.Contains(r.Stdout, "\x1b[32mallow\x1b[m") || fileExists(paged) {
		t.Errorf("log --no-pager on a terminal: no colour, or paged: %q", r.Stdout)
	}
	r = tty(nil, "log")
	if b, err := os.ReadFile(paged); err != nil || !strings.Contains(string(b), red) || !strings.Contains(string(b), "R3-principal") {
		t.Errorf("log on a terminal did not go through $PAGER (%v): %q", err, b)
	}
	r = tty(nil, "diff", "MEMORY.md")
	if b, err := os.ReadFile(paged); err != nil || !strings.Contains(string(b), green+"+- likes tea\x1b[m") {
		t.Errorf("diff on a terminal: not paged or not coloured (%v): %q", err, b)
	}
	r = tty([]string{"NO_COLOR=1"}, "log", "--no-pager")
	if strings.Contains(r.Stdout, "\x1b[") || !strings.Contains(r.Stdout, "R3-principal") {
		t.Errorf("NO_COLOR=1: %q", r.Stdout)
	}
	r = tty(nil, "log", "--json", "--no-pager")
	if strings.Contains(r.Stdout, "\x1b[") {
		t.Errorf("log --json on a terminal has colour: %q", r.Stdout)
	}
	r = tty(nil, "status")
	if !strings.Contains(r.Stdout, "\x1b[32mlog healthy\x1b[m") || fileExists(paged) {
		t.Errorf("status on a terminal: not coloured, or paged: %q", r.Stdout)
	}
	// A pipe: neither.
	p := runCmd(e.WS, []string{"TERM=xterm", "PAGER=cat > " + paged}, aerfsBin, "log")
	if strings.Contains(p.Stdout, "\x1b[") || fileExists(paged) || !strings.Contains(p.Stdout, "R3-principal") {
		t.Errorf("log on a pipe is coloured or paged: %s", p)
	}
	p = runCmd(e.WS, []string{"TERM=xterm"}, aerfsBin, "diff", "MEMORY.md")
	if strings.Contains(p.Stdout, "\x1b[") || !strings.Contains(p.Stdout, "+- likes tea") {
		t.Errorf("diff on a pipe: %s", p)
	}
}
