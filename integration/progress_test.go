package integration

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Long operations draw a progress bar on a terminal, and only there: run
// on a pseudo-terminal (script(1)), export, verify, report and a first
// mount of a long log without its index show their bar on standard error;
// with --quiet, and on a pipe, nothing but the command's own output is
// printed. --verbose adds what each step took.
func TestProgressOnTerminalOnly(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Fatal("script(1) is needed (Debian: util-linux)")
	}
	e := newEnv(t, nil)
	// Without its index, the first mount reads the whole log.
	genlog(t, e, 60000, "-no-index")
	onTTY := func(args ...string) Result {
		t.Helper()
		q := make([]string, len(args))
		for i, a := range args {
			q[i] = strconv.Quote(a)
		}
		return runCmd("/", []string{"TERM=xterm"}, "script", "-qfec", aerfsBin+" "+strings.Join(q, " "), "/dev/null")
	}
	m := onTTY("mount", "--state", e.State, e.WS)
	t.Cleanup(e.Unmount)
	if m.Code != 0 || !strings.Contains(m.Stdout, "mount: the daemon reads the evidence log") || !strings.Contains(m.Stdout, "aerfs: mounted "+e.WS) {
		t.Errorf("a first mount of 60,000 records on a terminal shows no progress: %s", m)
	}

	dir := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		bar  string
	}{
		{"export", []string{"export", "--state", e.State, "--workspace", e.WS, "-o", filepath.Join(dir, "b1")}, "export: records"},
		{"verify --state", []string{"verify", "--state", e.State, "--workspace", e.WS}, "verify: records"},
		{"verify BUNDLE", []string{"verify", "--key", strings.TrimSpace(e.mustAerfs("key", "--state", e.State, "--workspace", e.WS).Stdout), filepath.Join(dir, "b1")}, "verify: records"},
		{"report", []string{"report", "--state", e.State, "--workspace", e.WS, "-o", filepath.Join(dir, "r1.html")}, "report: exporting records"},
	} {
		r := onTTY(c.args...)
		if r.Code != 0 || !strings.Contains(r.Stdout, c.bar) || !strings.Contains(r.Stdout, "|") {
			t.Errorf("%s on a terminal: no progress bar %q: %s", c.name, c.bar, r)
		}
		// --quiet: the same command, no bar.
		q := onTTY(append([]string{"--quiet"}, quietArgs(c.args, dir)...)...)
		// (A terminal ends lines with \r\n: a bar is told by its text.)
		if q.Code != 0 || strings.Contains(q.Stdout, c.bar) || strings.Contains(q.Stdout, "%|") {
			t.Errorf("%s --quiet on a terminal draws: %s", c.name, q)
		}
		// A pipe: no bar, nothing on stderr.
		p := runCmd("/", nil, aerfsBin, quietArgs(c.args, dir)...)
		if p.Code != 0 || p.Stderr != "" || strings.Contains(p.Stdout, "\r") {
			t.Errorf("%s on a pipe prints more than its result: %s", c.name, p)
		}
	}
	// --verbose says what the steps took.
	v := runCmd("/", nil, aerfsBin, "report", "--verbose", "--state", e.State, "--workspace", e.WS, "-o", filepath.Join(dir, "r9.html"))
	if v.Code != 0 || !strings.Contains(v.Stdout, "exporting the log took ") {
		t.Errorf("report --verbose: %s", v)
	}
	v = runCmd("/", nil, aerfsBin, "verify", "--verbose", "--state", e.State, "--workspace", e.WS)
	if v.Code != 0 || !strings.Contains(v.Stdout, "record bytes hashed") {
		t.Errorf("verify --verbose: %s", v)
	}
}

// quietArgs gives an output-writing command a new output path, so that
// each run writes its own.
var quietRun int

func quietArgs(args []string, dir string) []string {
	out := append([]string(nil), args...)
	for i := range out {
		if i > 0 && out[i-1] == "-o" {
			quietRun++
			out[i] = filepath.Join(dir, strconv.Itoa(quietRun)+"-"+filepath.Base(out[i]))
		}
	}
	return out
}
