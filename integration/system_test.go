package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// unitLine returns the command of key= in the systemd unit, with the
// unit's specifiers and variables filled in as systemd would for this
// workspace.
func unitLine(t *testing.T, unit, key string, e *Env) []string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(unit))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, key+"=") {
			continue
		}
		var argv []string
		for _, f := range strings.Fields(strings.TrimPrefix(line, key+"=")) {
			switch f {
			case "@BINDIR@/aerfs":
				argv = append(argv, aerfsBin)
			case "$AERFS_FLAGS":
				// From /etc/aerfs/<instance>.env: the flags the README
				// says to put there.
				argv = append(argv, "--state", e.State, "--no-passthrough", "--metrics-addr", "127.0.0.1:0", "--log-max-size", "1048576", "--log-keep", "2")
			case "$AERFS_UNMOUNT_FLAGS":
				// The stop command's own flags (none needed).
			case "%f":
				argv = append(argv, e.WS)
			default:
				if strings.ContainsAny(f, "%$@") {
					t.Fatalf("%s has %q, which this test does not know how to fill in", key, f)
				}
				argv = append(argv, f)
			}
		}
		return argv
	}
	t.Fatalf("the unit has no %s line", key)
	return nil
}

// The systemd unit's ExecStart serves the workspace in the foreground with
// JSON log lines on stderr (for journald); its ExecStop unmounts, after
// which the daemon records the unmount and exits 0 by itself.
func TestSystemdUnitStartsAndStops(t *testing.T) {
	b, err := os.ReadFile("../configs/aerfs@.service")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"})
	start := unitLine(t, string(b), "ExecStart", e)
	stop := unitLine(t, string(b), "ExecStop", e)

	if !regexp.MustCompile(`(?m)^Type=notify$`).Match(b) || !regexp.MustCompile(`(?m)^NotifyAccess=main$`).Match(b) {
		t.Fatalf("the unit must be Type=notify (started only once the mount serves), NotifyAccess=main")
	}
	// systemd's side of sd_notify: a datagram socket named by NOTIFY_SOCKET.
	sock := filepath.Join(t.TempDir(), "notify")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	cmd := exec.Command(start[0], start[1:]...)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(e.Unmount)
	notify.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 4096)
	n, err := notify.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "READY=1") {
		t.Fatalf("no READY=1 from ExecStart within 30 s: %q %v\nstderr:\n%s", buf[:n], err, stderr.String())
	}
	// Ready means serving: the mount answers at once.
	if !e.Mounted() {
		t.Fatalf("READY=1 sent before the workspace was mounted")
	}
	expectOK(t, "owner write through the unit's mount", e.Owner("echo more >> MEMORY.md"))

	expectOK(t, "ExecStop", runCmd("/", nil, stop[0], stop[1:]...))
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ExecStart's process ended with %v\nstderr:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("ExecStart's process still runs 20 s after ExecStop")
	}
	if e.Mounted() {
		t.Fatal("still mounted after ExecStop")
	}
	// Every stderr line the daemon wrote is one JSON object (journald
	// keeps them as they are).
	n = 0
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue // the CLI's own "aerfs: …" lines
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("stderr line is not JSON: %q", line)
		}
		n++
	}
	if n == 0 {
		t.Errorf("no JSON log lines on stderr:\n%s", stderr.String())
	}
}

// installMountHelper puts configs/mount.fuse.aerfs where mount(8) looks for
// it (/sbin), pointing at the binary under test, for the test's duration.
func installMountHelper(t *testing.T) {
	t.Helper()
	src, err := os.ReadFile("../configs/mount.fuse.aerfs")
	if err != nil {
		t.Fatal(err)
	}
	dst := "/sbin/mount.fuse.aerfs"
	old, oldErr := os.ReadFile(dst)
	helper := strings.ReplaceAll(string(src), "@BINDIR@", filepath.Dir(aerfsBin))
	if err := os.WriteFile(dst, []byte(helper), 0o755); err != nil {
		t.Fatalf("installing the mount helper: %v", err)
	}
	t.Cleanup(func() {
		if oldErr == nil {
			os.WriteFile(dst, old, 0o755)
		} else {
			os.Remove(dst)
		}
	})
}

