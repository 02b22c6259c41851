package policy

import "testing"

func TestSymlinkEscapes(t *testing.T) {
	p := Default()
	for _, c := range []struct {
		link, target string
		want         bool
	}{
		{"proj", "node_modules/p", true},                // proj/Makefile is control, node_modules/p/Makefile is not
		{"a/proj", "../node_modules/p", true},           // the same, relative to a subdirectory
		{"run.sh", "/var/tmp/x.sh", true},               // outside the root
		{"run.sh", "../../var/tmp/x.sh", true},          // climbs above the root
		{"a/b", "../../x", true},                        // climbs above the root
		{".venv/bin/python", "/usr/bin/python3", false}, // the system's
		{"node_modules/.bin/tsc", "../typescript/bin/tsc", false},
		{"node_modules/a", "../node_modules/b", false}, // excluded to excluded
		{"docs/current", "v2", false},                  // plain to plain
		{"latest", "docs/v2", false},
		{"link", "", false},
		{"proj", "x/../node_modules/p", true}, // x may be a symlink the kernel climbs out of
		{"docs/current", "./v2/../v3", true},  // the same
		{"docs/current", "../docs/v2", false}, // leading steps climb out of the link's own directory
	} {
		if got := p.SymlinkEscapes(c.link, c.target); got != c.want {
			t.Errorf("SymlinkEscapes(%q, %q) = %v, want %v", c.link, c.target, got, c.want)
		}
	}
}

func TestSymlinkUnguards(t *testing.T) {
	p := Default()
	for _, c := range []struct {
		link, target string
		want         bool
	}{
		{"AGENTS.md", "notes.txt", true},                 // a memory name serving a plain file
		{"CLAUDE.md", "AGENTS.md", false},                // memory to memory: the usual alias
		{"sub/CLAUDE.md", "../AGENTS.md", false},         // the same, from a subdirectory
		{"AGENTS.md", "docs/AGENTS.md", false},           // memory at any depth
		{"MEMORY.md", "/home/u/MEMORY.md", true},         // outside the root
		{"MEMORY.md", "/usr/share/doc/MEMORY.md", true},  // outside the root, even the system's
		{"MEMORY.md", "../MEMORY.md", true},              // climbs above the root
		{"memory", "notes", true},                        // memory/prefs.md would be plain
		{"memory", "memory2", true},                      // the same
		{"memory/sub", "../memory/other", false},         // memory/** to memory/**
		{"memory/x.md", "../notes.txt", true},            // a memory file serving a plain one
		{".claude", "cfg", true},                         // .claude/settings.json would be plain
		{".claude/settings.json", "../notes.json", true}, // control to plain
		{"notes/current", "v2", false},                   // plain to plain
		{"link", "MEMORY.md", false},                     // a plain name may name a guarded file
		{"AGENTS.md", "", true},                          // a FIFO, a socket or a device at a memory name
		{"notes.txt", "", false},                         // at a plain name
		{"node_modules/.bin/tsc", "../typescript/bin/tsc", false},
		{".venv/bin/python", "/usr/bin/python3", false},
		{"CLAUDE.md", "x/../memory/notes.md", true},   // read as text memory/notes.md; followed, whatever x leads to
		{"CLAUDE.md", "./AGENTS.md", false},           // "." steps change nothing
		{"src/CLAUDE.md", "../../ws/AGENTS.md", true}, // climbs above the root
		{"notes/current", "x/../v2", false},           // no guarded name at the link
		{".github", "gh", true},                       // .github/copilot-instructions.md, .github/workflows/x
		{".git/info", "../info2", true},               // .git/info/attributes
		{".git/worktrees", "../lib", true},            // .git/worktrees/x/commondir
		{".git/modules", "../m", true},                // .git/modules/x/config
		{"docs/.github", "../.github", false},         // .github to .github, at any depth
		{"gh", ".github", false},                      // a plain name may name a guarded directory
	} {
		if got := p.SymlinkUnguards(c.link, c.target); got != c.want {
			t.Errorf("SymlinkUnguards(%q, %q) = %v, want %v", c.link, c.target, got, c.want)
		}
	}
}
