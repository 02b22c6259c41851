package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// A restore computes its plan first. A plan that goes beyond what the owner
// named — it removes a file, or throws away a change the owner made by hand
// in a file the owner did not name — is refused (rule RP-confirm, recorded)
// until the owner confirms it with --yes; --dry-run shows every file, from
// which version to which, and changes nothing; restoring a file the owner
// names needs no confirmation.
func TestRestorePlanBeyondWhatWasNamedNeedsYes(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m0\n", "AGENTS.md": "a0\n"}).Mount()
	expectOK(t, "agent v1", e.Sh("USER", "agent", "echo m1 > MEMORY.md"))
	snap := e.mustAerfs("snapshot", "--label", "before", "--workspace", e.WS)
	id := strings.TrimSuffix(strings.Fields(snap.Stdout)[1], ":")
	expectOK(t, "the owner's own edit", e.Owner("echo 'm2 typed by the owner' > MEMORY.md"))
	expectOK(t, "an agent's new file", e.Sh("USER", "agent", "mkdir -p memory && echo new > memory/new.md"))
	expectOK(t, "an agent's change", e.Sh("USER", "agent", "echo a1 > AGENTS.md"))
	before := e.guardedHashes("MEMORY.md", "AGENTS.md", "memory/new.md")

	r := e.Aerfs("restore", "--snapshot", id)
	if r.Code != 4 || !strings.Contains(r.Stderr, "RP-confirm") {
		t.Fatalf("restore --snapshot whose plan removes a file and the owner's edit: %s, want refused (exit 4, RP-confirm)", r)
	}
	if !e.logHas("verdict", "restore", "deny", "RP-confirm", "") {
		t.Fatal("the refused restore is not recorded with rule RP-confirm")
	}
	if after := e.guardedHashes("MEMORY.md", "AGENTS.md", "memory/new.md"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a refused restore changed files: %v -> %v", before, after)
	}
	for _, want := range []string{"remove  memory/new.md", "needs --yes: removes the file", "needs --yes: throws away 1 change(s) you made yourself"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("the refused plan does not say %q:\n%s", want, r.Stdout)
		}
	}

	dry := e.Aerfs("restore", "--snapshot", id, "--dry-run", "--json")
	expectOK(t, "dry run", dry)
	var plan struct {
		Confirm bool `json:"needs_confirmation"`
		Steps   []struct {
			Path        string `json:"path"`
			Action      string `json:"action"`
			FromVersion int    `json:"from_version"`
			ToVersion   int    `json:"to_version"`
			Beyond      string `json:"beyond"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(dry.Stdout), &plan); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range plan.Steps {
		got[s.Path] = fmt.Sprintf("%s %d->%d beyond=%v", s.Action, s.FromVersion, s.ToVersion, s.Beyond != "")
	}
	want := map[string]string{
		"MEMORY.md":     "change 2->1 beyond=true",
		"AGENTS.md":     "change 1->0 beyond=false",
		"memory/new.md": "remove 1->0 beyond=true",
	}
	if !plan.Confirm || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("dry-run plan %v (needs confirmation %v), want %v", got, plan.Confirm, want)
	}
	if after := e.guardedHashes("MEMORY.md", "AGENTS.md", "memory/new.md"); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("--dry-run changed files")
	}

	expectOK(t, "restore --snapshot --yes", e.Aerfs("restore", "--snapshot", id, "--yes"))
	if e.Read("MEMORY.md") != "m1\n" || e.Read("AGENTS.md") != "a0\n" || e.Exists("memory/new.md") {
		t.Fatalf("after the confirmed restore: MEMORY.md %q AGENTS.md %q new.md %v", e.Read("MEMORY.md"), e.Read("AGENTS.md"), e.Exists("memory/new.md"))
	}
	// A file the owner names: what it asks is exactly what happens.
	expectOK(t, "restore MEMORY.md --to 2", e.Aerfs("restore", "MEMORY.md", "--to", "2"))
	if got := e.Read("MEMORY.md"); got != "m2 typed by the owner\n" {
		t.Fatalf("MEMORY.md = %q", got)
	}
}

// aerfs gc --dry-run lists what it would prune: every blob, with the file
// and the version (as aerfs history numbers it) whose content it is.
func TestGCDryRunListsFilesAndVersions(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m0\n"}).Mount()
	for i := 1; i <= 4; i++ {
		expectOK(t, "write", e.Owner(fmt.Sprintf("echo m%d > MEMORY.md", i)))
	}
	dry := e.Aerfs("gc", "--dry-run", "--keep-last", "2", "--keep-within", "0")
	expectOK(t, "gc --dry-run", dry)
	for _, want := range []string{"would prune 2 stored versions", "MEMORY.md version 1 ", "MEMORY.md version 2 "} {
		if !strings.Contains(dry.Stdout, want) {
			t.Errorf("gc --dry-run does not list %q:\n%s", want, dry.Stdout)
		}
	}
	if strings.Contains(dry.Stdout, "MEMORY.md version 3") {
		t.Errorf("gc --dry-run lists a kept version:\n%s", dry.Stdout)
	}
	if n := len(e.records("gc", "")); n != 0 {
		t.Fatalf("gc --dry-run recorded %d gc records", n)
	}
}

// A directory named as poisoned names none of its files one by one: a plan
// that would remove them (they were created through the mount, so before
// their first version they were absent) waits for --yes; a file named
// as poisoned is taken back without it.
func TestRestoreContaminatedByDirectoryNeedsYesToRemoveItsFiles(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m0\n"}).Mount()
	expectOK(t, "the owner's notes", e.Owner("mkdir -p memory && echo a > memory/a.md && echo b > memory/b.md"))
	expectOK(t, "the agent reads one and writes memory", e.Sh("USER", "agent", "cat memory/a.md >/dev/null; echo from-a >> MEMORY.md"))
	r := e.Aerfs("restore", "--contaminated-by", "memory")
	if r.Code != 4 || !strings.Contains(r.Stderr, "RP-confirm") {
		t.Fatalf("restore --contaminated-by a directory whose plan removes its files: %s, want refused (RP-confirm)", r)
	}
	if !e.Exists("memory/a.md") || !e.Exists("memory/b.md") || e.Read("MEMORY.md") != "m0\nfrom-a\n" {
		t.Fatal("a refused restore changed files")
	}
	expectOK(t, "restore --contaminated-by the file", e.Aerfs("restore", "--contaminated-by", "memory/a.md"))
	if e.Exists("memory/a.md") || !e.Exists("memory/b.md") || e.Read("MEMORY.md") != "m0\n" {
		t.Fatalf("after restoring what memory/a.md led to: a %v b %v MEMORY.md %q", e.Exists("memory/a.md"), e.Exists("memory/b.md"), e.Read("MEMORY.md"))
	}
}
