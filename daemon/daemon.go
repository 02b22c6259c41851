package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/authority"
	"github.com/aerfs/aerfs/evidence"
	aerfs "github.com/aerfs/aerfs/fs"
	"github.com/aerfs/aerfs/guard"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/internal/mountinfo"
	"github.com/aerfs/aerfs/metrics"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// PolicyName is the policy file inside the state directory.
const PolicyName = "aerfs.yaml"

// Options configure Run.
type Options struct {
	Workspace string
	StateDir  string
	Debug     bool
	// NoPassthrough serves plain file data through the daemon.
	NoPassthrough bool
	// Version is the aerfs version that serves the mount; the mount record
	// carries it.
	Version string
	// MetricsAddr, when set, serves Prometheus metrics at
	// http://MetricsAddr/metrics.
	MetricsAddr string
	Log         zerolog.Logger
	// Ready is called once: with nil when the mount serves, or with the
	// error that stopped it.
	Ready func(error)
	// Warn receives notices for the user (processes that bypass the mount).
	Warn func(string)
	// NewState accepts a state directory whose evidence log is not the
	// one the workspace is pinned to (pin.go), and pins it instead.
	NewState bool
}

// ErrNoWorkspace is returned when the workspace is missing or not a
// directory.
var ErrNoWorkspace = errors.New("workspace is not a directory")

