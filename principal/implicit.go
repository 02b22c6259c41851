package principal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/policy"
)

// # Implicit sessions
//
// An owner process outside every session that reads something tainted
// (a WEB session's page) is given an implicit session holding the taint,
// so that what it starts afterwards is tainted too. Its taint follows the
// process, never only a cgroup:
//
//   - By identity. The process is a member of its implicit session by its
//     ProcID from the moment it is tainted, before the read that tainted it
//     returns; a process that leaves the session's cgroup (root may write
//     any cgroup.procs) is still a member wherever it goes.
//   - By ancestry. A process outside this mount's sessions is resolved by
//     walking its parents to a member; a member's child counts only if it
//     was started after the member joined (member.since), so the children
//     an owner process had before it read the page stay clean. The
//     process-events connector records every fork of a member, so a child
//     whose parent has exited stays a member too.
//   - By cgroup. Where the daemon is root the process is moved into a
//     cgroup of its own (…/i-<tgid>-<start>), so that the kernel puts every
//     later child there at fork. Every thread that reads while the move is
//     under way waits for it (Session.settle): no read returns before the
//     process's children are the session's.
//   - Across mounts. A process in another mount's implicit session is
//     never moved out of it; its cgroup is then this mount's session for
//     that process too (keyed by the ProcID its name carries), so the
//     taint this mount gave it reaches every process in that cgroup.
//
// A process in one of this mount's registered sessions that is also a
// member of an implicit session (a tainted owner process that moved itself
// into a clean session's cgroup) carries both taints (Resolved.also).

// implicitCount is the number of implicit sessions known.
func (r *Registry) implicitCount() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.implicit)
}

// implicitRoot reads the process an implicit session's cgroup was made
// for from its name (…/i-<tgid>-<start>).
func implicitRoot(abs string) (ProcID, bool) {
	leaf := abs[strings.LastIndexByte(abs, '/')+1:]
	rest, ok := strings.CutPrefix(leaf, "i-")
	if !ok {
		return ProcID{}, false
	}
	t, st, ok := strings.Cut(rest, "-")
	if !ok {
		return ProcID{}, false
	}
	tgid, err1 := strconv.Atoi(t)
	start, err2 := strconv.ParseUint(st, 10, 64)
	if err1 != nil || err2 != nil {
		return ProcID{}, false
	}
	return ProcID{Tgid: tgid, Start: start}, true
}

// foreignImplicit is the implicit session this mount holds for another
// mount's implicit session cgroup abs, if it holds one.
func (r *Registry) foreignImplicit(abs string) (member, bool) {
	key, ok := implicitRoot(abs)
	if !ok {
		return member{}, false
	}
	r.mu.RLock()
	s := r.implicit[key]
	r.mu.RUnlock()
	if s == nil {
		return member{}, false
	}
	return member{sess: s, principal: s.Principal}, true
}

// nowTicks is the time since boot in the clock ticks of /proc/<pid>/stat
// start times (USER_HZ, 100 on Linux): a process started from now on has
// a start time at or above it.
func nowTicks() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0 // every child counts: more taint, never less
	}
	return uint64(ts.Sec)*100 + uint64(ts.Nsec)/10_000_000
}

// taintOutside adds t to res, a process resolved outside every session:
// it becomes a member of an implicit session (made if needed) holding
// the taint, before this returns. It reports whether anything grew.
func (r *Registry) taintOutside(res *Resolved, t policy.Taint) bool {
	grew := res.addOwn(t) // the resolution in hand shows it at once
	id := res.Proc.ID
	abs, cgErr := cgroupOf(id.Tgid)
	r.mu.Lock()
	cg := r.cg
	var s *Session
	if m, ok := r.members[id]; ok && m.sess.Implicit {
		s = m.sess // tainted before, wherever it is now
	}
	key, foreign := id, false
	if s == nil && cgErr == nil && placeCgroup(abs, cg) == cgForeignImplicit {
		if k, ok := implicitRoot(abs); ok {
			key, foreign = k, true
		}
	}
	if s == nil {
		s = r.implicit[key]
	}
	changed, move := false, false
	if s == nil {
		s = &Session{ID: fmt.Sprintf("implicit-%d-%d", key.Tgid, key.Start), Principal: res.Principal,
			Started: time.Now().UTC(), Root: id, Implicit: true}
		if move = cg != nil && !foreign; move {
			s.settled = make(chan struct{})
		}
		r.implicit[key] = s
		changed = true
	}
	if m, ok := r.members[id]; !ok || m.sess != s {
		r.members[id] = member{sess: s, principal: res.Principal, since: nowTicks()}
		r.byTgid[id.Tgid] = id
		changed = true
	}
	if changed {
		r.invalidate()
	}
	r.mu.Unlock()
	grew = s.AddTaint(t) || grew
	if move {
		r.placeImplicit(cg, s, res)
		close(s.settled)
	}
	s.settle()
	return grew
}

