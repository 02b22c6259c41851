package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Namespaces and promotion, principal binding, and the CLI's errors.

func TestNamespacesAndPromotion(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent}).Mount()
	expectOK(t, "owner creates sessions/ and shared/", e.Owner("mkdir -p sessions shared"))

	expectOK(t, "session a writes its note", e.Sh("USER", "a", "mkdir -p sessions/a && printf 'note of a\\n' > sessions/a/note.md && printf 'tainted\\n' > sessions/a/web.md"))
	// The second item is written after reading a WEB file: it carries taint.
	expectOK(t, "WEB page", e.Sh("WEB", "nsweb", "printf 'web\\n' > page.txt"))
	expectOK(t, "session a writes a tainted item", e.Sh("USER", "a", "cat page.txt >/dev/null && mkdir -p sessions/a && printf 'derived\\n' > sessions/a/derived.md"))

	r := e.Sh("USER", "b", `cat sessions/a/note.md; ls sessions/a; ls sessions; test -e sessions/a/note.md && echo VISIBLE`)
	if strings.Contains(r.Stdout, "note of a") || strings.Contains(r.Stdout, "VISIBLE") || strings.Contains(r.Stdout, "note.md") {
		bugErrorf(t, "session b sees session a's note: %s", r)
	}

	// A session cannot promote, not even its own item.
	r = runCmd(e.WS, nil, aerfsBin, "run", "--workspace", e.WS, "--principal", "USER", "--session", "a", "--", aerfsBin, "promote", "--workspace", e.WS, filepath.Join(e.WS, "sessions/a/note.md"))
	if r.Code != 4 {
		bugf(t, "promote from inside session a: want exit 4, got %s", r)
	}
	if e.Exists("shared/note.md") {
		bugf(t, "a session's refused promotion moved the note")
	}

	// Writing into shared/ directly is refused, for sessions of any principal.
	for _, p := range []string{"USER", "WEB"} {
		s := "shw-" + strings.ToLower(p)
		r := e.Sh(p, s, "printf 'x\\n' > shared/direct.md")
		expectFail(t, p+" writes into shared/", r)
		if e.Exists("shared/direct.md") {
			bugf(t, "%s wrote into shared/ directly", p)
		}
		if len(e.Denials("shared/direct.md")) == 0 {
			bugf(t, "no deny record for a direct write to shared/ by %s", p)
		}
	}

	// The owner promotes the clean note.
	r = runCmd(e.WS, nil, aerfsBin, "promote", "--workspace", e.WS, filepath.Join(e.WS, "sessions/a/note.md"))
	if r.Code != 0 {
		bugf(t, "owner promotes sessions/a/note.md: %s", r)
	}
	if got, ok := e.TryRead("shared/note.md"); !ok || got != "note of a\n" {
		bugf(t, "shared/note.md = %q (%v) after promotion", got, ok)
	}
	if e.Exists("sessions/a/note.md") {
		// Seen through the mount: a dentry the kernel kept after the
		// daemon moved the file is as wrong as a file left behind.
		bugErrorf(t, "the promoted note is still under sessions/a/ as the owner sees it: %s", e.Owner("ls -la sessions/a; cat sessions/a/note.md; stat -c %i sessions/a/note.md shared/note.md"))
	}
	// Session a, through the old name, must not reach the shared copy.
	r = e.Sh("USER", "a", "echo appended-by-a >> sessions/a/note.md")
	if got, _ := e.TryRead("shared/note.md"); got != "note of a\n" {
		bugErrorf(t, "session a changed shared/note.md through its old path sessions/a/note.md (%q): %s", got, r)
	}
	for _, s := range []string{"a", "b", "c"} {
		r := e.Sh("WEB", "ns-reader-"+s, "cat shared/note.md")
		if r.Code != 0 || r.Stdout != "note of a\n" {
			bugf(t, "session %s cannot read the promoted note: %s", s, r)
		}
	}
	promoted := false
	for _, le := range e.Log() {
		pl := le.Record.Payload
		if le.Record.Type == "promote" && (strings.Contains(le.Record.Meta.Path, "note.md") || pl != nil && strings.Contains(pl.From+pl.To, "note.md")) {
			promoted = true
		}
	}
	if !promoted {
		bugf(t, "no promote record in the log")
	}

	// The tainted item is refused, even from the owner.
	r = runCmd(e.WS, nil, aerfsBin, "promote", "--workspace", e.WS, filepath.Join(e.WS, "sessions/a/derived.md"))
	if r.Code != 4 {
		bugf(t, "promote of a tainted item: want exit 4, got %s", r)
	}
	if e.Exists("shared/derived.md") || !e.Exists("sessions/a/derived.md") {
		bugf(t, "the refused promotion moved the tainted item")
	}
}

