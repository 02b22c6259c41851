package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aerfs/aerfs/evidence"
)

func TestObserveCountsRecords(t *testing.T) {
	live := 3
	m := New(Probes{Version: "v9.9.9-test", LiveSessions: func() int { return live }, LogHealthy: func() bool { return true }})
	rec := func(typ, verdict, rule, principal string, taint ...string) *evidence.Record {
		return &evidence.Record{Type: typ, Principal: principal, Taint: taint,
			Meta: evidence.Meta{Verdict: verdict, Rule: rule}}
	}
	m.Observe(rec(evidence.TypeVerdict, "allow", "R0-allow", "USER"))
	m.Observe(rec(evidence.TypeVerdict, "deny", "R3-untrusted", "WEB"))
	m.Observe(rec(evidence.TypeVerdict, "deny", "R3-untrusted", "WEB"))
	m.Observe(rec(evidence.TypeQuarantine, "deny", "R2-taint", "USER"))
	m.Observe(rec(evidence.TypeWrite, "allow", "", "USER"))
	m.Observe(rec(evidence.TypeTaint, "", "", "USER", "WEB_DERIVED", "UNTRUSTED"))
	m.Observe(rec(evidence.TypeReject, "", "", "USER"))
	web := rec(evidence.TypeNet, "allow", "RN-web", "USER")
	web.Payload = &evidence.Payload{Net: &evidence.NetConn{Host: "example.org", Port: 443, Channel: "web", Sent: 100, Received: 5000}}
	m.Observe(web)
	m.Observe(web)
	secret := rec(evidence.TypeNet, "deny", "RN-secret", "USER")
	secret.Payload = &evidence.Payload{Net: &evidence.NetConn{Host: "example.org", Port: 443, Channel: "web"}}
	m.Observe(secret)

	if got := testutil.ToFloat64(m.verdicts.WithLabelValues("deny", "R3-untrusted", "WEB")); got != 2 {
		t.Errorf("deny verdicts: %v", got)
	}
	if got := testutil.ToFloat64(m.refusals.WithLabelValues("R2-taint", "USER")); got != 1 {
		t.Errorf("quarantine counted as a refusal: %v", got)
	}
	if got := testutil.ToFloat64(m.pending); got != 0 {
		t.Errorf("pending after quarantine and reject: %v", got)
	}
	if got := testutil.ToFloat64(m.commits.WithLabelValues("write")); got != 1 {
		t.Errorf("writes: %v", got)
	}
	if got := testutil.ToFloat64(m.taint.WithLabelValues("WEB_DERIVED")); got != 1 {
		t.Errorf("taint: %v", got)
	}
	if got := testutil.ToFloat64(m.netConns.WithLabelValues("web", "allow", "RN-web")); got != 2 {
		t.Errorf("net connections: %v", got)
	}
	if got := testutil.ToFloat64(m.netBytes.WithLabelValues("web", "received")); got != 10000 {
		t.Errorf("net bytes received: %v", got)
	}
	if got := testutil.ToFloat64(m.refusals.WithLabelValues("RN-secret", "USER")); got != 1 {
		t.Errorf("a refused connection is not a refusal: %v", got)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"aerfs_sessions 3", "aerfs_evidence_log_healthy 1", "process_resident_memory_bytes", `aerfs_refusals_total{principal="WEB",rule="R3-untrusted"} 2`, `version="v9.9.9-test"} 1`, "aerfs_build_info{gofuse="} {
		if !strings.Contains(string(b), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
}
