package integration

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// evidenceBytes is the size of the state directory's blob store: its
// packs and its blob files.
func evidenceBytes(t *testing.T, e *Env) int64 {
	var n int64
	for _, d := range []string{"packs", "blobs"} {
		filepath.Walk(filepath.Join(e.State, "evidence", d), func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.Mode().IsRegular() {
				n += fi.Size()
			}
			return nil
		})
	}
	return n
}

// Every append to MEMORY.md stores the whole new version. aerfs gc prunes
// the versions outside the retention and keeps every record: the log and
// an exported bundle still verify, history says "content pruned", a pruned
// version cannot be restored and says why, a session cannot ask for gc
// (RO-owner), and gc works on an unmounted state directory too.
func TestGCPrunesContentKeepsRecords(t *testing.T) {
	const appends = 120
	e := newEnv(t, map[string]string{"MEMORY.md": strings.Repeat("an old memory line\n", 200)}).Mount()
	expectOK(t, "appends", e.Owner(`python3 -c '
for i in range(`+itoa(appends)+`):
    with open("MEMORY.md", "a") as f:
        f.write("line %d\n" % i)
'`))
	before := evidenceBytes(t, e)
	t.Logf("%d appends: %d bytes of stored content, %d bytes per commit", appends, before, before/appends)

	r := e.Run("USER", "agent", aerfsBin, "gc", "--keep-last", "5", "--keep-within", "0", "--workspace", e.WS)
	if r.Code != 4 || !strings.Contains(r.Stderr, "RO-owner") {
		t.Fatalf("gc from inside a session: %s, want refused with RO-owner (exit 4)", r)
	}
	if !hasRule(e.index().denials("agent"), "RO-owner") {
		t.Fatalf("no RO-owner refusal recorded for the session's gc: %s", describe(e.index().denials("agent")))
	}

	g := e.mustAerfs("gc", "--keep-last", "5", "--keep-within", "0", "--json", "--workspace", e.WS)
	var res struct {
		Prune []string `json:"prune"`
		Bytes int64    `json:"bytes_freed"`
	}
	if err := json.Unmarshal([]byte(g.Stdout), &res); err != nil || len(res.Prune) == 0 {
		t.Fatalf("gc: %v %s", err, g.Stdout)
	}
	after := evidenceBytes(t, e)
	t.Logf("after aerfs gc --keep-last 5: %d bytes (%d pruned versions, %d bytes freed)", after, len(res.Prune), res.Bytes)
	if after >= before/4 {
		t.Fatalf("gc kept %d of %d bytes", after, before)
	}
	if n := len(e.records("gc", "")); n != 1 {
		t.Fatalf("%d gc records, want 1", n)
	}
	expectOK(t, "verify after gc", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))
	bundle := filepath.Join(t.TempDir(), "ev.zip")
	expectOK(t, "export after gc", e.Aerfs("export", "-o", bundle, "--state", e.State, "--workspace", e.WS))
	expectOK(t, "verify the bundle", runCmd("/", nil, aerfsBin, "verify", "--key", "@"+filepath.Join(e.State, "evidence", "key.pub"), bundle))

	var hist []struct {
		N      int    `json:"n"`
		Hash   string `json:"hash"`
		Pruned bool   `json:"content_pruned"`
		Size   *int64 `json:"size"`
	}
	h := e.mustAerfs("history", "--json", "MEMORY.md", "--workspace", e.WS)
	if err := json.Unmarshal([]byte(h.Stdout), &hist); err != nil || len(hist) < appends {
		t.Fatalf("history: %v (%d versions)", err, len(hist))
	}
	pruned := 0
	for _, v := range hist {
		if v.Pruned {
			pruned++
		}
	}
	last := hist[len(hist)-1]
	if pruned == 0 || last.Pruned || last.Size == nil || hist[len(hist)-5].Pruned {
		t.Fatalf("history after gc: %d pruned; the last five must keep their content", pruned)
	}
	if text := e.mustAerfs("history", "MEMORY.md", "--workspace", e.WS).Stdout; !strings.Contains(text, "content pruned") {
		t.Fatalf("history does not say content pruned:\n%s", text)
	}
	rr := e.Aerfs("restore", "MEMORY.md", "--to", "3", "--workspace", e.WS)
	if rr.Code == 0 || !strings.Contains(rr.Stderr, "pruned by aerfs gc") {
		t.Fatalf("restore of a pruned version: %s, want a refusal that says it was pruned", rr)
	}

	// Unmounted: gc on the state directory itself.
	e.Unmount()
	expectOK(t, "offline gc", e.Aerfs("gc", "--keep-last", "1", "--keep-within", "0", "--state", e.State))
	expectOK(t, "verify after offline gc", runCmd("/", nil, aerfsBin, "verify", "--state", e.State))
	e.Mount()
	if got := e.Read("MEMORY.md"); !strings.HasSuffix(got, "line 119\n") {
		t.Fatalf("MEMORY.md after gc: ...%q", got[len(got)-20:])
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
