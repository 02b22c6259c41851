package principal

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/policy"
)

// Session is a group of processes started through one registration (and
// everything they start). Its taint only grows.
type Session struct {
	ID        string
	Principal policy.Principal // principal of the registration that created it
	Started   time.Time
	Root      ProcID
	parent    *Session // session the registering process was in, if any
	// Implicit: made by the daemon for a process outside every session
	// that became tainted; it carries the taint to the process's children
	// and is never joined or named by a registration.
	Implicit bool
	restored bool // known from the log of an earlier mount
	// settled, for an implicit session moved into a cgroup of its own, is
	// closed once the move is over (done or given up): reads wait for it
	// (implicit.go).
	settled chan struct{}
	taint   atomic.Uint32
	held    atomic.Bool // quarantined after a burst of refusals

	confinement atomic.Pointer[string] // what the registration asked for (owner.go)
	agent       atomic.Pointer[string] // the agent it runs (aerfs run --agent), "" for none
	ended       atomic.Int64           // unix ns when the owner ended it (owner.go)
}

// SetAgent says which agent the session runs (aerfs run --agent NAME).
func (s *Session) SetAgent(name string) {
	if name != "" {
		s.agent.Store(&name)
	}
}

// Agent is the agent the session, or a session it was started from, runs
// ("" for none): what an agent's session writes informs, it does not act.
func (s *Session) Agent() string {
	for x := s; x != nil; x = x.parent {
		if a := x.agent.Load(); a != nil {
			return *a
		}
	}
	return ""
}

// Parent is the session this one was started from (nil for none).
func (s *Session) Parent() *Session { return s.parent }

// TreeRoot is the outermost registered session this one was started from
// (itself when it was started outside sessions): refusals anywhere in the
// tree count towards it, and its quarantine covers the tree.
func (s *Session) TreeRoot() *Session {
	for s != nil && s.parent != nil && !s.parent.Implicit {
		s = s.parent
	}
	return s
}

// Quarantine marks the session so that every further mutation from it is
// refused. It reports whether the session was not quarantined before.
func (s *Session) Quarantine() bool { return s.held.CompareAndSwap(false, true) }

// Quarantined reports whether the session (or the one it was started from)
// is quarantined.
func (s *Session) Quarantined() bool {
	return s != nil && (s.held.Load() || s.parent.Quarantined())
}

// Taint is the session's own taint together with that of the session it was
// started from: a tainted session cannot wash itself by starting a new one.
func (s *Session) Taint() policy.Taint {
	if s == nil {
		return 0
	}
	return policy.Taint(s.taint.Load()) | s.parent.Taint()
}

// AddTaint raises the session's taint and reports whether it grew. The
// sessions it was started from are raised too: a nested session shares
// their pipes, files and proxy (its output is what the outer session
// reads, `x=$(aerfs run -- cat page.txt)`), so what it learns, they hold.
func (s *Session) AddTaint(t policy.Taint) bool {
	for p := s.parent; p != nil; p = p.parent {
		p.addOwnTaint(t)
	}
	return s.addOwnTaint(t)
}

func (s *Session) addOwnTaint(t policy.Taint) bool {
	for {
		old := s.taint.Load()
		nw := old | uint32(t)
		if nw == old {
			return false
		}
		if s.taint.CompareAndSwap(old, nw) {
			return true
		}
	}
}

// member is how a process belongs to a session: the session and the
// principal its registration granted. since, when set, is the moment (in
// the clock ticks of /proc/<pid>/stat start times) the process joined:
// only what it starts from then on is in the session with it (an owner
// process made an implicit session keeps the children it had before).
type member struct {
	sess      *Session
	principal policy.Principal
	since     uint64
}

// Resolved is a caller as identified from /proc.
type Resolved struct {
	Proc       Proc
	Session    *Session
	Principal  policy.Principal
	Identified bool
	Reason     string // why the caller is unidentified
	// Stalled: its /proc entries did not answer (procwait.go), as those
	// of a process on its way out do.
	Stalled bool

	own atomic.Uint32 // taint of a process outside every session
	reg *Registry     // where an implicit session is made
	hg  uint64        // the host's move counter when resolved (foreign.go)
	// also is the implicit session the process belongs to by its identity
	// or ancestry when its cgroup names another session of this mount: a
	// tainted owner process that moved itself (root may) into a clean
	// session's cgroup carries its taint there (implicit.go).
	also *Session
}

// Subject is the policy's view of the caller, with taint as of now.
func (r *Resolved) Subject() policy.Subject {
	if r == nil || !r.Identified {
		return policy.Subject{}
	}
	s := policy.Subject{Principal: r.Principal, Identified: true, Taint: policy.Taint(r.own.Load())}
	if r.Session != nil {
		if !r.Session.Implicit {
			// An implicit session carries taint, not a namespace: the
			// process keeps the visibility it had outside sessions.
			s.Session = r.Session.ID
		}
		s.Taint |= r.Session.Taint()
	}
	s.Taint |= r.also.Taint()
	return s
}

