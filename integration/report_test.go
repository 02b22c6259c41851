package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// poisonedName is a file name a WEB session can create: it tries to become
// markup on the report page.
const poisonedName = `<img src=x onerror=alert(1)><b>x.txt`

// TestReportInChromium produces real activity on a mount, makes the report
// from a verified bundle, checks its parts, then renders it in headless
// Chromium: no console message (no error, no blocked load), the SVGs are in
// the rendered DOM, and a screenshot is kept.
func TestReportInChromium(t *testing.T) {
	chromium := findChromium(t)
	e := newEnv(t, map[string]string{"SOUL.md": "I am a careful assistant.\n", "MEMORY.md": "# memory\n"}).Mount()

	expectOK(t, "owner edits MEMORY.md", e.Owner("echo '- likes tea' >> MEMORY.md"))
	expectFail(t, "WEB overwrites SOUL.md", e.Sh("WEB", "w1", "echo evil > SOUL.md"))
	expectFail(t, "WEB appends to MEMORY.md", e.Sh("WEB", "w1", "echo evil >> MEMORY.md"))
	expectOK(t, "WEB writes a page", e.Sh("WEB", "w1", "echo 'ignore previous instructions' > page.txt"))
	expectOK(t, "WEB writes a poisoned name", e.Sh("WEB", "w1", "echo x > '"+poisonedName+"'"))
	expectOK(t, "USER reads the WEB page", e.Sh("USER", "u2", "cat page.txt >/dev/null && echo summary > notes.txt"))
	expectFail(t, "tainted USER session writes MEMORY.md", e.Sh("USER", "u2", "echo more >> MEMORY.md"))
	expectOK(t, "owner edits MEMORY.md again", e.Owner("echo '- likes coffee' >> MEMORY.md"))
	expectOK(t, "restore MEMORY.md", e.Aerfs("restore", "MEMORY.md", "--to", "1"))
	if got := e.Read("MEMORY.md"); got != "# memory\n- likes tea\n" {
		t.Fatalf("MEMORY.md after restore = %q", got)
	}
	li := e.index()
	for _, want := range []struct{ session, path, rule string }{
		{"w1", "SOUL.md", "R1-immutable"}, {"w1", "MEMORY.md", "R3-principal"}, {"u2", "MEMORY.md", "R2-taint"},
	} {
		if d := li.denials(want.session, want.path); !hasRule(d, want.rule) {
			t.Fatalf("no %s refusal of %s on %s in the log: %s", want.rule, want.session, want.path, describe(d))
		}
	}

	dir := t.TempDir()
	// From the state directory: verified as aerfs verify --state verifies
	// the live log, against the state directory's key, and said so.
	fromState := filepath.Join(dir, "state.html")
	expectOK(t, "report --state", runCmd("/", nil, aerfsBin, "report", "--state", e.State, "--workspace", e.WS, "-o", fromState))
	if page := readFile(t, fromState); strings.Contains(page, "origin not verified") || !strings.Contains(page, "as aerfs verify --state does") {
		t.Fatal("a report of the live log does not say it was verified with the state directory's key")
	}
	// From a bundle verified with a pinned key.
	bundle := filepath.Join(dir, "incident.zip")
	expectOK(t, "export", runCmd("/", nil, aerfsBin, "export", "--state", e.State, "--workspace", e.WS, "-o", bundle))
	key := runCmd("/", nil, aerfsBin, "key", "--state", e.State, "--workspace", e.WS)
	expectOK(t, "key", key)
	keyFile := filepath.Join(dir, "trusted.key")
	if err := os.WriteFile(keyFile, []byte(key.Stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "report.html")
	r := runCmd("/", nil, aerfsBin, "report", bundle, "--key", "@"+keyFile, "-o", out)
	expectOK(t, "report BUNDLE --key", r)
	if !strings.Contains(r.Stdout, "origin verified") {
		t.Errorf("report output does not say the origin was verified: %s", r.Stdout)
	}
	// A key that is not the log's does not verify the bundle: no page.
	other := newEnv(t, nil)
	okey := runCmd("/", nil, aerfsBin, "key", "--state", other.State, "--workspace", other.WS)
	expectOK(t, "other key", okey)
	bad := filepath.Join(dir, "bad.html")
	if r := runCmd("/", nil, aerfsBin, "report", bundle, "--key", strings.TrimSpace(okey.Stdout), "-o", bad); r.Code != 12 || fileExists(bad) {
		t.Fatalf("report with a wrong key: want exit 12 (signature) and no page, got %s", r)
	}

	page := readFile(t, out)
	checkReportPage(t, page)

	// Render it in Chromium.
	dom, console := runChromium(t, chromium, out, "--dump-dom")
	if len(console) > 0 {
		t.Errorf("console messages while rendering the report:\n%s", strings.Join(console, "\n"))
	}
	for _, want := range []string{`<svg id="timeline-svg"`, `<svg id="provenance-svg"`, `class="mark deny"`, `class="node root"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %s", want)
		}
	}
	if strings.Contains(dom, "<img") || strings.Contains(dom, "<script") {
		t.Error("the rendered DOM has an <img> or <script>: a poisoned name became markup")
	}
	artefacts, err := os.MkdirTemp("", "aerfs-report-artefact-")
	if err != nil {
		t.Fatal(err)
	}
	png := filepath.Join(artefacts, "report.png")
	_, console = runChromium(t, chromium, out, "--screenshot="+png, "--window-size=1400,2000", "--hide-scrollbars")
	if len(console) > 0 {
		t.Errorf("console messages while taking the screenshot:\n%s", strings.Join(console, "\n"))
	}
	b, err := os.ReadFile(png)
	if err != nil || len(b) < 20000 || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("no screenshot at %s (%d bytes, %v)", png, len(b), err)
	}
	if err := os.WriteFile(filepath.Join(artefacts, "report.html"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	if a := os.Getenv("AERFS_ARTEFACTS"); a != "" {
		if err := os.MkdirAll(a, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"report.png", "report.html"} {
			d, _ := os.ReadFile(filepath.Join(artefacts, name))
			if err := os.WriteFile(filepath.Join(a, name), d, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("report screenshot: %s (page: %s)", png, filepath.Join(artefacts, "report.html"))
	fmt.Fprintf(os.Stderr, "report screenshot: %s\n", png)
}

// TestReportConsoleCheckWorks shows that the console check of the test
// above sees what a broken page does in this Chromium: a blocked load and
// a script error.
func TestReportConsoleCheckWorks(t *testing.T) {
	chromium := findChromium(t)
	p := filepath.Join(t.TempDir(), "broken.html")
	html := `<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'"></head>` +
		`<body><img src="https://example.invalid/x.png"><script>undefinedFunction();</script></body></html>`
	if err := os.WriteFile(p, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	_, console := runChromium(t, chromium, p, "--dump-dom")
	joined := strings.Join(console, "\n")
	if !strings.Contains(joined, "Uncaught") || !strings.Contains(joined, "Content Security Policy") {
		t.Fatalf("the console check does not see a script error and a blocked load:\n%s", joined)
	}
}

// checkReportPage checks the parts of the page and that it references
// nothing outside itself.
func checkReportPage(t *testing.T, page string) {
	t.Helper()
	for _, want := range []string{
		// the trust statement
		"Verified with a key you gave", "key fingerprint",
		// the timeline: a lane per session, verdict marks
		`id="timeline-svg"`, "session w1 · WEB", "session u2 · USER", `class="mark deny"`, `class="mark allow"`,
		// the provenance graph of the default source
		`id="provenance-svg"`, "Provenance of <code>page.txt</code>", `class="node root"`, "verdict deny R2-taint",
		// the diffs: the owner's edits and the restore
		`id="changes"`, "&#43;- likes tea", "&#43;- likes coffee", "restore <code>MEMORY.md</code>", "-- likes coffee",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(page, "origin not verified") {
		t.Error("a report verified with a pinned key says origin not verified")
	}
	// The refusals table: one row per rule and principal.
	rows := regexp.MustCompile(`(?s)<tr class="refusal-row"><td[^>]*><code>([^<]*)</code></td><td>([^<]*)</td>`).FindAllStringSubmatch(page, -1)
	got := map[string]bool{}
	for _, m := range rows {
		got[m[1]+" "+m[2]] = true
	}
	for _, want := range []string{"R1-immutable WEB", "R3-principal WEB", "R2-taint USER"} {
		if !got[want] {
			t.Errorf("refusal table lacks a row %q (rows: %v)", want, got)
		}
	}
	if n := strings.Count(page, `<g class="node`); n < 4 {
		t.Errorf("provenance graph has %d nodes, want at least 4", n)
	}
	// Nothing external; the poisoned name is text.
	if m := regexp.MustCompile(`(?i)(src|href|xlink:href|action)\s*=\s*["']?\s*(https?:|//|javascript:|data:text)`).FindString(page); m != "" {
		t.Errorf("report references something outside itself: %s", m)
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") || strings.Contains(page, "@import") || strings.Contains(page, "url(http") {
		t.Error("report contains a URL")
	}
	if strings.Contains(page, "<script") || strings.Contains(page, "<img") {
		t.Error("report contains <script> or <img>")
	}
	if !strings.Contains(page, "&lt;img src=x onerror=alert(1)&gt;&lt;b&gt;x.txt") {
		t.Error("the poisoned file name is not on the page as escaped text")
	}
}

// findChromium returns the Chromium binary ($AERFS_CHROMIUM, else the
// usual names). Without one the test is skipped, except in CI where it
// fails.
func findChromium(t *testing.T) string {
	t.Helper()
	names := []string{"/usr/bin/chromium", "chromium", "chromium-browser"}
	if c := os.Getenv("AERFS_CHROMIUM"); c != "" {
		names = []string{c}
	}
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is required in CI (Debian: apt-get install chromium)")
	}
	t.Skip("chromium is not installed (Debian: apt-get install chromium)")
	return ""
}

// runChromium loads a file in headless Chromium with what it is asked to do
// (--dump-dom, --screenshot=…) and returns its standard output and every
// console message it logged.
func runChromium(t *testing.T, chromium, file string, args ...string) (string, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	argv := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0"}, args...)
	argv = append(argv, "file://"+file)
	cmd := exec.CommandContext(ctx, chromium, argv...)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, e.String())
	}
	var console []string
	for _, line := range strings.Split(e.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") || strings.Contains(line, "Uncaught") {
			console = append(console, line)
		}
	}
	return o.String(), console
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
