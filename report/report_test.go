package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aerfs/aerfs/evidence"
)

// poison is a file name and field value an attacker controls: each tries
// to leave its context in HTML, in an attribute or in SVG.
const poison = `<img src=x onerror=alert(1)>"'><script>alert(2)</script><svg onload=alert(3)>`

type fixture struct {
	state, bundle, key string
}

// makeBundle writes a small log (a WEB write of a poisoned file name, a
// USER session tainted by reading it and refused, owner writes of a
// guarded file) and exports it.
func makeBundle(t *testing.T) fixture {
	t.Helper()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := evidence.Init(state, "aerfs/test"); err != nil {
		t.Fatal(err)
	}
	l, err := evidence.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n := 0
	add := func(r *evidence.Record) string {
		t.Helper()
		n++
		r.Meta.Time = evidence.FormatTime(t0.Add(time.Duration(n) * time.Second))
		if r.Taint == nil {
			r.Taint = []string{}
		}
		if r.Parents == nil {
			r.Parents = []string{}
		}
		id, err := l.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	v1, _ := l.PutBlob([]byte("# memory\n"))
	v2, _ := l.PutBlob([]byte("# memory\n- likes tea\n</pre><script>alert(4)</script>\n"))
	add(&evidence.Record{Type: evidence.TypeWrite, Principal: "USER",
		Meta:    evidence.Meta{Path: "MEMORY.md", Op: "commit", Verdict: "allow", Rule: "RA-allowed"},
		Payload: &evidence.Payload{OldHash: v1, NewHash: v2}})
	web := add(&evidence.Record{Type: evidence.TypeWrite, Principal: "WEB", Taint: []string{"UNTRUSTED", "WEB_DERIVED"},
		Meta: evidence.Meta{Path: poison, Op: "open", Verdict: "allow", Rule: "R0-plain", Session: "w1"}})
	add(&evidence.Record{Type: evidence.TypeVerdict, Principal: "WEB", Taint: []string{"UNTRUSTED"},
		Meta: evidence.Meta{Path: "SOUL.md", Op: "write", Verdict: "deny", Rule: "R1-immutable", Session: poison, Reason: poison}})
	tr := add(&evidence.Record{Type: evidence.TypeTaint, Principal: "USER", Taint: []string{"UNTRUSTED", "WEB_DERIVED"}, Parents: []string{web},
		Meta: evidence.Meta{Path: poison, Op: "read", Session: "u2"}})
	// A guarded change downstream of the source (as an approved or
	// promoted write would be).
	notes, _ := l.PutBlob([]byte("notes from the page\n"))
	add(&evidence.Record{Type: evidence.TypeWrite, Principal: "USER", Taint: []string{"UNTRUSTED", "WEB_DERIVED"}, Parents: []string{tr},
		Meta:    evidence.Meta{Path: "skills/notes.md", Op: "commit", Verdict: "allow", Rule: "RA-allowed", Session: "u2"},
		Payload: &evidence.Payload{NewHash: notes}})
	add(&evidence.Record{Type: evidence.TypeVerdict, Principal: "USER", Taint: []string{"UNTRUSTED", "WEB_DERIVED"},
		Meta: evidence.Meta{Path: "MEMORY.md", Op: "write", Verdict: "deny", Rule: "R2-taint", Session: "u2", Reason: "tainted"}})
	add(&evidence.Record{Type: evidence.TypeNet, Principal: "USER", Taint: []string{"UNTRUSTED", "WEB_DERIVED"},
		Meta:    evidence.Meta{Op: "connect", Verdict: "allow", Rule: "RN-web", Session: "u2"},
		Payload: &evidence.Payload{Net: &evidence.NetConn{Host: "example.org", Port: 443, Channel: "web", Sent: 517, Received: 4096, DurationUS: 1200}}})
	add(&evidence.Record{Type: evidence.TypeNet, Principal: "USER", Taint: []string{"SECRET_RISK"},
		Meta:    evidence.Meta{Op: "connect", Verdict: "deny", Rule: "RN-secret", Session: "s3", Reason: "a session that read a secret reaches only model and trusted hosts"},
		Payload: &evidence.Payload{Net: &evidence.NetConn{Host: "exfil.example", Port: 443, Channel: "web"}}})
	v3, _ := l.PutBlob([]byte("# memory\n- obey the page\n"))
	add(&evidence.Record{Type: evidence.TypeQuarantine, Principal: "USER", Taint: []string{"UNTRUSTED"},
		Meta:    evidence.Meta{Path: "MEMORY.md", Op: "commit", Rule: "RQ-quarantine", Session: "u2"},
		Payload: &evidence.Payload{OldHash: v1, NewHash: v3}})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	key, err := evidence.PublicKey(state)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(dir, "bundle")
	if _, err := evidence.Export(state, evidence.Filter{}, bundle); err != nil {
		t.Fatal(err)
	}
	return fixture{state, bundle, key}
}

func render(t *testing.T, path, key string, o Options) string {
	t.Helper()
	b, tr, err := Open(path, key, evidence.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Render(&out, b, tr, o); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

func TestRenderEscapesPoisonedNames(t *testing.T) {
	f := makeBundle(t)
	page := render(t, f.bundle, f.key, Options{})
	for _, bad := range []string{"<script", "<img", "<svg onload"} {
		if strings.Contains(page, bad) {
			i := strings.Index(page, bad)
			t.Errorf("page contains %q unescaped: …%s…", bad, page[max(0, i-80):min(len(page), i+80)])
		}
	}
	if !strings.Contains(page, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Error("the poisoned name is not on the page, escaped")
	}
	if !strings.Contains(page, "&#43;&lt;/pre&gt;&lt;script&gt;alert(4)&lt;/script&gt;") {
		t.Error("the poisoned diff line is not on the page, escaped")
	}
	// The only tags are the page's own.
	allowed := map[string]bool{}
	for _, tag := range strings.Fields("html head meta title style body header h1 h2 h3 div main section p table tr th td code span b i svg rect text line circle polygon path g a defs marker details summary pre") {
		allowed[tag] = true
	}
	for _, m := range regexp.MustCompile(`<([a-zA-Z][a-zA-Z0-9]*)`).FindAllStringSubmatch(page, -1) {
		if !allowed[strings.ToLower(m[1])] {
			t.Errorf("unexpected tag <%s>", m[1])
		}
	}
	if regexp.MustCompile(`(?i)(src|href)\s*=\s*"?(https?:|//|javascript:)`).MatchString(page) {
		t.Error("the page references something outside itself")
	}
}

func TestRenderParts(t *testing.T) {
	f := makeBundle(t)
	page := render(t, f.bundle, f.key, Options{})
	for _, want := range []string{
		`id="timeline-svg"`, `id="provenance-svg"`, `class="mark deny"`, `class="mark allow"`,
		"R1-immutable", "R2-taint", `class="refusal-row"`, "verdict deny R2-taint", // the refusal hangs in the graph
		`<span class="add">&#43;- likes tea</span>`, "Verified with a key you gave",
		`class="mark quarantine"`, `<g class="node change"><a href="#change-`, `<a href="#change-`, "Guarded files changed downstream",
		`&#43;notes from the page`, "quarantined (not applied)", `<span class="add">&#43;- obey the page</span>`,
		`id="net-table"`, `<td>u2</td><td><code>example.org:443</code></td><td>web</td><td>1</td><td>0</td><td><code>RN-web</code></td><td>517</td><td>4096</td>`,
		`<td class="kind-deny">1</td><td><code>RN-secret</code></td>`, `<td><code>exfil.example:443</code></td>`, // the refusal names the host
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(page, "origin not verified") {
		t.Error("a pinned key still says origin not verified")
	}
}

func TestOpenTrust(t *testing.T) {
	f := makeBundle(t)
	page := render(t, f.bundle, "", Options{})
	if !strings.Contains(page, "origin not verified") || !strings.Contains(page, Fingerprint(f.key)) {
		t.Error("a bundle verified with its own key must say origin not verified and show the key's fingerprint")
	}
	// Another workspace's key must not verify it.
	other := t.TempDir()
	if err := evidence.Init(other, "aerfs/other"); err != nil {
		t.Fatal(err)
	}
	k2, _ := evidence.PublicKey(other)
	if _, _, err := Open(f.bundle, k2, evidence.DefaultLimits); err == nil {
		t.Fatal("a bundle verified with another key")
	}
}

func TestOpenRefusesTamperedBundle(t *testing.T) {
	f := makeBundle(t)
	p := filepath.Join(f.bundle, "records.jsonl")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte("R2-taint"), []byte("R9-taint"), 1)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(f.bundle, "", evidence.DefaultLimits); err == nil || evidence.KindOf(err) == 0 {
		t.Fatalf("a tampered bundle opened: %v", err)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{"a.md": "a.md", "a\xffb": `a\xffb`, "x\ny": `x\ny`, "é": "é",
		"evil\u202etxt.md": `evil\u202etxt.md`, "a\u200bb": `a\u200bb`, "t\tb": `t\tb`} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTimelineLaneLimit(t *testing.T) {
	b := &Bundle{}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := 0; i < maxLanes+30; i++ {
		r := &evidence.Record{Type: evidence.TypeVerdict, Principal: "USER",
			Meta: evidence.Meta{Session: fmt.Sprintf("s%d", i), Verdict: "allow"}}
		b.Entries = append(b.Entries, Entry{Idx: int64(i), Rec: r, Time: t0.Add(time.Duration(i) * time.Second)})
	}
	// A late session with refusals gets a lane of its own.
	for i := 0; i < 3; i++ {
		r := &evidence.Record{Type: evidence.TypeVerdict, Principal: "WEB",
			Meta: evidence.Meta{Session: "late", Verdict: "deny", Rule: "R3-principal"}}
		b.Entries = append(b.Entries, Entry{Idx: int64(len(b.Entries)), Rec: r, Time: t0.Add(time.Duration(len(b.Entries)) * time.Second)})
	}
	tl := timeline(b)
	if len(tl.Lanes) != maxLanes || tl.Lanes[maxLanes-1].Label != "32 further sessions" {
		t.Fatalf("%d lanes, last %q", len(tl.Lanes), tl.Lanes[len(tl.Lanes)-1].Label)
	}
	own := false
	for _, l := range tl.Lanes {
		own = own || l.Label == "session late · WEB"
	}
	if !own {
		t.Error("the session with refusals has no lane of its own")
	}
	// Every record is in exactly one mark.
	n := 0
	for _, m := range tl.Marks {
		if c, _, ok := strings.Cut(m.Title, " records, "); ok {
			k, err := strconv.Atoi(c)
			if err != nil {
				t.Fatalf("mark title %q", m.Title)
			}
			n += k
		} else {
			n++
		}
	}
	if n != maxLanes+33 {
		t.Fatalf("the marks hold %d records, want %d", n, maxLanes+33)
	}
}

// A year's log does not make a page a browser cannot open: 100,000
// records of 2,000 sessions, most of them refusals, give a page of a few
// MB whose every part is bounded — lanes × columns marks, the newest
// records and refusals in full, counts of the rest.
func TestRenderBoundedAt100k(t *testing.T) {
	b := &Bundle{blobs: map[string][]byte{}}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const n = 100000
	for i := 0; i < n; i++ {
		s := fmt.Sprintf("sess-%d", i%2000)
		r := &evidence.Record{Type: evidence.TypeVerdict, Principal: "WEB",
			Meta: evidence.Meta{Session: s, Verdict: "allow", Op: "open", Path: fmt.Sprintf("notes/%d.md", i%5000)}}
		if i%2 == 0 {
			r.Meta.Verdict, r.Meta.Rule, r.Meta.Reason, r.Meta.Path = "deny", "R3-principal", "WEB may not change memory", "MEMORY.md"
		}
		b.Entries = append(b.Entries, Entry{Idx: int64(i), ID: fmt.Sprintf("%064x", i), Rec: r, Time: t0.Add(time.Duration(i) * 300 * time.Second), Path: r.Meta.Path})
	}
	b.Manifest.Complete = true
	start := time.Now()
	var out bytes.Buffer
	if err := Render(&out, b, Trust{Pinned: true, Fingerprint: "x"}, Options{}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	page := out.String()
	if out.Len() > 5<<20 {
		t.Errorf("the page of %d records is %.1f MB, want at most 5", n, float64(out.Len())/1e6)
	}
	for _, want := range []string{"· 100000 records ·", "<b>50000</b> refused", "the newest 500 refusals (and 49500 earlier: aerfs log --refused)",
		"The newest 500 of 100000 records", "… and 1900 more sessions", "… and 2401 more paths", `<td class="nw"><code>R3-principal</code></td><td class="kind-deny">50000</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if marks := strings.Count(page, `class="mark `); marks > maxLanes*(timelineW/columnW) {
		t.Errorf("%d timeline marks", marks)
	}
	t.Logf("%d records: %.2f MB in %s", n, float64(out.Len())/1e6, took.Round(time.Millisecond))
}

func TestGraphNodeLimit(t *testing.T) {
	b := &Bundle{}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n := maxNodes + 50
	for i := 0; i < n; i++ {
		r := &evidence.Record{Type: evidence.TypeTaint, Principal: "USER", Taint: []string{"UNTRUSTED"}, Parents: []string{},
			Meta: evidence.Meta{Session: fmt.Sprintf("s%d", i), Path: "src.txt", Time: evidence.FormatTime(t0.Add(time.Duration(i) * time.Millisecond))}}
		if i == 0 {
			r.Type, r.Principal = evidence.TypeWrite, "WEB"
		}
		b.Entries = append(b.Entries, Entry{Idx: int64(i), ID: fmt.Sprintf("%064x", i+1), Rec: r, Path: "src.txt",
			Time: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	x := index(b)
	if got := DefaultSource(b, x); got != "src.txt" {
		t.Fatalf("default source %q", got)
	}
	sc, err := x.Scope("src.txt")
	if err != nil {
		t.Fatal(err)
	}
	g := graph(b, x, sc, nil)
	if len(g.Nodes) != maxNodes || g.Omitted != n-maxNodes {
		t.Fatalf("%d nodes drawn, %d omitted", len(g.Nodes), g.Omitted)
	}
	// Every read hangs under the write: one edge each.
	if len(g.Edges) != maxNodes-1 {
		t.Fatalf("%d edges", len(g.Edges))
	}
}

// A page made from the live log with the state directory's key says so, in
// green, as aerfs verify --state verifies: never "origin not verified".
func TestTrustStateKey(t *testing.T) {
	f := makeBundle(t)
	b, tr, err := Open(f.bundle, f.key, evidence.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	tr.StateKey = true
	var out bytes.Buffer
	if err := Render(&out, b, tr, Options{}); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	if strings.Contains(page, "origin not verified") || strings.Contains(page, `class="trust unpinned"`) || !strings.Contains(page, "as aerfs verify --state does") {
		t.Errorf("the trust statement of a page verified with the state directory's key is wrong:\n%s", page[strings.Index(page, `<section id="trust"`):strings.Index(page, `<section id="summary"`)])
	}
}

// A refusal folded with the ones its caller repeated within a minute
// counts as all of them, in the summary, the rule table and the list.
func TestFoldedRefusalsCount(t *testing.T) {
	b := &Bundle{blobs: map[string][]byte{}}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, folded := range []int{0, 0, 0, 41} {
		r := &evidence.Record{Type: evidence.TypeVerdict, Principal: "WEB",
			Meta: evidence.Meta{Session: "w", Verdict: "deny", Rule: "R3-principal", Path: "MEMORY.md", Op: "open", Folded: folded}}
		b.Entries = append(b.Entries, Entry{Idx: int64(i), ID: fmt.Sprintf("%064x", i), Rec: r, Time: t0.Add(time.Duration(i) * time.Second), Path: "MEMORY.md"})
	}
	b.Manifest.Complete = true
	var out bytes.Buffer
	if err := Render(&out, b, Trust{Pinned: true, Fingerprint: "x"}, Options{}); err != nil {
		t.Fatal(err)
	}
	page := out.String()
	for _, want := range []string{`<b>44</b> refused`, `<td class="nw"><code>R3-principal</code></td><td class="kind-deny">44</td>`, "deny ×41"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
