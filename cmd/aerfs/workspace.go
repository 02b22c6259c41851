package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/daemon"
)

// defaultStateDir is where `aerfs init` keeps the state of ws: outside the
// workspace, under $XDG_STATE_HOME/aerfs/<name>-<hash of the path>.
func defaultStateDir(ws string) string {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil || home == "" {
			home = "/root"
		}
		base = filepath.Join(home, ".local", "state")
	}
	sum := sha256.Sum256([]byte(ws))
	return filepath.Join(base, "aerfs", filepath.Base(ws)+"-"+hex.EncodeToString(sum[:4]))
}

func absClean(p string) (string, error) {
	a, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if r, err := filepath.EvalSymlinks(a); err == nil {
		a = r
	}
	return a, nil
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// target is the workspace and state directory a command works on.
type target struct {
	workspace string
	stateDir  string
	mounted   bool
	// viaDaemon: the state directory is the daemon's and the caller
	// cannot read it; the daemon serving it reads it for the owner
	// (findTargetReading).
	viaDaemon bool
}

// findTarget locates the workspace from --workspace or the current
// directory, and its state directory from --state, the mount table, or the
// default location.
func findTarget(needMount bool) (*target, error) {
	return findTargetFor(needMount, false)
}

// findTargetMountedBySocket is findTarget(false) for a command that, when
// the workspace is mounted, works through the control socket alone (gc):
// it does not need to read the state directory then.
func findTargetMountedBySocket() (*target, error) {
	return findTargetFor(false, true)
}

// findTargetReading is findTarget(false) for a command that reads the
// state directory through the daemon itself when it cannot read it
// (t.viaDaemon), instead of being run by the daemon whole.
func findTargetReading() (*target, error) {
	return findTargetOpts(false, false, false)
}

func findTargetFor(needMount, socketWhenMounted bool) (*target, error) {
	return findTargetOpts(needMount, socketWhenMounted, true)
}

func findTargetOpts(needMount, socketWhenMounted, forward bool) (*target, error) {
	ws := gopts.workspace
	if ws == "" && gopts.state != "" {
		// The state directory records the workspace it belongs to; a
		// root daemon's state is not readable by the owner, whose
		// mount table names it instead.
		if b, err := os.ReadFile(filepath.Join(gopts.state, "workspace")); err == nil {
			ws = strings.TrimSpace(string(b))
		} else if a, err := absClean(gopts.state); err == nil {
			if m := daemon.FindMountOfState(a); m != nil {
				ws = m.Mountpoint
			}
		}
	}
	if ws == "" {
		cwd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		if m := daemon.FindMount(cwd); m != nil {
			ws = mountWorkspace(m)
		} else if gopts.state == "" {
			return nil, fail(exitNotMounted, "run it inside a mounted workspace, or pass --workspace DIR",
				"%s is not inside an aerfs mount", cwd)
		}
	}
	t := &target{stateDir: gopts.state}
	if ws != "" {
		a, err := absClean(ws)
		if err != nil {
			return nil, err
		}
		t.workspace = a
		if m := daemon.FindMount(a); m != nil && m.Mountpoint == a {
			t.mounted = true
			if t.stateDir == "" {
				t.stateDir = m.StateDir
			}
		}
		if t.stateDir == "" {
			t.stateDir = findStateDir(a)
		}
	}
	if needMount && !t.mounted {
		if t.workspace == "" {
			return nil, fail(exitNotMounted, "pass --workspace DIR (or --state DIR of an initialised workspace)", "no workspace given")
		}
		return nil, fail(exitNotMounted, "mount it first: aerfs mount"+t.stateFlag()+" "+t.workspace, "%s is not mounted", t.workspace)
	}
	if _, err := os.Stat(t.stateDir); errors.Is(err, os.ErrNotExist) {
		return nil, fail(exitNotMounted, "run: aerfs init "+t.workspace+" (with --state DIR if its state is elsewhere)", "no state directory at %s", t.stateDir)
	}
	if !needMount && !(socketWhenMounted && t.mounted) && !stateReadable(t.stateDir) {
		// The commands that read the state directory themselves (log,
		// history, verify, export, report …). A root daemon's state is
		// its own: the owner reads it as root; the requests that change
		// something go through the control socket and work as the owner.
		// While it serves the workspace, the daemon runs the command for
		// the owner (ownerread.go).
		if t.mounted && os.Getenv(daemon.OwnerReadEnv) == "" {
			if !forward {
				t.viaDaemon = true
				return t, nil
			}
			return nil, forwardRead(t)
		}
		return nil, fail(exitError, "run it as root: sudo aerfs "+strings.Join(os.Args[1:], " "),
			"the state directory %s is the aerfs daemon's (root-owned, mode 0700): while the workspace is not mounted, its log, versions and policy are read as root", t.stateDir)
	}
	return t, nil
}

// stateReadable says whether this process can read the state directory:
// the daemon's is root's, and a confined session's view of it is empty.
func stateReadable(dir string) bool {
	if unix.Access(dir, unix.R_OK|unix.X_OK) != nil {
		return false
	}
	_, err := os.Stat(filepath.Join(dir, "evidence"))
	return !errors.Is(err, os.ErrNotExist)
}

// stateSummary says who holds the state directory, for aerfs status.
func stateSummary(st *daemon.Status) string {
	switch st.StateMode {
	case daemon.StateDaemons:
		return "root-owned 0700, control socket " + st.Socket
	case daemon.StateOwners:
		return "owner's (rootless); sessions kept out by confinement, control socket " + st.Socket
	}
	return "unknown"
}

// stateLink is the file, in a workspace's default state directory, that
// names the state directory `aerfs init --state DIR` chose instead: every
// command finds the state from the workspace, mounted or not.
const stateLink = "state-dir"

// findStateDir is the state directory of ws: the default one, or the one
// it points to.
func findStateDir(ws string) string {
	def := defaultStateDir(ws)
	if b, err := os.ReadFile(filepath.Join(def, stateLink)); err == nil {
		if p := strings.TrimSpace(string(b)); filepath.IsAbs(p) {
			return p
		}
	}
	return def
}

// stateFlag is " --state DIR" when the state directory is not the one the
// workspace alone leads to, so that hints can be followed as printed.
func (t *target) stateFlag() string {
	if t.stateDir == "" || (t.workspace != "" && findStateDir(t.workspace) == t.stateDir) {
		return ""
	}
	return " --state " + t.stateDir
}

// flags is what a printed command needs to reach this workspace from
// anywhere: --workspace, and --state when it is not found from there.
func (t *target) flags() string {
	f := t.stateFlag()
	if t.workspace != "" {
		f = " --workspace " + t.workspace + f
	}
	return f
}

// call sends a control request and turns refusals and failures into
// errors with exit codes.
func call(t *target, req daemon.Request) (*daemon.Response, error) {
	resp, err := daemon.Call(t.stateDir, req)
	if err != nil {
		return nil, fail(exitNotMounted, "is the workspace mounted? aerfs status"+t.flags(), "%v", err)
	}
	if resp.Refused {
		return nil, fail(exitRefused, resp.Hint, "%s (rule %s)", resp.Error, resp.Rule)
	}
	if !resp.OK {
		return nil, fail(exitError, resp.Hint, "%s", resp.Error)
	}
	return resp, nil
}

// syncLog asks the daemon, if one serves this state directory, to make the
// records it has queued durable, so that a reader sees the verdicts of
// operations that just returned. Without a daemon the log is complete.
func syncLog(stateDir string) {
	daemon.Call(stateDir, daemon.Request{Op: "sync"})
}
