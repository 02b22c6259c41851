package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's Layout section names every package directory of the
// module (the e2e tests' included), so that a reader finds each one.
func TestReadmeLayoutNamesEveryPackage(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no Layout section")
	}
	_, block, _ := strings.Cut(after, "```\n")
	block, _, _ = strings.Cut(block, "```")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "list", "-tags", "e2e", "-f", "{{.Dir}}", mod[:len(mod)-1]+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	listed := map[string]bool{}
	for _, l := range strings.Split(block, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			listed[strings.TrimSuffix(f[0], "/")] = true
		}
	}
	n := 0
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil || rel == "." {
			continue
		}
		n++
		if !listed[filepath.ToSlash(rel)] {
			t.Errorf("README.md's Layout does not name %s/", rel)
		}
	}
	if n < 20 {
		t.Fatalf("go list found %d packages: %s", n, out)
	}
}
