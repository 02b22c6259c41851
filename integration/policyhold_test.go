package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A policy edit that would guard a file open for writing through a plain
// descriptor holds that file back (RW-open-writer) until the descriptor is
// closed: the kernel serves such a descriptor's writes without aerfs, so
// guarded at once it would be changed undecided and unrecorded. The rest
// of the edit takes effect at once (a session holding a descriptor cannot
// keep the owner's whole edit waiting), status says what is held, and the
// held file is guarded by itself once the writer closes.
func TestPolicyEditHeldWhileNewlyGuardedFileIsOpen(t *testing.T) {
	e := newEnv(t, map[string]string{"notes.md": "my notes\n", "other.md": "other\n"}).Mount()
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
	edited := strings.Replace(string(b), "\n    - MEMORY.md\n", "\n    - MEMORY.md\n    - notes.md\n    - other.md\n", 1)
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
	if c := e.Aerfs("why", "other.md"); !classIs(c.Stdout, "memory") {
		t.Fatalf("the rest of the edit waited for notes.md's writer:\n%s", c)
	}
	if st := e.Aerfs("status"); !strings.Contains(st.Stdout, "policy held:") || !strings.Contains(st.Stdout, "notes.md") {
		t.Fatalf("status does not say notes.md is held:\n%s", st)
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
	guardedNow := false
	for _, le := range e.Log() {
		guardedNow = guardedNow || le.Record.Type == "policy_load" && le.Record.Meta.Verdict == "allow" && strings.Contains(le.Record.Meta.Reason, "guarded now")
	}
	if !guardedNow {
		t.Fatalf("no policy_load record says the held files are guarded now")
	}
	if st := e.Aerfs("status"); strings.Contains(st.Stdout, "policy held:") {
		t.Fatalf("status still says a file is held:\n%s", st)
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

// A process that renames a directory holding a file it has open for
// writing into a guarded directory is refused (RW-open-writer): only a
// file it renames itself is excused (a writer publishing its temporary
// file), not the files a directory carries, whose later writes through
// that descriptor the kernel would pass to a guarded file undecided.
func TestDirectoryRenameByHolderOfOpenFileRefused(t *testing.T) {
	e := newEnv(t, map[string]string{"d/notes.md": "ok\n", "memory/keep.md": "k\n"}).Mount()
	r := e.Run("USER", "u", "python3", "-c", `
import os
fd = os.open("d/notes.md", os.O_WRONLY | os.O_APPEND)
try:
    os.rename("d", "memory/d")
    print("moved")
except OSError as ex:
    print("refused", ex.errno)
os.close(fd)
`)
	expectOK(t, "the holder's rename", r)
	if !strings.Contains(r.Stdout, "refused") {
		t.Fatalf("the holder of an open descriptor moved its file's directory under memory/: %s", r)
	}
	if !e.logHas("verdict", "rename_to", "deny", "RW-open-writer", "u") {
		t.Fatalf("the directory rename: %s, want a refusal RW-open-writer", describe(recordsFor(e.Log(), "", "", "memory/d/notes.md")))
	}
}