// Run mounts and serves until the mount is unmounted or ctx is done.
func Run(ctx context.Context, o Options) (err error) {
	ready := o.Ready
	if ready == nil {
		ready = func(error) {}
	}
	defer func() {
		if err != nil && ready != nil {
			ready(err)
		}
	}()
	syscall.Umask(0) // the kernel has already applied the caller's umask
	boundMemory()

	ws, err := filepath.Abs(o.Workspace)
	if err != nil {
		return err
	}
	if err := clearStaleMount(ws); err != nil {
		return err
	}
	fi, err := os.Stat(ws)
	if err != nil || !fi.IsDir() {
		return fmt.Errorf("%w: %s", ErrNoWorkspace, ws)
	}
	if m := FindMount(ws); m != nil && m.Mountpoint == ws {
		return fmt.Errorf("%s is already mounted (state %s)", ws, m.StateDir)
	}
	if m, inside := NestedMount(ws); m != nil {
		msg, hint := NestedMountError(ws, m, inside)
		return fmt.Errorf("%s (%s)", msg, hint)
	}
	if err := CheckStateEntries(o.StateDir); err != nil {
		return err
	}
	// A root daemon serves a workspace only from the evidence log it was
	// pinned to (pin.go), before it reads anything else of the state.
	if os.Geteuid() == 0 && !o.NewState {
		if err := checkPin(ws, o.StateDir); err != nil {
			return err
		}
	}
	pol, err := policy.Load(filepath.Join(o.StateDir, PolicyName))
	if err != nil {
		return err
	}
	// A root daemon's state directory is its own: neither the owner nor
	// the owner's sessions may change the policy, the log or the keys.
	stateMode := StateOwners
	if os.Geteuid() == 0 {
		if err := claimStateDir(o.StateDir); err != nil {
			return err
		}
		stateMode = StateDaemons
	}
	if o.Warn != nil {
		for _, p := range bypassingProcesses(ws) {
			o.Warn(p)
		}
	}
	rootFd, err := syscall.Open(ws, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(rootFd)

	// A daemon that was just killed may still hold the log's lock for a
	// moment while the kernel tears it down.
	elog, err := evidence.Open(o.StateDir)
	for i := 0; err != nil && strings.Contains(err.Error(), "in use") && i < 30; i++ {
		time.Sleep(100 * time.Millisecond)
		elog, err = evidence.Open(o.StateDir)
	}
	if err != nil {
		return err
	}
	defer elog.Close()
	mountStart := elog.Size()
	// The log's index: what the mount reads instead of the whole log
	// (state.go). Written once more after the unmount record.
	keeper, err := openIndex(o.StateDir, elog, o.Log)
	if err != nil {
		return err
	}
	defer func() {
		elog.Flush()
		if err := keeper.Close(); err != nil {
			o.Log.Warn().Err(err).Msg("the log's index is not written at unmount: the next mount reads the records since its last copy")
		}
	}()
	labels, err := label.Open(filepath.Join(o.StateDir, "labels.jsonl"))
	if err != nil {
		return err
	}
	defer labels.Close()

	ev := &events{}
	var mon *guarded
	reg := principal.NewRegistry(fi.Sys().(*syscall.Stat_t).Uid, func() *policy.Policy { return mon.Policy() }, ev)
	reg.SetStateDir(o.StateDir)
	reg.SetArchive(sessionArchive{x: keeper.Index(), mountStart: mountStart})
	health := &logHealth{ok: true, log: o.Log}
	rec := &countingRecorder{Recorder: elog, health: health}
	elog.OnHealth(health.note) // a log that heals by itself, with nobody appending, says so
	if o.MetricsAddr != "" {
		rec.m = metrics.New(metrics.Probes{
			Version:      o.Version,
			LiveSessions: func() int { return len(reg.Sessions()) },
			LogHealthy:   func() bool { ok, _, _ := health.state(); return ok },
		})
	}
	var onCommit func(time.Duration)
	if rec.m != nil {
		onCommit = rec.m.ObserveCommit
	}
	// The quarantine of a burst covers the session tree: every session
	// started from the root has its guarded changes rolled back, in every
	// root (the workspace's guard routes the paths).
	onBurst := func(root *principal.Session) {
		for _, s := range reg.Sessions() {
			if s.TreeRoot() == root {
				rollbackSession(mon, o.StateDir, o.Log, s)
			}
		}
	}
	// Every root's explanations read what came before the mount from the
	// log's index (state.go), and a session back from retirement
	// continues its provenance chain from it.
	taints := &taintRecords{}
	fromIndex := func(c *guard.Config) {
		c.Explain, c.ExplainFrom = explainSource{k: keeper, l: elog}, mountStart
		c.LastReads = func(id string) string { return lastReads(keeper.Index(), id) }
		c.TaintRecords = taints.of
	}
	roots, err := openRoots(o, pol, ws, fi.Sys().(*syscall.Stat_t), reg, rec, onCommit, onBurst, fromIndex)
	if err != nil {
		return err
	}
	defer roots.close()
	gc := guard.Config{RootFd: rootFd, Path: ws, StateDir: o.StateDir, Policy: pol,
		Registry: reg, Labels: labels, Recorder: rec, Log: o.Log, Roots: roots.guards(),
		Authority: authority.New(authorityConfig(pol), nil), Namespaces: true, OnCommit: onCommit, OnBurst: onBurst}
	fromIndex(&gc)
	g, err := guard.New(gc)
	if err != nil {
		return err
	}
	mon = newGuarded(g, rec, "", rootFd)
	mon.taints = taints
	roots.attach(mon)
	ev.m = mon
	// Sessions are cgroups where the daemon may make them (root and a
	// cgroup v2 hierarchy); elsewhere they are followed by ancestry.
	if cg, err := principal.NewCgroups(o.StateDir); err != nil {
		reg.UseCgroups(nil, err)
		o.Log.Warn().Err(err).Msg("sessions are not cgroups: membership is followed by ancestry (weaker)")
	} else {
		reg.UseCgroups(cg, nil)
		defer cg.RemoveEmpty()
	}
	if err := restoreSessions(reg, keeper.Index()); err != nil {
		return fmt.Errorf("reading the session registrations from the log: %w", err)
	}
	if n, err := replayAttestations(mon, keeper.Index()); err != nil {
		return fmt.Errorf("reading the attestations from the log: %w", err)
	} else if n > 0 {
		o.Log.Info().Int("attestations", n).Msg("attestations replayed from the log")
	}

	// Before the mount serves: finish a restore a crash interrupted, and
	// compare the guarded files with the log (drift while unmounted).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	why := "mounting over " + ws
	if os.Geteuid() == 0 {
		old, err := writePin(ws, o.StateDir, o.NewState)
		if err != nil {
			return fmt.Errorf("pinning the evidence log of %s: %w", ws, err)
		}
		if old != nil {
			why += fmt.Sprintf("; a new log for this workspace (--new-state): it replaces the log with key %s in %s", keyShort(old.PublicKey), old.StateDir)
		}
	}
	mon.Record(&evidence.Record{Type: evidence.TypeMount, Principal: "SYS",
		Meta:    evidence.Meta{Path: ws, Pid: os.Getpid(), UID: uint32(os.Getuid()), Reason: why},
		Payload: &evidence.Payload{Detail: "aerfs " + o.Version}})
	mon.Record(&evidence.Record{Type: evidence.TypePolicyLoad, Principal: "SYS",
		Meta: evidence.Meta{Path: filepath.Join(o.StateDir, PolicyName), UID: uint32(os.Getuid()), Reason: "policy loaded at mount"}})
	recordIndexRebuilt(mon, keeper.Index(), mountStart)
	if err := resumeJournal(mon, o.StateDir, o.Log); err != nil {
		return err
	}
	if err := checkDriftAtMount(ctx, mon, o); err != nil {
		return err
	}

	server, err := aerfs.Mount(ws, mon.Door(), aerfs.MountOptions{Debug: o.Debug, NoPassthrough: o.NoPassthrough})
	if err != nil {
		return err
	}
	if err := roots.mount(ctx, o, mon); err != nil {
		server.Unmount()
		return err
	}
	started := time.Now().UTC()
	if err := watchPolicy(ctx, mon, o.Log, filepath.Join(o.StateDir, PolicyName)); err != nil {
		o.Log.Warn().Err(err).Msg("the policy file is not watched: edits take effect at the next mount")
	}
	procEvents := principal.FollowProcessEvents(ctx, reg) == nil
	if !procEvents {
		o.Log.Warn().Msg("process events connector unavailable: sessions are followed by ancestry at each request")
	}
	go keepIndex(ctx, keeper, elog, reg, o.Log)

	if rec.m != nil {
		addr, err := serveMetrics(ctx, o.MetricsAddr, rec.m, o.Log)
		if err != nil {
			server.Unmount()
			return fmt.Errorf("--metrics-addr %s: %w", o.MetricsAddr, err)
		}
		o.Log.Info().Str("event", "metrics").Str("addr", addr).Msg("serving Prometheus metrics at /metrics")
	}
	sockPath, err := listenPath(o.StateDir)
	if err != nil {
		server.Unmount()
		return fmt.Errorf("control socket: %w", err)
	}
	srv := &controlServer{m: mon, ws: ws, stateDir: o.StateDir, reg: reg, log: o.Log, prune: elog.Prune, rec: rec, index: keeper.Index(), status: func() Status {
		return Status{Workspace: ws, StateDir: o.StateDir, Policy: filepath.Join(o.StateDir, PolicyName),
			StateMode: stateMode, Socket: sockPath,
			PID: os.Getpid(), Started: started, ProcEvents: procEvents, CachedCallers: reg.CachedCallers(), Tracking: reg.Tracking(),
			LogHealthy:   func() bool { ok, _, _ := health.state(); return ok }(),
			LogLastError: func() string { _, e, _ := health.state(); return e }(),
			LogLastErrAt: func() time.Time { _, _, at := health.state(); return at }(),
			// The kernel offers it, the mount asked for it, and the
			// daemon may register backing files (CAP_SYS_ADMIN).
			Passthrough:  server.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH != 0 && !o.NoPassthrough && os.Geteuid() == 0,
			Version:      o.Version,
			FUSEProtocol: fmt.Sprintf("%d.%d", server.KernelSettings().Major, server.KernelSettings().Minor)}
	}}
	if err := srv.listen(sockPath); err != nil {
		server.Unmount()
		return err
	}
	defer removeSocket(o.StateDir, sockPath)
	defer srv.close()
	go srv.serve()
	go func() {
		// A session's proxy lives as long as a process is in its
		// network namespace.
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				srv.shared.nets.reap()
			}
		}
	}()

	if err := server.WaitMount(); err != nil {
		return err
	}
	ready(nil)
	ready = nil

	served, err := newServedMount(ws, o.StateDir, server)
	if err != nil {
		server.Unmount()
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sig)
	go func() {
		// Leave when asked (a signal, the caller), or as soon as the mount
		// has left this namespace (leave.go).
		gone, done := served.gone(ctx), ctx.Done()
		for {
			select {
			case <-sig:
			case <-done:
				done = nil
			case <-gone:
			case <-served.done:
				return
			}
			err := served.leave(false, o.Log)
			if errors.Is(err, errBusy) {
				o.Log.Error().Msg("unmount failed: the mount is busy")
				continue
			}
			if err != nil {
				o.Log.Error().Err(err).Msg("the daemon cannot leave")
			}
			return
		}
	}()
	<-served.done
	// What the guard holds for the log (refusals counted and not yet
	// recorded) is recorded now.
	mon.Close()
	// Flush what this mount published, within a bound: a flush that
	// does not finish leaves the unmount unrecorded (not clean), and the
	// next mount completes what this one recorded.
	flushed := make(chan error, 1)
	go func() { flushed <- mon.SyncBacking() }()
	select {
	case err := <-flushed:
		if err != nil {
			o.Log.Error().Err(err).Msg("cannot flush what aerfs wrote at unmount: the unmount is not recorded as clean")
			return err
		}
	case <-time.After(flushBound):
		o.Log.Error().Msg("flushing what aerfs wrote at unmount takes longer than " + flushBound.String() + ": the unmount is not recorded as clean; the next mount completes what this one recorded")
		return fmt.Errorf("flush at unmount: not done after %s", flushBound)
	}
	mon.Record(&evidence.Record{Type: evidence.TypeUnmount, Principal: "SYS",
		Meta: evidence.Meta{Path: ws, Pid: os.Getpid(), UID: uint32(os.Getuid()), Reason: "unmounted"}})
	return nil
}

