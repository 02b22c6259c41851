package main

import "testing"

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/home/alice/agent":   "/home/alice/agent",
		"/home/alice/my work": "'/home/alice/my work'",
		"/tmp/it's":           `'/tmp/it'\''s'`,
		"":                    "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
