package integration

// What a confined session keeps of the host beyond files: capabilities
// and the owner's services over path sockets (docs/confinement.md).

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// capLines returns the Cap* lines of a /proc/<pid>/status text.
func capLines(status string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.HasPrefix(k, "Cap") {
			m[k] = strings.TrimSpace(v)
		}
	}
	return m
}

// With a root owner (the workspace is root's), a confined session is uid 0
// in its user namespace without a single capability: every set empty and
// the securebits locked, so that no execve gives any back. aerfs status
// shows the sets from /proc.
func TestConfineNoCapabilities(t *testing.T) {
	e := newEnv(t, map[string]string{"README": "hi\n"}).Mount()
	r := e.Sh("USER", "caps", `grep ^Cap /proc/self/status; id -u
/usr/bin/python3 -c 'import ctypes; print("securebits", ctypes.CDLL(None).prctl(27, 0, 0, 0, 0))'`)
	expectOK(t, "confined session", r)
	t.Logf("%s", r.Stdout)
	caps := capLines(r.Stdout)
	for _, k := range []string{"CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"} {
		if caps[k] != "0000000000000000" {
			t.Errorf("%s in a confined session of a root owner: %q", k, caps[k])
		}
	}
	// NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE and
	// their locks: 0xef.
	if !strings.Contains(r.Stdout, "securebits 239") {
		t.Errorf("securebits not locked: %s", r.Stdout)
	}
	// The same session's process, seen by aerfs status.
	done := make(chan Result, 1)
	go func() { done <- e.Sh("USER", "caps-live", "sleep 3") }()
	var status string
	for i := 0; i < 50; i++ {
		status = e.Aerfs("status", "--verbose").Stdout
		if strings.Contains(status, "CapEff=0 CapPrm=0 CapBnd=0") {
			break
		}
		runCmd("/", nil, "sleep", "0.1")
	}
	<-done
	if !strings.Contains(status, "CapEff=0 CapPrm=0 CapBnd=0") || !strings.Contains(status, "no capabilities") {
		t.Errorf("aerfs status does not show the empty capability sets:\n%s", status)
	}
	// --sandbox=off keeps root's capabilities, as asked.
	r = e.sessionOf("USER", "caps-off", true, "grep ^CapEff /proc/self/status")
	if strings.Contains(r.Stdout, "0000000000000000") {
		t.Errorf("an unconfined root session lost its capabilities: %s", r.Stdout)
	}
}

// svcScript is an owner's service on a path socket that runs the line it
// is sent (as an editor's or a runtime's socket would, one way or another)
// and counts its connections in COUNT.
const svcScript = `
import socket, subprocess, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(64)
n = 0
while True:
    c, _ = s.accept(); n += 1
    open(sys.argv[2], "w").write(str(n))
    line = c.makefile().readline().strip()
    if line:
        subprocess.run(line, shell=True)
    c.close()
`

// startOwnerService runs argv as the owner outside every session until the
// test ends.
func (s *sbEnv) startOwnerService(t *testing.T, argv ...string) {
	t.Helper()
	cmd := exec.Command("setpriv", append([]string{"--reuid", strconv.Itoa(s.uid), "--regid", strconv.Itoa(s.gid), "--init-groups", "--"}, argv...)...)
	cmd.Dir, cmd.Env = "/", s.ownerEnv()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}

// socketDenied reports whether e's log refuses a connect to path with
// RU-socket.
func (e *Env) socketDenied(path string) bool {
	for _, le := range e.Log() {
		m := le.Record.Meta
		if m.Op == "connect" && m.Verdict == "deny" && m.Rule == "RU-socket" && strings.Contains(m.Reason, path) {
			return true
		}
	}
	return false
}

