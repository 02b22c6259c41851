package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
open("writer.open", "w").close()
deadline = time.time() + 60
while not os.path.exists("writer.go") and time.time() < deadline:
    time.sleep(0.05)
os.write(fd, b"written through the old descriptor\n")
os.close(fd)
`)
	}()
	// The writer has its descriptor, and keeps it until told to go on
	// (writer.go): the checks below need it held, however slow the
	// machine.
	for deadline := time.Now().Add(30 * time.Second); !e.Exists("writer.open"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the WEB writer did not open notes.md")
		}
	}
	editPolicy(t, e, "\n    - MEMORY.md\n", "\n    - MEMORY.md\n    - notes.md\n    - other.md\n")
	waitClass(t, e, "other.md", "memory", 15*time.Second, "the rest of the edit waited for notes.md's writer")
	if c := e.Aerfs("why", "notes.md"); !classIs(c.Stdout, "plain") {
		t.Fatalf("while a WEB session holds notes.md open for writing, the edit guarding it took effect:\n%s", c)
	}
	if st := e.Aerfs("status"); !strings.Contains(st.Stdout, "policy held:") || !strings.Contains(st.Stdout, "notes.md") {
		t.Fatalf("status does not say notes.md is held:\n%s", st)
	}
	if !e.logHas("policy_load", "reload", "deny", "RW-open-writer", "") {
		t.Fatalf("no policy_load record held back with RW-open-writer:%s", describe(recordsFor(e.Log(), "policy_load", "", "")))
	}
	// The hold is for the descriptor open at the edit: a new writer is
	// refused until the edit is in force.
	e.Sh("WEB", "w3", "echo 'a new writer' >> notes.md")
	if strings.Contains(e.Read("notes.md"), "a new writer") || !e.logHas("verdict", "write", "deny", "RW-open-writer", "w3") {
		t.Fatalf("a WEB session opened the held notes.md for writing after the edit:%s", describe(recordsFor(e.Log(), "", "", "notes.md")))
	}
	// Nor does content arrive by another name: a rename over it, a link
	// of it, its removal.
	for _, script := range []string{"echo theirs > mine.md && mv mine.md notes.md", "ln notes.md x.md", "rm notes.md"} {
		before := len(heldRefusals(e, "w4"))
		if r := e.Sh("WEB", "w4", script); r.Code == 0 || len(heldRefusals(e, "w4")) != before+1 {
			t.Fatalf("while notes.md is held, a WEB session's %q: %s, want one more RW-open-writer refusal:%s", script, r, describe(heldRefusals(e, "w4")))
		}
	}
	if got := e.Read("notes.md"); strings.Contains(got, "theirs") || e.Exists("x.md") {
		t.Fatalf("while held, notes.md changed by another name: %q", got)
	}
	if err := os.WriteFile(filepath.Join(e.WS, "writer.go"), nil, 0o644); err != nil {
		t.Fatal(err)
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
		guardedNow = guardedNow || le.Record.Type == "policy_load" && le.Record.Meta.Verdict == "allow" && strings.Contains(le.Record.Meta.Reason, "in force now")
	}
	if !guardedNow {
		t.Fatalf("no policy_load record says the held files are in force now")
	}
	if st := e.Aerfs("status"); strings.Contains(st.Stdout, "policy held:") {
		t.Fatalf("status still says a file is held:\n%s", st)
	}
	// Guarded now: the WEB session's next write is refused.
	expectFail(t, "WEB appends to the now guarded notes.md", e.Sh("WEB", "w2", "echo again >> notes.md"))
}

// waitClass waits up to wait for aerfs why to say rel has class c, and
// fails the test with what (the edit that should have taken effect) if it
// does not.
func waitClass(t *testing.T, e *Env, rel, c string, wait time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !classIs(e.Aerfs("why", rel).Stdout, c) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s is not %s", what, rel, c)
		}
		time.Sleep(100 * time.Millisecond)
	}
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

// heldRefusals are the RW-open-writer refusals of session's changes.
func heldRefusals(e *Env, session string) []LogEntry {
	var out []LogEntry
	for _, le := range e.Log() {
		if m := le.Record.Meta; m.Verdict == "deny" && m.Rule == "RW-open-writer" && m.Session == session {
			out = append(out, le)
		}
	}
	return out
}

// editPolicy replaces old by new in the workspace's policy file (the
// mounted daemon reloads it).
func editPolicy(t *testing.T, e *Env, old, new string) {
	t.Helper()
	pol := filepath.Join(e.State, "aerfs.yaml")
	b, err := os.ReadFile(pol)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), old, new, 1)
	if edited == string(b) {
		t.Fatalf("%q is not in the policy", old)
	}
	if err := os.WriteFile(pol, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A policy edit that makes a file secret while a WEB session has it open
// for reading (opened while it was plain, served by the kernel) cannot take
// the descriptor back: it says so (RS-open-reader) and taints the reader
// SECRET_RISK at once, as a read of a secret would.
func TestPolicyEditSecretWhileOpenForReading(t *testing.T) {
	e := newEnv(t, map[string]string{"api.token": "placeholder\n"}).Mount()
	done := make(chan Result, 1)
	go func() {
		done <- e.Run("WEB", "w", "python3", "-c", `
