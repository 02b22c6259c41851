package integration

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/hanwen/go-fuse/v2/posixtest"
)

// skipPosix lists posixtest cases that fail on the plain go-fuse loopback
// too, with the reason; they are skipped on both mounts alike.
var skipPosix = map[string]string{
	// Both opens come from one process. POSIX locks of one process never
	// conflict, so the kernel-local locking of a mount without EnableLocks
	// (aerfs's and the loopback's) grants the second lock. go-fuse's own
	// suite runs this case with server-side OFD locks.
	"FcntlFlockLocksFile": "same-process POSIX locks do not conflict without server-side locking",
}

// TestPosix runs go-fuse's own POSIX suite on plain paths of an aerfs
// mount, and on a plain go-fuse loopback mounted with the same options, in
// the same run. Each test must behave the same on both.
func TestPosix(t *testing.T) {
	names := make([]string, 0, len(posixtest.All))
	for n := range posixtest.All {
		names = append(names, n)
	}
	sort.Strings(names)

	t.Run("loopback", func(t *testing.T) {
		for _, name := range names {
			fn := posixtest.All[name]
			t.Run(name, func(t *testing.T) {
				if why, ok := skipPosix[name]; ok {
					t.Skip(why)
				}
				mnt := mountLoopback(t)
				fn(t, mnt)
			})
		}
	})
	t.Run("aerfs", func(t *testing.T) {
		e := newEnv(t, map[string]string{"SOUL.md": "soul\n", "MEMORY.md": "memory\n"}).Mount()
		for _, name := range names {
			fn := posixtest.All[name]
			t.Run(name, func(t *testing.T) {
				if why, ok := skipPosix[name]; ok {
					t.Skip(why)
				}
				dir := filepath.Join(e.WS, "posix-"+name)
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				fn(t, dir)
			})
		}
	})
}

// mountLoopback mounts a plain go-fuse loopback of a fresh directory with
// the options aerfs uses (fs/mount.go).
func mountLoopback(t *testing.T) string {
	t.Helper()
	orig := t.TempDir()
	mnt := t.TempDir()
	root, err := gofs.NewLoopbackRoot(orig)
	if err != nil {
		t.Fatal(err)
	}
	sec := time.Second
	var zero time.Duration
	srv, err := gofs.Mount(mnt, root, &gofs.Options{
		EntryTimeout: &sec, AttrTimeout: &sec, NegativeTimeout: &zero, NullPermissions: true,
		MountOptions: fuse.MountOptions{AllowOther: true, Options: []string{"default_permissions"},
			Name: "loopback", DirectMount: true},
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
		t.Errorf("loopback unmount failed")
	})
	return mnt
}