// The owner's services on path sockets, outside every session: tmux (in
// /tmp, where tmux puts it, and in the home directory), ssh-agent in the
// home directory, and a service that runs what it is sent in /run. A
// confined WEB session reaches none of them: /tmp is its own, and every
// connect() to a path outside the session is refused by the daemon
// (RU-socket). The owner still uses each of them, and the session still
// reaches the control socket, its own sockets and the network.
func TestConfineOwnerServices(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"MEMORY.md": "# memory\n"})
	for _, tool := range []string{"tmux", "ssh-agent", "ssh-add"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed: CI installs it (.ci/run)", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
	home, err := os.MkdirTemp(s.home, "svc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	os.Chown(home, s.uid, s.gid)
	for _, p := range []string{"pwned-tmux-tmp", "pwned-tmux-home", "pwned-svc"} {
		os.Remove(filepath.Join(s.home, p)) // an earlier run's
	}
	run := filepath.Join("/run", "aerfs-it-svc-"+strconv.Itoa(os.Getpid()))
	os.Mkdir(run, 0o755)
	os.Chown(run, s.uid, s.gid)
	t.Cleanup(func() { os.RemoveAll(run) })

	tmuxTmp := s.startOwnerTmux(t)
	tmuxHome := filepath.Join(home, "tmux.sock")
	expectOK(t, "owner's tmux in the home directory", s.asOwner("tmux", "-S", tmuxHome, "new-session", "-d", "sleep 120"))
	t.Cleanup(func() { s.asOwner("tmux", "-S", tmuxHome, "kill-server") })
	agent := filepath.Join(home, "agent.sock")
	s.startOwnerService(t, "ssh-agent", "-D", "-a", agent)
	svc := filepath.Join(run, "svc.sock")
	count := filepath.Join(home, "svc.count")
	s.startOwnerService(t, "/usr/bin/python3", "-c", svcScript, svc, count)
	for _, p := range []string{agent, svc} {
		waitFor(t, p, func() bool { _, err := os.Stat(p); return err == nil })
	}

	// The services are real: the owner, outside sessions, uses each.
	expectOK(t, "owner's tmux", s.asOwner("tmux", "-S", tmuxHome, "run-shell", "true"))
	r := s.asOwner("sh", "-c", "SSH_AUTH_SOCK="+agent+" ssh-add -l")
	if !strings.Contains(r.Stdout+r.Stderr, "no identities") {
		t.Fatalf("the owner's ssh-agent does not answer its owner: %s", r)
	}

	attack := `
try() { name=$1; shift; if out=$("$@" 2>&1); then echo "$name ok"; else echo "$name failed: $out"; fi; }
try tmux-tmp tmux -S "$TMUX_TMP" run-shell "touch $HOME/pwned-tmux-tmp"
try tmux-home tmux -S "$TMUX_HOME" run-shell "touch $HOME/pwned-tmux-home"
try agent env SSH_AUTH_SOCK="$AGENT" ssh-add -l
try svc /usr/bin/python3 -c '
import os, socket, sys
c = socket.socket(socket.AF_UNIX)
try:
    c.connect(sys.argv[1])
except OSError as e:
    sys.exit(os.strerror(e.errno))
c.sendall(("touch " + sys.argv[2] + "\n").encode())' "$SVC" "$HOME/pwned-svc"
try control "$AERFS" status
try own /usr/bin/python3 -c 'import socket, tempfile; p = tempfile.mktemp(dir="/tmp"); s = socket.socket(socket.AF_UNIX); s.bind(p); s.listen(1); c = socket.socket(socket.AF_UNIX); c.connect(p)'
try tcp /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1); c = socket.socket(); c.connect(s.getsockname())'
`
	r = s.session("WEB", "web", "export TMUX_TMP="+tmuxTmp+" TMUX_HOME="+tmuxHome+" AGENT="+agent+" SVC="+svc+" AERFS="+aerfsBin+"\n"+attack)
	t.Logf("confined WEB session:\n%s%s", r.Stdout, r.Stderr)
	got := parseAttempts(r.Stdout)
	// Refused before anything reached the service: its socket is out of
	// sight (ENOENT) or the daemon refused the connect (EACCES).
	for _, name := range []string{"tmux-tmp", "tmux-home", "agent", "svc"} {
		if !strings.Contains(got[name], "Permission denied") && !strings.Contains(got[name], "No such file or directory") {
			t.Errorf("%s from a confined WEB session: %q", name, got[name])
		}
	}
	for _, name := range []string{"control", "own", "tcp"} {
		if got[name] != "ok" {
			t.Errorf("%s from a confined WEB session: %q", name, got[name])
		}
	}
	for _, p := range []string{"pwned-tmux-tmp", "pwned-tmux-home", "pwned-svc"} {
		if _, err := os.Stat(filepath.Join(s.home, p)); err == nil {
			t.Errorf("an owner's service ran a command for a confined session: %s exists", p)
		}
	}
	if b, _ := os.ReadFile(count); len(b) > 0 {
		t.Errorf("the owner's service in /run was connected to %s times from a confined session", b)
	}
	for _, p := range []string{tmuxHome, agent, svc} {
		if !s.socketDenied(p) {
			t.Errorf("no RU-socket refusal of %s in the log", p)
		}
	}
}

// A session flips the address of its connect() between a socket of its
// own and the owner's service while other threads connect, hoping the
// kernel reads the owner's path after the daemon checked its own: the
// daemon carries out the call on what it read itself, so the owner's
// service is never reached. A filter of the session's own with a listener,
// io_uring and datagram Unix sockets (the ways around connect()) are
// refused.
func TestConfineSocketRace(t *testing.T) {
	s := newOwnedEnv(t, map[string]string{"README": "hi\n"})
	home, err := os.MkdirTemp(s.home, "svc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	os.Chown(home, s.uid, s.gid)
	svc := filepath.Join(home, "svc.sock")
	count := filepath.Join(home, "svc.count")
	s.startOwnerService(t, "/usr/bin/python3", "-c", svcScript, svc, count)
	waitFor(t, svc, func() bool { _, err := os.Stat(svc); return err == nil })
	race := `
import ctypes, errno, os, socket, struct, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
import tempfile
own = tempfile.mktemp(dir="/tmp").encode()
srv = socket.socket(socket.AF_UNIX); srv.bind(own); srv.listen(512)
def drain():
    while True:
        c, _ = srv.accept(); c.close()
threading.Thread(target=drain, daemon=True).start()
target = sys.argv[1].encode()
buf = ctypes.create_string_buffer(110)
def put(p):
    ctypes.memmove(buf, struct.pack("H", socket.AF_UNIX) + p + b"\0" * (108 - len(p)), 110)
stop = False
def flip():
    while not stop:
        put(own); put(target)
threading.Thread(target=flip, daemon=True).start()
ok = refused = 0
for i in range(3000):
    s = socket.socket(socket.AF_UNIX)
    if libc.connect(s.fileno(), buf, 110) == 0:
        ok += 1
    else:
        refused += 1
    s.close()
stop = True
print("connected", ok, "refused", refused)
def sys_errno(nr, *args):
    r = libc.syscall(nr, *args)
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
prog = (ctypes.c_ulonglong * 1)(0x7fff000000000006)  # return ALLOW
fprog = struct.pack("HxxxxxxQ", 1, ctypes.addressof(prog))
print("listener", sys_errno(317, 1, 8, ctypes.c_char_p(fprog)))  # seccomp(SET_MODE_FILTER, NEW_LISTENER)
params = ctypes.create_string_buffer(120)
print("io_uring", sys_errno(425, 8, params))
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); print("dgram ok")
except OSError as e:
    print("dgram", errno.errorcode[e.errno])
try:
    socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); print("dgrampair ok")
except OSError as e:
    print("dgrampair", errno.errorcode[e.errno])
`
	r := s.session("WEB", "racer", "/usr/bin/python3 -c '"+strings.ReplaceAll(race, "'", `'"'"'`)+"' "+svc)
	t.Logf("%s", r)
	if r.Code != 0 || !strings.Contains(r.Stdout, "connected") {
		t.Fatalf("the race did not run: %s", r)
	}
	if b, _ := os.ReadFile(count); len(b) > 0 {
		t.Errorf("the owner's service was connected to %s times by a session flipping its address", b)
	}
	for _, want := range []string{"listener EPERM", "io_uring EPERM", "dgram EPERM", "dgrampair EPERM"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("want %q in the session's output", want)
		}
	}
	if !s.socketDenied(svc) {
		t.Errorf("no RU-socket refusal of %s in the log", svc)
	}
}

// A path socket the policy lists (sandbox.sockets) is reached from a
// confined session, with the session's permissions; one it does not list
// is refused. Each refusal is recorded once a minute per path, however
// often the session retries.
func TestConfinePolicySockets(t *testing.T) {
	e := newEnv(t, map[string]string{"README": "hi\n"})
	dir := sharedTempDir(t)
	listed, other := filepath.Join(dir, "listed.sock"), filepath.Join(dir, "other.sock")
	pol := filepath.Join(e.State, "aerfs.yaml")
	b, err := os.ReadFile(pol)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "\n  private_tmp: true\n", "\n  private_tmp: true\n  sockets: ["+listed+"]\n", 1))
	if err := os.WriteFile(pol, b, 0o600); err != nil {
		t.Fatal(err)
	}
	e.Mount()
	for _, p := range []string{listed, other} {
		cmd := exec.Command("/usr/bin/python3", "-c", svcScript, p, p+".count")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		waitFor(t, p, func() bool { _, err := os.Stat(p); return err == nil })
	}
	r := runCmd(e.WS, []string{"LISTED=" + listed, "OTHER=" + other}, aerfsBin, "run", "--principal", "USER", "--session", "pol", "--", "sh", "-c", `
for s in "$LISTED" "$OTHER" "$OTHER" "$OTHER"; do
  /usr/bin/python3 -c 'import socket, sys; c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1])' "$s" 2>/dev/null && echo "reached $s" || echo "refused $s"
done`)
	t.Logf("%s", r)
	if !strings.Contains(r.Stdout, "reached "+listed) || strings.Contains(r.Stdout, "reached "+other) {
		t.Errorf("sandbox.sockets: %s", r.Stdout)
	}
	n := 0
	for _, le := range e.Log() {
		m := le.Record.Meta
		if m.Op == "connect" && m.Rule == "RU-socket" && strings.Contains(m.Reason, other) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d RU-socket records for three refusals within a minute, want 1", n)
	}
}