// AddTaint adds t to the caller's session, or to the process itself when it
// belongs to no session. It reports whether anything grew.
func (r *Resolved) AddTaint(t policy.Taint) bool {
	if t == 0 || r == nil || !r.Identified {
		return false
	}
	if r.Session != nil {
		grew := r.Session.AddTaint(t)
		r.Session.settle()
		return grew
	}
	if r.reg != nil {
		return r.reg.taintOutside(r, t)
	}
	return r.addOwn(t)
}

// addOwn raises the taint kept on the resolution itself.
func (r *Resolved) addOwn(t policy.Taint) bool {
	for {
		old := r.own.Load()
		nw := old | uint32(t)
		if nw == old {
			return false
		}
		if r.own.CompareAndSwap(old, nw) {
			return true
		}
	}
}

// Events receives what the registry learns; the daemon records them.
type Events interface {
	SessionTainted(s *Session, added policy.Taint, why string, p Proc)
	SessionEnded(s *Session)
	// ImplicitUnplaced: the implicit session s made for p could not be
	// given its cgroup (err says why, a *HostLockError when the host lock
	// was not taken); its taint follows p by identity and ancestry only.
	ImplicitUnplaced(s *Session, p Proc, err error)
}

// Registry knows every session and resolves callers to subjects.
type Registry struct {
	OwnerUID uint32
	policy   func() *policy.Policy
	events   Events

	mu       sync.RWMutex
	sessions map[string]*Session
	members  map[ProcID]member    // session roots, implicit sessions' processes and descendants seen so far
	procs    map[ProcID]*Resolved // resolved processes
	gen      uint64               // bumped at every registration: negative results expire
	neg      map[ProcID]uint64    // processes known to be outside sessions, at gen
	byTgid   map[int]ProcID       // latest ProcID seen for a tgid, for exit events
	// departed: members' children that had exited by the time their fork
	// event was read, until their exit event is (forkAt).
	departed map[int]member
	threads  map[int]threadEntry // thread id → its process, while the thread lives
	dirs     int                 // threads entries holding an open /proc directory
	groups   map[int][]int       // tgid → the ids of its threads in threads
	// taskGen is bumped by every process event that drops cached threads:
	// a resolution that read /proc before one is not cached.
	taskGen uint64
	pe      atomic.Pointer[procEvents] // the process events, once followed (procevents_linux.go)

	stateDir string // the mount's state directory (foreign.go)

	archive  Archive          // where retired sessions are (archive.go); nil: none are retired
	onRetire []func(*Session) // told of every session retired (archive.go)

	// cgroup mode (nil: sessions are followed by ancestry and events)
	cg       *Cgroups
	byCg     map[string]member   // registration cgroup (relative to the subtree) → member
	implicit map[ProcID]*Session // implicit sessions by the process whose taint they hold (implicit.go)
	cgErr    string              // why cgroup mode is not in force
}

// threadEntry caches the resolution of a thread. It is valid while the
// thread's start time and executable are unchanged: a reused thread id has
// another start time, an exec another executable.
//
// dir, when set, is the thread's /proc directory, opened once and checked
// to belong to the resolved process. Lookups under it fail once that thread
// is gone, even if its id is reused (procfs binds the directory to the
// thread, not to the number), so one readlink of its "exe" both proves the
// thread is the one resolved and tells whether it has exec'd since: one
// system call instead of reading /proc/<tid>/stat and the exe link. Where
// process events vouch for cached threads (cachedCurrent), neither is read.
type threadEntry struct {
	start uint64
	exe   string
	res   *Resolved
	dir   *os.File
	hg    uint64 // the host's move counter when cached
	fsuid int64  // the filesystem uid of the request it was resolved for (-1: none)
}

// maxThreadDirs bounds the /proc directories kept open for cached threads
// (past it, cached threads are checked through /proc paths): 4096, or a
// quarter of the daemon's descriptor limit if that is less, so that the
// cache never starves the descriptors that FUSE requests need.
var maxThreadDirs = func() int {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return int(min(4096, rl.Cur/4))
}()

// setThread caches e for tid, closing the directory of the entry it
// replaces. Called with r.mu held.
func (r *Registry) setThread(tid int, e threadEntry) {
	if old, ok := r.threads[tid]; ok && old.dir != nil && old.dir != e.dir {
		old.dir.Close()
		r.dirs--
	}
	if e.dir != nil {
		r.dirs++
	}
	if old, ok := r.threads[tid]; !ok || old.res.Proc.ID.Tgid != e.res.Proc.ID.Tgid {
		if ok {
			r.ungroup(tid, old.res.Proc.ID.Tgid)
		}
		r.groups[e.res.Proc.ID.Tgid] = append(r.groups[e.res.Proc.ID.Tgid], tid)
	}
	r.threads[tid] = e
}

