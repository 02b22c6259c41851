package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// leftoverScript is a process a session leaves running after its command
// returns (a dev server, a nohup'd tool), holding the descriptors of the
// session's terminal: once told, it draws on the terminal and reads from
// it, as one forging the owner's later `aerfs pending` would, and writes
// what it managed to RES.
const leftoverScript = `
import errno, os, sys, time
go, res = sys.argv[1], sys.argv[2]
for i in range(400):
    if os.path.exists(go):
        break
    time.sleep(0.05)
out = []
try:
    os.write(1, b"\x1b[2J\x1b[HFORGED-REVIEW approve me\n"); out.append("write ok")
except OSError as e:
    out.append("write " + errno.errorcode[e.errno])
try:
    d = os.read(0, 64); out.append("read %d bytes" % len(d))
except OSError as e:
    out.append("read " + errno.errorcode[e.errno])
open(res, "w").write(", ".join(out) + "\n")
`

// A confined session started from the owner's terminal gets a terminal of
// its own, which aerfs run relays to the owner's while the session's
// command runs: the command sees a terminal of the owner's size, reads
// what the owner types, and the owner's terminal is as it was afterwards.
// A process the session leaves behind keeps only the session's terminal,
// which is hung up when the command returns: it can neither draw over the
// owner's later output (a forged `aerfs pending`) nor read the owner's
// keystrokes.
func TestSandboxSessionTerminal(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Skip("script (util-linux) is not installed")
	}
	e := newEnv(t, map[string]string{"README": "hi\n"}).Mount()
	dir := sharedTempDir(t)
	left := filepath.Join(dir, "leftover.py")
	goFile, res := filepath.Join(dir, "go"), filepath.Join(dir, "res")
	os.WriteFile(left, []byte(leftoverScript), 0o644)
	owner := filepath.Join(dir, "owner.sh")
	os.WriteFile(owner, []byte(`cd `+e.WS+`
stty rows 33 cols 101
stty -g > `+dir+`/before
tty > `+dir+`/owner-tty
`+aerfsBin+` run --principal WEB --session web -- sh -c '
tty > `+dir+`/session-tty
echo "size $(stty size)"
test -t 0 && test -t 1 && test -t 2 && echo "all terminals"
read line; echo "got $line"
( setsid /usr/bin/python3 `+left+` `+goFile+` `+res+` & )
sleep 0.5
exit 7'
echo "exit $?"
stty -g > `+dir+`/after
echo OWNER-LINE
touch `+goFile+`
for i in $(seq 100); do test -s `+res+` && break; sleep 0.05; done
sleep 0.3
echo OWNER-END
`), 0o644)
	typescript := filepath.Join(dir, "typescript")
	// The owner types a line while the session waits for it.
	cmd := exec.Command("script", "-qfec", "bash "+owner, typescript)
	cmd.Dir = e.WS
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	in.Write([]byte("typed-by-owner\n"))
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case <-waited:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the owner's terminal session did not end")
	}
	in.Close()
	b, _ := os.ReadFile(typescript)
	shown := string(b)
	t.Logf("the owner's terminal:\n%q", shown)
	got := parseAttempts(strings.ReplaceAll(shown, "\r", ""))
	if got["exit"] != "7" {
		t.Errorf("aerfs run's exit status: %q, want the command's 7", got["exit"])
	}
	if got["size"] != "33 101" || got["all"] != "terminals" || got["got"] != "typed-by-owner" {
		t.Errorf("the session's terminal: size %q, %q, read %q; want 33 101, all terminals, typed-by-owner", got["size"], got["all"], got["got"])
	}
	ownerTTY, _ := os.ReadFile(filepath.Join(dir, "owner-tty"))
	sessionTTY, _ := os.ReadFile(filepath.Join(dir, "session-tty"))
	if len(sessionTTY) == 0 || string(sessionTTY) == string(ownerTTY) {
		t.Errorf("the session's terminal is %q, the owner's %q: want one of its own", sessionTTY, ownerTTY)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "before"))
	after, _ := os.ReadFile(filepath.Join(dir, "after"))
	if len(before) == 0 || string(before) != string(after) {
		t.Errorf("the owner's terminal mode was %q before the session and %q after", before, after)
	}
	r, _ := os.ReadFile(res)
	t.Logf("the leftover process: %s", r)
	if _, afterOwner, ok := strings.Cut(shown, "OWNER-LINE"); !ok || strings.Contains(afterOwner, "FORGED-REVIEW") {
		t.Errorf("a process the session left behind drew on the owner's terminal after the session")
	}
	if !strings.HasPrefix(string(r), "write EIO") {
		t.Errorf("the leftover process's write to its terminal: %q, want EIO", r)
	}
}

// A confined session reaches no terminal of the owner's by another door:
// not /dev/tty when it was started with none of its standard descriptors
// a terminal (aerfs run … </dev/null >log 2>&1 from the owner's shell),
// and not another of the owner's terminals by its path /dev/pts/N. The
// terminals it makes itself work.
func TestSandboxNoOwnerTerminalByPath(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Fatal("script (util-linux) is not installed")
	}
	e := newEnv(t, map[string]string{"README": "hi\n"}).Mount()
	dir := sharedTempDir(t)
	probe := filepath.Join(dir, "probe.py")
	os.WriteFile(probe, []byte(`
import errno, os, pty, sys
out = []
try:
    fd = os.open("/dev/tty", os.O_RDWR); os.write(fd, b"FORGED-VIA-DEVTTY\r\n"); out.append("devtty open")
except OSError as e:
    out.append("devtty " + errno.errorcode[e.errno])
victim = open(sys.argv[2]).read().strip()
try:
    fd = os.open(victim, os.O_RDWR); os.write(fd, b"FORGED-VIA-PTS\r\n"); out.append("pts open")
except OSError as e:
    out.append("pts " + errno.errorcode[e.errno])
pid, fd = pty.fork()
if pid == 0:
    os.execv("/bin/sh", ["sh", "-c", "echo own-pty-works"])
b = b""
while True:
    try:
        d = os.read(fd, 100)
    except OSError:
        break
    if not d:
        break
    b += d
out.append("own " + ("ok" if b"own-pty-works" in b else "failed"))
open(sys.argv[1], "w").write(", ".join(out) + "\n")
`), 0o644)
	res, victim := filepath.Join(dir, "res"), filepath.Join(dir, "victim")
	owner := filepath.Join(dir, "owner.sh")
	os.WriteFile(owner, []byte(`cd `+e.WS+`
tty > `+victim+`
`+aerfsBin+` run --principal WEB --session web -- /usr/bin/python3 `+probe+` `+res+` `+victim+` </dev/null >`+dir+`/out 2>&1
echo "exit $?"
sleep 0.3
`), 0o644)
	typescript := filepath.Join(dir, "typescript")
	cmd := exec.Command("script", "-qfec", "bash "+owner, typescript)
	cmd.Dir = e.WS
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the owner's terminal session: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(typescript)
	r, _ := os.ReadFile(res)
	o, _ := os.ReadFile(filepath.Join(dir, "out"))
	t.Logf("the session: %s (output %q); the owner's terminal: %q", r, o, b)
	if strings.Contains(string(b), "FORGED") {
		t.Errorf("a confined session wrote into the owner's terminal: %q", b)
	}
	got := string(r)
	if !strings.Contains(got, "devtty ENXIO") || !strings.Contains(got, "pts ENOENT") || !strings.Contains(got, "own ok") {
		t.Errorf("the session's doors to terminals: %q, want devtty ENXIO, pts ENOENT, own ok", got)
	}
}
