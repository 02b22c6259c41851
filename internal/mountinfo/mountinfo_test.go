package mountinfo

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParse(t *testing.T) {
	in := `22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
41 22 0:52 / /home/o/my\040ws rw,nosuid,nodev,relatime - fuse.aerfs /home/o/.local/state/aerfs/ws rw,user_id=0,group_id=0
broken line
43 22 0:53 / /tmp rw - tmpfs tmpfs rw
`
	ms := Parse([]byte(in))
	if len(ms) != 3 {
		t.Fatalf("got %d mounts: %+v", len(ms), ms)
	}
	m := ms[1]
	if m.ID != 41 || m.Parent != 22 || m.Major != 0 || m.Minor != 52 || m.Point != "/home/o/my ws" ||
		m.FSType != "fuse.aerfs" || m.Source != "/home/o/.local/state/aerfs/ws" || len(m.Optional) != 0 {
		t.Errorf("fuse line: %+v", m)
	}
	if len(ms[0].Optional) != 1 || ms[0].Optional[0] != "shared:1" {
		t.Errorf("optional fields: %+v", ms[0])
	}
	if Unescape(`a\134b\011`) != "a\\b\t" {
		t.Errorf("unescape: %q", Unescape(`a\134b\011`))
	}
	if !Within("/a/b", "/a") || Within("/ab", "/a") || !Within("/x", "/") {
		t.Errorf("Within")
	}
}

// A mount that stays mounted is found exactly once in every read, while
// other mounts come and go beside it as fast as the kernel allows.
func TestSelfWhileMountsChurn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	stable := filepath.Join(dir, "stable")
	os.Mkdir(stable, 0o755)
	if err := unix.Mount("tmpfs", stable, "tmpfs", 0, ""); err != nil {
		t.Skipf("cannot mount tmpfs: %v", err)
	}
	defer unix.Unmount(stable, unix.MNT_DETACH)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		d := filepath.Join(dir, "churn"+strconv.Itoa(i))
		os.Mkdir(d, 0o755)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if unix.Mount("tmpfs", d, "tmpfs", 0, "") == nil {
					unix.Unmount(d, unix.MNT_DETACH)
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for i := 0; i < 2000; i++ {
		ms, err := Self()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range ms {
			if m.Point == stable {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("read %d: the stable mount appears %d times", i, n)
		}
	}
}