// ungroup takes tid out of its process's thread list. Called with r.mu
// held.
func (r *Registry) ungroup(tid, tgid int) {
	g := r.groups[tgid]
	for i, t := range g {
		if t == tid {
			g[i] = g[len(g)-1]
			g = g[:len(g)-1]
			break
		}
	}
	if len(g) == 0 {
		delete(r.groups, tgid)
	} else {
		r.groups[tgid] = g
	}
}

// dropThread forgets tid. Called with r.mu held.
func (r *Registry) dropThread(tid int) {
	old, ok := r.threads[tid]
	if !ok {
		return
	}
	if old.dir != nil {
		// Close waits for a concurrent readlink through it to finish.
		old.dir.Close()
		r.dirs--
	}
	r.ungroup(tid, old.res.Proc.ID.Tgid)
	delete(r.threads, tid)
}

// staleTask is a cached thread a process event makes stale: the thread
// pid (a fork gave its id to a new task, or it exited), or with group
// every thread of the process pid (it exec'd).
type staleTask struct {
	pid   int
	group bool
}

// tasksChanged drops the cached threads that ts make stale, under one
// lock for all.
func (r *Registry) tasksChanged(ts []staleTask) {
	if len(ts) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.taskGen++
	for _, t := range ts {
		if t.group {
			for _, tid := range slices.Clone(r.groups[t.pid]) {
				r.dropThread(tid)
			}
		}
		r.dropThread(t.pid)
	}
}

// dropThreads drops every cached thread: process events were lost.
func (r *Registry) dropThreads() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.taskGen++
	for tid := range r.threads {
		r.dropThread(tid)
	}
}

// vouched reports whether process events vouch for cached threads: they
// are followed and were shown to arrive.
func (r *Registry) vouched() bool {
	pe := r.pe.Load()
	return pe != nil && pe.trusted.Load()
}

// eventsCurrent reports whether the cached threads reflect every process
// event sent before the call: the events are followed and shown to
// arrive, none was lost, and what the socket held has been taken in.
func (r *Registry) eventsCurrent() bool {
	pe := r.pe.Load()
	return pe != nil && pe.intake(r)
}

// cachedCurrent is the cached resolution of tid when process events
// vouch for it (eventsCurrent): no /proc is read. nil when there is none
// to answer with, or nothing vouches for it.
func (r *Registry) cachedCurrent(tid int, fsuid int64, hg uint64) *Resolved {
	if !r.eventsCurrent() {
		return nil
	}
	r.mu.RLock()
	e, ok := r.threads[tid]
	r.mu.RUnlock()
	if ok && e.hg == hg && (fsuid < 0 || e.fsuid == fsuid) {
		return e.res
	}
	return nil
}

// NewRegistry returns a registry for a workspace owned by ownerUID.
func NewRegistry(ownerUID uint32, pol func() *policy.Policy, ev Events) *Registry {
	return &Registry{
		OwnerUID: ownerUID,
		policy:   pol,
		events:   ev,
		sessions: map[string]*Session{},
		members:  map[ProcID]member{},
		procs:    map[ProcID]*Resolved{},
		neg:      map[ProcID]uint64{},
		byTgid:   map[int]ProcID{},
		departed: map[int]member{},
		threads:  map[int]threadEntry{},
		groups:   map[int][]int{},
		byCg:     map[string]member{},
		implicit: map[ProcID]*Session{},
		cgErr:    "not set up",
	}
}

// SetStateDir names the state directory of the mount: a confined session
// of this mount is told from another's by it (foreign.go).
func (r *Registry) SetStateDir(dir string) {
	r.mu.Lock()
	r.stateDir = dir
	r.mu.Unlock()
}

// UseCgroups makes sessions cgroups of c (see cgroup.go). Call it before
// the mount serves. A nil c with an error keeps the ancestry method and
// remembers why.
func (r *Registry) UseCgroups(c *Cgroups, why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cg = c
	if why != nil {
		r.cgErr = why.Error()
	}
}

// Cgroups is the subtree in use (nil in ancestry mode).
func (r *Registry) Cgroups() *Cgroups {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cg
}

// CachedCallers says how a cached caller is checked at its next request,
// for aerfs status: "process events" where they vouch for the cache (no
// /proc is read), "/proc" elsewhere.
func (r *Registry) CachedCallers() string {
	if r.vouched() {
		return "process events"
	}
	return "/proc"
}

// Tracking says how session membership is known, for aerfs status.
func (r *Registry) Tracking() string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.cg != nil {
		return "cgroup"
	}
	return "ancestry (weaker: membership is reconstructed from process ancestry and fork events; " +
		"a child whose parent exits before aerfs sees it can escape its session; cgroup v2: " + r.cgErr + ")"
}

// Resolve identifies the thread tid. A thread that cannot be read is returned
// unidentified, never guessed. Its /proc entries are read under a bound
// (procwait.go): a thread whose entries do not answer is on its way out and
// is returned Stalled. Only those reads are bounded: the registry's own
// work (its locks, the host's coordination of mounts) is not a sign of an
// exit, and a resolution that waits for it is not stalled.
func (r *Registry) Resolve(tid int) *Resolved { return r.ResolveAs(tid, -1) }