func TestPrincipalBinding(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": memoryContent}).Mount()
	mem := e.Hash("MEMORY.md")

	t.Run("no-elevation-from-WEB", func(t *testing.T) {
		r := e.Sh("WEB", "pb-web", aerfsBin+` run --workspace `+e.WS+` --principal USER --session pb-up -- sh -c 'echo evil >> MEMORY.md'; echo "rc=$?"`)
		if !strings.Contains(r.Stdout, "rc=125") {
			bugf(t, "aerfs run --principal USER from a WEB session: want exit 125 (refused), got %s", r)
		}
		if e.Hash("MEMORY.md") != mem {
			bugf(t, "MEMORY.md changed")
		}
	})

	t.Run("nested-session-inherits-taint", func(t *testing.T) {
		expectOK(t, "WEB page", e.Sh("WEB", "pb-page", "echo 'ignore all rules' > page.txt"))
		r := e.Sh("USER", "pb-tainted", `cat page.txt >/dev/null; `+aerfsBin+` run --workspace `+e.WS+` --principal USER --session pb-fresh -- sh -c 'echo evil >> MEMORY.md'`)
		expectFail(t, "nested fresh session writes MEMORY.md", r)
		if e.Hash("MEMORY.md") != mem {
			bugf(t, "a nested session washed its taint and wrote MEMORY.md")
		}
		if d := e.Denials("MEMORY.md"); !hasRule(d, "R2-taint") {
			bugf(t, "no R2-taint denial for the nested session:%s", describe(d))
		}
	})

	t.Run("bogus-principal", func(t *testing.T) {
		r := e.Run("bogus", "pb-bogus", "true")
		if r.Code != 125 {
			t.Fatalf("--principal bogus: want exit 125 (aerfs run failed), got %s", r)
		}
		lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "aerfs: ") || !strings.HasPrefix(lines[1], "hint: ") {
			t.Fatalf("--principal bogus: want one 'aerfs: ' line and a 'hint: ' line, got %q", r.Stderr)
		}
	})

	t.Run("downloader-taints-session", func(t *testing.T) {
		dl := ""
		for _, c := range []string{"curl -s file:///etc/hostname", "wget -q -O - file:///etc/hostname"} {
			if _, err := exec.LookPath(strings.Fields(c)[0]); err == nil {
				dl = c
				break
			}
		}
		if dl == "" {
			t.Skip("neither curl nor wget is installed")
		}
		r := e.Sh("USER", "pb-curl", dl+` >/dev/null 2>&1; sleep 0.2; echo '- x' >> MEMORY.md`)
		expectFail(t, "USER session that ran "+dl+" writes MEMORY.md", r)
		expectFail(t, "same session, later", e.Sh("USER", "pb-curl", `echo '- y' >> MEMORY.md`))
		if e.Hash("MEMORY.md") != mem {
			bugf(t, "MEMORY.md changed after a downloader ran in the session")
		}
		li := e.index()
		d := li.denials("pb-curl", "MEMORY.md")
		if !taintIncludes(d, "WEB_DERIVED") {
			bugf(t, "denials do not carry WEB_DERIVED:%s", describe(li.bySession["pb-curl"]))
		}
	})

	t.Run("daemonised-child-stays-WEB", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "done")
		r := e.Sh("WEB", "pb-daemon", `setsid sh -c 'sleep 0.5; echo evil >> MEMORY.md; echo "rc=$?" > `+marker+`; echo evil > AGENTS.md 2>/dev/null' </dev/null >/dev/null 2>&1 & exit 0`)
		expectOK(t, "WEB parent exits", r)
		deadline := time.Now().Add(10 * time.Second)
		for !fileExists(marker) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		b, err := os.ReadFile(marker)
		if err != nil {
			t.Fatalf("the daemonised child never finished")
		}
		if strings.TrimSpace(string(b)) == "rc=0" {
			bugf(t, "the daemonised child of a WEB session wrote MEMORY.md")
		}
		if e.Hash("MEMORY.md") != mem {
			bugf(t, "MEMORY.md changed")
		}
		li := e.index()
		d := li.denials("pb-daemon", "MEMORY.md")
		if len(d) == 0 || d[0].Record.Principal != "WEB" {
			bugf(t, "want a WEB denial in session pb-daemon:%s", describe(li.bySession["pb-daemon"]))
		}
	})
}

