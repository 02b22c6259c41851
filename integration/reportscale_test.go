package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestReportScale100k (make test-report-scale): the report of a log of
// 100,000 records — written by the benchmark's log generator, a year of
// 1,000 sessions, then mounted — is made by the owner from inside the
// workspace, stays a few MB, and headless Chromium renders it in under
// 10 s with no console message. The sizes and times are printed: they are
// measurements, the only bounds asserted are the page's size and the
// browser's 10 s.
func TestReportScale100k(t *testing.T) {
	if os.Getenv("AERFS_REPORT_SCALE") == "" {
		t.Skip("make test-report-scale runs it (AERFS_REPORT_SCALE=1)")
	}
	chromium := findChromium(t)
	records := 100000
	if n, err := strconv.Atoi(os.Getenv("AERFS_REPORT_RECORDS")); err == nil && n > 0 {
		records = n
	}
	e := newEnv(t, nil)
	start := time.Now()
	genlog(t, e, records)
	t.Logf("genlog: %d records in %s", records, time.Since(start).Round(time.Millisecond))
	start = time.Now()
	e.Mount()
	t.Logf("mount: %s", time.Since(start).Round(time.Millisecond))

	page := filepath.Join(t.TempDir(), "report.html")
	start = time.Now()
	r := e.Aerfs("report", "-o", page)
	made := time.Since(start)
	expectOK(t, "aerfs report", r)
	fi, err := os.Stat(page)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("aerfs report: %.2f MB in %s", float64(fi.Size())/1e6, made.Round(time.Millisecond))
	if fi.Size() > 5<<20 {
		t.Errorf("the page of %d records is %.1f MB, want a few MB at most", records, float64(fi.Size())/1e6)
	}
	html := readFile(t, page)
	for _, want := range []string{`id="timeline-svg"`, `id="session-table"`, `id="path-table"`, `id="rule-table"`, `id="recent-table"`,
		"The newest 500 of ", "further sessions", "as aerfs verify --state does"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	start = time.Now()
	dom, console := runChromium(t, chromium, page, "--dump-dom")
	rendered := time.Since(start)
	t.Logf("chromium --dump-dom: %s (%d bytes of DOM)", rendered.Round(time.Millisecond), len(dom))
	if len(console) > 0 {
		t.Errorf("console messages while rendering:\n%s", strings.Join(console, "\n"))
	}
	if !strings.Contains(dom, `<svg id="timeline-svg"`) {
		t.Error("the rendered DOM has no timeline")
	}
	if rendered > 10*time.Second {
		t.Errorf("headless Chromium took %s to render the page of %d records, want under 10 s", rendered, records)
	}
	png := filepath.Join(t.TempDir(), "report.png")
	start = time.Now()
	runChromium(t, chromium, page, "--screenshot="+png, "--window-size=1400,2400", "--hide-scrollbars")
	t.Logf("chromium --screenshot: %s", time.Since(start).Round(time.Millisecond))
	if a := os.Getenv("AERFS_ARTEFACTS"); a != "" {
		os.MkdirAll(a, 0o755)
		for _, f := range []string{page, png} {
			if b, err := os.ReadFile(f); err == nil {
				os.WriteFile(filepath.Join(a, "scale-"+filepath.Base(f)), b, 0o644)
			}
		}
	}
}

// genlog writes a signed log of about records records, with records/100
// sessions, into e's state directory and the files it describes into its
// workspace (scripts/bench/genlog), before e is mounted.
func genlog(t *testing.T, e *Env, records int, flags ...string) {
	t.Helper()
	gen := filepath.Join(t.TempDir(), "genlog")
	if out, err := exec.Command("go", "build", "-o", gen, "../scripts/bench/genlog").CombinedOutput(); err != nil {
		t.Fatalf("build genlog: %v\n%s", err, out)
	}
	args := append([]string{"-state", e.State, "-workspace", e.WS, "-records", strconv.Itoa(records), "-sessions", strconv.Itoa(records / 100)}, flags...)
	if out, err := exec.Command(gen, args...).CombinedOutput(); err != nil {
		t.Fatalf("genlog: %v\n%s", err, out)
	}
}