// ResolveAs is Resolve for a request of tid that the kernel says is made
// as the filesystem uid fsuid (-1: not known). The request is decided as
// that user, the one whose permissions the kernel checks for it (the
// effective uid, unless the thread set its filesystem uid apart), not as
// the real uid, which a thread may change while it keeps acting as the
// same user; and a resolution cached for a request serves only requests
// made as the same uid: a thread that changed its credentials without an
// exec (a service dropping to another user) is resolved again, as the
// user it is now. Where no request names a user (Resolve) the real uid
// decides.
func (r *Registry) ResolveAs(tid int, fsuid int64) *Resolved {
	if tid <= 0 {
		return &Resolved{Reason: "request without a caller pid"}
	}
	stalled := func() *Resolved {
		return &Resolved{Stalled: true, Reason: fmt.Sprintf("pid %d: its /proc entries did not answer within %v (a process on its way out)", tid, ProcWait)}
	}
	// Fast path: a thread seen before, still alive, same program, making
	// its request as the same user, and no daemon on the host has moved a
	// process since. Where the process events are followed and shown to
	// arrive, they vouch for the first two: every event sent before this
	// request has been taken in, and since the entry was cached no fork
	// gave its id to another task and its process neither exec'd nor
	// exited (procevents_linux.go). No /proc is read then, and no bound
	// is needed.
	hg := hostGen()
	if res := r.cachedCurrent(tid, fsuid, hg); res != nil {
		return res
	}
	r.mu.RLock()
	e, ok := r.threads[tid]
	r.mu.RUnlock()
	// Where events vouch for cached threads, one they did not answer for
	// is resolved again; elsewhere each is checked through its /proc.
	ok = ok && !r.vouched() && e.hg == hg && (fsuid < 0 || e.fsuid == fsuid)
	if ok {
		same := false
		// Even the one readlink of a cached thread's "exe" stays under
		// the bound: it waits for a thread inside an exec too. Made
		// inline where ResolveCaller answers a FLUSH, the FLUSH of a
		// close-on-exec descriptor sent from inside the caller's exec
		// never got its answer: the daemon's goroutine stayed in that
		// readlinkat and the exec waited for the answer, until
		// TestExecClosingMountFilesIsNotWaitedOn timed out. Without the
		// bound's goroutine creates were 11–16% faster on tmpfs
		// (docs/performance.md, round five). Any thread this daemon
		// reads may be such a caller.
		if !WithinProcWait(tid, func() {
			if e.dir != nil && e.exe != "" {
				exe, ok := exeAt(e.dir)
				same = ok && exe == e.exe
			} else {
				start, err := startTime(tid)
				same = err == nil && e.start == start && exePath(tid) == e.exe
			}
		}) {
			return stalled()
		}
		if same {
			return e.res
		}
	}
	// A resolution that straddles a registration or an implicit session
	// (gen moved on) is answered but not cached: it may predate the move.
	r.mu.RLock()
	gen, tg := r.gen, r.taskGen
	r.mu.RUnlock()
	if !hostMapped(true) {
		hg = 0
	}
	var p Proc
	var err error
	if !WithinProcWait(tid, func() { p, err = ReadProc(tid) }) {
		return stalled()
	}
	if err != nil {
		return &Resolved{Reason: fmt.Sprintf("pid %d: %v", tid, err)}
	}
	if fsuid >= 0 {
		p.UID = uint32(fsuid) // the user the request is made as
	}
	r.mu.RLock()
	res, ok := r.procs[p.ID]
	r.mu.RUnlock()
	if !ok || res.Proc.Exe != p.Exe || res.Proc.UID != p.UID || res.hg != hg {
		res = r.resolve(p, res)
	}
	r.mu.RLock()
	room := r.dirs < maxThreadDirs
	r.mu.RUnlock()
	var dir *os.File
	var st uint64
	var stErr error
	if !WithinProcWait(tid, func() {
		if room {
			dir = openThreadDir(tid, p.ID.Start)
		}
		st, stErr = startTime(tid)
	}) {
		return res // answered, not cached (what the read opens is dropped by the next resolution's cache miss)
	}
	if stErr == nil {
		r.mu.Lock()
		if r.gen == gen && r.taskGen == tg {
			r.setThread(tid, threadEntry{start: st, exe: p.Exe, res: res, dir: dir, hg: res.hg, fsuid: fsuid})
		} else if dir != nil {
			dir.Close()
		}
		r.mu.Unlock()
	} else if dir != nil {
		dir.Close()
	}
	return res
}