// mount -t fuse.aerfs and an fstab line mount a workspace through the
// mount.fuse.aerfs helper; an unknown option is refused with a hint.
func TestMountTypeFuseAerfs(t *testing.T) {
	installMountHelper(t)
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"})
	t.Cleanup(e.Unmount)
	expectOK(t, "mount -t fuse.aerfs", runCmd("/", nil, "mount", "-t", "fuse.aerfs", "-o", "defaults,nofail", e.State, e.WS))
	if !e.Mounted() {
		t.Fatal("mount -t fuse.aerfs did not mount")
	}
	expectOK(t, "owner write", e.Owner("echo more >> MEMORY.md"))
	e.Unmount()

	fstab := filepath.Join(t.TempDir(), "fstab")
	line := e.State + " " + e.WS + " fuse.aerfs defaults,no_passthrough,_netdev 0 0\n"
	if err := os.WriteFile(fstab, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	expectOK(t, "mount from an fstab line", runCmd("/", nil, "mount", "-T", fstab, e.WS))
	if !e.Mounted() {
		t.Fatal("the fstab line did not mount")
	}
	e.Unmount()

	r := runCmd("/", nil, "mount", "-t", "fuse.aerfs", "-o", "bogus", e.State, e.WS)
	if r.Code == 0 || !strings.Contains(r.Stderr, "unknown mount option 'bogus'") || !strings.Contains(r.Stderr, "hint:") {
		t.Fatalf("an unknown option should be refused with a hint: %s", r)
	}
	if e.Mounted() {
		t.Fatal("mounted despite an unknown option")
	}
}

// daemon.log holds only JSON lines — among them the mounted line with the
// version and the unmounted line — and the rotation flags reach the daemon.
func TestDaemonLogJSONOnly(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"})
	e.Mount("--log-max-size=100000", "--log-keep=2", "--debug")
	expectOK(t, "owner write", e.Owner("echo more >> MEMORY.md"))
	expectFail(t, "WEB write", e.Sh("WEB", "w", "echo x >> MEMORY.md"))
	var mountDetail string
	for _, le := range e.Log() {
		if le.Record.Type == "mount" && le.Record.Payload != nil {
			mountDetail = le.Record.Payload.Detail
		}
	}
	if !strings.HasPrefix(mountDetail, "aerfs ") {
		t.Errorf("the mount record does not carry the version: %q", mountDetail)
	}
	e.Unmount()
	b, err := os.ReadFile(filepath.Join(e.State, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	events := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var v struct {
			Event, Version string
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("daemon.log has a line that is not JSON: %q", line)
		}
		events[v.Event] = true
		if v.Event == "mounted" && v.Version == "" {
			t.Errorf("mounted line without a version: %s", line)
		}
	}
	if !events["mounted"] || !events["unmounted"] {
		t.Errorf("daemon.log lacks the mounted/unmounted lines:\n%s", b)
	}
	// --debug's request log went to daemon.stderr, not into the JSON log.
	if st, err := os.ReadFile(filepath.Join(e.State, "daemon.stderr")); err != nil || !strings.Contains(string(st), "LOOKUP") {
		t.Errorf("daemon.stderr should hold go-fuse's request log: %v", err)
	}
}

// aerfs version, run in a mount, also names the daemon's version and the
// FUSE protocol the kernel offered it.
func TestVersionInAMount(t *testing.T) {
	e := newEnv(t, nil).Mount()
	r := runCmd(e.WS, nil, aerfsBin, "version")
	expectOK(t, "version", r)
	for _, want := range []string{"go-fuse  v2.", "kernel FUSE protocol 7."} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("aerfs version lacks %q:\n%s", want, r.Stdout)
		}
	}
}

// A workspace never initialised is a usage error whose hint names aerfs
// init — from aerfs mount, with a --state that does not exist, and from
// mount -t fuse.aerfs (it printed a raw lstat error and exited 4, the code
// of a policy refusal).
func TestMountNotInitialisedSaysRunInit(t *testing.T) {
	installMountHelper(t)
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	nostate := filepath.Join(t.TempDir(), "nonexistent")
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"aerfs mount", []string{aerfsBin, "mount", ws}},
		{"aerfs mount --state", []string{aerfsBin, "mount", "--state", nostate, ws}},
		{"mount -t fuse.aerfs", []string{"mount", "-t", "fuse.aerfs", nostate, ws}},
	} {
		r := runCmd("/", nil, c.argv[0], c.argv[1:]...)
		if r.Code == 0 {
			syscall.Unmount(ws, syscall.MNT_DETACH)
			t.Fatalf("%s of a workspace never initialised succeeded", c.name)
		}
		if c.argv[0] == aerfsBin && r.Code != 2 {
			t.Errorf("%s: exit %d, want 2 (usage)", c.name, r.Code)
		}
		if !strings.Contains(r.Stderr, "aerfs: "+ws+" is not initialised") || !strings.Contains(r.Stderr, "hint: run: aerfs init ") ||
			strings.Contains(r.Stderr, "lstat") {
			t.Errorf("%s: want 'is not initialised' and a hint naming aerfs init:\n%s", c.name, r.Stderr)
		}
	}
}

