package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/sandbox"
)

type runOptions struct {
	principal string
	session   string
	sandbox   string
}

func newRunCommand() *cobra.Command {
	var o runOptions
	c := &cobra.Command{
		Use:   "run [--principal P] [--session S] [--sandbox=off] -- CMD [ARGS...]",
		Short: "Run a command in a session under a principal",
		Long: `run registers this process with the daemon over the control socket and then
executes CMD in its place (same pid). CMD and everything it starts belong to
the session. The daemon authenticates the request by the kernel's peer
credentials and grants only principals at or below the caller's own.

Before it executes CMD, run confines the session (docs/confinement.md):
Landlock lets it change files only beneath the workspace and the policy's
sandbox.writable paths, keeps it out of the state directory and scopes
signals, abstract sockets and ptrace to the session; a seccomp filter under
no_new_privs refuses ptrace, process_vm_*, pidfd_getfd, mount, unshare and
the like. --sandbox=off runs CMD unconfined; the session start records it.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRun(o, args)
		},
	}
	c.Flags().StringVar(&o.principal, "principal", "", "SYS, USER, TOOL_AUTH, TOOL_UNAUTH, WEB, SKILL, CHANNEL or EXTERNAL (default: your own)")
	c.Flags().StringVar(&o.session, "session", "", "session name (default: a new session)")
	c.Flags().StringVar(&o.sandbox, "sandbox", "on", "on: confine the session (default); off: run it unconfined")
	return c
}

func runRun(o runOptions, args []string) error {
	if o.principal != "" {
		if _, err := policy.ParsePrincipal(o.principal); err != nil {
			return fail(exitUsage, "principals are SYS, USER, TOOL_AUTH, TOOL_UNAUTH, WEB, SKILL, CHANNEL, EXTERNAL", "unknown principal %q", o.principal)
		}
	}
	if o.sandbox != "on" && o.sandbox != "off" {
		return fail(exitUsage, "write --sandbox=on (the default) or --sandbox=off", "unknown --sandbox value %q", o.sandbox)
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		return fail(exitUsage, "check the command name and PATH", "%v", err)
	}
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	var sb *sandbox.Config
	planned := "off"
	if o.sandbox == "on" {
		sb = sessionSandbox(t)
		planned = "landlock abi " + strconv.Itoa(sandbox.LandlockABI()) + ", seccomp, no_new_privs"
	}
	resp, err := call(t, daemon.Request{Op: "register", Principal: o.principal, Session: o.session, Sandbox: planned})
	if err != nil {
		return err
	}
	var reg struct{ Session, Principal string }
	json.Unmarshal(resp.Data, &reg)
	env := append(os.Environ(), "AERFS_SESSION="+reg.Session, "AERFS_PRINCIPAL="+reg.Principal)
	if sb != nil {
		// The confinement holds for this thread and what it executes:
		// keep the goroutine on it until execve.
		runtime.LockOSThread()
		rep, err := sandbox.Apply(*sb)
		if err != nil {
			return fail(exitError, "run it unconfined with --sandbox=off if this kernel cannot confine it", "cannot confine session %s: %v", reg.Session, err)
		}
		env = append(env, "AERFS_SANDBOX="+rep.String())
	} else {
		env = append(env, "AERFS_SANDBOX=off")
	}
	// Same pid: the registration names this process as the session root.
	return syscall.Exec(path, args, env)
}

// sessionSandbox is the confinement of a session in workspace t: writes
// beneath the workspace and the policy's sandbox.writable paths (~ being
// the workspace owner's home), no reads of the state directory.
func sessionSandbox(t *target) *sandbox.Config {
	pol, err := policy.Load(filepath.Join(t.stateDir, daemon.PolicyName))
	if err != nil {
		// An unreadable or broken file: the daemon keeps its last good
		// policy; confine by the defaults rather than not at all.
		pol = policy.Default()
	}
	var st syscall.Stat_t
	home := ""
	owner := -1
	if syscall.Stat(t.workspace, &st) == nil {
		owner = int(st.Uid)
		if u, err := user.LookupId(strconv.Itoa(owner)); err == nil {
			home = u.HomeDir
		}
	}
	writable := pol.SandboxWritable(home)
	if owner == os.Getuid() && home != "" {
		// A cache the owner has not used yet: create it, or the session
		// could not (its parent is not writable to it).
		for _, w := range writable {
			if strings.HasPrefix(w, home+"/") {
				os.MkdirAll(w, 0o755)
			}
		}
	}
	return &sandbox.Config{Workspace: t.workspace, Writable: writable, Hidden: []string{t.stateDir}}
}
