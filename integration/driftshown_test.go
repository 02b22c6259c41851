package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Guarded files changed while the workspace was unmounted are drift: aerfs
// mount says so, a line per file, and aerfs status keeps saying it, with
// the commands that list, accept and undo them.
func TestDriftShownByMountAndStatus(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "v1\n", "SOUL.md": "soul\n", "notes.txt": "plain\n"}).Mount()
	// Nothing drifted: nothing said.
	if r := e.mustAerfs("status", "--workspace", e.WS); strings.Contains(r.Stdout, "drift") {
		t.Fatalf("status speaks of drift before any: %s", r)
	}
	e.Unmount()
	os.WriteFile(filepath.Join(e.WS, "MEMORY.md"), []byte("edited while unmounted\n"), 0o644)
	os.WriteFile(filepath.Join(e.WS, "SOUL.md"), []byte("new soul\n"), 0o644)
	os.WriteFile(filepath.Join(e.WS, "notes.txt"), []byte("plain, not guarded\n"), 0o644)
	r := e.mustAerfs("mount", "--state", e.State, e.WS)
	e.t.Cleanup(e.Unmount)
	out := r.Stdout + r.Stderr
	for _, want := range []string{"aerfs: drift: 2 guarded files changed while unmounted", "\n  MEMORY.md  (found ", "\n  SOUL.md  (found ", "aerfs log --type drift --workspace " + e.WS} {
		if !strings.Contains(out, want) {
			t.Errorf("aerfs mount does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "notes.txt") {
		t.Errorf("aerfs mount names a plain file as drift:\n%s", out)
	}
	st := e.mustAerfs("status", "--workspace", e.WS).Stdout
	for _, want := range []string{"drift:       2 guarded files changed while unmounted", "  MEMORY.md  (found ", "  SOUL.md  (found ", "aerfs adopt --workspace " + e.WS} {
		if !strings.Contains(st, want) {
			t.Errorf("aerfs status does not say %q:\n%s", want, st)
		}
	}
	// The log agrees: one drift record each.
	for _, p := range []string{"MEMORY.md", "SOUL.md"} {
		if len(e.records("drift", p)) != 1 {
			t.Errorf("%s: %d drift records", p, len(e.records("drift", p)))
		}
	}
}
