package integration

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bindView bind-mounts the workspace's directory at a second path before
// aerfs covers it: a way to change the backing directory behind aerfs's
// back, as drift tests need.
func bindView(t *testing.T, e *Env) string {
	t.Helper()
	view := filepath.Join(filepath.Dir(e.WS), "view")
	if err := os.MkdirAll(view, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(e.WS, view, "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(view, syscall.MNT_DETACH) })
	return view
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 250; i++ {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func (e *Env) records(typ, path string) []LogEntry {
	var out []LogEntry
	for _, le := range e.Log() {
		if le.Record.Type == typ && (path == "" || le.Record.Meta.Path == path) {
			out = append(out, le)
		}
	}
	return out
}

func TestDriftWhileMountedRecordedAndLabelledExternal(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "mine\n"})
	view := bindView(t, e)
	e.Mount()
	if err := os.WriteFile(filepath.Join(view, "MEMORY.md"), []byte("planted behind aerfs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a drift record", func() bool { return len(e.records("drift", "MEMORY.md")) > 0 })
	d := e.records("drift", "MEMORY.md")[0].Record
	if d.Payload == nil || d.Payload.OldHash == d.Payload.NewHash {
		t.Fatalf("drift record %+v", d)
	}
	// The drifted content is EXTERNAL: a session that reads it is tainted
	// and cannot write memory.
	expectOK(t, "read drifted memory", e.Sh("USER", "r", "cat MEMORY.md >/dev/null"))
	expectFail(t, "write after reading drifted content", e.Sh("USER", "r", "echo x >> MEMORY.md"))
	// aerfs's own commits are not drift.
	expectOK(t, "clean commit", e.Sh("USER", "clean", "echo fixed > MEMORY.md"))
	time.Sleep(300 * time.Millisecond)
	if n := len(e.records("drift", "MEMORY.md")); n != 1 {
		t.Fatalf("%d drift records, want 1 (a commit through the mount is not drift)", n)
	}
}

func TestDriftRestoredWhenPolicySaysSo(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "mine\n"})
	pol := filepath.Join(e.State, "aerfs.yaml")
	b, _ := os.ReadFile(pol)
	os.WriteFile(pol, []byte(strings.Replace(string(b), "on_drift: record", "on_drift: restore", 1)), 0o600)
	view := bindView(t, e)
	e.Mount()
	os.WriteFile(filepath.Join(view, "MEMORY.md"), []byte("planted\n"), 0o644)
	waitFor(t, "the drift to be repaired", func() bool { return len(e.records("restore", "MEMORY.md")) > 0 })
	if got := e.Read("MEMORY.md"); got != "mine\n" {
		t.Fatalf("MEMORY.md = %q after on_drift: restore", got)
	}
}

func TestDriftWhileUnmountedReportedAtMount(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "v1\n", "SOUL.md": "soul\n"}).Mount()
	expectOK(t, "commit", e.Sh("USER", "u", "echo v2 > MEMORY.md"))
	e.Unmount()
	os.WriteFile(filepath.Join(e.WS, "MEMORY.md"), []byte("edited while unmounted\n"), 0o644)
	os.WriteFile(filepath.Join(e.WS, "SOUL.md"), []byte("new soul\n"), 0o644)
	e.Mount()
	for _, p := range []string{"MEMORY.md", "SOUL.md"} {
		if len(e.records("drift", p)) != 1 {
			t.Fatalf("drift of %s while unmounted not reported at mount", p)
		}
	}
}

func TestPolicyReload(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n", "NOTES.md": "n\n"}).Mount()
	pol := filepath.Join(e.State, "aerfs.yaml")
	orig, _ := os.ReadFile(pol)
	expectOK(t, "WEB writes NOTES.md (plain)", e.Sh("WEB", "w", "echo a >> NOTES.md"))

	// An invalid edit is refused; the old policy stays.
	os.WriteFile(pol, []byte("version: 1\nclasses:\n  memory: [MEMORY.md]\nbogus: true\n"), 0o600)
	waitFor(t, "the refused reload", func() bool {
		for _, le := range e.records("policy_load", "") {
			if le.Record.Meta.Verdict == "deny" && strings.Contains(le.Record.Meta.Reason, "bogus") {
				return true
			}
		}
		return false
	})
	expectFail(t, "WEB still refused on MEMORY.md", e.Sh("WEB", "w", "echo a >> MEMORY.md"))

	// A valid edit that guards NOTES.md takes effect.
	edited := strings.Replace(string(orig), "memory:   [", "memory:   [NOTES.md, ", 1)
	if edited == string(orig) {
		edited = strings.Replace(string(orig), "  memory:\n", "  memory:\n    - NOTES.md\n", 1)
	}
	if edited == string(orig) {
		t.Fatalf("cannot find the memory class in the default policy:\n%s", orig)
	}
	tmp := pol + ".new"
	os.WriteFile(tmp, []byte(edited), 0o600)
	os.Rename(tmp, pol) // as editors save
	waitFor(t, "the reload", func() bool {
		for _, le := range e.records("policy_load", "") {
			if le.Record.Meta.Op == "reload" && le.Record.Meta.Verdict == "allow" {
				return true
			}
		}
		return false
	})
	expectFail(t, "WEB now refused on NOTES.md", e.Sh("WEB", "w", "echo b >> NOTES.md"))
	if got := e.Read("NOTES.md"); got != "n\na\n" {
		t.Fatalf("NOTES.md = %q", got)
	}
}
