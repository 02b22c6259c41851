//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	fm "github.com/aerfs/aerfs/e2e/fakemodel"
)

// TestControl runs the clean scenario's work, and git status, on a plain
// directory without aerfs: it shows that the client, its setup and the
// scripted model do the work, so that a scenario failing on the mount is
// aerfs's doing.
func TestControl(t *testing.T) {
	for _, c := range clients {
		c := c
		t.Run(c.name, func(t *testing.T) {
			c.require(t)
			dir := t.TempDir()
			for _, f := range []string{"MEMORY.md", c.memory} {
				os.WriteFile(filepath.Join(dir, f), []byte(memOld), 0o644)
			}
			note := "# Notes\nThe owner prefers short commits.\n"
			steps := []fm.Step{
				{Kind: fm.Read, Path: "MEMORY.md"},
				{Kind: fm.Edit, Path: "MEMORY.md", Old: "- the build runs with make\n", New: "- the build runs with make\n- tests need root\n"},
				{Kind: fm.Write, Path: "memory/notes.md", Content: note},
				{Kind: fm.Shell, Command: "git init -q && git status --short && git status"},
				{Kind: fm.Final, Text: "CONTROL-DONE"},
			}
			r := runClient(t, c, dir, "", "", "Update the memory.", steps)
			p := clientOK(c, r, "CONTROL-DONE")
			if b, _ := os.ReadFile(filepath.Join(dir, "MEMORY.md")); string(b) != memNew {
				p = append(p, fmt.Sprintf("MEMORY.md is %q", b))
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "memory/notes.md")); string(b) != note {
				p = append(p, fmt.Sprintf("memory/notes.md is %q", b))
			}
			if _, err := os.Stat(filepath.Join(dir, ".git/index.lock")); err == nil {
				p = append(p, "stale .git/index.lock")
			}
			report(t, c.name, "control (plain dir)", "the same work without aerfs succeeds", p, fmt.Sprintf("exit %d, %d turns", r.code, r.turns))
		})
	}
}