// flushBound is how long the flush at unmount may take.
const flushBound = 3 * time.Second

// events records what the registry learns.
type events struct{ m *guarded }

func (e *events) SessionTainted(s *principal.Session, added policy.Taint, why string, p principal.Proc) {
	id, _ := e.m.Record(&evidence.Record{Type: evidence.TypeTaint, Principal: s.Principal.String(), Taint: added.Names(),
		Meta: evidence.Meta{Session: s.ID, Pid: p.ID.Tgid, Exe: p.Exe, UID: p.UID, Reason: why}})
	if id != "" {
		e.m.TaintedBy(s.ID, id)
	}
}

func (e *events) ImplicitUnplaced(s *principal.Session, p principal.Proc, err error) {
	rec := &evidence.Record{Type: evidence.TypeTaint, Principal: s.Principal.String(), Taint: nonNil(s.Taint().Names()),
		Meta: evidence.Meta{Pid: p.ID.Tgid, Exe: p.Exe, UID: p.UID,
			Reason: "its implicit session has no cgroup of its own (" + err.Error() + "): its taint follows the process and what it starts by identity and ancestry"}}
	if errors.As(err, new(*principal.HostLockError)) {
		rec.Meta.Rule = policy.RuleHostLock.ID()
	}
	e.m.Record(rec)
}

