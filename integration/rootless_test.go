package integration

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// rootlessUser returns an unprivileged user for the test (created once)
// and a directory in its home that the test removes afterwards.
func rootlessUser(t *testing.T) (u *user.User, home string) {
	t.Helper()
	const name = "aerfs-it-owner"
	u, err := user.Lookup(name)
	if err != nil {
		if out, err := exec.Command("useradd", "--create-home", "--shell", "/bin/sh", name).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v\n%s", err, out)
		}
		if u, err = user.Lookup(name); err != nil {
			t.Fatal(err)
		}
	}
	home, err = os.MkdirTemp(u.HomeDir, "it-")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	return u, home
}

// publicBinary copies the aerfs under test where any user can run it.
func publicBinary(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "aerfs-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	b, err := os.ReadFile(aerfsBin)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "aerfs")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// mountRootless is a workspace ws (with MEMORY.md) initialised and
// mounted by the unprivileged owner u with the aerfs binary bin, its state
// in state; unmounted at the end.
func mountRootless(t *testing.T) (u *user.User, bin, ws, state string) {
	t.Helper()
	u, home := rootlessUser(t)
	bin = publicBinary(t)
	ws, state = filepath.Join(home, "ws"), filepath.Join(home, "state")
	envsMu.Lock()
	envs[ws] = true
	envsMu.Unlock()
	fi, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	mode := fi.Mode().Perm()
	os.Chmod("/dev/fuse", 0o666)
	t.Cleanup(func() { os.Chmod("/dev/fuse", mode) })
	expectOK(t, "init as the owner", asUser(u, home, fmt.Sprintf("mkdir ws && echo '# MEMORY' > ws/MEMORY.md && %s init --state %s %s", bin, state, ws)))
	expectOK(t, "rootless mount", asUser(u, home, fmt.Sprintf("%s mount --state %s %s", bin, state, ws)))
	t.Cleanup(func() {
		if (&Env{WS: ws}).Mounted() {
			asUser(u, "/", bin+" unmount "+ws)
		}
	})
	return u, bin, ws, state
}

// asUser runs a shell script as u, in dir.
func asUser(u *user.User, dir, script string) Result {
	return runCmd(dir, []string{"HOME=" + u.HomeDir, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		"setpriv", "--reuid="+u.Uid, "--regid="+u.Gid, "--init-groups", "--", "sh", "-c", script)
}

// An unprivileged owner mounts, works in and unmounts a workspace without
// allow_other (so without user_allow_other in /etc/fuse.conf), and when a
// piece is missing the error names it with the fix.
func TestRootlessMountAndUnmount(t *testing.T) {
	u, home := rootlessUser(t)
	bin := publicBinary(t)
	ws, state := filepath.Join(home, "ws"), filepath.Join(home, "state")
	envsMu.Lock()
	envs[ws] = true
	envsMu.Unlock()

	fi, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	mode := fi.Mode().Perm()
	t.Cleanup(func() { os.Chmod("/dev/fuse", mode) })

	init := fmt.Sprintf("mkdir ws && echo '# MEMORY' > ws/MEMORY.md && %s init --state %s %s", bin, state, ws)
	expectOK(t, "init as the owner", asUser(u, home, init))

	// /dev/fuse closed to the user: the mount names it.
	os.Chmod("/dev/fuse", 0o600)
	r := asUser(u, home, fmt.Sprintf("%s mount --state %s %s", bin, state, ws))
	if r.Code == 0 || !strings.Contains(r.Stderr, "/dev/fuse is not readable and writable") || !strings.Contains(r.Stderr, "hint: as root: chmod 0666 /dev/fuse") {
		t.Fatalf("want an error naming /dev/fuse and its fix: %s", r)
	}

	os.Chmod("/dev/fuse", 0o666)
	expectOK(t, "rootless mount", asUser(u, home, fmt.Sprintf("%s mount --state %s %s", bin, state, ws)))
	t.Cleanup(func() {
		if (&Env{WS: ws}).Mounted() {
			asUser(u, "/", bin+" unmount "+ws)
		}
	})
	// Root itself is not let in: the mount is the owner's alone.
	if _, err := os.Stat(filepath.Join(ws, "MEMORY.md")); err == nil {
		t.Errorf("root could use an unprivileged mount made without allow_other")
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == ws {
			if strings.Contains(line, "allow_other") {
				t.Errorf("an unprivileged mount asked for allow_other: %s", line)
			}
			if !strings.Contains(line, "user_id="+u.Uid) {
				t.Errorf("mount is not the user's: %s", line)
			}
		}
	}
	expectOK(t, "owner's memory edit", asUser(u, "/", "cd "+ws+" && echo '- rootless works' >> MEMORY.md"))
	r = asUser(u, "/", "cat "+ws+"/MEMORY.md")
	if !strings.Contains(r.Stdout, "- rootless works") {
		t.Fatalf("edit missing: %s", r)
	}
	r = asUser(u, "/", fmt.Sprintf("%s log --json --state %s --workspace %s", bin, state, ws))
	expectOK(t, "aerfs log as the owner", r)
	if !strings.Contains(r.Stdout, `"path":"MEMORY.md"`) {
		t.Fatalf("the commit is not in the log: %s", r)
	}
	expectOK(t, "aerfs unmount as the owner", asUser(u, "/", fmt.Sprintf("%s unmount %s", bin, ws)))
	if (&Env{WS: ws}).Mounted() {
		t.Fatal("still mounted after aerfs unmount")
	}
}
