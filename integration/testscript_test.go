package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// mountNamed mounts a plain go-fuse loopback at mnt under a file system
// name of our choosing (its type in the mount table is fuse.<name>).
func mountNamed(t *testing.T, mnt, name string) {
	t.Helper()
	root, err := gofs.NewLoopbackRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := gofs.Mount(mnt, root, &gofs.Options{
		MountOptions: fuse.MountOptions{Name: name, DirectMount: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 20; i++ {
			if srv.Unmount() == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("unmount of %s failed", mnt)
	})
}

// make test's leftover check answers only for mounts under its own run
// directory: FUSE mounts elsewhere on the machine — an aerfs workspace, the
// benchmark's aerfs-loopback — never fail it, and a mount it left under its
// directory always does.
func TestLeftoverCheckMindsOnlyItsRun(t *testing.T) {
	script, err := filepath.Abs("../scripts/leftover-mounts.sh")
	if err != nil {
		t.Fatal(err)
	}
	runDir := t.TempDir()
	elsewhere := t.TempDir()
	for _, name := range []string{"aerfs", "aerfs-loopback"} {
		mnt := filepath.Join(elsewhere, name)
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		mountNamed(t, mnt, name)
	}
	// A sibling whose name starts like the run directory is not inside it.
	lookalike := runDir + "-other"
	if err := os.Mkdir(lookalike, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(lookalike) })
	mountNamed(t, lookalike, "aerfs")

	out, err := exec.Command("bash", script, runDir).CombinedOutput()
	if err != nil {
		t.Fatalf("leftover check failed with only unrelated FUSE mounts present: %v\n%s", err, out)
	}

	mine := filepath.Join(runDir, "ws")
	if err := os.Mkdir(mine, 0o755); err != nil {
		t.Fatal(err)
	}
	mountNamed(t, mine, "aerfs")
	out, err = exec.Command("bash", script, runDir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), mine) || strings.Contains(string(out), elsewhere) || strings.Contains(string(out), lookalike) {
		t.Fatalf("leftover check should name exactly %s and fail; err=%v, output:\n%s", mine, err, out)
	}
}
