package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/internal/printable"
	"github.com/aerfs/aerfs/policy"
)

type mountOptions struct {
	asJSON     bool
	metrics    string // --metrics-addr
	logMax     int64  // bytes of daemon.log before it rotates
	logKeep    int    // rotated files kept
	foreground bool
	readyFd    int
	debug      bool
	noPT       bool
	newState   bool // --new-state: accept and pin another evidence log
}

func newMountCommand() *cobra.Command {
	var o mountOptions
	c := &cobra.Command{
		Use:   "mount WORKSPACE",
		Short: "Mount aerfs over the workspace (returns once the mount serves)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMount(cmd.Context(), o, args[0])
		},
	}
	c.Flags().BoolVar(&o.foreground, "foreground", false, "serve in the foreground instead of starting a daemon")
	c.Flags().IntVar(&o.readyFd, "ready-fd", 0, "file descriptor to report readiness on (used by the background start)")
	c.Flags().BoolVar(&o.debug, "debug", false, "log every FUSE request")
	c.Flags().BoolVar(&o.noPT, "no-passthrough", false, "serve plain file data through the daemon, as an unprivileged mount does (for comparison, or a kernel whose passthrough misbehaves)")
	c.Flags().BoolVar(&o.asJSON, "json", false, "once mounted, print the workspace, state directory and daemon pid as JSON")
	c.Flags().StringVar(&o.metrics, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464)")
	c.Flags().Int64Var(&o.logMax, "log-max-size", 10<<20, "rotate daemon.log in the state directory past this many bytes (0: never)")
	c.Flags().IntVar(&o.logKeep, "log-keep", 5, "rotated daemon logs to keep (daemon.log.1 … daemon.log.N)")
	c.Flags().BoolVar(&o.newState, "new-state", false, "accept a state directory whose evidence log is not the one this workspace was first mounted with (root: the pin is replaced, the mount record says so)")
	c.Flags().MarkHidden("ready-fd")
	return c
}

