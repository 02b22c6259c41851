package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/sandbox"
)

// runSandbox is the confinement aerfs run applies to a session.
type runSandbox struct {
	cfg        *sandbox.Config // nil: --sandbox=off
	privateTmp bool
	inNS       bool        // this process runs in the session's new namespaces
	net        *sessionNet // the session's network (run_network.go)
	planned    string      // what the register request announces
	agent      string      // aerfs run --agent
}

// prepareSandbox decides the session's confinement. When the session
// gets its own namespaces and this process is not yet in them, it runs
// aerfs run again inside them and exits with its status: it does not
// return. model are the session's model endpoints (host:port).
func prepareSandbox(on bool, t *target, model []string) (*runSandbox, error) {
	nested := confined() // inside a session: its network is its parent's
	sc := &runSandbox{planned: "off", net: &sessionNet{mode: "open", model: model}}
	if nested {
		sc.net = &sessionNet{}
	}
	if !on {
		return sc, nil
	}
	if os.Getenv(mountNSEnv) == "" && !nested {
		withNet := networkMode(t) == "proxy"
		if code, ok := runInNamespace(withNet); ok {
			os.Exit(code)
		}
		if withNet {
			return nil, fail(exitError, "set sandbox.network: open in the policy (sessions then use the host's network, unrecorded), or run the session with --sandbox=off",
				"cannot give the session a network namespace of its own: the kernel refused a new user namespace")
		}
	}
	sc.inNS = os.Getenv(mountNSEnv) != "" && os.Getenv(mountNSEnv) != mountNS()
	inNetNS := os.Getenv(netNSEnv) != "" && os.Getenv(netNSEnv) != sandbox.NetNS()
	os.Unsetenv(mountNSEnv)
	os.Unsetenv(netNSEnv)
	sc.cfg = &sandbox.Config{Workspace: t.workspace, Hidden: []string{t.stateDir}}
	sc.planned = "landlock abi " + strconv.Itoa(sandbox.LandlockABI()) + ", seccomp, no_new_privs"
	if sc.inNS {
		sc.planned += ", mount namespace"
	}
	if inNetNS {
		n, err := prepareNet(model)
		if err != nil {
			return nil, fail(exitError, "set sandbox.network: open in the policy, or run the session with --sandbox=off, if this kernel cannot give it a network of its own",
				"cannot set up the session's network namespace: %v", err)
		}
		sc.net = n
		sc.planned += ", network namespace"
	}
	return sc, nil
}

// sandboxGrant is what the daemon's policy lets a confined session write
// besides the workspace, as the register request answers it.
type sandboxGrant struct {
	Writable   []string `json:"writable"`
	Private    []string `json:"private"`
	PrivateTmp bool     `json:"private_tmp"`
	Home       string   `json:"home"`
}

