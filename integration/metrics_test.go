package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// scrape reads the metrics page into name{labels} → value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// The counters served at --metrics-addr move by exactly what the evidence
// log records during a burst of guarded writes, refusals and taint.
func TestMetricsFollowTheLog(t *testing.T) {
	addr := freeAddr(t)
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount("--metrics-addr", addr)
	count := func(pred func(LogEntry) bool) int {
		n := 0
		for _, le := range e.Log() {
			if pred(le) {
				n++
			}
		}
		return n
	}
	isWrite := func(le LogEntry) bool { return le.Record.Type == "write" }
	isWebDeny := func(le LogEntry) bool {
		m := le.Record.Meta
		return le.Record.Type == "verdict" && m.Verdict == "deny" && le.Record.Principal == "WEB" && m.Rule == "R3-principal"
	}
	before := scrape(t, addr)
	w0, d0 := count(isWrite), count(isWebDeny)

	for i := 0; i < 7; i++ {
		expectOK(t, "owner append", e.Owner(fmt.Sprintf("echo line%d >> MEMORY.md", i)))
	}
	for i := 0; i < 3; i++ {
		expectFail(t, "WEB write", e.Sh("WEB", "w", "echo evil >> MEMORY.md"))
	}
	expectOK(t, "WEB page", e.Sh("WEB", "w", "echo page > page.txt"))
	expectOK(t, "USER reads the page", e.Sh("USER", "u", "cat page.txt >/dev/null"))
	after := scrape(t, addr)
	w1, d1 := count(isWrite), count(isWebDeny)

	delta := func(k string) float64 { return after[k] - before[k] }
	if got, want := delta(`aerfs_guarded_changes_total{type="write"}`), float64(w1-w0); got != want || want < 7 {
		t.Errorf("guarded writes: metric moved %v, log has %v new (at least the 7 guarded appends)", got, want)
	}
	if got := delta("aerfs_guarded_commit_seconds_count"); got != 7 {
		t.Errorf("commit latency observations: %v, want 7", got)
	}
	if got, want := delta(`aerfs_refusals_total{principal="WEB",rule="R3-principal"}`), float64(d1-d0); got != want || want < 3 {
		t.Errorf("WEB refusals: metric moved %v, log has %v new (at least 3)", got, want)
	}
	if got := delta(`aerfs_taint_events_total{flag="WEB_DERIVED"}`); got < 1 {
		t.Errorf("taint events: %v", got)
	}
	if after["aerfs_evidence_log_healthy"] != 1 || after["aerfs_sessions"] < 2 || after["process_resident_memory_bytes"] == 0 {
		t.Errorf("gauges: healthy=%v sessions=%v rss=%v", after["aerfs_evidence_log_healthy"], after["aerfs_sessions"], after["process_resident_memory_bytes"])
	}
	st := e.Aerfs("status", "--workspace", e.WS)
	if !strings.Contains(st.Stdout, "evidence:    log healthy") || !strings.Contains(st.Stdout, "since mount:") {
		t.Errorf("status: %s", st)
	}
}
