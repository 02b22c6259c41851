package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/policy"
)

type runOptions struct {
	principal string
	session   string
	resume    bool
	sandbox   string
	agent     string
	model     []string
}

func newRunCommand() *cobra.Command {
	var o runOptions
	c := &cobra.Command{
		Use:   "run [--principal P] [--session S [--resume]] [--sandbox=off] -- CMD [ARGS...]",
		Short: "Run a command in a session under a principal",
		Long: `run registers this process with the daemon over the control socket and then
executes CMD in its place (same pid). CMD and everything it starts belong to
the session. The daemon authenticates the request by the kernel's peer
credentials and grants only principals at or below the caller's own.
A session id belongs to the registration that created it, across remounts:
it can be registered again only from inside that session, or by the owner
outside sessions (with --resume for a session of an earlier mount).

Before it executes CMD, run confines the session (docs/confinement.md):
it starts a copy of itself in a new user and mount namespace (the owner's
/run/user/<uid>, tmux and ssh-agent sockets and the state directory out of
sight; the copy registers and executes CMD, this process waits for it);
Landlock lets the session change files only beneath the workspace and the
policy's sandbox.writable paths, keeps it out of the state directory and
scopes signals, abstract sockets and ptrace to it; a seccomp filter under
no_new_privs refuses ptrace, process_vm_*, pidfd_getfd, mount, unshare and
the like. --sandbox=off runs CMD unconfined; the session start records it.

The session also gets a network namespace with only loopback: its one way
out is the daemon's proxy, which HTTP_PROXY, HTTPS_PROXY and ALL_PROXY
point at (docs/confinement.md, "The network"). The proxy records every
connection, and what a web host sends taints the session before the
client reads it. The client's model endpoint is not web: run reads it from
ANTHROPIC_BASE_URL, OPENAI_BASE_URL and the like, and --model names it
when the client's base URL is in a configuration file. The policy's
sandbox.network: open keeps sessions on the host's network (recorded).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExitCodes(runRun(o, args))
		},
	}
	// Flags end at the command: aerfs run --principal USER ls -la works
	// without "--", and -la belongs to ls.
	c.Flags().SetInterspersed(false)
	c.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &cliError{code: exitRunFailed, msg: err.Error(), hint: "see 'aerfs run --help'"}
	})
	c.Flags().StringVar(&o.principal, "principal", "", "SYS, USER, TOOL_AUTH, TOOL_UNAUTH, WEB, SKILL, CHANNEL or EXTERNAL (default: your own)")
	c.Flags().StringVar(&o.session, "session", "", "session name (default: a new session)")
	c.Flags().BoolVar(&o.resume, "resume", false, "rejoin the existing session --session (the owner, outside sessions)")
	c.Flags().StringVar(&o.sandbox, "sandbox", "on", "on: confine the session (default); off: run it unconfined")
	c.Flags().StringVar(&o.agent, "agent", "", "the agent client CMD is (claude-code, codex, gemini, openclaw): recorded with the session (docs/agents.md)")
	c.Flags().StringArrayVar(&o.model, "model", nil, "the base URL of the client's model API (repeatable): its host:port is the session's model channel; ANTHROPIC_BASE_URL, OPENAI_BASE_URL … are read too")
	return c
}

func runRun(o runOptions, args []string) error {
	if o.principal != "" {
		if _, err := policy.ParsePrincipal(o.principal); err != nil {
			return fail(exitUsage, "principals are SYS, USER, TOOL_AUTH, TOOL_UNAUTH, WEB, SKILL, CHANNEL, EXTERNAL", "unknown principal %q", o.principal)
		}
	}
	if o.resume && o.session == "" {
		return fail(exitUsage, "name the session to rejoin: aerfs run --resume --session ID -- CMD", "--resume needs --session")
	}
	if o.sandbox != "on" && o.sandbox != "off" {
		return fail(exitUsage, "write --sandbox=on (the default) or --sandbox=off", "unknown --sandbox value %q", o.sandbox)
	}
	if err := startPlace(); err != nil { // run_start.go
		return err
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		code := exitRunNotFound
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return fail(code, "check the command name and PATH", "%v", err)
		}
		return fail(exitRunNoExec, "check the file's mode (chmod +x) and that it is a program", "%v", err)
	}
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	if err := checkRunAgent(t, o.agent); err != nil {
		return err
	}
	model, err := modelEndpoints(o.model)
	if err != nil {
		return err
	}
	sc, err := prepareSandbox(o.sandbox == "on", t, model)
	if err != nil {
		return err
	}
	resp, err := call(t, daemon.Request{Op: "register", Principal: o.principal, Session: o.session, Resume: o.resume, Sandbox: sc.planned, Agent: o.agent,
		Network: sc.net.mode, Model: sc.net.model})
	if err != nil {
		return err
	}
	var reg struct {
		Session, Principal  string
		Joined, Quarantined bool
		Taint               []string
		Sandbox             *sandboxGrant
	}
	json.Unmarshal(resp.Data, &reg)
	noteJoined(reg.Session, reg.Joined, reg.Quarantined, reg.Taint) // cmd_session.go
	env := append(os.Environ(), "AERFS_SESSION="+reg.Session, "AERFS_PRINCIPAL="+reg.Principal)
	sc.agent = o.agent
	confinement, err := sc.apply(t, reg.Session, reg.Sandbox)
	if err != nil {
		return err
	}
	env = append(env, confinement...)
	env = append(env, agentEnv(o.agent)...)
	if o.sandbox == "on" {
		closeInheritedSockets()
	}
	// Same pid: the registration names this process as the session root.
	return syscall.Exec(path, args, lastWins(env))
}

// closeInheritedSockets closes the sockets a confined session would
// inherit beyond its standard descriptors: a socket the owner's shell left
// open lives in the owner's network namespace (a UDP socket re-aimed with
// connect() reaches the host's services around the proxy, untainted) or
// is connected to one of the owner's services. Files and pipes are passed
// as they are (a jobserver's pipe, a redirection).
func closeInheritedSockets() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC != 0 {
			continue // not inherited
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFSOCK {
			unix.Close(fd)
		}
	}
}

// Exit codes of aerfs run. The command's own status passes through; run's
// own failures before the command starts use the codes env(1), timeout(1)
// and container runtimes use, which a command's own exit 2 or 4 cannot be
// mistaken for.
const (
	exitRunFailed   = 125 // run itself failed: bad flags, refused registration, no mount
	exitRunNoExec   = 126 // the command was found but cannot be executed
	exitRunNotFound = 127 // the command was not found
)

// runExitCodes gives aerfs run's own failures run's exit codes, keeping
// the message and hint (a refusal still names its rule).
func runExitCodes(err error) error {
	if err == nil {
		return nil
	}
	var ce *cliError
	if errors.As(err, &ce) {
		if ce.code != exitRunNoExec && ce.code != exitRunNotFound {
			return &cliError{code: exitRunFailed, msg: ce.msg, hint: ce.hint}
		}
		return err
	}
	return &cliError{code: exitRunFailed, msg: err.Error()}
}