func (e *events) SessionEnded(s *principal.Session) {
	e.m.Record(&evidence.Record{Type: evidence.TypeSessionEnd, Principal: s.Principal.String(), Taint: s.Taint().Names(),
		Meta: evidence.Meta{Session: s.ID, Reason: "session root exited"}})
	// Ended once its end is on its way to the log: the session may be
	// retired from then on (principal/archive.go).
	if s.Ended().IsZero() {
		s.MarkEnded(time.Now())
	}
}

func parseTaints(names []string) (policy.Taint, error) {
	var t policy.Taint
	for _, n := range names {
		x, err := policy.ParseTaint(n)
		if err != nil {
			return t, err
		}
		t |= x
	}
	return t, nil
}

// clearStaleMount unmounts a dead FUSE mount ("transport endpoint is not
// connected") left at ws by a daemon that died.
func clearStaleMount(ws string) error {
	// statfs is never answered from the kernel's caches: it reaches the
	// daemon, or fails when the daemon is gone.
	var sfs syscall.Statfs_t
	err := syscall.Statfs(ws, &sfs)
	// A connection being torn down answers EIO for a moment.
	for i := 0; i < 20 && errors.Is(err, syscall.EIO); i++ {
		time.Sleep(50 * time.Millisecond)
		err = syscall.Statfs(ws, &sfs)
	}
	if err == nil || !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ECONNABORTED) {
		return nil
	}
	if err := syscall.Unmount(ws, syscall.MNT_DETACH); err != nil {
		return fmt.Errorf("stale mount at %s: %w", ws, err)
	}
	return nil
}