func runMount(ctx context.Context, o mountOptions, wsArg string) error {
	ws, err := filepath.Abs(wsArg)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(ws); err != nil && !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) || err == nil && !fi.IsDir() {
		return fail(exitNoWorkspace, "check the path, or create the directory and run aerfs init", "workspace %s does not exist or is not a directory", wsArg)
	}
	if r, err := filepath.EvalSymlinks(ws); err == nil {
		ws = r
	}
	if m := daemon.FindMount(ws); m != nil && m.Mountpoint == ws && !staleMount(ws) {
		return fail(exitError, "aerfs status --workspace "+ws+" shows it, aerfs list every mount; aerfs unmount "+ws+" first to mount it again",
			"%s is already mounted (state %s)", ws, m.StateDir)
	}
	if m, inside := daemon.NestedMount(ws); m != nil {
		msg, hint := daemon.NestedMountError(ws, m, inside)
		return fail(exitError, hint, "%s", msg)
	}
	state := gopts.state
	if state == "" {
		state = findStateDir(ws)
	}
	if state, err = filepath.Abs(state); err != nil {
		return err
	}
	// Root follows no link the owner put in the state directory: not to
	// read the policy, not to append the daemon's log (it would create or
	// extend any file on the system).
	if _, err := os.Lstat(state); errors.Is(err, os.ErrNotExist) {
		return notInitialised(ws, state, "no state directory "+state)
	}
	// One state directory serves one workspace: its log is locked by the
	// daemon that serves it.
	if at := mountedElsewhere(state, ws); len(at) > 0 {
		return fail(exitError, "aerfs list shows every mount; to move the state to "+ws+": aerfs unmount "+at[0]+", then aerfs mount --state "+state+" "+ws,
			"the state directory %s already serves %s (mounted)", state, strings.Join(at, ", "))
	}
	if err := daemon.CheckStateEntries(state); err != nil {
		return fail(exitRefused, "", "%v", err)
	}
	if _, err := os.Stat(filepath.Join(state, daemon.PolicyName)); err != nil {
		return notInitialised(ws, state, "no policy in "+state)
	}
	// Check the policy here too, so a bad one is reported to the user
	// and not only in the daemon's log.
	if _, err := policy.Load(filepath.Join(state, daemon.PolicyName)); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		if err := rootlessPreflight(); err != nil {
			return err
		}
	}
	if !o.foreground {
		return startDaemon(ws, state, o)
	}
	// daemon.log holds only JSON lines, rotated by size; anything else
	// the process prints (a Go runtime panic) goes to daemon.stderr.
	logf, err := openRotating(filepath.Join(state, "daemon.log"), o.logMax, o.logKeep)
	if err != nil {
		return err
	}
	defer logf.Close()
	var w io.Writer = logf
	if o.readyFd == 0 {
		// In the foreground: readable lines on a terminal; JSON lines
		// otherwise (a systemd unit: journald keeps them as they are).
		if isTerminal(os.Stderr) {
			w = zerolog.MultiLevelWriter(logf, consoleLog(os.Stderr))
		} else {
			w = zerolog.MultiLevelWriter(logf, os.Stderr)
		}
	}
	// Repeated warnings and errors are limited: daemon.log lives in the
	// state directory, and a full disk must not be refilled by complaints
	// about it (daemon/quietlog.go).
	log := zerolog.New(w).With().Timestamp().Logger().Hook(daemon.NewRepeatLimiter())
	var ready func(error)
	warn := func(s string) {
		log.Warn().Msg(s)
		fmt.Fprintf(os.Stderr, "aerfs: warning: %s (it bypasses the mount)\n", printable.Line(s))
	}
	if o.readyFd > 0 {
		f := os.NewFile(uintptr(o.readyFd), "ready")
		// Warnings travel over the readiness pipe to the user's terminal.
		warn = func(s string) {
			log.Warn().Msg(s)
			// One line each: a name with a newline must not end the
			// warning early, nor read as "ready" to the waiting mount.
			fmt.Fprintf(f, "warn %s (it bypasses the mount)\n", printable.Line(s))
		}
		ready = func(err error) {
			if err != nil {
				fmt.Fprintf(f, "error %s\n", printable.Line(err.Error()))
			} else {
				fmt.Fprintln(f, "ready")
			}
			f.Close()
		}
	} else {
		ready = func(err error) {
			if err == nil {
				fmt.Fprintf(os.Stderr, "aerfs: serving %s (state %s); Ctrl-C unmounts\n", ws, state)
				// Under systemd (Type=notify) the unit is started
				// only now; elsewhere NOTIFY_SOCKET is unset and
				// this does nothing.
				if _, err := sddaemon.SdNotify(false, sddaemon.SdNotifyReady+"\nSTATUS=serving "+ws); err != nil {
					log.Warn().Err(err).Msg("cannot tell systemd that the mount serves")
				}
			}
		}
		defer sddaemon.SdNotify(false, sddaemon.SdNotifyStopping)
	}
	// Operators' lines: when the mount serves and when it ends, with the
	// version that served it.
	v := buildVersion()
	announce := ready
	served := false
	ready = func(err error) {
		if err == nil {
			served = true
			log.Info().Str("event", "mounted").Str("workspace", ws).Str("state", state).
				Str("version", v.Version).Str("revision", v.Revision).Int("pid", os.Getpid()).Msg("mounted")
		}
		announce(err)
	}
	err = daemon.Run(ctx, daemon.Options{Workspace: ws, StateDir: state, Debug: o.debug, NoPassthrough: o.noPT, MetricsAddr: o.metrics, Version: v.Version, Log: log, Ready: ready, Warn: warn, NewState: o.newState})
	switch {
	case err != nil && !served:
		// The user is told by the command itself; the line is for the
		// record (a second mount of a mounted workspace ends here).
		log.Warn().Str("event", "mount_failed").Str("workspace", ws).Err(err).Msg("did not mount")
	case err != nil:
		log.Error().Str("event", "unmounted").Str("workspace", ws).Err(err).Msg("stopped with an error")
	default:
		log.Info().Str("event", "unmounted").Str("workspace", ws).Msg("unmounted")
	}
	if errors.Is(err, daemon.ErrNoWorkspace) {
		return fail(exitNoWorkspace, "check the path", "%v", err)
	}
	return err
}

// notInitialised is the usage error of a mount before aerfs init: it names
// the command to run, with the state directory when one was given.
func notInitialised(ws, state, why string) error {
	hint := "run: aerfs init " + ws + " (or pass the --state DIR it was initialised with)"
	if gopts.state != "" {
		hint = "run: aerfs init --state " + state + " " + ws + " (or pass the --state DIR it was initialised with)"
	}
	return fail(exitUsage, hint, "%s is not initialised (%s)", ws, why)
}

