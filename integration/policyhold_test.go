package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A policy edit that would guard a file open for writing through a plain
// descriptor is held back (RW-open-writer) until the descriptor is closed:
// the kernel serves such a descriptor's writes without aerfs, so in force
// at once the policy would let them change a guarded file undecided and
// unrecorded. Once the writer closes, the edit takes effect by itself.
func TestPolicyEditHeldWhileNewlyGuardedFileIsOpen(t *testing.T) {
	e := newEnv(t, map[string]string{"notes.md": "my notes\n"}).Mount()
	done := make(chan Result, 1)
	go func() {
		done <- e.Run("WEB", "w", "python3", "-c", `
import os, time
fd = os.open("notes.md", os.O_WRONLY | os.O_APPEND)
print("open", flush=True)
time.sleep(3)
os.write(fd, b"written through the old descriptor\n")
os.close(fd)
`)
	}()
	time.Sleep(800 * time.Millisecond) // the writer has its descriptor
	pol := filepath.Join(e.State, "aerfs.yaml")
	b, err := os.ReadFile(pol)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), "\n    - MEMORY.md\n", "\n    - MEMORY.md\n    - notes.md\n", 1)
	if edited == string(b) {
		t.Fatalf("no memory list with MEMORY.md in the default policy:\n%s", b)
	}
	if err := os.WriteFile(pol, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	if c := e.Aerfs("why", "notes.md"); !classIs(c.Stdout, "plain") {
		t.Fatalf("while a WEB session holds notes.md open for writing, the edit guarding it took effect:\n%s", c)
	}
	if !e.logHas("policy_load", "reload", "deny", "RW-open-writer", "") {
		t.Fatalf("no policy_load record held back with RW-open-writer:%s", describe(recordsFor(e.Log(), "policy_load", "", "")))
	}
	r := <-done
	expectOK(t, "the WEB writer", r)
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := e.Aerfs("why", "notes.md")
		if classIs(c.Stdout, "memory") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the held policy did not take effect after the writer closed:\n%s", c)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !e.logHas("policy_load", "reload", "allow", "", "") {
		t.Fatalf("no policy_load allow record once the writer closed")
	}
	// Guarded now: the WEB session's next write is refused.
	expectFail(t, "WEB appends to the now guarded notes.md", e.Sh("WEB", "w2", "echo again >> notes.md"))
}

// classIs reports whether aerfs why's output names the class c.
func classIs(why, c string) bool {
	for _, line := range strings.Split(why, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "class:" {
			return f[1] == c
		}
	}
	return false
}