// bypassingProcesses lists processes whose working directory or open files
// are inside ws before the mount covers it: they keep seeing the backing
// directory and are not guarded.
func bypassingProcesses(ws string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	inside := func(p string) bool { return p == ws || strings.HasPrefix(p, ws+"/") }
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		base := "/proc/" + e.Name()
		// The entries of a process on its way out may block their reader
		// until its exit is done (principal/procwait.go); such a process
		// is skipped, and the mount does not wait for it.
		var found string
		ok := principal.WithinProcWait(pid, func() {
			if cwd, err := os.Readlink(base + "/cwd"); err == nil && inside(cwd) {
				found = fmt.Sprintf("pid %d (%s) has its working directory in %s", pid, comm(base), cwd)
				return
			}
			fds, _ := os.ReadDir(base + "/fd")
			for _, fd := range fds {
				if t, err := os.Readlink(base + "/fd/" + fd.Name()); err == nil && inside(t) {
					found = fmt.Sprintf("pid %d (%s) has %s open", pid, comm(base), t)
					return
				}
			}
		})
		if ok && found != "" { // found is still written to when !ok
			out = append(out, found)
		}
	}
	return out
}

func comm(base string) string {
	b, _ := os.ReadFile(base + "/comm")
	return strings.TrimSpace(string(b))
}

// MountInfo is an aerfs mount found in the mount table.
type MountInfo struct {
	Mountpoint string
	StateDir   string
	ID         int    // the mount's id in the table
	Conn       uint32 // its FUSE connection (the mount's device number)
}

// Mounts lists the aerfs mounts of this process's mount table, read whole
// (internal/mountinfo): other file systems mounting and unmounting
// meanwhile never hide one. The state directory is the mount's source.
func Mounts() []MountInfo {
	ms, err := mountinfo.Self()
	if err != nil {
		return nil
	}
	var out []MountInfo
	for _, m := range ms {
		if m.FSType == "fuse.aerfs" {
			out = append(out, MountInfo{Mountpoint: m.Point, StateDir: m.Source, ID: m.ID, Conn: m.Major<<20 | m.Minor})
		}
	}
	return out
}

// FindMount returns the aerfs mount that contains path (the innermost), or
// nil.
func FindMount(p string) *MountInfo {
	var best *MountInfo
	for _, m := range Mounts() {
		if mountinfo.Within(p, m.Mountpoint) && (best == nil || len(m.Mountpoint) > len(best.Mountpoint)) {
			best = &m
		}
	}
	return best
}

// NestedMount returns an aerfs mount that ws is inside of, or that is
// inside ws (not ws's own mount), and which of the two it is. A workspace
// is never mounted nested with another: each daemon would reach its backing
// directory through the other's mount, so a session of one would write
// into the other as that daemon's process — outside every session there,
// taken for the owner.
func NestedMount(ws string) (m *MountInfo, inside bool) {
	for _, x := range Mounts() {
		if x.Mountpoint == ws {
			continue
		}
		if mountinfo.Within(ws, x.Mountpoint) {
			return &x, true
		}
		if mountinfo.Within(x.Mountpoint, ws) {
			return &x, false
		}
	}
	return nil, false
}

// NestedMountError says why a nested workspace is refused, with what to do.
func NestedMountError(ws string, m *MountInfo, inside bool) (msg, hint string) {
	if inside {
		return fmt.Sprintf("%s is inside the aerfs mount %s (state %s): a workspace is never mounted inside another", ws, m.Mountpoint, m.StateDir),
			"mount a workspace beside the other, not inside it; or aerfs unmount " + m.Mountpoint + " first (aerfs list shows every mount)"
	}
	return fmt.Sprintf("%s contains the aerfs mount %s (state %s): a workspace is never mounted over another", ws, m.Mountpoint, m.StateDir),
		"aerfs unmount " + m.Mountpoint + " first, or mount a workspace that does not contain it (aerfs list shows every mount)"
}

