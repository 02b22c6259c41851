package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// gcCommitter rewrites a guarded file every 20 ms with content of its own
// until $STOP exists.
const gcCommitter = `
import os, sys, time
path, stop = sys.argv[1], sys.argv[2]
i = 0
while not os.path.exists(stop):
    i += 1
    with open(path, "w") as f:
        f.write("version %d\n" % i)
    time.sleep(0.02)
`

// aerfs gc runs while guarded commits arrive every 20 ms. gc decides what to
// prune under the same serialisation as the commits, not from a history
// read before them: after every round, the five newest versions of the file
// (--keep-last 5), its current content among them, still have their
// content. make test runs 100 rounds; AERFS_GC_RACE_ROUNDS sets another
// number (make soak runs 1000).
func TestGCConcurrentWithCommitsKeepsRetainedVersions(t *testing.T) {
	rounds := 100
	if n, err := strconv.Atoi(os.Getenv("AERFS_GC_RACE_ROUNDS")); err == nil && n > 0 {
		rounds = n
	}
	e := newEnv(t, map[string]string{"MEMORY.md": "version 0\n"}).Mount()
	stop := filepath.Join(t.TempDir(), "stop")
	w := exec.Command("python3", "-c", gcCommitter, "MEMORY.md", stop)
	w.Dir = e.WS
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stopWriter := func() {
		if !stopped {
			stopped = true
			os.WriteFile(stop, nil, 0o644)
			w.Wait()
		}
	}
	t.Cleanup(stopWriter)

	type version struct {
		N      int    `json:"n"`
		Hash   string `json:"hash"`
		Size   *int64 `json:"size"`
		Pruned bool   `json:"content_pruned"`
	}
	pruned := 0
	for round := 1; round <= rounds; round++ {
		g := e.Aerfs("gc", "--keep-last", "5", "--keep-within", "0", "--json")
		expectOK(t, fmt.Sprintf("gc round %d", round), g)
		var res struct {
			Prune []string `json:"prune"`
		}
		if err := json.Unmarshal([]byte(g.Stdout), &res); err != nil {
			t.Fatalf("gc round %d: %v %s", round, err, g.Stdout)
		}
		pruned += len(res.Prune)
		h := e.Aerfs("history", "--json", "MEMORY.md")
		expectOK(t, "history", h)
		var hist []version
		if err := json.Unmarshal([]byte(h.Stdout), &hist); err != nil {
			t.Fatalf("history: %v", err)
		}
		if len(hist) < 5 {
			continue
		}
		for _, v := range hist[len(hist)-5:] {
			if v.Size == nil {
				t.Fatalf("round %d: version %d of MEMORY.md (%.12s), one of the five newest, lost its content (pruned: %v) to a gc running beside the commits",
					round, v.N, v.Hash, v.Pruned)
			}
		}
	}
	stopWriter()
	if pruned == 0 {
		t.Fatal("gc pruned nothing in any round: the test exercised nothing")
	}
	cur := e.Hash("MEMORY.md")
	d := e.Aerfs("diff", "MEMORY.md")
	expectOK(t, "diff of the current content after the gc rounds", d)
	h := e.Aerfs("history", "--json", "MEMORY.md")
	var hist []version
	json.Unmarshal([]byte(h.Stdout), &hist)
	if last := hist[len(hist)-1]; last.Hash != cur || last.Size == nil {
		t.Fatalf("the current content %.12s: last version %+v", cur, last)
	}
	expectOK(t, "verify", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))
	t.Logf("%d gc rounds beside commits every 20 ms: %d versions, %d blobs pruned", rounds, len(hist), pruned)
}
