package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/aerfs/aerfs/internal/printable"
	"github.com/aerfs/aerfs/sandbox"
)

// # What a session says about itself
//
// aerfs run reports the confinement it applied, from the process that
// registered the session, before it executes the session's command. The
// daemon shows that report to the owner (aerfs status, session list), so it
// is a session's text on the owner's terminal — and a process that speaks
// the control protocol itself can send any report it likes. The daemon
// takes only what it can check: names from the sets aerfs run uses, paths
// that are absolute, clean and printable, bounded counts and lengths, and
// claims the kernel confirms (no_new_privs and a seccomp filter on a
// thread of the sender, as /proc shows them). Anything else refuses the
// report, which then shows as "not reported".

const (
	maxReportPaths = 256
	maxReportText  = 512
)

var (
	reportScopes     = []string{"signal", "abstract_unix_socket"}
	reportNamespaces = []string{"user", "mount", "net", "pid", "uts", "ipc", "cgroup"}
)

// checkAnnouncement checks the confinement aerfs run announces at
// registration ("off", or a short summary).
func checkAnnouncement(s string) error {
	if !printable.Safe(s, 256) {
		return fmt.Errorf("the announced confinement is not printable text of at most 256 bytes")
	}
	return nil
}

// checkReport checks a confinement report sent by process pid.
func checkReport(r *sandbox.Report, pid int) error {
	if r.LandlockABI < 0 || r.LandlockABI > 99 || r.Landlock && r.LandlockABI == 0 {
		return fmt.Errorf("landlock abi %d", r.LandlockABI)
	}
	for _, s := range r.Scoped {
		if !slices.Contains(reportScopes, s) {
			return fmt.Errorf("unknown landlock scope %q", s)
		}
	}
	for _, s := range r.Namespaces {
		if !slices.Contains(reportNamespaces, s) {
			return fmt.Errorf("unknown namespace %q", s)
		}
	}
	for _, list := range [][]string{r.Writable, r.Hidden, r.Private} {
		if len(list) > maxReportPaths {
			return fmt.Errorf("more than %d paths", maxReportPaths)
		}
		for _, p := range list {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p || !printable.Safe(p, 4096) {
				return fmt.Errorf("path %s is not absolute, clean and printable", printable.Line(p))
			}
		}
	}
	if len(r.Warnings) > 32 {
		return fmt.Errorf("more than 32 warnings")
	}
	for _, w := range r.Warnings {
		if !printable.Safe(w, maxReportText) {
			return fmt.Errorf("a warning is not printable text of at most %d bytes", maxReportText)
		}
	}
	if r.NoNewPrivs || r.Seccomp {
		nnp, filter := threadsConfined(pid)
		if r.NoNewPrivs && !nnp {
			return fmt.Errorf("it claims no_new_privs, which no thread of pid %d has", pid)
		}
		if r.Seccomp && !filter {
			return fmt.Errorf("it claims a seccomp filter, which no thread of pid %d runs under", pid)
		}
	}
	return nil
}

// threadsConfined reports whether some thread of pid has no_new_privs set,
// and whether some thread runs under a seccomp filter.
func threadsConfined(pid int) (nnp, filter bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch v = strings.TrimSpace(v); k {
			case "NoNewPrivs":
				nnp = nnp || v == "1"
			case "Seccomp":
				filter = filter || v == "2"
			}
		}
	}
	return nnp, filter
}
