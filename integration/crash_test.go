package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aerfs/aerfs/evidence"
)

// The daemon is killed with SIGKILL while eight sessions commit guarded
// writes. After the next mount the log verifies, every write whose close
// returned success has its record, and no guarded file holds content that
// has no record.
func TestCrashDuringGuardedWrites(t *testing.T) {
	const sessions = 8
	files := map[string]string{}
	for i := 0; i < sessions; i++ {
		files[fmt.Sprintf("memory/s%d.md", i)] = "start\n"
	}
	e := newEnv(t, files).Mount()
	pid := daemonPid(t, e)

	var wg sync.WaitGroup
	acked := make([][]string, sessions) // contents whose write returned success
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// python3 checks close() itself: a write is acknowledged only
			// when the close that commits it returned success.
			script := fmt.Sprintf(`
import sys
for n in range(100000):
    data = "s%d-%%d\n" %% n
    try:
        with open("memory/s%d.md", "w") as f:
            f.write(data)
    except OSError:
        break
    print(data, end="", flush=True)
`, i, i)
			r := e.Run("USER", fmt.Sprintf("w%d", i), "python3", "-c", script)
			for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
				if line != "" {
					acked[i] = append(acked[i], line+"\n")
				}
			}
		}()
	}
	// Kill once the sessions are in full swing (a slow machine or a race
	// build needs longer than a fast one).
	deadline := time.Now().Add(30 * time.Second)
	for len(e.records("write", "")) < 4*sessions && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the daemon to die", func() bool { return syscall.Kill(pid, 0) != nil })
	wg.Wait()

	expectOK(t, "remount", runCmd("/", nil, aerfsBin, "mount", "--state", e.State, e.WS))
	expectOK(t, "verify", runCmd("/", nil, aerfsBin, "verify", "--state", e.State, "--workspace", e.WS))

	recorded := map[string]map[string]bool{} // path → content hashes with a write record
	for _, le := range e.records("write", "") {
		p := le.Record.Meta.Path
		if recorded[p] == nil {
			recorded[p] = map[string]bool{}
		}
		if le.Record.Payload != nil {
			recorded[p][le.Record.Payload.NewHash] = true
		}
	}
	total := 0
	for i := 0; i < sessions; i++ {
		p := fmt.Sprintf("memory/s%d.md", i)
		total += len(acked[i])
		for _, c := range acked[i] {
			sum := sha256.Sum256([]byte(c))
			if !recorded[p][hex.EncodeToString(sum[:])] {
				t.Errorf("%s: write of %q returned success but has no record", p, c)
			}
		}
		content := e.Read(p)
		sum := sha256.Sum256([]byte(content))
		if content != "start\n" && !recorded[p][hex.EncodeToString(sum[:])] {
			t.Errorf("%s holds %q, which has no record", p, content)
		}
	}
	if total < sessions {
		t.Fatalf("only %d writes acknowledged before the kill: the test did not exercise anything", total)
	}
	t.Logf("%d writes acknowledged before SIGKILL, all recorded", total)
}

// A write whose record is durable but whose rename never happened (the
// daemon died in between) is completed at the next mount, and the log says
// so: the log and the files never disagree.
func TestRecordedWriteCompletedAtMount(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "before\n"}).Mount()
	expectOK(t, "a first commit", e.Sh("USER", "u", "echo committed > MEMORY.md"))
	e.Unmount()
	// What a daemon killed between the record and the rename leaves: the
	// record of "after", the file still at "committed".
	l, err := evidence.Open(e.State)
	if err != nil {
		t.Fatal(err)
	}
	oldSum := sha256.Sum256([]byte("committed\n"))
	newHash, err := l.PutBlob([]byte("after\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(&evidence.Record{Type: evidence.TypeWrite, Principal: "USER",
		Meta:    evidence.Meta{Path: "MEMORY.md", Op: "commit", Verdict: "allow", Session: "u"},
		Payload: &evidence.Payload{OldHash: hex.EncodeToString(oldSum[:]), NewHash: newHash}}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	e.Mount()
	if got := e.Read("MEMORY.md"); got != "after\n" {
		t.Fatalf("MEMORY.md = %q, want the recorded write completed", got)
	}
	done := false
	for _, le := range e.records("recovery", "MEMORY.md") {
		done = done || le.Record.Meta.Op == "complete-write"
	}
	if !done {
		t.Fatal("no record of the completed write")
	}
	if n := len(e.records("drift", "MEMORY.md")); n != 0 {
		t.Fatalf("the completed write was reported as drift (%d records)", n)
	}
}
