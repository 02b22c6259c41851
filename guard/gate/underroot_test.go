package gate

import (
	"os"
	"path/filepath"
	"testing"
)

// underRoot follows an absolute target outside the mount as the kernel
// would, on a real tree: back into the root through an alias of its
// parent, out of it, through a chain, into /proc (the follower's), and
// round a loop.
func TestUnderRoot(t *testing.T) {
	tmp := t.TempDir()
	root := filepath.Join(tmp, "ws")
	for _, d := range []string{root, filepath.Join(tmp, "out")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(tmp, "out", "f"), nil, 0o644)
	for name, target := range map[string]string{
		"alias": tmp,        // the root's parent by another name
		"rel":   "alias/ws", // a relative link to the root, through alias
		"chain": filepath.Join(tmp, "rel"),
		"loopa": filepath.Join(tmp, "loopb"),
		"loopb": filepath.Join(tmp, "loopa"),
	} {
		if err := os.Symlink(target, filepath.Join(tmp, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		abs    string
		in     string
		inside bool
	}{
		{filepath.Join(root, "notes.txt"), "notes.txt", true},
		{filepath.Join(tmp, "alias", "ws", "docs", "a.md"), "docs/a.md", true},
		{filepath.Join(tmp, "chain", "notes.txt"), "notes.txt", true},
		{filepath.Join(tmp, "out", "f"), "", false},
		{filepath.Join(tmp, "missing", "f"), "", false},
		{"/proc/self/cwd/notes.txt", "", true},
		{"/dev/fd/3", "", true},
		{filepath.Join(tmp, "loopa", "x"), "", true},
	} {
		in, inside := underRoot(root, c.abs)
		if in != c.in || inside != c.inside {
			t.Errorf("underRoot(%q) = %q, %v; want %q, %v", c.abs, in, inside, c.in, c.inside)
		}
	}
}
