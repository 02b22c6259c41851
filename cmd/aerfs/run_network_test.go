package main

import (
	"strings"
	"testing"

	"github.com/aerfs/aerfs/evidence"
)

func TestModelEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4000/v1":        "127.0.0.1:4000",
		"https://api.anthropic.com":       "api.anthropic.com:443",
		"http://Gateway.Example.":         "gateway.example:80",
		"127.0.0.1:11434":                 "127.0.0.1:11434", // OLLAMA_HOST
		"http://[::1]:8080/":              "[::1]:8080",
		"ftp://example.org":               "",
		"http://":                         "",
		"http://2130706433/":              "",
		"http://example.org:0/":           "",
		"https://user:pw@example.org/x?y": "example.org:443",
	} {
		got, ok := modelEndpoint(in)
		if want == "" {
			if ok {
				t.Errorf("%q accepted as %q", in, got)
			}
			continue
		}
		if !ok || got != want {
			t.Errorf("%q = %q, %v; want %q", in, got, ok, want)
		}
	}
	t.Setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:4000")
	t.Setenv("OPENAI_BASE_URL", "not a url at all")
	got, err := modelEndpoints([]string{"http://127.0.0.1:4000/v1", "https://gw.example/v1"})
	if err != nil || strings.Join(got, " ") != "127.0.0.1:4000 gw.example:443" {
		t.Errorf("modelEndpoints = %v, %v", got, err)
	}
	if _, err := modelEndpoints([]string{"ftp://gw.example/"}); err == nil {
		t.Error("a bad --model was accepted")
	}
}

func TestSessionNetEnv(t *testing.T) {
	n := &sessionNet{mode: "proxy", proxy: "http://127.0.0.1:4321"}
	env := strings.Join(n.env(), "\n")
	for _, want := range []string{"HTTP_PROXY=http://127.0.0.1:4321", "https_proxy=http://127.0.0.1:4321", "ALL_PROXY=http://127.0.0.1:4321",
		"NO_PROXY=\n", "no_proxy=\n", "NODE_USE_ENV_PROXY=1", "AERFS_NETWORK=proxy http://127.0.0.1:4321: the only way out"} {
		if !strings.Contains(env+"\n", want) {
			t.Errorf("env lacks %q:\n%s", want, env)
		}
	}
	if e := (&sessionNet{mode: "open"}).env(); len(e) != 1 || e[0] != "AERFS_NETWORK=open" {
		t.Errorf("open: %v", e)
	}
	if e := (&sessionNet{}).env(); e != nil {
		t.Errorf("nested: %v", e)
	}
	// What aerfs run sets replaces what the caller had.
	got := lastWins([]string{"A=1", "HTTP_PROXY=http://corp:3128", "B=2", "HTTP_PROXY=http://127.0.0.1:4321"})
	if strings.Join(got, " ") != "A=1 HTTP_PROXY=http://127.0.0.1:4321 B=2" {
		t.Errorf("lastWins = %v", got)
	}
}

func TestNetRecordLines(t *testing.T) {
	r := &evidence.Record{Type: evidence.TypeNet, Principal: "USER", Taint: []string{"UNTRUSTED", "WEB_DERIVED"},
		Meta: evidence.Meta{Time: "2026-03-01T12:00:00Z", Op: "connect", Verdict: "deny", Rule: "RN-secret", Session: "s",
			Reason: "a session that read a secret reaches only model and trusted hosts"},
		Payload: &evidence.Payload{Net: &evidence.NetConn{Host: "example.org", Port: 443, Channel: "web", Sent: 2048, Received: 3 << 20, DurationUS: 1500}}}
	want := "example.org:443 web sent 2.0 KiB received 3.0 MiB in 2ms"
	if got := formatRecord(7, r); !strings.Contains(got, want) || !strings.Contains(got, "RN-secret") || !strings.Contains(got, "— a session that read a secret") {
		t.Errorf("log line: %s", got)
	}
	if got := watchLine(r, false); !strings.Contains(got, want) || !strings.Contains(got, "DENY") {
		t.Errorf("watch line: %s", got)
	}
}
