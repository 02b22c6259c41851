package snapshot

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering keeps the package free of FUSE and of the daemon's parts:
// the read-only commands and the daemon both build on it.
func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"github.com/hanwen/go-fuse", "github.com/aerfs/aerfs/fs", "github.com/aerfs/aerfs/daemon", "github.com/aerfs/aerfs/principal"} {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("snapshot depends on %s", dep)
			}
		}
	}
}