import os, time
fd = os.open("api.token", os.O_RDONLY)
open("ready", "w").close()
time.sleep(3)
os.close(fd)
`)
	}()
	waitFor(t, "ready", func() bool { return e.Exists("ready") })
	editPolicy(t, e, "\n    - .netrc\n", "\n    - .netrc\n    - \"*.token\"\n")
	waitClass(t, e, "api.token", "secret", 10*time.Second, "the edit making *.token secret did not take effect")
	if !e.logHas("policy_load", "reload", "deny", "RS-open-reader", "") {
		t.Fatalf("no policy_load note RS-open-reader for api.token open for reading by a WEB session:%s", describe(recordsFor(e.Log(), "policy_load", "", "")))
	}
	if s := e.sessionList(t); !slices.Contains(s["w"].Taint, "SECRET_RISK") {
		t.Fatalf("the WEB session reading api.token as it became secret is not SECRET_RISK: %+v", s["w"])
	}
	expectOK(t, "the WEB reader", <-done)
}

// The namespace roots stay those the mount started with: an edit moving
// the shared namespace would carry files into it behind their writers.
func TestPolicyEditKeepsNamespaceRoots(t *testing.T) {
	e := newEnv(t, map[string]string{"pub/notes.txt": "team notes\n", "MEMORY.md": "m\n"}).Mount()
	editPolicy(t, e, "\n  shared: shared\n", "\n  shared: pub\n")
	editPolicy(t, e, "\n    - MEMORY.md\n", "\n    - MEMORY.md\n    - other.md\n")
	waitClass(t, e, "other.md", "memory", 5*time.Second, "the policy edit did not take effect")
	expectOK(t, "WEB appends to pub/notes.txt", e.Sh("WEB", "w", "echo more >> pub/notes.txt"))
	found := false
	for _, le := range e.Log() {
		found = found || le.Record.Type == "policy_load" && strings.Contains(le.Record.Meta.Reason, "namespace roots stay")
	}
	if !found {
		t.Fatalf("no policy_load record says the namespace roots stay until the next mount")
	}
}

// A write-open racing a policy edit is either held with the file or
// decided under the new policy: a WEB session reopening notes.md for
// writing in a loop never holds a plain descriptor of it once the edit
// guarding it is in force (none is opened while the edit looks for them,
// and a handle that is closing counts as open). When a second open is
// refused, the first descriptor must be one the edit holds the file for.
func TestPolicyEditRacingWriteOpens(t *testing.T) {
	files := map[string]string{"notes.md": "my notes\n"}
	for d := 0; d < 16; d++ {
		for f := 0; f < 200; f++ {
			files[fmt.Sprintf("d%02d/f%03d", d, f)] = "x"
		}
	}
	e := newEnv(t, files).Mount()
	done := make(chan Result, 1)
	go func() {
		done <- e.Run("WEB", "w", "python3", "-c", `