// checkDriftAtMount compares the guarded files with what the log says aerfs
// last gave them (changes made while unmounted are drift), then watches the
// backing directory for drift while mounted.
func checkDriftAtMount(ctx context.Context, m *guarded, o Options) error {
	cur, err := m.State()
	if err != nil {
		return fmt.Errorf("cannot read the guarded files: %w", err)
	}
	// The index is read from the files: everything appended so far (the
	// resumed restore's records included) must be covered first.
	if err := m.FlushLog(); err != nil {
		return err
	}
	prev, pending, ended, err := lastKnownState(o.StateDir)
	if err != nil {
		return err
	}
	// A change recorded but not published (the daemon died between its
	// record and its rename or unlink) is completed: the log says it
	// happened. Only the previous mount's, and only when it crashed.
	for p, c := range pending {
		if cur[p] == c.After {
			continue // published
		}
		// Still the content before (the rename or unlink never happened),
		// or anything else (a rename published content a crash did not
		// let reach the disk): the log says what the file holds. What is
		// found is kept as the previous version.
		op := "complete-write"
		if c.After == "" {
			op = "complete-" + c.Type
		}
		_, _, err := m.setContent(p, c.After, func(found string) *evidence.Record {
			why := "a " + c.Type + " was recorded but not applied before a crash: completed at mount"
			if found != c.Before {
				why = "a " + c.Type + " was recorded and the file holds neither its content nor the one before after a crash: completed at mount, what was found kept as the previous version"
			}
			return &evidence.Record{Type: evidence.TypeRecovery, Principal: policy.Sys.String(),
				Meta:    evidence.Meta{Path: p, Op: op, Verdict: "allow", UID: uint32(os.Getuid()), Reason: why},
				Payload: &evidence.Payload{OldHash: found, NewHash: c.After}}
		})
		if err != nil {
			return fmt.Errorf("completing the recorded %s of %s: %w", c.Type, p, err)
		}
		if c.After == "" {
			delete(cur, p)
		} else {
			cur[p] = c.After
		}
		o.Log.Warn().Str("path", p).Str("op", op).Msg("completed a recorded change interrupted by a crash")
	}
	// A file the log never saw predates aerfs (or this log, or the policy
	// that guards it): believe it — unless it was born after the previous
	// mount ended: created while unmounted, it is drift.
	union := map[string]string{}
	for p, h := range prev {
		union[p] = h
	}
	for p, h := range cur {
		if _, ok := prev[p]; !ok {
			union[p] = h
			if !ended.IsZero() && !m.isRootPath(p) && m.bornAfter(p, ended) {
				union[p] = ""
			}
		}
	}
	m.Expect(guard.Expectation{State: union})
	for p := range union {
		d, err := m.Drift(p)
		if err != nil {
			o.Log.Warn().Err(err).Str("path", p).Msg("drift check at mount")
			continue
		}
		if d != nil {
			repairDrift(m, o.Log, d, "while unmounted")
		}
	}
	// The state at mount is the baseline the next mount compares with.
	now, err := m.State()
	if err != nil {
		return err
	}
	p := &evidence.Payload{Detail: "mount"}
	if fs := fileStates(now); len(fs) > 0 {
		p.Files = fs
	}
	if _, err := m.Record(&evidence.Record{Type: evidence.TypeSnapshot, Principal: policy.Sys.String(),
		Meta: evidence.Meta{Op: "snapshot", Verdict: "allow", UID: uint32(os.Getuid()),
			Reason: "state of the guarded files at mount"}, Payload: p}); err != nil {
		return err
	}
	paths := make([]string, 0, len(now))
	for p := range now {
		if !m.isRootPath(p) { // each root has its own watcher (roots.go)
			paths = append(paths, p)
		}
	}
	return startDriftWatcher(ctx, m, o.Log, paths)
}

// memoryLimit is the daemon's soft memory limit, unless GOMEMLIMIT names
// another. The daemon lives as long as the mount and its steady state is
// small (what is live: sessions, labels, the log's recent window, ~20–30 MiB
// under a busy agent); the owner's commands (gc, history, why, status)
// allocate in bursts that the collector, paced by GOGC alone, would let
// double the heap and keep from the system. Under the limit the collector
// runs sooner and returns freed memory, so the daemon's footprint follows
// what is live. A soft limit: past it the collector works harder (at most
// half the CPU, the runtime's own bound), nothing fails.
const memoryLimit = 64 << 20

func boundMemory() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
}
