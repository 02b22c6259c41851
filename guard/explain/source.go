package explain

import (
	"os"
	"strconv"
	"strings"

	"github.com/aerfs/aerfs/evidence"
)

// # Explanations of what came before the mount
//
// .aerfs/status and aerfs why say what the log says about a process, a
// session or a path. With a Source (the log's index), the Index follows
// the log from the mount on and keeps, per live session or process, its
// last taint causes and refusals; what the log said of a session before
// the mount, and of a path at any time, it reads from the source when
// asked, so that its memory follows what is live rather than the log's
// length. A retired session is forgotten (Forget) and read again from the
// source if it is asked about.

// Source reads from the log's index what the explanations need.
type Source interface {
	// SessionRecords calls fn, in log order, with the records before
	// record before that explain session id: its registration, its last
	// taint causes and refusals, its last burst and release.
	SessionRecords(id string, before int64, fn func(id string, r *evidence.Record))
	// PathRecords calls fn with the records naming path, newest first,
	// until fn returns false.
	PathRecords(path string, fn func(id string, r *evidence.Record) bool)
	// StillPending reports whether the quarantine record id is undecided.
	StillPending(id string) bool
}

// maxSubjects: past it, the processes outside sessions that have exited
// are forgotten.
const maxSubjects = 4096

// UseSource makes the index follow the log from record start (the
// mount's first) and read what came before from src.
func (x *Index) UseSource(src Source, start int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.src, x.start, x.next = src, start, start
	x.loaded = map[string]bool{}
	x.paths = nil
}

// Forget drops what the index holds about session id (retired: what the
// log says of it is read from the source again if it is asked about).
func (x *Index) Forget(id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	k := subjKey(id, 0)
	delete(x.subj, k)
	delete(x.loaded, k)
}

// loadBefore reads, once, what the log said of session key before the
// mount, and puts it before what was seen since. Called with x.mu held.
func (x *Index) loadBefore(key string) {
	id, ok := strings.CutPrefix(key, "s:")
	if x.src == nil || !ok || x.loaded[key] {
		return
	}
	x.loaded[key] = true
	tmp := &Index{subj: map[string]*subjectLog{}, pending: map[string]bool{}}
	x.src.SessionRecords(id, x.start, tmp.add)
	old := tmp.subj[key]
	if old == nil {
		return
	}
	for _, r := range old.refusals {
		if r.Pending != "" {
			if _, known := x.pending[r.Pending]; !known && x.src.StillPending(r.Pending) {
				x.pending[r.Pending] = true
			}
		}
	}
	if cur := x.subj[key]; cur != nil {
		old.causes = appendCauses(old.causes, cur.causes)
		old.refusals = append(old.refusals, cur.refusals...)
		if len(old.refusals) > keepRefusals {
			old.refusals = old.refusals[len(old.refusals)-keepRefusals:]
		}
		if cur.confinement != "" {
			old.confinement = cur.confinement
		}
		if cur.burstSet {
			old.burst, old.burstSet = cur.burst, true
		}
	}
	x.subj[key] = old
}

func appendCauses(c, more []TaintCause) []TaintCause {
	for _, tc := range more {
		c = appendCause(c, tc)
	}
	return c
}

// pathVerdicts lists the last records about rel, newest first, from the
// source. Called with x.mu held.
func (x *Index) pathVerdicts(rel string) []PathVerdict {
	out := []PathVerdict{}
	x.src.PathRecords(rel, func(id string, r *evidence.Record) bool {
		m := r.Meta
		path := m.FilePath()
		if path == "" && r.Payload != nil {
			path = r.Payload.ToPath()
		}
		if path != rel {
			return true
		}
		t, _ := evidence.ParseTime(m.Time)
		out = append(out, PathVerdict{Time: t, Type: r.Type, Op: m.Op, Verdict: m.Verdict, Rule: m.Rule, Reason: m.Reason,
			Principal: r.Principal, Session: m.Session, Pid: m.Pid, Record: id})
		return len(out) < keepVerdicts
	})
	return out
}

// sweep forgets the processes outside sessions that have exited. Called
// with x.mu held.
func (x *Index) sweep() {
	for k := range x.subj {
		if pid, ok := strings.CutPrefix(k, "p:"); ok {
			if _, err := strconv.Atoi(pid); err != nil {
				delete(x.subj, k)
			} else if _, err := os.Stat("/proc/" + pid); err != nil {
				delete(x.subj, k)
			}
		}
	}
}