func (r *Registry) resolve(p Proc, prev *Resolved) *Resolved {
	pol := r.policy()
	hg := hostGen()
	r.mu.RLock()
	cg := r.cg
	gen := r.gen
	stateDir := r.stateDir
	r.mu.RUnlock()
	// Where the caller lies on the host comes first: a process in another
	// mount's session is nobody here (foreign.go).
	m, inSession, why := r.cgroupSession(cg, p)
	var also *Session
	if why == "" && !inSession {
		// Outside this mount's cgroups (or without cgroups): a member by
		// identity or ancestry (a process that left its session's cgroup,
		// the rootless fallback).
		m, inSession = r.findSession(p)
	} else if why == "" && !m.sess.Implicit && r.implicitCount() > 0 {
		if im, ok := r.findSession(p); ok && im.sess.Implicit {
			also = im.sess
		}
	}
	if why == "" && !inSession {
		why = outsider(p, stateDir)
	}
	if why != "" {
		// Fail closed: never guess a session.
		return &Resolved{Proc: p, Reason: why, hg: hg}
	}
	res := &Resolved{Proc: p, Identified: true, reg: r, hg: hg, also: also}
	if prev != nil {
		// exec in place: same process, new program. Keep its taint.
		res.own.Store(prev.own.Load())
	}
	if inSession {
		res.Session = m.sess
		res.Principal = m.principal
	} else if p.UID == r.OwnerUID {
		res.Principal = policy.User
	} else if pr, ok := pol.UIDPrincipal(p.UID); ok {
		res.Principal = pr
	} else {
		res.Principal = policy.External
	}
	if pr, ok := pol.ExecPrincipal(p.Exe); ok {
		lowered := policy.Lower(res.Principal, pr)
		res.Principal = lowered
		// A fetcher's output reaches the agent through pipes aerfs does not
		// see: the whole session is as tainted as the fetcher.
		if t := policy.OriginTaint(lowered); res.Session != nil && (lowered == policy.Web || lowered == policy.Skill) {
			if res.Session.AddTaint(t) && r.events != nil {
				r.events.SessionTainted(res.Session, t, "exec of "+p.Exe+" as "+lowered.String(), p)
			}
		}
	}
	if res.Session != nil && res.Principal != policy.User && res.Principal != policy.Sys {
		// Whatever an untrusted principal writes carries its origin.
		res.own.Store(res.own.Load() | uint32(policy.OriginTaint(res.Principal)))
	}
	r.mu.Lock()
	if r.gen != gen {
		// A session changed while this was read: read again.
		r.mu.Unlock()
		return r.resolve(p, prev)
	}
	if old := r.procs[p.ID]; old != nil && old != prev {
		// Another thread of the process resolved it meanwhile: keep
		// the taint it may have gathered.
		res.own.Store(res.own.Load() | old.own.Load())
	}
	r.procs[p.ID] = res
	r.byTgid[p.ID.Tgid] = p.ID
	r.mu.Unlock()
	return res
}

// cgroupSession reads the session of p from its cgroup (cg is nil in
// ancestry mode: only another mount's session is told then). why is set
// when p is in another mount's session, or in the daemon's subtree but in
// no cgroup the registry knows.
func (r *Registry) cgroupSession(cg *Cgroups, p Proc) (member, bool, string) {
	abs, err := cgroupOf(p.ID.Tgid)
	if err != nil {
		if cg == nil && !errors.Is(err, ErrVanished) {
			return member{}, false, "" // no cgroup v2 here: no aerfs cgroup either
		}
		return member{}, false, fmt.Sprintf("pid %d: cgroup unreadable: %v", p.ID.Tgid, err)
	}
	switch placeCgroup(abs, cg) {
	case cgForeign:
		return member{}, false, fmt.Sprintf("pid %d is in another aerfs mount's session (cgroup %s)", p.ID.Tgid, abs)
	case cgForeignImplicit:
		// Another mount's implicit session is a session here too: the
		// taint this mount gave one of its processes is all of theirs.
		if m, ok := r.foreignImplicit(abs); ok {
			return m, true, ""
		}
		return member{}, false, ""
	case cgOutside:
		return member{}, false, ""
	}
	rel, _ := cg.Within(abs)
	if rel == "" {
		return member{}, false, ""
	}
	r.mu.RLock()
	m, ok := r.byCg[rel]
	r.mu.RUnlock()
	if !ok {
		// A retired session's process: the registration that made the
		// cgroup still holds it.
		r.mu.Lock()
		if r.archive != nil {
			if a, found := r.archive.ArchivedCgroup(rel); found {
				r.unretire(a, 0)
			}
		}
		m, ok = r.byCg[rel]
		r.mu.Unlock()
	}
	if !ok {
		return member{}, false, fmt.Sprintf("pid %d is in session cgroup %s, unknown to this mount", p.ID.Tgid, abs)
	}
	return m, true, ""
}

// invalidate drops cached resolutions: a process's session changed (a
// registration or an implicit session). Called with r.mu held.
func (r *Registry) invalidate() {
	for id := range r.procs {
		delete(r.procs, id)
	}
	for tid := range r.threads {
		r.dropThread(tid)
	}
	r.gen++
}

