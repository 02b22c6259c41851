package main

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/sandbox"
)

// The owner's commands that read a root daemon's state directory (log,
// history, pending, verify, export …) are run by the daemon for them: see
// daemon/ownerread.go. forwardRead is the owner's side, owner-read the
// daemon's child.

// exitOnly ends aerfs with code and prints nothing more: the command that
// ran for the owner has said everything.
type exitOnly struct{ code int }

func (e *exitOnly) Error() string { return fmt.Sprintf("exit %d", e.code) }

// forwardRead runs this invocation of aerfs through the daemon serving t
// and returns what it ended with.
func forwardRead(t *target) error {
	args := stripGlobalFlags(os.Args[1:])
	hint := "run it as root: sudo aerfs " + strings.Join(os.Args[1:], " ")
	if len(args) == 0 || !daemon.OwnerReadCommands[args[0]] || args[0] == "report" {
		return fail(exitError, hint, "the state directory %s is the aerfs daemon's (root-owned, mode 0700)", t.stateDir)
	}
	// A key named @FILE is the owner's file: read it here.
	for i := 0; i < len(args); i++ {
		if k, ok := flagValue(args, i, "--key", ""); ok && strings.HasPrefix(args[k], "@") {
			b, err := os.ReadFile(args[k][1:])
			if err != nil {
				return fail(exitIO, "", "cannot read key: %v", err)
			}
			args[k] = strings.TrimSpace(string(b))
		}
	}
	// An output file is the owner's too: the daemon's command writes to
	// its standard output and this process writes the file.
	var out string
	for i := 0; i < len(args); i++ {
		if k, ok := flagValue(args, i, "--output", "-o"); ok && args[k] != "-" {
			out, args[k] = args[k], "-"
		}
	}
	var sink io.Writer = os.Stdout
	var buf *os.File
	if out != "" {
		if _, err := os.Lstat(out); err == nil && args[0] == "export" {
			return fail(exitError, "", "evidence: export: %s already exists", out)
		}
		f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp")
		if err != nil {
			return err
		}
		defer os.Remove(f.Name())
		defer f.Close()
		buf, sink = f, f
	}
	var stderr io.Writer = os.Stderr
	if out != "" {
		stderr = &renameOutput{w: os.Stderr, out: out}
	}
	code, refusal, err := daemon.CallRead(t.stateDir, args, sink, stderr)
	if err != nil {
		return fail(exitNotMounted, hint, "reading the state through the aerfs daemon: %v", err)
	}
	if refusal != nil {
		if refusal.Refused {
			return fail(exitRefused, refusal.Hint, "%s (rule %s)", refusal.Error, refusal.Rule)
		}
		if refusal.Hint == "" {
			refusal.Hint = hint
		}
		return fail(exitError, refusal.Hint, "%s", refusal.Error)
	}
	if code == 0 && buf != nil {
		if err := placeOutput(buf, out, args[0] == "export"); err != nil {
			return err
		}
	}
	return &exitOnly{code: code}
}

// exportThroughDaemon has the daemon export its whole log for the owner
// into the zip bundle at out.
func exportThroughDaemon(t *target, out string) error {
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	var msg bytes.Buffer
	code, refusal, err := daemon.CallRead(t.stateDir, []string{"export", "-o", "-"}, f, &msg)
	switch {
	case err != nil:
		return fail(exitNotMounted, "run it as root: sudo aerfs "+strings.Join(os.Args[1:], " "), "reading the state through the aerfs daemon: %v", err)
	case refusal != nil && refusal.Refused:
		return fail(exitRefused, refusal.Hint, "%s (rule %s)", refusal.Error, refusal.Rule)
	case refusal != nil:
		return fail(exitError, refusal.Hint, "%s", refusal.Error)
	case code != 0:
		return fail(exitError, "check it with: aerfs verify --state "+t.stateDir, "cannot export the evidence log: %s", strings.TrimSpace(msg.String()))
	}
	return f.Sync()
}

// placeOutput moves what the daemon's command wrote into place at out: a
// report or a zip bundle as it is, a bundle for a directory unpacked.
func placeOutput(f *os.File, out string, bundle bool) error {
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if !bundle || strings.HasSuffix(out, ".zip") {
		if err := f.Sync(); err != nil {
			return err
		}
		return os.Rename(f.Name(), out)
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	z, err := zip.NewReader(f, fi.Size())
	if err != nil {
		return fmt.Errorf("the bundle the daemon sent: %w", err)
	}
	tmp := filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".tmp")
	os.RemoveAll(tmp)
	for _, e := range z.File {
		name := filepath.Clean(filepath.FromSlash(e.Name))
		if name == "." || strings.HasPrefix(name, "..") || filepath.IsAbs(name) {
			os.RemoveAll(tmp)
			return fmt.Errorf("the bundle the daemon sent names %q", e.Name)
		}
		p := filepath.Join(tmp, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			os.RemoveAll(tmp)
			return err
		}
		r, err := e.Open()
		if err == nil {
			var w *os.File
			if w, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
				_, err = io.Copy(w, r)
				if cerr := w.Close(); err == nil {
					err = cerr
				}
			}
			r.Close()
		}
		if err != nil {
			os.RemoveAll(tmp)
			return err
		}
	}
	return os.Rename(tmp, out)
}