// apply confines the calling thread, which must execute the session's
// command next, reports what it applied to the daemon (aerfs status shows
// it), and returns the environment entries that say what was applied
// (AERFS_SANDBOX, AERFS_SANDBOX_WARNINGS). It fails closed.
func (sc *runSandbox) apply(t *target, session string, grant *sandboxGrant) ([]string, error) {
	if sc.cfg == nil {
		return append([]string{"AERFS_SANDBOX=off"}, sc.net.env()...), nil
	}
	if grant == nil {
		return nil, fail(exitError, "the daemon serving this workspace is older than this aerfs: remount it", "the daemon did not say what session %s may write", session)
	}
	sc.cfg.Writable, sc.privateTmp = grant.Writable, grant.PrivateTmp
	if grant.Home != "" {
		// A cache the owner has not used yet: create it, or the session
		// could not (its parent is not writable to it).
		for _, w := range sc.cfg.Writable {
			if strings.HasPrefix(w, grant.Home+"/") {
				os.MkdirAll(w, 0o755)
			}
		}
	}
	// The confinement holds for this thread and what it executes: keep
	// the goroutine on it until execve.
	runtime.LockOSThread()
	var private []string
	if sc.inNS {
		// Executing with the kept capability cleared the death signal
		// the outer aerfs run asked for: ask again, on the thread that
		// executes the command.
		unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
		if os.Getppid() == 1 {
			return nil, fail(exitError, "", "aerfs run ended before session %s started", session)
		}
		cwd, _ := os.Getwd()
		var (
			writable []string
			err      error
		)
		// The control socket stays reachable at its usual path in the
		// state directory, through the cover.
		sock := daemon.SocketPath(t.stateDir)
		private, writable, err = sandbox.SetupMounts(sandbox.Mounts{Workspace: t.workspace, StateDir: t.stateDir,
			Socket: sock, UID: os.Getuid(), PrivateTmp: sc.privateTmp, Private: grant.Private})
		if err != nil {
			return nil, fail(exitError, "run it unconfined with --sandbox=off if this kernel cannot confine it", "cannot set up the mount namespace of session %s: %v", session, err)
		}
		sc.cfg.Writable = append(sc.cfg.Writable, writable...)
		// Resolve the working directory again in the new tree: the old
		// one is a way back into what was covered.
		if os.Chdir(cwd) != nil {
			os.Chdir(t.workspace)
		}
	}
	// Build and package caches of the session's own (sandbox/cache.go):
	// a session started from within another keeps its parent's.
	cache := os.Getenv(sandbox.CacheEnvVar)
	if !confined() || !filepath.IsAbs(cache) {
		var err error
		if cache, err = sandbox.SessionCache(sc.inNS); err != nil {
			return nil, fail(exitError, "run it unconfined with --sandbox=off if this system cannot give it a directory in /tmp", "cannot make the caches of session %s: %v", session, err)
		}
		if sc.inNS {
			private = append(private, cache)
		}
	}
	sc.cfg.Writable = append(sc.cfg.Writable, cache)
	var clientEnv []string
	if sc.agent == "openclaw" {
		clientEnv = openclawStateEnv(cache) // run_openclaw.go
	}
	// Every connect() of the session is the daemon's to decide (path
	// sockets: sandbox/unotify.go), unless this session is started from
	// within a confined one, whose filter and supervisor cover it already.
	var sup *net.UnixConn
	if !confined() {
		var err error
		if sup, err = requestSupervision(t, session, private); err != nil {
			return nil, err
		}
		defer sup.Close()
		sc.cfg.SuperviseConnect = true
	}
	rep, err := sandbox.Apply(*sc.cfg)
	if err != nil {
		return nil, fail(exitError, "run it unconfined with --sandbox=off if this kernel cannot confine it", "cannot confine session %s: %v", session, err)
	}
	if sup != nil {
		err := handOver(sup, rep.Listener)
		unix.Close(rep.Listener) // the daemon's alone: never the session's
		if err != nil {
			return nil, fail(exitError, "run it unconfined with --sandbox=off if this daemon cannot decide its sockets", "cannot hand session %s's sockets to the daemon: %v", session, err)
		}
	}
	rep.Private = private
	if sc.inNS {
		rep.Namespaces = []string{"user", "mount"}
	}
	if len(sc.net.files) > 0 {
		rep.Namespaces = append(rep.Namespaces, "net")
	}
	// Tell the daemon what was applied, from the confined process itself
	// (the daemon adds what /proc shows of it). The proxy's listening
	// sockets go with the report: the daemon serves them, and this
	// process keeps no copy past its execve.
	b, _ := json.Marshal(rep)
	resp, err := daemon.CallFiles(t.stateDir, daemon.Request{Op: "confined", Session: session, Sandbox: string(b), Listeners: sc.net.listeners}, sc.net.files)
	sc.net.close()
	if err != nil {
		return nil, fail(exitNotMounted, "is the workspace mounted? aerfs status"+t.flags(), "%v", err)
	}
	if !resp.OK {
		return nil, fail(exitError, resp.Hint, "%s", resp.Error)
	}
	env := append([]string{"AERFS_SANDBOX=" + rep.String()}, sc.net.env()...)
	env = append(env, quietClients()...)
	env = append(env, sandbox.CacheEnv(cache)...)
	env = append(env, clientEnv...)
	if len(rep.Warnings) > 0 && !sc.inNS {
		// With a namespace the state directory is covered whatever
		// Landlock could not keep out of it.
		env = append(env, "AERFS_SANDBOX_WARNINGS="+strings.Join(rep.Warnings, "; "))
	}
	return env, nil
}

// confinedClientEnv is what confined sessions tell their clients not to
// try, because the confinement refuses it and the client would print the
// refusal into every tool result the model reads: OpenClaw wraps each
// command it runs in a shell that raises the command's oom_score_adj, a
// write to /proc that Landlock refuses ("cannot create
// /proc/self/oom_score_adj: Permission denied"); its documented opt-out
// turns the wrapper off. The write stays refused. A value the owner set
// is kept.
var confinedClientEnv = []string{"OPENCLAW_CHILD_OOM_SCORE_ADJ=0"}

func quietClients() []string {
	var out []string
	for _, kv := range confinedClientEnv {
		if _, set := os.LookupEnv(kv[:strings.IndexByte(kv, '=')]); !set {
			out = append(out, kv)
		}
	}
	return out
}

