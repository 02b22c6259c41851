package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMain runs the confined half of TestApply in a child process: the
// restrictions cannot be lifted once applied.
func TestMain(m *testing.M) {
	if ws := os.Getenv("SANDBOX_TEST_WS"); ws != "" {
		os.Exit(confinedChild(ws, os.Getenv("SANDBOX_TEST_OUT"), os.Getenv("SANDBOX_TEST_HIDDEN")))
	}
	os.Exit(m.Run())
}

func confinedChild(ws, out, hidden string) int {
	runtime.LockOSThread()
	r, err := Apply(Config{Workspace: ws, Hidden: []string{hidden}})
	if err != nil {
		println("apply:", err.Error())
		return 2
	}
	fail := func(what string, err error) int { println(what, err); return 3 }
	if err := os.WriteFile(filepath.Join(ws, "ok"), []byte("x"), 0o644); err != nil {
		return fail("write in workspace:", err)
	}
	if !r.Landlock {
		return 0
	}
	if err := os.WriteFile(out, []byte("x"), 0o644); !errors.Is(err, unix.EACCES) {
		return fail("write outside: want EACCES, got", err)
	}
	if _, err := os.ReadFile(filepath.Join(hidden, "secret")); !errors.Is(err, unix.EACCES) {
		return fail("read hidden: want EACCES, got", err)
	}
	if _, err := os.ReadFile("/etc/hostname"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fail("read /etc/hostname:", err)
	}
	if err := unix.Unshare(unix.CLONE_NEWUSER); !errors.Is(err, unix.EPERM) {
		return fail("unshare: want EPERM, got", err)
	}
	if _, err := unix.PidfdGetfd(0, 0, 0); !errors.Is(err, unix.EPERM) {
		return fail("pidfd_getfd: want EPERM, got", err)
	}
	if _, err := unix.Socket(unix.AF_UNIX, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); !errors.Is(err, unix.EPERM) {
		return fail("socket(AF_UNIX, SOCK_RAW): want EPERM, got", err)
	}
	if _, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0); !errors.Is(err, unix.EAFNOSUPPORT) {
		return fail("socket(AF_VSOCK): want EAFNOSUPPORT, got", err)
	}
	if _, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_GENERIC); !errors.Is(err, unix.EPROTONOSUPPORT) {
		return fail("socket(AF_NETLINK, NETLINK_GENERIC): want EPROTONOSUPPORT, got", err)
	}
	for _, f := range [][3]int{{unix.AF_UNIX, unix.SOCK_STREAM, 0}, {unix.AF_INET6, unix.SOCK_DGRAM, 0}, {unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE}} {
		fd, err := unix.Socket(f[0], f[1], f[2])
		if err != nil {
			return fail("socket of an allowed family:", err)
		}
		unix.Close(fd)
	}
	return 0
}

func TestApply(t *testing.T) {
	if LandlockABI() == 0 {
		t.Log("Landlock unavailable: only seccomp is checked")
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	hidden := filepath.Join(dir, "state")
	os.Mkdir(ws, 0o755)
	os.Mkdir(hidden, 0o755)
	os.WriteFile(filepath.Join(hidden, "secret"), []byte("s"), 0o644)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "SANDBOX_TEST_WS="+ws, "SANDBOX_TEST_OUT="+filepath.Join(dir, "out"), "SANDBOX_TEST_HIDDEN="+hidden)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("confined child: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "ok")); err != nil {
		t.Fatal(err)
	}
}

func TestFilterLinks(t *testing.T) {
	p, err := Filter()
	if err != nil {
		t.Fatal(err)
	}
	if len(p) > 200 {
		t.Fatalf("filter has %d instructions", len(p))
	}
}

func TestSocketDirs(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"tmux-0", "plain", "ssh-x"} {
		os.Mkdir(filepath.Join(dir, d), 0o700)
	}
	os.WriteFile(filepath.Join(dir, "plain", "f"), nil, 0o600)
	for _, s := range []string{"tmux-0/default", "ssh-x/agent.1"} {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: filepath.Join(dir, s)}); err != nil {
			t.Fatal(err)
		}
	}
	got := socketDirs(dir, os.Getuid())
	want := []string{filepath.Join(dir, "ssh-x"), filepath.Join(dir, "tmux-0")}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("socketDirs = %q, want %q", got, want)
	}
	if len(socketDirs(dir, os.Getuid()+1)) != 0 {
		t.Errorf("another uid's socket directories are listed")
	}
}