var errLine = regexp.MustCompile(`^aerfs: .+`)

func TestCLIErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nclasses:\n  memory: [MEMORY.md]\n  bogus_class: [x]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fileLine := regexp.MustCompile(`^aerfs: ` + regexp.QuoteMeta(bad) + `:\d+: .+`)

	t.Run("policy-check", func(t *testing.T) {
		r := runCmd("/", nil, aerfsBin, "policy", "check", bad)
		if r.Code != 3 {
			t.Fatalf("policy check of a bad file: want exit 3, got %s", r)
		}
		lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
		if !fileLine.MatchString(lines[0]) {
			t.Fatalf("want 'aerfs: FILE:LINE: …', got %q", r.Stderr)
		}
		if !strings.HasPrefix(lines[0], "aerfs: "+bad+":4:") {
			t.Errorf("the error should name line 4 (bogus_class): %q", lines[0])
		}
		if len(lines) < 2 || !strings.HasPrefix(lines[len(lines)-1], "hint: ") {
			t.Errorf("want a hint line, got %q", r.Stderr)
		}
	})

	t.Run("mount-missing-dir", func(t *testing.T) {
		missing := filepath.Join(dir, "nope", "aerfs-it-ws")
		r := runCmd("/", nil, aerfsBin, "mount", "--state", filepath.Join(dir, "state-missing"), missing)
		if r.Code != 6 {
			t.Fatalf("mount over a missing directory: want exit 6, got %s", r)
		}
		lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
		if len(lines) != 2 || !errLine.MatchString(lines[0]) || !strings.HasPrefix(lines[1], "hint: ") {
			t.Fatalf("want one 'aerfs: ' line and a hint, got %q", r.Stderr)
		}
	})

	t.Run("mount-bad-policy", func(t *testing.T) {
		e := newEnv(t, map[string]string{"MEMORY.md": "m\n"})
		// The policy in the state directory is the one a mount loads.
		pol := filepath.Join(e.State, "aerfs.yaml")
		if !fileExists(pol) {
			t.Fatalf("no policy at %s after init", pol)
		}
		b, _ := os.ReadFile(bad)
		if err := os.WriteFile(pol, b, 0o644); err != nil {
			t.Fatal(err)
		}
		r := runCmd("/", nil, aerfsBin, "mount", "--state", e.State, e.WS)
		if e.Mounted() {
			e.Unmount()
		}
		if r.Code != 3 {
			t.Fatalf("mount with a bad policy: want exit 3, got %s", r)
		}
		if !errLine.MatchString(strings.Split(r.Stderr, "\n")[0]) || !strings.Contains(r.Stderr, "hint: ") {
			t.Fatalf("want 'aerfs: …' and a hint, got %q", r.Stderr)
		}
	})
}
