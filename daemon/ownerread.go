package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// # The owner's readers of a root daemon's state
//
// A root daemon's state directory is its own (root-owned, mode 0700), so
// the owner's `aerfs log`, `history`, `pending`, `verify` and the other
// commands that read it cannot open it. They ask the daemon instead: the
// "read" request names the command and its arguments, and the daemon,
// once the caller is shown to be the owner's channel (RO-owner: a process
// outside every session), runs that one command as a child of its own
// binary, `aerfs owner-read`, which confines itself before it executes the
// command: the signing key masked in a mount namespace of its own, and
// Landlock to read the state directory and the workspace and write nothing
// anywhere. The child's standard
// output and error come back over the connection as ReadFrame lines, then
// its exit code; the client prints them as if it had run the command.

// OwnerReadCommands are the commands the "read" request runs: those that
// only read the state directory. Everything that changes something has
// its own request.
var OwnerReadCommands = map[string]bool{
	"log": true, "history": true, "diff": true, "scope": true, "pending": true,
	"watch": true, "export": true, "verify": true, "prove": true, "key": true,
	"snapshot": true, // snapshot list only: checked below
}

// OwnerReadEnv marks the process the owner's read runs as (the confined
// command): it does not forward again.
const OwnerReadEnv = "AERFS_OWNER_READ"

// ReadFrame is one line of the answer to a "read" request: output, error
// output, the exit code (the last frame), or a refusal (the only frame).
type ReadFrame struct {
	Out     []byte `json:"out,omitempty"`
	Err     []byte `json:"err,omitempty"`
	Exit    *int   `json:"exit,omitempty"`
	Error   string `json:"error,omitempty"`
	Hint    string `json:"hint,omitempty"`
	Refused bool   `json:"refused,omitempty"`
	Rule    string `json:"rule,omitempty"`
}

// ownerReaders bounds the owner's readers running at once.
const ownerReaders = 4

// checkReadArgs says what is wrong with the arguments of a "read"
// request, "" when nothing is. The child's confinement is what keeps a
// reader from writing or reading elsewhere; this keeps it to the reading
// commands and to this daemon's own state.
func checkReadArgs(args []string) string {
	if len(args) == 0 || !OwnerReadCommands[args[0]] {
		return "not a command that reads the state directory"
	}
	if args[0] == "snapshot" && (len(args) < 2 || args[1] != "list") {
		return "of the snapshot commands only 'snapshot list' reads the state directory"
	}
	// Every argument, "--" included: a flag that takes a value takes a
	// following "--" as its value ("--path -- --state DIR").
	for _, a := range args {
		for _, f := range []string{"--state", "--workspace"} {
			if a == f || strings.HasPrefix(a, f+"=") {
				return "the daemon reads its own state: leave out " + f
			}
		}
	}
	return ""
}

