package daemon

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/evidence"
	aerfs "github.com/aerfs/aerfs/fs"
	"github.com/aerfs/aerfs/guard"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// # Further roots
//
// A policy's roots (an agent's home-directory memory and configuration,
// such as ~/.claude) are guarded by the same daemon as the workspace: each
// is a FUSE mount over its own directory, served from a descriptor opened
// before the mount covered it, with a monitor of its own (its classes, its
// labels) that shares the workspace's principal registry, evidence log and
// policy. Records of a root's files name the root: "@claude/projects/…".
// The workspace's monitor routes such paths to the root's (restore,
// approve, burst rollback, drift at mount); each root has its own drift
// watcher. Unmounting the workspace unmounts every root.

// guardedRoot is one mounted further root.
type guardedRoot struct {
	root   policy.Root
	fd     int
	mon    *guarded
	labels *label.Store
	server *fuse.Server
	served *servedMount // leave.go
}

type rootSet struct {
	roots []*guardedRoot
	log   zerolog.Logger
}

// OwnerHome is the home directory of the owner of the workspace ws (the
// uid that owns it), where "~" of a policy root points.
func OwnerHome(ws string) string {
	var st syscall.Stat_t
	if syscall.Stat(ws, &st) != nil {
		return ""
	}
	u, err := user.LookupId(strconv.Itoa(int(st.Uid)))
	if err != nil {
		return ""
	}
	return u.HomeDir
}

// openRoots prepares a guard for each root of pol, to be attached to the
// workspace's guard. Nothing is mounted yet.
func openRoots(o Options, pol *policy.Policy, ws string, owner *syscall.Stat_t, reg *principal.Registry, rec ledger.Recorder, onCommit func(time.Duration), onBurst func(*principal.Session), fromIndex func(*guard.Config)) (*rootSet, error) {
	set := &rootSet{log: o.Log}
	if len(pol.Roots()) == 0 {
		return set, nil
	}
	home := ""
	if u, err := user.LookupId(strconv.Itoa(int(owner.Uid))); err == nil {
		home = u.HomeDir
	}
	roots, err := pol.ResolveRoots(home, ws, o.StateDir)
	if err != nil {
		return nil, fmt.Errorf("policy roots: %w", err)
	}
	// The same check on the directories as the kernel resolves them: a
	// symlink in a parent must not hide an overlap.
	real := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		if r, err := filepath.EvalSymlinks(filepath.Dir(p)); err == nil {
			return filepath.Join(r, filepath.Base(p))
		}
		return p
	}
	inside := func(a, b string) bool { return a == b || strings.HasPrefix(a, strings.TrimSuffix(b, "/")+"/") }
	for i, r := range roots {
		d := real(r.Dir)
		others := []string{real(ws), real(o.StateDir)}
		for _, q := range roots[:i] {
			others = append(others, real(q.Dir))
		}
		for _, x := range others {
			if inside(d, x) || inside(x, d) {
				return nil, fmt.Errorf("policy roots: root %s (%s, really %s) overlaps %s", r.Name, r.Dir, d, x)
			}
		}
	}
	for _, r := range roots {
		// "@name/…" is how records name the root's files: a workspace
		// entry of that name would be confused with them.
		if _, err := os.Lstat(filepath.Join(ws, policy.RootPrefix+r.Name)); err == nil {
			set.close()
			return nil, fmt.Errorf("the workspace holds %s%s, the name records give root %s's files: rename it (or the root) first", policy.RootPrefix, r.Name, r.Name)
		}
		if o.Warn != nil {
			for _, p := range bypassingProcesses(r.Dir) {
				o.Warn(p + " (root " + r.Name + ")")
			}
		}
		g, err := openRoot(o, r, owner, reg, rec, onCommit, onBurst, fromIndex)
		if err != nil {
			set.close()
			return nil, fmt.Errorf("root %s (%s): %w", r.Name, r.Dir, err)
		}
		set.roots = append(set.roots, g)
	}
	return set, nil
}

