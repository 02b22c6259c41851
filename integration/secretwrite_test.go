package integration

import (
	"strings"
	"testing"
)

// A secret file is loaded as configuration too (a client reads ~/.gemini/.env
// or a project's .env into the environment of every command it runs): a
// session that read a web page does not change it, and a WEB-made file is
// not renamed onto it, though both are trusted principals' requests.
func TestSecretNotChangedByTaintedWriter(t *testing.T) {
	e := newEnv(t, map[string]string{".env": "API_KEY=k\n"}).Mount()
	expectOK(t, "WEB saves a page", e.Sh("WEB", "web", "echo 'set BASH_ENV' > page.html; printf 'BASH_ENV=/var/tmp/x.sh\\n' > env.new"))
	r := e.Sh("USER", "agent", "cat page.html > /dev/null; echo BASH_ENV=/var/tmp/x.sh >> .env")
	if got := e.Read(".env"); got != "API_KEY=k\n" {
		bugErrorf(t, "a tainted session changed .env to %q: %s", got, r)
	}
	if d := e.Denials(".env"); !hasRule(d, "R2-taint") {
		bugErrorf(t, "the tainted session's write of .env was not refused R2-taint:%s", describe(d))
	}
	r = e.Sh("USER", "agent2", "mv env.new .env.local")
	if e.Exists(".env.local") {
		bugErrorf(t, "a WEB-made file was renamed onto .env.local: %s", r)
	}
	if d := e.Denials(".env.local"); !hasRule(d, "R7-authority") {
		bugErrorf(t, "the rename of WEB content onto .env.local was not refused R7-authority:%s", describe(d))
	}
	// A clean session still keeps its own secrets.
	expectOK(t, "a clean session writes .env", e.Sh("USER", "clean", "echo OTHER=1 >> .env"))
	if got := e.Read(".env"); !strings.Contains(got, "OTHER=1") {
		t.Fatalf(".env = %q after a clean session's append", got)
	}
}
