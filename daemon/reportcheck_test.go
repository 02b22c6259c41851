package daemon

import (
	"os"
	"strings"
	"testing"

	"github.com/aerfs/aerfs/sandbox"
)

// A confinement report is shown to the owner: the daemon takes only what it
// can check, and refuses the rest.
func TestCheckReport(t *testing.T) {
	pid := os.Getpid() // the test process: no seccomp filter
	nnp, filter := threadsConfined(pid)
	ok := sandbox.Report{Landlock: true, LandlockABI: 7, Scoped: []string{"signal"}, Writable: []string{"/ws", "/tmp"},
		Namespaces: []string{"user", "mount"}, NoNewPrivs: nnp, Seccomp: filter, Warnings: []string{"writable /x skipped: no such file"}}
	if err := checkReport(&ok, pid); err != nil {
		t.Fatalf("a plain report was refused: %v", err)
	}
	for name, mod := range map[string]func(r *sandbox.Report){
		"escape in a path":       func(r *sandbox.Report) { r.Writable = []string{"/tmp/\x1b[2Jx"} },
		"bidi in a warning":      func(r *sandbox.Report) { r.Warnings = []string{"ok \u202e"} },
		"relative path":          func(r *sandbox.Report) { r.Hidden = []string{"state"} },
		"unclean path":           func(r *sandbox.Report) { r.Private = []string{"/tmp/../etc"} },
		"unknown scope":          func(r *sandbox.Report) { r.Scoped = []string{"everything"} },
		"unknown namespace":      func(r *sandbox.Report) { r.Namespaces = []string{"time\nforged"} },
		"huge warning":           func(r *sandbox.Report) { r.Warnings = []string{strings.Repeat("w", 600)} },
		"bad abi":                func(r *sandbox.Report) { r.LandlockABI = 1000 },
		"seccomp nobody runs":    func(r *sandbox.Report) { r.Seccomp = !filter || r.Seccomp },
		"no_new_privs not there": func(r *sandbox.Report) { r.NoNewPrivs = true },
	} {
		r := ok
		mod(&r)
		if name == "no_new_privs not there" && nnp {
			continue // the test process has it: the claim is true
		}
		if name == "seccomp nobody runs" && filter {
			continue
		}
		if err := checkReport(&r, pid); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if checkAnnouncement("landlock abi 7, seccomp, no_new_privs, mount namespace") != nil || checkAnnouncement("off") != nil {
		t.Fatal("aerfs run's announcement refused")
	}
	if checkAnnouncement("x\r\x1b[Kforged") == nil {
		t.Fatal("an announcement with escape sequences accepted")
	}
}