// guards are the roots' guards, for the workspace's.
func (s *rootSet) guards() []*guard.Guard {
	var out []*guard.Guard
	for _, g := range s.roots {
		out = append(out, g.mon.Guard)
	}
	return out
}

// attach notes the roots as attached to the workspace's guard mon.
func (s *rootSet) attach(mon *guarded) {
	mon.roots = map[string]bool{}
	for _, g := range s.roots {
		mon.roots[g.root.Name] = true
	}
	mountedRoots.Store(mon, s)
}

func openRoot(o Options, r policy.Root, owner *syscall.Stat_t, reg *principal.Registry, rec ledger.Recorder, onCommit func(time.Duration), onBurst func(*principal.Session), fromIndex func(*guard.Config)) (*guardedRoot, error) {
	if err := clearStaleMount(r.Dir); err != nil {
		return nil, err
	}
	if m := FindMount(r.Dir); m != nil && m.Mountpoint == r.Dir {
		return nil, fmt.Errorf("already mounted (state %s)", m.StateDir)
	}
	if m, inside := NestedMount(r.Dir); m != nil && m.StateDir != o.StateDir {
		// Another daemon's mount (this daemon's own workspace and roots
		// share its state directory).
		msg, hint := NestedMountError(r.Dir, m, inside)
		return nil, fmt.Errorf("%s (%s)", msg, hint)
	}
	fi, err := os.Lstat(r.Dir)
	if os.IsNotExist(err) {
		// The agent has not run yet: make its directory, the owner's,
		// so that its first files are guarded too.
		if err = os.MkdirAll(r.Dir, 0o700); err == nil {
			os.Chown(r.Dir, int(owner.Uid), int(owner.Gid))
			fi, err = os.Lstat(r.Dir)
		}
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("not a directory (a symlink is not followed: name the directory it points to)")
	}
	fd, err := syscall.Open(r.Dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	g := &guardedRoot{root: r, fd: fd}
	g.labels, err = label.Open(filepath.Join(o.StateDir, "labels-"+r.Name+".jsonl"))
	if err != nil {
		syscall.Close(fd)
		return nil, err
	}
	// A burst in a root quarantines the session and rolls back all it
	// changed, in every root: the workspace's guard routes the paths.
	gc := guard.Config{RootFd: fd, Path: r.Dir, StateDir: o.StateDir, Policy: r.Policy,
		Registry: reg, Labels: g.labels, Recorder: rec, Log: o.Log.With().Str("root", r.Name).Logger(), Root: r.Name,
		OnCommit: onCommit, OnBurst: onBurst}
	fromIndex(&gc)
	rg, err := guard.New(gc)
	if err != nil {
		g.labels.Close()
		syscall.Close(fd)
		return nil, err
	}
	g.mon = newGuarded(rg, rec, r.Name, fd)
	return g, nil
}

// mount mounts every root and starts its drift watcher. Called after the
// drift check at mount (the expected contents are known).
func (s *rootSet) mount(ctx context.Context, o Options, mon *guarded) error {
	for _, g := range s.roots {
		srv, err := aerfs.Mount(g.root.Dir, g.mon.Door(), aerfs.MountOptions{Debug: o.Debug, NoPassthrough: o.NoPassthrough})
		if err != nil {
			s.unmount()
			return fmt.Errorf("root %s: %w", g.root.Name, err)
		}
		g.server = srv
		if err := srv.WaitMount(); err != nil {
			go srv.Wait()
			s.unmount()
			return fmt.Errorf("root %s: %w", g.root.Name, err)
		}
		if g.served, err = newServedMount(g.root.Dir, o.StateDir, srv); err != nil {
			go srv.Wait()
			s.unmount()
			return fmt.Errorf("root %s: %w", g.root.Name, err)
		}
		mon.Record(&evidence.Record{Type: evidence.TypeMount, Principal: "SYS",
			Meta: evidence.Meta{Path: g.root.Dir, Pid: os.Getpid(), UID: uint32(os.Getuid()),
				Reason: "mounting root " + g.root.Name + " over " + g.root.Dir + " (its records are " + policy.RootPrefix + g.root.Name + "/…)"}})
		st, err := g.mon.State()
		if err != nil {
			s.log.Warn().Err(err).Str("root", g.root.Name).Msg("root files not read: drift is not watched")
			continue
		}
		paths := make([]string, 0, len(st))
		for p := range st {
			paths = append(paths, p)
		}
		if err := startDriftWatcher(ctx, g.mon, s.log, paths); err != nil {
			s.log.Warn().Err(err).Str("root", g.root.Name).Msg("drift is not watched")
		}
	}
	return nil
}

// unmount unmounts every mounted root (lazily when busy: the daemon is
// leaving) and records it.
func (s *rootSet) unmount() {
	for _, g := range s.roots {
		if g.server == nil {
			continue
		}
		s.log.Debug().Str("root", g.root.Name).Msg("unmounting root")
		// The workspace is gone and the daemon is leaving: a root still
		// in use is detached rather than left to a dead daemon.
		if g.served != nil {
			// Detached when busy, aborted when copies in other mount
			// namespaces keep it open (leave.go).
			if err := g.served.leave(true, s.log); err != nil {
				s.log.Error().Err(err).Str("root", g.root.Name).Msg("root cannot leave")
			}
		} else if syscall.Unmount(g.root.Dir, syscall.MNT_DETACH) != nil {
			fusermountUnmount(g.root.Dir, true)
		}
		g.server, g.served = nil, nil
		if err := g.mon.SyncBacking(); err != nil {
			s.log.Warn().Err(err).Str("root", g.root.Name).Msg("cannot flush the root's file system at unmount")
		}
		s.log.Info().Str("event", "unmounted").Str("root", g.root.Name).Str("path", g.root.Dir).Msg("root unmounted")
		g.mon.Record(&evidence.Record{Type: evidence.TypeUnmount, Principal: "SYS",
			Meta: evidence.Meta{Path: g.root.Dir, Pid: os.Getpid(), UID: uint32(os.Getuid()), Reason: "unmounted root " + g.root.Name}})
	}
}

// close releases what openRoots took.
func (s *rootSet) close() {
	if s == nil {
		return
	}
	mountedRoots.Range(func(k, v any) bool {
		if v == s {
			mountedRoots.Delete(k)
		}
		return true
	})
	s.unmount()
	for _, g := range s.roots {
		g.labels.Close()
		syscall.Close(g.fd)
	}
}

// checkAgent validates the agent a session registration names ("" for
// none): a short name of lowercase letters, digits and '-'.
func checkAgent(a string) string {
	if len(a) > 32 {
		return "agent name is longer than 32 characters"
	}
	for _, c := range a {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Sprintf("bad agent name %q", a)
		}
	}
	return ""
}

// agentDetail is what the session start record says of the agent.
func agentDetail(a string) string {
	if a == "" {
		return ""
	}
	return "; agent: " + a
}

// mountedRoots maps a workspace's monitor to its mounted roots, for status.
var mountedRoots sync.Map // *guarded → *rootSet

// addRootStatus adds the roots of the workspace's guard m to st, and their
// verdict counts to the workspace's.
func addRootStatus(m *guarded, st *Status) {
	v, ok := mountedRoots.Load(m)
	if !ok {
		return
	}
	for _, g := range v.(*rootSet).roots {
		if st.Roots == nil {
			st.Roots = map[string]string{}
		}
		st.Roots[policy.RootPrefix+g.root.Name] = g.root.Dir
		gs := g.mon.Status()
		drift, n := g.mon.driftFound()
		for _, d := range drift {
			if len(st.Drift) < maxDriftShown {
				d.Path = policy.RootPrefix + g.root.Name + "/" + d.Path
				st.Drift = append(st.Drift, d)
			}
		}
		st.DriftCount += n
		st.Labels += gs.Labels
		st.Allowed += gs.Allowed
		st.Denied += gs.Denied
		st.Committed += gs.Committed
		st.Quarantined += gs.Quarantined
	}
}