// serveRead answers a "read" request on c, frame by frame.
func (s *controlServer) serveRead(c *net.UnixConn, p *peer, req Request) {
	var mu sync.Mutex
	// No write deadline: the owner's client may stop reading for a while
	// (a pager); a frame cut short would break the stream. A client that
	// goes away ends the reader. After a failed write nothing more is sent.
	var broken error
	send := func(f ReadFrame) error {
		b, _ := json.Marshal(f)
		mu.Lock()
		defer mu.Unlock()
		if broken != nil {
			return broken
		}
		c.SetWriteDeadline(time.Time{})
		_, broken = c.Write(append(b, '\n'))
		return broken
	}
	res := s.reg.Resolve(p.pid)
	if err := p.verify(res); err != nil {
		r := s.refuseStale(p, req, res)
		send(ReadFrame{Error: r.Error, Hint: r.Hint, Refused: true, Rule: r.Rule})
		return
	}
	rs := *s
	rs.caller = res
	// The record names the command only when it is one: the arguments
	// are the caller's text, and a refused caller's text must not reach
	// the log (or, through it, the owner's terminal).
	what := "read the state directory"
	if len(req.Args) > 0 && OwnerReadCommands[req.Args[0]] {
		what = "aerfs " + req.Args[0]
	}
	if _, refusal := rs.ownerChannel(p.pid, what); refusal != nil {
		send(ReadFrame{Error: refusal.Error, Hint: refusal.Hint, Refused: true, Rule: refusal.Rule})
		return
	}
	if msg := checkReadArgs(req.Args); msg != "" {
		send(ReadFrame{Error: "read refused: " + msg, Hint: "the commands read this way: log, history, diff, scope, pending, watch, export, verify, prove, key, snapshot list (report asks for an export)"})
		return
	}
	select {
	case s.shared.readers <- struct{}{}:
		defer func() { <-s.shared.readers }()
	default:
		send(ReadFrame{Error: fmt.Sprintf("%d readers of the state directory are running already", ownerReaders),
			Hint: "wait for one to end (aerfs watch and log -f run until interrupted)"})
		return
	}
	ws := s.status().Workspace
	// The command runs where the owner's process is when that is inside
	// the workspace (relative FILE arguments), else at the workspace root.
	dir := ws
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", p.pid)); err == nil && (cwd == ws || strings.HasPrefix(cwd, ws+"/")) {
		dir = cwd
	}
	// The child changes to dir itself, after it has executed: a child of
	// the daemon between fork and exec must not touch the mount (the
	// daemon's runtime waits for it and serves nothing meanwhile).
	cmd := exec.Command("/proc/self/exe", append([]string{"owner-read", s.stateDir, ws, dir, "--"}, req.Args...)...)
	cmd.Args[0] = "aerfs"
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", OwnerReadEnv + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		send(ReadFrame{Error: "read: " + err.Error()})
		return
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		send(ReadFrame{Error: "read: " + err.Error()})
		return
	}
	if err := cmd.Start(); err != nil {
		send(ReadFrame{Error: "read: " + err.Error()})
		return
	}
	kill := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// The owner interrupting (closing the connection), a client that
	// stops reading, or the daemon ending ends the reader.
	stop := make(chan struct{})
	go func() {
		gone := make(chan struct{})
		go func() {
			io.Copy(io.Discard, c)
			close(gone)
		}()
		select {
		case <-gone:
			kill()
		case <-s.shared.done:
			kill()
		case <-stop:
		}
	}()
	pump := func(r io.Reader, frame func([]byte) ReadFrame, wg *sync.WaitGroup) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				if send(frame(append([]byte(nil), buf[:n]...))) != nil {
					kill()
					io.Copy(io.Discard, r)
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go pump(stdout, func(b []byte) ReadFrame { return ReadFrame{Out: b} }, &wg)
	go pump(stderr, func(b []byte) ReadFrame { return ReadFrame{Err: b} }, &wg)
	wg.Wait()
	err = cmd.Wait()
	close(stop)
	code := 0
	if err != nil {
		code = 1
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() > 0 {
			code = ee.ExitCode()
		}
	}
	send(ReadFrame{Exit: &code})
}

// OwnerReadPaths are what the owner's reader may read: the state
// directory, the workspace, and what the program itself needs (the dynamic
// loader and libraries, time zones, its own /proc entry); it may execute
// only the aerfs binary and the loader. hidden are masked in its own mount
// namespace: the signing key.
func OwnerReadPaths(stateDir, workspace string) (read, exec, hidden []string) {
	read = []string{stateDir, workspace, "/proc/self", "/etc/localtime", "/etc/ld.so.cache", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf"}
	exec = []string{"/proc/self/exe", "/usr", "/lib", "/lib64"}
	hidden = []string{filepath.Join(stateDir, "evidence", "key")}
	return read, exec, hidden
}

// CallRead asks the daemon serving stateDir to run a reading command for
// the owner (args: the command and its arguments) and copies its output
// to stdout and stderr as it comes. It returns the command's exit code,
// or the frame that refused or failed the request.
func CallRead(stateDir string, args []string, stdout, stderr io.Writer) (int, *ReadFrame, error) {
	c, err := net.DialTimeout("unix", SocketPath(stateDir), 5*time.Second)
	if err != nil {
		return 0, nil, fmt.Errorf("cannot reach the aerfs daemon: %w", err)
	}
	defer c.Close()
	if err := json.NewEncoder(c).Encode(Request{Op: "read", Args: args}); err != nil {
		return 0, nil, err
	}
	dec := json.NewDecoder(c)
	for {
		var f ReadFrame
		if err := dec.Decode(&f); err != nil {
			if err == io.EOF {
				err = fmt.Errorf("the aerfs daemon closed the connection before the command ended")
			}
			return 0, nil, err
		}
		switch {
		case f.Error != "":
			return 0, &f, nil
		case f.Exit != nil:
			return *f.Exit, nil, nil
		}
		if len(f.Out) > 0 {
			if _, err := stdout.Write(f.Out); err != nil {
				return 0, nil, err
			}
		}
		if len(f.Err) > 0 {
			stderr.Write(f.Err)
		}
	}
}
