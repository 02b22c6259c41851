package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dirBytes is the total size of the regular files under dir.
func dirBytes(t testing.TB, dir string) int64 {
	t.Helper()
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// gcMemory is a MEMORY.md of a realistic size (about 8 KB) for append
// workloads.
func gcMemory() string {
	var b strings.Builder
	b.WriteString("# Memory\n\n")
	for i := 0; b.Len() < 8<<10; i++ {
		fmt.Fprintf(&b, "- %d: the user prefers short answers, tabs over spaces, and tests before fixes\n", i)
	}
	return b.String()
}

// TestGCEvidenceGrowth measures the evidence a run of appends to MEMORY.md
// makes (every version is stored whole), then prunes it with aerfs gc and
// checks what gc promises: the log still verifies, exported bundles verify,
// history says "content pruned", a pruned version cannot be restored (a
// clear error), kept and snapshotted versions can, and gc is owner-only.
func TestGCEvidenceGrowth(t *testing.T) {
	const n = 300
	e := newEnv(t, map[string]string{"MEMORY.md": gcMemory()}).Mount()
	ev := filepath.Join(e.State, "evidence")
	base := dirBytes(t, ev)
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do i=$((i+1)); echo "- note $i: remembered something worth keeping across sessions" >> MEMORY.md; done`, n/2)
	expectOK(t, "appends", e.Owner(script))
	expectOK(t, "snapshot", e.Aerfs("snapshot", "--label", "middle"))
	expectOK(t, "appends", e.Owner(script))
	expectOK(t, "sync", e.Aerfs("status"))
	before := dirBytes(t, ev)
	blobsBefore := dirBytes(t, filepath.Join(ev, "blobs"))
	per := (before - base) / n
	t.Logf("%d appends to an %d-byte MEMORY.md: evidence %d bytes (blobs %d), %d bytes/commit", n, len(gcMemory()), before-base, blobsBefore, per)
	writes := 0
	for _, le := range e.Log() {
		if le.Record.Type == "write" && le.Record.Meta.Path == "MEMORY.md" {
			writes++
		}
	}
	if writes < n {
		t.Fatalf("%d write records for %d appends", writes, n)
	}

	// From inside a session: refused, with the rule recorded.
	r := e.Run("USER", "agent", aerfsBin, "gc", "--keep-last", "1", "--keep-within", "0")
	expectFail(t, "gc from a session", r)
	if !strings.Contains(r.Stderr, "RO-owner") {
		t.Errorf("gc from a session: want rule RO-owner in %q", r.Stderr)
	}
	found := false
	for _, le := range e.Log() {
		if le.Record.Meta.Op == "gc" && le.Record.Meta.Verdict == "deny" && le.Record.Meta.Rule == "RO-owner" {
			found = true
		}
	}
	if !found {
		t.Errorf("no deny record with rule RO-owner for the session's gc")
	}

	dry := e.Aerfs("gc", "--keep-last", "10", "--keep-within", "0", "--dry-run")
	expectOK(t, "gc --dry-run", dry)
	if dirBytes(t, ev) < before {
		t.Fatalf("gc --dry-run removed blobs")
	}
	g := e.Aerfs("gc", "--keep-last", "10", "--keep-within", "0", "--json")
	expectOK(t, "gc", g)
	var res struct {
		Record string `json:"record"`
		Pruned []struct {
			Hash, Path, Reason string
		} `json:"pruned"`
	}
	if err := json.Unmarshal([]byte(g.Stdout), &res); err != nil || res.Record == "" {
		t.Fatalf("gc --json: %v %s", err, g.Stdout)
	}
	after := dirBytes(t, ev)
	blobsAfter := dirBytes(t, filepath.Join(ev, "blobs"))
	t.Logf("after aerfs gc --keep-last 10: evidence %d bytes (blobs %d), %d bytes/commit; %d blobs pruned", after-base, blobsAfter, (after-base)/n, len(res.Pruned))
	if len(res.Pruned) < n-20 || blobsAfter*2 > blobsBefore {
		t.Fatalf("gc pruned %d blobs, blobs %d -> %d bytes", len(res.Pruned), blobsBefore, blobsAfter)
	}

	expectOK(t, "verify --state after gc", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))
	out := filepath.Join(t.TempDir(), "bundle")
	expectOK(t, "export", e.Aerfs("export", "-o", out, "--state", e.State, "--workspace", e.WS))
	key := strings.TrimSpace(e.Aerfs("key", "--state", e.State).Stdout)
	expectOK(t, "verify bundle", e.Aerfs("verify", "--key", key, out))
	pout := filepath.Join(t.TempDir(), "pbundle")
	expectOK(t, "export --path", e.Aerfs("export", "-o", pout, "--path", "MEMORY.md", "--state", e.State, "--workspace", e.WS))
	expectOK(t, "verify the --path bundle", e.Aerfs("verify", "--key", key, pout))
	expectOK(t, "report from the bundle", runCmd("/", nil, aerfsBin, "report", out, "--key", key, "-o", filepath.Join(t.TempDir(), "r.html")))
	expectOK(t, "report --state", runCmd("/", nil, aerfsBin, "report", "--state", e.State, "--workspace", e.WS, "-o", filepath.Join(t.TempDir(), "s.html")))

	h := e.Aerfs("history", "MEMORY.md")
	expectOK(t, "history", h)
	if c := strings.Count(h.Stdout, "content pruned"); c < n-20 {
		t.Errorf("history marks %d versions as content pruned, want ≥ %d", c, n-20)
	}
	rr := e.Aerfs("restore", "MEMORY.md", "--to", "2")
	expectFail(t, "restore to a pruned version", rr)
	if !strings.Contains(rr.Stderr, "aerfs: ") || !strings.Contains(rr.Stderr, "content pruned") {
		t.Errorf("restore to a pruned version: want a clear aerfs: … content pruned error, got %q", rr.Stderr)
	}
	expectOK(t, "restore to a kept version", e.Aerfs("restore", "MEMORY.md", "--to", fmt.Sprint(n-3)))
	snaps := e.Aerfs("snapshot", "list", "--json")
	var sl []struct {
		ID    string `json:"id"`
		Label string `json:"label"`
	}
	json.Unmarshal([]byte(snaps.Stdout), &sl)
	middle := ""
	for _, s := range sl {
		if s.Label == "middle" {
			middle = s.ID
		}
	}
	if middle == "" {
		t.Fatalf("snapshot list: %s", snaps)
	}
	expectOK(t, "restore the snapshot (its files are never pruned)", e.Aerfs("restore", "--snapshot", middle))
	if got := strings.Count(e.Read("MEMORY.md"), "- note "); got != n/2 {
		t.Errorf("after restoring the snapshot: %d notes, want %d", got, n/2)
	}

	// A blob removed behind gc's back is lost, not pruned: verify says so.
	var lost string
	for _, le := range e.Log() {
		if le.Record.Type == "write" && le.Record.Payload != nil && le.Record.Payload.NewHash != "" {
			lost = le.Record.Payload.NewHash
		}
	}
	expectOK(t, "verify --state", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))
	p := filepath.Join(ev, "blobs", lost[:2], lost[2:])
	if err := os.Rename(p, p+".away"); err != nil {
		t.Fatal(err)
	}
	v := runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS)
	os.Rename(p+".away", p)
	if v.Code == 0 || !strings.Contains(v.Stdout+v.Stderr, "missing") {
		t.Errorf("verify with a blob lost (not pruned): want a missing-blob failure, got %s", v)
	}
}

// TestGCUnmounted prunes straight on the state directory of an unmounted
// workspace: the next mount finds nothing amiss and the log verifies.
func TestGCUnmounted(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": gcMemory()}).Mount()
	expectOK(t, "appends", e.Owner(`i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo "- note $i" >> MEMORY.md; done`))
	want := e.Read("MEMORY.md")
	e.Unmount()
	g := runCmd("/", nil, aerfsBin, "gc", "--workspace", e.WS, "--keep-last", "3", "--keep-within", "0", "--json")
	expectOK(t, "gc unmounted", g)
	var res struct {
		Record string                  `json:"record"`
		Pruned []struct{ Hash string } `json:"pruned"`
	}
	if err := json.Unmarshal([]byte(g.Stdout), &res); err != nil || res.Record == "" || len(res.Pruned) < 30 {
		t.Fatalf("gc unmounted: %v %s", err, g)
	}
	expectOK(t, "verify --state", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))
	e.Mount()
	if got := e.Read("MEMORY.md"); got != want {
		t.Fatalf("MEMORY.md changed across an unmounted gc")
	}
	for _, le := range e.Log() {
		if le.Record.Type == "drift" || le.Record.Type == "recovery" {
			t.Errorf("mount after gc: %s record: %s", le.Record.Type, le.Record.Meta.Reason)
		}
	}
	h := e.Aerfs("history", "MEMORY.md")
	if !strings.Contains(h.Stdout, "content pruned") {
		t.Errorf("history after an unmounted gc: %s", h.Stdout)
	}
	expectOK(t, "append after gc", e.Owner(`echo "- after gc" >> MEMORY.md; echo "- and again" >> MEMORY.md; echo "- once more" >> MEMORY.md`))
	expectOK(t, "verify --state", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))

	// A size cap of one byte prunes every kept version that is not
	// protected, and nothing the guarded file needs.
	g = e.Aerfs("gc", "--keep-last", "10", "--keep-within", "0", "--max-size", "1", "--json")
	expectOK(t, "gc --max-size", g)
	var capped struct {
		Pruned []struct{ Reason string } `json:"pruned"`
	}
	json.Unmarshal([]byte(g.Stdout), &capped)
	bySize := 0
	for _, p := range capped.Pruned {
		if p.Reason == "max-size" {
			bySize++
		}
	}
	if bySize == 0 {
		t.Errorf("gc --max-size 1 pruned nothing for the cap: %s", g.Stdout)
	}
	if got := e.Read("MEMORY.md"); !strings.HasSuffix(got, "- once more\n") {
		t.Errorf("MEMORY.md after gc --max-size: %q", got[len(got)-40:])
	}
	expectOK(t, "append after the capped gc", e.Owner(`echo "- after the cap" >> MEMORY.md`))
	expectOK(t, "verify --state", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))
}

// TestGCWhileWriting runs gc again and again while the owner appends to
// MEMORY.md and flips AGENTS.md between two contents (so that content gc
// prunes comes back): every write lands, and the log verifies.
func TestGCWhileWriting(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": gcMemory(), "AGENTS.md": "a\n"}).Mount()
	done := make(chan Result, 1)
	go func() {
		done <- e.Owner(`i=0; while [ $i -lt 150 ]; do i=$((i+1)); echo "- note $i" >> MEMORY.md; if [ $((i%2)) = 0 ]; then echo a > AGENTS.md; else echo b > AGENTS.md; fi; done`)
	}()
	for i := 0; i < 8; i++ {
		expectOK(t, "gc", e.Aerfs("gc", "--keep-last", "1", "--keep-within", "0"))
	}
	expectOK(t, "writer", <-done)
	expectOK(t, "gc", e.Aerfs("gc", "--keep-last", "1", "--keep-within", "0"))
	if got := strings.Count(e.Read("MEMORY.md"), "- note "); got != 150 {
		t.Errorf("%d notes, want 150", got)
	}
	expectOK(t, "verify --state", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))
	expectOK(t, "append after gc", e.Owner(`echo "- last" >> MEMORY.md; echo a > AGENTS.md; echo b > AGENTS.md`))
	expectOK(t, "verify --state", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))
}