import os, time, sys
t0 = time.time()
open("ready", "w").close()
fd = os.open("notes.md", os.O_WRONLY | os.O_APPEND)
while time.time() - t0 < 8:
    time.sleep(0.005)
    # The next descriptor is opened before the last one closes: one is
    # always open when the edit looks, and the next open races its walk.
    try:
        nfd = os.open("notes.md", os.O_WRONLY | os.O_APPEND)
    except OSError:
        open("refused", "w").close()
        while not os.path.exists("verdict"):
            time.sleep(0.01)
        if open("verdict").read() == "unheld":
            os.write(fd, b"INJECTED\n")
        os.close(fd)
        sys.exit(0)
    os.close(fd)
    fd = nfd
print("never")
`)
	}()
	waitFor(t, "ready", func() bool { return e.Exists("ready") })
	time.Sleep(300 * time.Millisecond)
	editPolicy(t, e, "\n    - MEMORY.md\n", "\n    - MEMORY.md\n    - notes.md\n")
	waitFor(t, "refused", func() bool { return e.Exists("refused") })
	if e.Exists("refused") {
		verdict := "unheld"
		if st := e.Aerfs("status"); strings.Contains(st.Stdout, "policy held:") && strings.Contains(st.Stdout, "notes.md") {
			verdict = "held"
		}
		if err := os.WriteFile(filepath.Join(e.WS, "verdict"), []byte(verdict), 0o644); err != nil {
			t.Fatal(err)
		}
		if verdict == "unheld" {
			t.Errorf("notes.md was guarded while a WEB session held a plain descriptor of it that the edit did not hold")
		}
	}
	r := <-done
	if got := e.Read("notes.md"); strings.Contains(got, "INJECTED") {
		t.Fatalf("a WEB session wrote the now guarded notes.md through a descriptor it opened around the edit:\n%s\n%s", got, r)
	}
}

// A file made secret while it is open for writing is secret at once: no
// session the policy refuses it to opens it meanwhile, and the edit says
// the descriptor's writes go on undecided (RS-open-reader).
func TestPolicyEditSecretWhileOpenForWriting(t *testing.T) {
	e := newEnv(t, map[string]string{"api.token": "old\n"}).Mount()
	done := make(chan Result, 1)
	go func() {
		done <- e.Owner(`python3 -c '
import os, time
fd = os.open("api.token", os.O_WRONLY | os.O_APPEND)
open("ready", "w").close()
time.sleep(5)
os.write(fd, b"new token\n")
os.close(fd)
'`)
	}()
	waitFor(t, "ready", func() bool { return e.Exists("ready") })
	editPolicy(t, e, "\n    - .netrc\n", "\n    - .netrc\n    - \"*.token\"\n")
	// The writer holds its descriptor for 5 s: secret within 2 s is not held.
	waitClass(t, e, "api.token", "secret", 2*time.Second, "the edit making api.token secret, open for writing, was held or did not take effect")
	if r := e.Sh("WEB", "w", "cat api.token"); strings.Contains(r.Stdout, "old") {
		t.Fatalf("a WEB session read api.token after the edit made it secret: %s", r)
	}
	found := false
	for _, le := range e.Log() {
		found = found || le.Record.Meta.Rule == "RS-open-reader" && strings.Contains(le.Record.Meta.Reason, "api.token (open for writing)")
	}
	if !found {
		t.Fatalf("no RS-open-reader note for api.token open for writing:%s", describe(recordsFor(e.Log(), "policy_load", "", "")))
	}
	expectOK(t, "the owner's writer", <-done)
}