// startDaemon starts `aerfs mount --foreground` in the background and waits
// until it serves or fails.
func startDaemon(ws, state string, o mountOptions) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	args := []string{"mount", "--foreground", "--ready-fd", "3", "--state", state, ws}
	if o.noPT {
		args = append(args, "--no-passthrough")
	}
	if o.newState {
		args = append(args, "--new-state")
	}
	if o.debug {
		args = append(args, "--debug")
	}
	args = append(args, fmt.Sprintf("--log-max-size=%d", o.logMax), fmt.Sprintf("--log-keep=%d", o.logKeep))
	if o.metrics != "" {
		args = append(args, "--metrics-addr", o.metrics)
	}
	cmd := exec.Command(self, args...)
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdin = nil
	cmd.Dir = "/"
	errf, err := os.OpenFile(filepath.Join(state, "daemon.stderr"), os.O_CREATE|os.O_APPEND|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer errf.Close()
	cmd.Stdout, cmd.Stderr = errf, errf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	w.Close()
	// A first mount of a long log builds its index before it serves.
	pr := startProgress("mount")
	pr.spin("the daemon reads the evidence log")
	defer pr.done()
	br := bufio.NewReader(r)
	var line string
	for {
		l, err := br.ReadString('\n')
		line = strings.TrimSpace(l)
		if w, ok := strings.CutPrefix(line, "warn "); ok {
			pr.done()
			fmt.Fprintf(os.Stderr, "aerfs: warning: %s\n", printable.Line(w))
			continue
		}
		if err != nil || line != "" {
			break
		}
	}
	r.Close()
	pr.done()
	if line == "ready" {
		// Drift found at mount: guarded files changed while unmounted.
		var st daemon.Status
		if resp, err := daemon.Call(state, daemon.Request{Op: "status"}); err == nil && resp.OK {
			json.Unmarshal(resp.Data, &st)
		}
		if o.asJSON {
			b, _ := json.Marshal(map[string]any{"workspace": ws, "state": state, "pid": cmd.Process.Pid, "drift": st.Drift, "drift_count": st.DriftCount})
			fmt.Println(string(b))
		} else {
			fmt.Fprintf(os.Stderr, "aerfs: mounted %s (daemon pid %d, state %s)\n", ws, cmd.Process.Pid, state)
			printDrift(os.Stderr, "aerfs: drift: ", &st, " --workspace "+ws+" --state "+state)
		}
		cmd.Process.Release()
		return nil
	}
	cmd.Wait()
	if msg, ok := strings.CutPrefix(line, "error "); ok {
		return fail(exitError, "details in "+filepath.Join(state, "daemon.log"), "mount failed: %s", msg)
	}
	return fail(exitError, "details in "+filepath.Join(state, "daemon.log")+" and "+filepath.Join(state, "daemon.stderr"), "the aerfs daemon exited before the mount was ready")
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// rootlessPreflight checks, before an unprivileged mount, the pieces it
// needs and names the one that is missing: /dev/fuse readable and writable
// by this user, and a setuid fusermount3 (or fusermount) to mount and
// unmount through.
func rootlessPreflight() error {
	uid := os.Geteuid()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	switch {
	case err == nil:
		unix.Close(fd)
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO):
		return fail(exitError, "as root: modprobe fuse (the kernel's FUSE module), then try again", "/dev/fuse is missing: this kernel offers no FUSE")
	default:
		mode := ""
		if fi, serr := os.Stat("/dev/fuse"); serr == nil {
			mode = fmt.Sprintf(" (mode %04o)", fi.Mode().Perm())
		}
		return fail(exitError, "as root: chmod 0666 /dev/fuse (Debian's fuse3 package does it through udev), or run aerfs mount as root",
			"/dev/fuse is not readable and writable by uid %d%s: %v", uid, mode, err)
	}
	helper, err := exec.LookPath("fusermount3")
	if err != nil {
		if helper, err = exec.LookPath("fusermount"); err != nil {
			return fail(exitError, "as root: apt-get install fuse3 (it provides the setuid fusermount3)", "an unprivileged mount needs fusermount3, and it is not on PATH")
		}
	}
	if fi, err := os.Stat(helper); err == nil && (fi.Mode()&os.ModeSetuid == 0) {
		return fail(exitError, "as root: chmod u+s "+helper+" (and make sure it is owned by root)", "%s is not setuid: an unprivileged user cannot mount through it", helper)
	}
	return nil
}

// staleMount reports whether the mount at ws has lost its daemon (killed):
// the kernel answers "transport endpoint is not connected", and the mount
// about to start clears it.
func staleMount(ws string) bool {
	var st syscall.Statfs_t
	err := syscall.Statfs(ws, &st)
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED)
}

// consoleLog is the daemon's log on the owner's terminal (a foreground
// mount): readable lines whose every message and value is escaped, since
// they carry names sessions chose (directories, sessions, hosts).
func consoleLog(out io.Writer) zerolog.ConsoleWriter {
	safe := func(i any) string {
		if i == nil {
			return ""
		}
		return printable.Line(fmt.Sprint(i))
	}
	return zerolog.ConsoleWriter{Out: out, TimeFormat: time.TimeOnly, NoColor: os.Getenv("NO_COLOR") != "",
		FormatMessage: safe, FormatFieldValue: safe, FormatErrFieldValue: safe}
}