// settle waits until the process of an implicit session has been moved
// into its cgroup (or the move given up): a read that taints it returns
// only once what the process starts lands in the session.
func (s *Session) settle() {
	if s.settled != nil {
		<-s.settled
	}
}

// placeImplicit moves the process of implicit session s into a cgroup of
// its own: only out of the root or a cgroup that is not aerfs's, never out
// of another mount's session or implicit session, which another daemon may
// have moved it into since it was resolved.
func (r *Registry) placeImplicit(cg *Cgroups, s *Session, res *Resolved) {
	id := res.Proc.ID
	rel := fmt.Sprintf("i-%d-%d", id.Tgid, id.Start)
	r.mu.Lock()
	r.byCg[rel] = member{sess: s, principal: res.Principal}
	r.mu.Unlock()
	if err := cg.Make(rel); err != nil {
		r.unplaced(s, res, err)
		return
	}
	done, err := lockHost()
	if err != nil {
		r.unplaced(s, res, err)
		return
	}
	if abs, err := cgroupOf(id.Tgid); err != nil || !movable(abs, cg) || placeCgroup(abs, cg) == cgOwn {
		done()
		return
	}
	err = cg.Move(id.Tgid, rel)
	done()
	if err != nil {
		r.unplaced(s, res, err)
		return
	}
	if !AliveOrSilent(id) {
		// The pid now belongs to another process: it must not inherit.
		if abs, err := cgroupOf(id.Tgid); err == nil && abs == cg.Root()+"/"+rel {
			cg.Move(id.Tgid, "")
		}
	}
}

// unplaced tells the events that implicit session s could not be given its
// cgroup, and why: its taint follows its process by identity and ancestry
// only.
func (r *Registry) unplaced(s *Session, res *Resolved, err error) {
	if r.events != nil {
		r.events.ImplicitUnplaced(s, res.Proc, err)
	}
}

// pruneImplicit forgets the implicit sessions nothing can be in any more:
// the process they were made for has exited, no process is known to be a
// member, and no cgroup of theirs (this mount's, or another mount's
// implicit session they stand for) holds a process.
func (r *Registry) pruneImplicit() {
	// Which processes are gone is read without the lock, which every
	// resolution takes (procwait.go).
	r.mu.RLock()
	var keys []ProcID
	for key := range r.implicit {
		keys = append(keys, key)
	}
	r.mu.RUnlock()
	gone := map[ProcID]bool{}
	for _, key := range keys {
		gone[key] = !AliveOrSilent(key)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.implicit) == 0 {
		return
	}
	held := map[*Session]bool{}
	for _, m := range r.members {
		held[m.sess] = true
	}
	top := ""
	if mnt, err := Cgroup2Mount(); err == nil {
		top = filepath.Join(mnt, cgroupTop)
	}
	for key, s := range r.implicit {
		if held[s] || !gone[key] {
			continue
		}
		rel := fmt.Sprintf("i-%d-%d", key.Tgid, key.Start)
		if r.cg != nil {
			if err := unix.Rmdir(r.cg.dir(rel)); err != nil && !errors.Is(err, unix.ENOENT) {
				continue // still populated
			}
		}
		if top != "" && populated(filepath.Join(top, "*", rel)) {
			continue
		}
		delete(r.byCg, rel)
		delete(r.implicit, key)
	}
}

// populated reports whether a cgroup matching pattern holds a process.
func populated(pattern string) bool {
	dirs, _ := filepath.Glob(pattern)
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil && len(b) > 0 {
			return true
		}
	}
	return false
}
