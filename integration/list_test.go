package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// aerfs list names every mounted workspace with its state directory and
// what its daemon says (pid, sessions); a second mount of a mounted
// workspace, or of its state directory at another path, says which mount
// holds it and how to move it, never only "see daemon.log".
func TestListAndMountedHints(t *testing.T) {
	e1 := newEnv(t, map[string]string{"MEMORY.md": "one\n"}).Mount()
	e2 := newEnv(t, map[string]string{"MEMORY.md": "two\n"}).Mount()

	r := runCmd("/", nil, aerfsBin, "list", "--json")
	expectOK(t, "aerfs list --json", r)
	var ws []struct {
		Workspace     string `json:"workspace"`
		State         string `json:"state_dir"`
		PID, Sessions int
		Mountpoints   []string
	}
	if err := json.Unmarshal([]byte(r.Stdout), &ws); err != nil {
		t.Fatalf("aerfs list --json: %v\n%s", err, r.Stdout)
	}
	for _, e := range []*Env{e1, e2} {
		var st struct {
			PID      int               `json:"pid"`
			Sessions []json.RawMessage `json:"sessions"`
		}
		s := e.mustAerfs("status", "--json", "--workspace", e.WS)
		json.Unmarshal([]byte(s.Stdout), &st)
		found := false
		for _, w := range ws {
			if w.Workspace == e.WS {
				found = true
				if w.State != e.State || w.PID != st.PID || w.PID == 0 || w.Sessions != len(st.Sessions) {
					t.Errorf("aerfs list says %+v of %s; status says pid %d, %d sessions", w, e.WS, st.PID, len(st.Sessions))
				}
			}
		}
		if !found {
			t.Errorf("aerfs list does not name %s:\n%s", e.WS, r.Stdout)
		}
	}
	txt := runCmd("/", nil, aerfsBin, "list")
	expectOK(t, "aerfs list", txt)
	if !strings.HasPrefix(txt.Stdout, "WORKSPACE") || !strings.Contains(txt.Stdout, e1.WS) || !strings.Contains(txt.Stdout, e2.State) {
		t.Errorf("aerfs list:\n%s", txt.Stdout)
	}

	// Mounting it again.
	again := runCmd("/", nil, aerfsBin, "mount", "--state", e1.State, e1.WS)
	if again.Code != 1 || !strings.Contains(again.Stderr, "is already mounted") || !strings.Contains(again.Stderr, "aerfs list every mount") {
		t.Errorf("a second mount of a mounted workspace: %s", again)
	}
	// Its state directory, at another path.
	other := filepath.Join(t.TempDir(), "elsewhere")
	os.MkdirAll(other, 0o755)
	moved := runCmd("/", nil, aerfsBin, "mount", "--state", e1.State, other)
	if moved.Code != 1 || !strings.Contains(moved.Stderr, "already serves "+e1.WS) ||
		!strings.Contains(moved.Stderr, "aerfs unmount "+e1.WS+", then aerfs mount --state "+e1.State+" "+other) || strings.Contains(moved.Stderr, "daemon.log") {
		t.Errorf("a mount of a state directory that serves another workspace: %s", moved)
	}
	// Unmounting what is not mounted.
	if u := runCmd("/", nil, aerfsBin, "unmount", other); u.Code != 5 || !strings.Contains(u.Stderr, "hint: aerfs list lists what is mounted") {
		t.Errorf("aerfs unmount of a directory that is not a mount: %s", u)
	}
}
