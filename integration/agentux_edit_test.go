package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// aerfsIn runs aerfs in the workspace with extra environment and stdin.
func (e *Env) aerfsIn(env []string, stdin string, args ...string) Result {
	cmd := exec.Command(aerfsBin, args...)
	cmd.Dir = e.WS
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, er strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &er
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
	}
	return Result{o.String(), er.String(), code}
}

// The owner changes SOUL.md with aerfs edit: through the daemon, with a
// diff and a confirmation, recorded; never from a session.
func TestAgentuxEditSoul(t *testing.T) {
	e := newEnv(t, map[string]string{"SOUL.md": "soul v1\n", "MEMORY.md": "m\n"}).Mount()
	sed := []string{"EDITOR=sed -i s/v1/v2/"}

	r := e.aerfsIn(sed, "n\n", "edit", "SOUL.md")
	if r.Code == 0 || e.Read("SOUL.md") != "soul v1\n" || !strings.Contains(r.Stdout, "+soul v2") {
		t.Fatalf("edit answered no: %s\nSOUL.md = %q", r, e.Read("SOUL.md"))
	}
	r = e.aerfsIn(sed, "y\n", "edit", "SOUL.md")
	expectOK(t, "edit confirmed", r)
	if got := e.Read("SOUL.md"); got != "soul v2\n" {
		t.Fatalf("SOUL.md = %q after aerfs edit", got)
	}
	if !e.logHas("write", "owner-edit", "allow", "RO-owner", "") {
		t.Fatal("the owner's edit is not recorded")
	}
	expectOK(t, "edit --yes", e.aerfsIn([]string{"EDITOR=sed -i s/v2/v3/"}, "", "edit", "--yes", "SOUL.md"))
	if got := e.Read("SOUL.md"); got != "soul v3\n" {
		t.Fatalf("SOUL.md = %q after aerfs edit --yes", got)
	}

	// A large identity file fits one edit (the owner's requests may be
	// long; a session's are not).
	big := strings.Repeat("a line of the soul, long enough to add up\n", 5000) // 210 KB
	bigFile := filepath.Join(t.TempDir(), "big-soul")
	if err := os.WriteFile(bigFile, []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	expectOK(t, "edit to a large SOUL.md", e.aerfsIn([]string{"EDITOR=cp " + bigFile}, "", "edit", "--yes", "SOUL.md"))
	if got := e.Read("SOUL.md"); got != big {
		t.Fatalf("SOUL.md has %d bytes after the large edit, want %d", len(got), len(big))
	}
	expectOK(t, "edit back", e.aerfsIn([]string{"EDITOR=sh -c 'printf \"soul v3\\n\" > \"$0\"'"}, "", "edit", "--yes", "SOUL.md"))
	if got := e.Read("SOUL.md"); got != "soul v3\n" {
		t.Fatalf("SOUL.md = %q after editing it back", got)
	}

	// From a session: refused with RO-owner, nothing changes.
	r = e.Run("USER", "agent", "env", "EDITOR=sed -i s/v3/evil/", aerfsBin, "edit", "--yes", "SOUL.md")
	if r.Code != 4 || e.Read("SOUL.md") != "soul v3\n" {
		t.Fatalf("edit from a session: %s", r)
	}
	if !hasRule(e.index().denials("agent"), "RO-owner") {
		t.Fatal("the session's edit is not refused with RO-owner")
	}
	// The owner's content taints nobody.
	expectOK(t, "a session reads SOUL.md and writes memory", e.Sh("USER", "reader", "cat SOUL.md >/dev/null; echo ok >> MEMORY.md"))

	// Remounting finds no drift: the edit was aerfs's own.
	e.Unmount()
	e.Mount()
	if n := len(e.records("drift", "SOUL.md")); n != 0 {
		t.Fatalf("%d drift records for SOUL.md after aerfs edit", n)
	}
}

// Drift while unmounted labels SOUL.md EXTERNAL and taints its readers;
// aerfs adopt accepts the content as the owner's, and a new session reads
// it and writes memory.
func TestAgentuxAdoptDrift(t *testing.T) {
	e := newEnv(t, map[string]string{"SOUL.md": "soul\n", "MEMORY.md": "m\n"}).Mount()
	e.Unmount()
	if err := os.WriteFile(filepath.Join(e.WS, "SOUL.md"), []byte("soul, edited by hand while unmounted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.Mount()
	if len(e.records("drift", "SOUL.md")) != 1 {
		t.Fatal("drift while unmounted not recorded")
	}
	e.Sh("USER", "u1", "cat SOUL.md >/dev/null; echo a >> MEMORY.md")
	if !hasRule(e.index().denials("u1", "MEMORY.md"), "R2-taint") {
		t.Fatal("reading the drifted SOUL.md did not taint the session")
	}
	if w := e.Aerfs("why", "SOUL.md"); !strings.Contains(w.Stdout, "aerfs adopt SOUL.md") {
		t.Fatalf("why SOUL.md does not point at adopt:\n%s", w)
	}

	if r := e.Run("USER", "agent", aerfsBin, "adopt", "SOUL.md"); r.Code != 4 {
		t.Fatalf("adopt from a session: %s", r)
	}
	if !hasRule(e.index().denials("agent"), "RO-owner") {
		t.Fatal("the session's adopt is not refused with RO-owner")
	}
	expectOK(t, "owner adopts", e.Aerfs("adopt", "SOUL.md"))
	if !e.logHas("declassify", "adopt", "allow", "RO-owner", "") {
		t.Fatal("the adoption is not recorded")
	}
	expectOK(t, "a new session reads SOUL.md and writes memory", e.Sh("USER", "u2", "cat SOUL.md >/dev/null; echo b >> MEMORY.md"))
	if got := e.Read("MEMORY.md"); got != "m\nb\n" {
		t.Fatalf("MEMORY.md = %q", got)
	}
	if d := e.index().denials("u2"); len(d) > 0 {
		t.Fatalf("session u2 refused after adopt:%s", describe(d))
	}
	if r := e.Aerfs("adopt", "SOUL.md"); r.Code == 0 {
		t.Fatalf("adopting a clean file again: %s", r)
	}
	// Nothing to report at the next mount either.
	e.Unmount()
	e.Mount()
	if n := len(e.records("drift", "SOUL.md")); n != 1 {
		t.Fatalf("%d drift records for SOUL.md after adopt and remount, want the first only", n)
	}
	expectOK(t, "after remount", e.Sh("USER", "u3", "cat SOUL.md >/dev/null; echo c >> MEMORY.md"))
}