// make install puts the binary, the mount helper, the unit, the man pages
// (sections 1, 5 and 8) and the completions in place under DESTDIR, and
// make uninstall removes every one of them.
func TestMakeInstallAndUninstall(t *testing.T) {
	dest := t.TempDir()
	expectOK(t, "make install", runCmd("..", nil, "make", "--no-print-directory", "install", "DESTDIR="+dest))
	var installed []string
	filepath.Walk(dest, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			installed = append(installed, strings.TrimPrefix(p, dest))
		}
		return nil
	})
	for _, want := range []string{"/usr/local/bin/aerfs", "/sbin/mount.fuse.aerfs", "/etc/systemd/system/aerfs@.service",
		"/usr/local/share/man/man1/aerfs.1", "/usr/local/share/man/man1/aerfs-run.1", "/usr/local/share/man/man5/aerfs-policy.5",
		"/usr/local/share/man/man8/mount.fuse.aerfs.8", "/usr/local/share/bash-completion/completions/aerfs"} {
		if !slices.Contains(installed, want) {
			t.Errorf("make install did not install %s", want)
		}
	}
	expectOK(t, "make uninstall", runCmd("..", nil, "make", "--no-print-directory", "uninstall", "DESTDIR="+dest))
	filepath.Walk(dest, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			t.Errorf("make uninstall left %s", strings.TrimPrefix(p, dest))
		}
		return nil
	})
}

// Mounting a workspace that is already mounted says so and how to see and
// undo it (the hint pointed at daemon.log, which is root's and said
// nothing more).
func TestMountTwiceSaysAlreadyMounted(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount()
	r := e.Aerfs("mount", "--state", e.State, e.WS)
	if r.Code == 0 || !strings.Contains(r.Stderr, "aerfs: "+e.WS+" is already mounted") ||
		!strings.Contains(r.Stderr, "hint: aerfs status --workspace "+e.WS) || strings.Contains(r.Stderr, "daemon.log") {
		t.Fatalf("second mount: %s", r)
	}
	expectOK(t, "the first mount still serves", e.Owner("echo more >> MEMORY.md"))
}

// The warnings aerfs mount prints name directories a session may have
// named: escape sequences reach the owner's terminal escaped, and a name
// with a newline stays on its line (it could otherwise read as "ready" on
// the pipe between the daemon and the waiting mount command).
func TestMountWarningsEscapeSessionNames(t *testing.T) {
	e := newEnv(t, map[string]string{"MEMORY.md": "m\n"}).Mount()
	expectOK(t, "a WEB session names a directory", e.Sh("WEB", "w",
		`n=$(printf 'x\033]0;PWNED\007\033[2J\nready\nwarn fake'); mkdir -p "logs/$n"`))
	e.Unmount()
	dirs, _ := filepath.Glob(filepath.Join(e.WS, "logs", "x*"))
	if len(dirs) != 1 {
		t.Fatalf("the session's directory: %v", dirs)
	}
	holder := exec.Command("sleep", "30")
	holder.Dir = dirs[0]
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	r := e.Aerfs("mount", "--state", e.State, e.WS)
	expectOK(t, "mount", r)
	if strings.ContainsAny(r.Stderr, "\x1b\x07") {
		t.Fatalf("raw escape sequences in aerfs mount's output: %q", r.Stderr)
	}
	warnings := 0
	for _, l := range strings.Split(strings.TrimSpace(r.Stderr), "\n") {
		if !strings.HasPrefix(l, "aerfs: ") {
			t.Errorf("a line of its own from a session's name: %q", l)
		}
		if strings.Contains(l, "has its working directory in "+filepath.Join(e.WS, "logs")) {
			warnings++
		}
	}
	if warnings != 1 {
		t.Fatalf("want one warning for the process in the directory:\n%s", r.Stderr)
	}
}