// findSession walks from p towards init until it meets a process known to be
// in a session, and started the process below it on the way after it
// joined. Every process met on the way is remembered.
func (r *Registry) findSession(p Proc) (member, bool) {
	r.mu.RLock()
	none := len(r.members) == 0
	r.mu.RUnlock()
	if none {
		return member{}, false
	}
	var chain []ProcID
	cur := p
	var below uint64 // start time of the process cur started on the way
	for depth := 0; depth < 4096; depth++ {
		r.mu.RLock()
		m, ok := r.members[cur.ID]
		g, negOK := r.neg[cur.ID]
		gen := r.gen
		r.mu.RUnlock()
		if ok && (depth == 0 || below >= m.since) {
			r.remember(chain, m)
			return m, true
		}
		if negOK && g == gen {
			break
		}
		chain = append(chain, cur.ID)
		below = cur.ID.Start
		if cur.PPid <= 1 {
			break
		}
		parent, err := ReadProc(cur.PPid)
		if err != nil {
			break
		}
		cur = parent
	}
	r.mu.Lock()
	for _, id := range chain {
		r.neg[id] = r.gen
	}
	r.mu.Unlock()
	return member{}, false
}

func (r *Registry) remember(chain []ProcID, m member) {
	if len(chain) == 0 {
		return
	}
	m.since = 0 // they joined when they started
	r.mu.Lock()
	for _, id := range chain {
		r.members[id] = m
		r.byTgid[id.Tgid] = id
	}
	r.mu.Unlock()
}

// Registration is what an accepted registration made.
type Registration struct {
	Session *Session
	Parent  string // id of the session the registering process was in ("" for none)
	Cgroup  string // the registration's cgroup, relative to the subtree ("" in ancestry mode)
}

// Register makes the process peerPid the root of session id with principal p.
// The peer is resolved like any caller, and it may only hand out trust at or
// below its own. An empty id creates a fresh session.
func (r *Registry) Register(peerPid int, p policy.Principal, id string) (*Session, *Resolved, policy.Verdict, error) {
	reg, peer, v, err := r.RegisterWith(peerPid, p, id, false)
	if reg == nil {
		return nil, peer, v, err
	}
	return reg.Session, peer, v, err
}

// RegisterWith is Register; resume says the owner asks explicitly to
// rejoin a session known from an earlier mount.
//
// A session id is bound to the registration that created it. An existing
// id may be registered again only from inside that session's tree
// (nesting), or by the owner outside sessions: explicitly with resume, or
// without it for a session created during this mount. Anything else is
// refused with RuleSession.
//
// In cgroup mode the peer is moved into the registration's cgroup before
// this returns; if the pid no longer belongs to the peer afterwards, the
// process found there is moved back and the registration refused.
func (r *Registry) RegisterWith(peerPid int, p policy.Principal, id string, resume bool) (*Registration, *Resolved, policy.Verdict, error) {
	peer := r.Resolve(peerPid)
	v := policy.CanGrant(peer.Subject(), p)
	if !v.Allow {
		return nil, peer, v, nil
	}
	if id == "" {
		id = newSessionID()
	}
	if !ValidSessionID(id) || strings.HasPrefix(id, "implicit-") {
		return nil, peer, v, fmt.Errorf("invalid session name %q", id)
	}
	r.mu.RLock()
	cgMode := r.cg != nil
	r.mu.RUnlock()
	if cgMode {
		// Where the peer is when it is moved, under the host's move
		// lock: another daemon may have made it a session of its own
		// mount since it was resolved, and it must stay there. Taken
		// before the registry's lock, which resolutions need.
		done, err := lockHost()
		if err != nil {
			return nil, peer, policy.Verdict{Rule: policy.RuleHostLock}, err
		}
		defer done()
	}
	// Whether the root of a session rejoined is still there, read before
	// the lock, which resolutions need (procwait.go).
	r.mu.RLock()
	var root ProcID
	if s := r.sessions[id]; s != nil {
		root = s.Root
	}
	r.mu.RUnlock()
	rootAlive := root != (ProcID{}) && AliveOrSilent(root)
	r.mu.Lock()
	defer r.mu.Unlock()
	var parent *Session
	var parentCg string
	if peer.Session != nil {
		parent = peer.Session
		if r.cg != nil {
			// The kernel's tree is the sessions' tree: a nested
			// registration is a child of the peer's cgroup.
			if abs, err := cgroupOf(peer.Proc.ID.Tgid); err == nil {
				if rel, ok := r.cg.Within(abs); ok && r.byCg[rel].sess == parent {
					parentCg = rel
				}
			}
		}
	}
	s := r.lookupArchived(id) // a retired id is still bound to its registration
	exists := s != nil
	if exists {
		inTree := false
		for x := peer.Session; x != nil; x = x.parent {
			inTree = inTree || x == s
		}
		ownerOutside := (peer.Session == nil || peer.Session.Implicit) && peer.Identified &&
			peer.Proc.UID == r.OwnerUID && peer.Principal.Trusted()
		if !inTree && !(ownerOutside && (resume || !s.restored)) {
			return nil, peer, policy.Verdict{Rule: policy.RuleSession}, nil
		}
		// Joining never washes: what the joining process carries, the
		// session carries from now on.
		s.AddTaint(peer.Subject().Taint)
	} else {
		s = &Session{ID: id, Principal: p, Started: time.Now().UTC(), Root: peer.Proc.ID, parent: parent}
		s.taint.Store(uint32(peer.Subject().Taint))
	}
	reg := &Registration{Session: s}
	if parent != nil && !parent.Implicit {
		reg.Parent = parent.ID
	}
	if r.cg != nil {
		rel := newSessionID()
		if parentCg != "" {
			rel = parentCg + "/" + rel
		}
		if err := r.cg.Make(rel); err != nil {
			return nil, peer, v, fmt.Errorf("cannot make the session's cgroup: %w", err)
		}
		old, err := cgroupOf(peer.Proc.ID.Tgid)
		if err != nil || placeCgroup(old, r.cg) == cgForeign {
			return nil, peer, policy.Verdict{Rule: policy.RuleUnidentified}, nil
		}
		if err := r.cg.Move(peer.Proc.ID.Tgid, rel); err != nil {
			return nil, peer, v, fmt.Errorf("cannot move the process into the session's cgroup: %w", err)
		}
		if !Alive(peer.Proc.ID) {
			r.cg.MoveTo(peer.Proc.ID.Tgid, old)
			return nil, peer, policy.Verdict{Rule: policy.RuleUnidentified}, nil
		}
		r.byCg[rel] = member{sess: s, principal: p}
		reg.Cgroup = rel
	}
	if !exists {
		r.sessions[id] = s
	} else if s.Root == (ProcID{}) || s.Root != root || !rootAlive {
		// Rejoined after its root exited (resumed): the joining process
		// is its root now, and the session ends when it exits.
		s.Root = peer.Proc.ID
	}
	s.ended.Store(0) // registered again: live
	s.AddTaint(policy.OriginTaint(p))
	r.members[peer.Proc.ID] = member{sess: s, principal: p}
	r.byTgid[peer.Proc.ID.Tgid] = peer.Proc.ID
	// Any cached resolution may now be wrong (the peer, processes it
	// started, anything that walked through it): start over. Registrations
	// are rare; resolutions are cheap to redo.
	r.invalidate()
	delete(r.procs, peer.Proc.ID)
	return reg, peer, v, nil
}

