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
	} {
		if got := p.SymlinkEscapes(c.link, c.target); got != c.want {
			t.Errorf("SymlinkEscapes(%q, %q) = %v, want %v", c.link, c.target, got, c.want)
		}
	}
}