// requestSupervision connects to the daemon (before the filter that
// would hand this very connect() to it) and asks it to take the session's
// connect() listener; private are the mounts of the session's own
// namespace, whose sockets are the session's.
func requestSupervision(t *target, session string, private []string) (*net.UnixConn, error) {
	var devs []uint64
	for _, p := range private {
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil {
			devs = append(devs, st.Dev)
		}
	}
	b, _ := json.Marshal(map[string]any{"private_devs": devs})
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: daemon.SocketPath(t.stateDir), Net: "unix"})
	if err != nil {
		return nil, fail(exitError, "", "cannot reach the aerfs daemon: %v", err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := json.NewEncoder(c).Encode(daemon.Request{Op: "supervise", Session: session, Sandbox: string(b)}); err != nil {
		c.Close()
		return nil, err
	}
	if err := readOK(c); err != nil {
		c.Close()
		return nil, fail(exitError, "run it unconfined with --sandbox=off, or remount the workspace with this aerfs", "cannot hand session %s's sockets to the daemon: %v", session, err)
	}
	return c, nil
}

// handOver sends the listener over c and waits for the daemon's answer.
func handOver(c *net.UnixConn, listener int) error {
	if _, _, err := c.WriteMsgUnix([]byte{0}, unix.UnixRights(listener), nil); err != nil {
		return err
	}
	return readOK(c)
}

// readOK reads one answer line from c: nil when it says ok.
func readOK(c *net.UnixConn) error {
	var line []byte
	buf := make([]byte, 1)
	for len(line) < 64<<10 {
		n, err := c.Read(buf)
		if err != nil {
			return err
		}
		if n == 1 && buf[0] == '\n' {
			break
		}
		line = append(line, buf[:n]...)
	}
	var r daemon.Response
	if err := json.Unmarshal(line, &r); err != nil {
		return err
	}
	if !r.OK {
		return errors.New(r.Error)
	}
	return nil
}

// mountNSEnv tells the copy of aerfs run started in the session's new
// namespaces the mount namespace of its parent (to tell that it is in a
// new one).
const mountNSEnv = "AERFS_RUN_PARENT_MOUNTNS"

func mountNS() string {
	l, _ := os.Readlink("/proc/self/ns/mnt")
	return l
}

// confined reports whether this process is already in a session's
// confinement (a nested aerfs run): no_new_privs is set.
func confined() bool {
	v, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	return err == nil && v == 1
}

// runInNamespace runs this aerfs run again in a new user namespace (the
// caller's uid mapped to itself, so files and the daemon see the owner),
// a new mount namespace and a new IPC namespace (the owner's System V
// queues, semaphores and shared memory are out of the session's reach), waits for it and returns its exit code. ok is
// false when the kernel refuses the namespaces: the session is then
// confined without one.
func runInNamespace(withNet bool) (code int, ok bool) {
	self, err := os.Executable()
	if err != nil {
		return 0, false
	}
	uid, gid := os.Getuid(), os.Getgid()
	size := 1
	if uid == 0 {
		size = 1<<32 - 1 // root keeps its power over every file it had
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// A terminal of the session's own in place of the owner's
	// (run_tty.go); without one the owner's terminal is the session's.
	tty, err := openSessionTTY()
	if err != nil {
		fmt.Fprintf(os.Stderr, "aerfs: cannot give the session a terminal of its own: %v\nhint: start it with its standard input and output away from the terminal (< /dev/null > out 2>&1), or unconfined with --sandbox=off\n", err)
		return exitError, true
	}
	ctty := -1
	if tty != nil {
		cmd.Stdin, cmd.Stdout, cmd.Stderr, ctty = tty.stdio()
	}
	cmd.Env = append(os.Environ(), mountNSEnv+"="+mountNS())
	flags, caps := uintptr(syscall.CLONE_NEWUSER|syscall.CLONE_NEWNS|syscall.CLONE_NEWIPC), []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP}
	if withNet {
		// A network namespace with only loopback (run_network.go); the
		// copy brings loopback up, which takes CAP_NET_ADMIN.
		flags |= syscall.CLONE_NEWNET
		caps = append(caps, unix.CAP_NET_ADMIN)
		cmd.Env = append(cmd.Env, netNSEnv+"="+sandbox.NetNS())
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:                 flags,
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: size}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: size}},
		GidMappingsEnableSetgroups: uid == 0,
		// The owner's uid has no capabilities after execve, even in its
		// own namespace: keep the ones the mounts, the loopback of its
		// network namespace and the capability drop need. The copy drops
		// every capability (sandbox.Apply) before it executes the
		// session's command. CAP_SETPCAP lets it empty the bounding set
		// and lock the securebits before it executes the session's
		// command.
		AmbientCaps: caps,
		// Killing aerfs run kills the session's command, as when they
		// were one process (the copy sets it again: its execve with a
		// capability clears it). The signal follows the thread that
		// started the child: keep this goroutine on it.
		Pdeathsig: syscall.SIGKILL,
		// The session is a session of its own, always: with a terminal
		// of its own, that terminal is its controlling terminal (^C on
		// it signals the session's command); without one it has none,
		// so /dev/tty is never the owner's terminal, even when none of
		// its standard descriptors is.
		Setsid:  true,
		Setctty: tty != nil,
		Ctty:    ctty,
	}
	runtime.LockOSThread()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		if tty != nil {
			tty.master.Close()
			tty.slave.Close()
		}
		return 0, false
	}
	// The session is in no process group of the owner's terminal: what
	// the terminal sends aerfs run (^C, ^\) is forwarded to it.
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	if tty == nil {
		return exitCode(cmd.Wait()), true
	}
	tty.start()
	ws, err := waitStopping(cmd.Process.Pid, tty)
	tty.stop()
	cmd.Process.Release()
	switch {
	case err != nil:
		return exitError, true
	case ws.Signaled():
		return 128 + int(ws.Signal()), true
	}
	return ws.ExitStatus(), true
}

// exitCode is aerfs run's status for the session command's err.
func exitCode(err error) int {
	if ee, isExit := err.(*exec.ExitError); isExit {
		if ws, isWS := ee.Sys().(syscall.WaitStatus); isWS && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return exitError
	}
	return 0
}