// Restore makes known a registration recorded by an earlier mount: the
// session id stays bound to it (with its principal, its parent and its
// taint), and processes still in its cgroup are its members.
func (r *Registry) Restore(id string, p policy.Principal, parent, cgroup string, taint policy.Taint, started time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sessions[id]
	if s == nil {
		s = &Session{ID: id, Principal: p, Started: started, parent: r.sessions[parent], restored: true}
		r.sessions[id] = s
	}
	s.AddTaint(taint)
	if cgroup != "" {
		r.byCg[cgroup] = member{sess: s, principal: p}
	}
}

// Session returns the named session, bringing it back if it was retired.
func (r *Registry) Session(id string) *Session {
	r.mu.RLock()
	s := r.sessions[id]
	r.mu.RUnlock()
	if s != nil {
		return s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookupArchived(id)
}

// Sessions lists every session the registry holds: those live, and those
// ended but not yet retired.
func (r *Registry) Sessions() []*Session {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Session, 0, len(r.sessions))
	for _, s := range r.sessions {
		out = append(out, s)
	}
	return out
}

// Live counts the live processes known to be in session s.
func (r *Registry) Live(s *Session) int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.liveLocked(s)
}

// liveLocked is Live, called with r.mu held.
func (r *Registry) liveLocked(s *Session) int {
	if r.cg != nil {
		n := 0
		for rel, m := range r.byCg {
			if m.sess == s {
				b, _ := os.ReadFile(r.cg.dir(rel) + "/cgroup.procs")
				n += strings.Count(string(b), "\n")
			}
		}
		return n
	}
	n := 0
	for id, m := range r.members {
		// Under the lock: never waited for when the process waits for
		// this daemon, and never past ProcWait (procwait.go).
		if m.sess == s && AliveOrSilent(id) {
			n++
		}
	}
	return n
}

// Forget drops everything known about processes that have exited. The
// daemon calls it periodically and on exit events.
func (r *Registry) Forget(id ProcID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.procs, id)
	delete(r.neg, id)
	if r.byTgid[id.Tgid] == id {
		delete(r.byTgid, id.Tgid)
	}
	r.dropThread(id.Tgid)
	if m, ok := r.members[id]; ok {
		delete(r.members, id)
		if m.sess.Root == id && r.events != nil {
			// The events record the end, then mark the session ended
			// (MarkEnded): it is retired only once its end is recorded.
			go r.events.SessionEnded(m.sess)
		}
	}
}