// renameOutput says the owner's file where the command says "-".
type renameOutput struct {
	w   io.Writer
	out string
}

func (r *renameOutput) Write(b []byte) (int, error) {
	if bytes.HasPrefix(b, []byte("exported -:")) {
		r.w.Write([]byte("exported " + r.out + string(b[len("exported -"):])))
		return len(b), nil
	}
	return r.w.Write(b)
}

// flagValue says whether args[i] is the flag long (or short) and where its
// value is: "--output X" or "-o X" (stripGlobalFlags split the other
// forms).
func flagValue(args []string, i int, long, short string) (int, bool) {
	a := args[i]
	switch {
	case a == "--":
		return 0, false
	case a == long || (short != "" && a == short):
		if i+1 < len(args) {
			return i + 1, true
		}
	}
	return 0, false
}

// stripGlobalFlags drops --workspace and --state (used to find the
// daemon) from args and splits "--output=X", "--key=K" and "-oX" into
// two arguments.
func stripGlobalFlags(in []string) []string {
	var out []string
	for i := 0; i < len(in); i++ {
		a := in[i]
		if a == "--" {
			out = append(out, in[i:]...)
			break
		}
		if a == "--workspace" || a == "--state" {
			i++
			continue
		}
		if strings.HasPrefix(a, "--workspace=") || strings.HasPrefix(a, "--state=") {
			continue
		}
		if k, v, ok := strings.Cut(a, "="); ok && (k == "--output" || k == "--key") {
			out = append(out, k, v)
			continue
		}
		if strings.HasPrefix(a, "-o") && len(a) > 2 && !strings.HasPrefix(a, "--") {
			out = append(out, "-o", a[2:])
			continue
		}
		out = append(out, a)
	}
	return out
}

// newOwnerReadCommand is the daemon's child that runs one reading command
// for the owner: it confines itself to reading the state directory and
// the workspace, then executes the command.
func newOwnerReadCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "owner-read STATE WORKSPACE DIR -- COMMAND [ARG...]",
		Short:              "Run a command that reads the state directory, confined to reading (the daemon's, for the owner)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) < 5 || args[3] != "--" {
				return fail(exitUsage, "", "usage: aerfs owner-read STATE WORKSPACE DIR -- COMMAND [ARG...]")
			}
			if os.Getenv(daemon.OwnerReadEnv) == "" {
				return fail(exitUsage, "", "owner-read is run by the aerfs daemon")
			}
			state, ws, dir, rest := args[0], args[1], args[2], args[4:]
			// Where the owner ran the command (relative FILE arguments).
			if err := os.Chdir(dir); err != nil {
				return err
			}
			read, exec, hidden := daemon.OwnerReadPaths(state, ws)
			// The further roots' files are the workspace's too (diff
			// --to current of "@claude/…").
			for _, r := range policyRoots(&target{workspace: ws, stateDir: state}) {
				read = append(read, r.Dir)
			}
			// The confinement holds for this thread and what it
			// executes next.
			runtime.LockOSThread()
			if err := maskPaths(hidden); err != nil {
				return fail(exitError, "run it as root: sudo aerfs "+strings.Join(rest, " "),
					"cannot hide the signing key from the reader of the state directory: %v", err)
			}
			if err := sandbox.RestrictToReading(read, exec, nil); err != nil {
				return fail(exitError, "run it as root: sudo aerfs "+strings.Join(rest, " "),
					"cannot confine the reader of the state directory: %v", err)
			}
			argv := append([]string{"aerfs", "--state", state, "--workspace", ws}, rest...)
			return syscall.Exec("/proc/self/exe", argv, os.Environ())
		},
	}
}

// maskPaths hides each file in paths from this thread and what it executes
// next: in a mount namespace of its own, /dev/null is bound over it. The
// reader's Landlock rules cover whole directories (a checkpoint the daemon
// replaces while the reader runs stays readable); the signing key in them
// is masked this way instead.
func maskPaths(paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("private mounts: %w", err)
	}
	for _, p := range paths {
		// Fail closed: a path to hide that is not there now (the state
		// directory moved away for a moment) could be there again when
		// the reader reads.
		if err := unix.Mount("/dev/null", p, "", unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("mask %s: %w", p, err)
		}
	}
	return nil
}
