package txn

import "testing"

func TestIsCommitTemp(t *testing.T) {
	for name, want := range map[string]bool{
		".aerfs-commit-1795332915994843541-3363": true,
		".aerfs-commit-1-2":                      true,
		".aerfs-commit-":                         false,
		".aerfs-commit-12":                       false,
		".aerfs-commit-12-":                      false,
		".aerfs-commit-12-x":                     false,
		".aerfs-commit-notes.md":                 false,
		"aerfs-commit-1-2":                       false,
		"MEMORY.md":                              false,
	} {
		if got := IsCommitTemp(name); got != want {
			t.Errorf("IsCommitTemp(%q) = %v, want %v", name, got, want)
		}
	}
}