// Prune forgets every process that is no longer alive.
func (r *Registry) Prune() {
	r.mu.RLock()
	var ids []ProcID
	for id := range r.procs {
		ids = append(ids, id)
	}
	for id := range r.members {
		ids = append(ids, id)
	}
	for id := range r.neg {
		ids = append(ids, id)
	}
	threads := map[int]uint64{}
	for tid, e := range r.threads {
		threads[tid] = e.start
	}
	r.mu.RUnlock()
	// Read without the lock, which every resolution takes: a thread
	// inside an exec does not answer until its FLUSH is (procwait.go).
	var tids []int
	for tid, start := range threads {
		var st uint64
		var err error
		if WithinProcWait(tid, func() { st, err = startTime(tid) }) && (err != nil || st != start) {
			tids = append(tids, tid)
		}
	}
	r.mu.Lock()
	for _, tid := range tids {
		if e, ok := r.threads[tid]; ok && e.start == threads[tid] {
			r.dropThread(tid)
		}
	}
	r.mu.Unlock()
	for _, id := range ids {
		if !AliveOrSilent(id) {
			r.Forget(id)
		}
	}
	r.pruneImplicit()
}

// userHZ is the unit of /proc's start times: USER_HZ, 100 on every
// architecture Linux runs aerfs on.
const userHZ = 100

// forkAt records that child was started by parent: a session member's child is
// a member even after it is re-parented to init. In cgroup mode, where the
// kernel puts a child in its parent's cgroup, only an implicit session's
// forks are recorded: its process may have left its cgroup, or have none.
//
// at is when the fork event was sent (CLOCK_MONOTONIC, ns; 0: not
// known). The process that has childTgid's pid when the event is read must
// have started by then: a later one got the pid after the child exited (a
// loaded daemon reads events late, and pids wrap), and is not the child.
func (r *Registry) forkAt(parentTgid, childTgid int, at uint64) {
	r.mu.RLock()
	pid, known := r.byTgid[parentTgid]
	pm, found := r.members[pid]
	if !known || !found {
		pm, found = r.departed[parentTgid]
	}
	cgMode := r.cg != nil
	r.mu.RUnlock()
	if !found || (cgMode && !pm.sess.Implicit) {
		return
	}
	st, err := startTime(childTgid)
	if err == nil && at != 0 && startedAfter(st, at) {
		err = errors.New("its pid is another process's now")
	}
	if err != nil {
		// The child is gone already: on a loaded machine a subshell forks
		// its own child and exits before its fork event is read. Events
		// come in order, so that child's fork event follows this one and
		// comes before the exit event of this child, which ends the entry
		// (exited): its pid cannot be another process's meanwhile.
		r.mu.Lock()
		if len(r.departed) < maxDeparted {
			r.departed[childTgid] = pm
		}
		r.mu.Unlock()
		return
	}
	if pm.since != 0 && st < pm.since {
		return
	}
	id := ProcID{childTgid, st}
	r.mu.Lock()
	r.members[id] = member{sess: pm.sess, principal: pm.principal}
	r.byTgid[childTgid] = id
	r.mu.Unlock()
}

// startedAfter reports whether a process with start time st (ticks since
// boot, /proc's) started more than a tick after at (CLOCK_MONOTONIC, ns):
// the start time counts time suspended too, so the two clocks' difference
// now is added to at.
func startedAfter(st, at uint64) bool {
	var boot, mono unix.Timespec
	if unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot) != nil || unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono) != nil {
		return false
	}
	atBoot := at + uint64(max(boot.Nano()-mono.Nano(), 0))
	const tick = uint64(1e9 / userHZ)
	return st*tick > atBoot+tick
}

// lostEvents forgets the departed children: their exit events may be
// among the events lost, and their pids another process's by now.
func (r *Registry) lostEvents() {
	r.mu.Lock()
	clear(r.departed)
	r.mu.Unlock()
}

// maxDeparted bounds the departed children kept at once (their exit
// events may be lost with a burst of events the socket could not hold).
const maxDeparted = 4096

// Exec re-resolves a process that started a new program, so executable
// rules take effect before it touches the mount.
func (r *Registry) Exec(tgid int) {
	p, err := ReadProc(tgid)
	if err != nil {
		return
	}
	r.mu.RLock()
	prev := r.procs[p.ID]
	r.mu.RUnlock()
	r.resolve(p, prev)
}

// ValidSessionID reports whether id can name a directory under sessions/.
func ValidSessionID(id string) bool {
	if id == "" || len(id) > 64 || id == "." || id == ".." {
		return false
	}
	for _, c := range id {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

func newSessionID() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "s-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return "s-" + hex.EncodeToString(b[:])
}

// exited forgets the process with this tgid if it is no longer alive.
func (r *Registry) exited(tgid int) {
	r.mu.Lock()
	id, ok := r.byTgid[tgid]
	delete(r.departed, tgid)
	r.mu.Unlock()
	if ok && !Alive(id) {
		r.Forget(id)
	}
}
