package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
	"github.com/aerfs/aerfs/snapshot"
)

// ownerChannel admits a request only from the owner's channel: an
// identified process of a trusted principal that belongs to no session.
// An agent cannot restore, approve or reject, whatever it is told.
func (s *controlServer) ownerChannel(pid int, what string) (*principal.Resolved, *Response) {
	peer := s.resolveCaller(pid)
	subj := peer.Subject()
	if v := policy.DecideOwner(subj); !v.Allow {
		rec := &evidence.Record{Type: evidence.TypeVerdict, Principal: subj.Principal.String(), Taint: nonNil(subj.Taint.Names()),
			Meta: evidence.Meta{Op: what, Verdict: "deny", Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID,
				Session: subj.Session, Rule: v.Rule.ID(), Reason: v.Rule.Reason() + ": " + what}}
		msg := what + " refused: only the owner's channel (a process outside every session) may " + what
		if !subj.Identified && peer.Reason != "" {
			// Another mount's session, most often: say so.
			rec.Meta.Reason += " (" + peer.Reason + ")"
			msg += ": " + peer.Reason
		}
		hint := "run it from your own terminal, not from an agent session"
		if v.Rule == policy.RuleOwnerTaint {
			msg = what + " refused: this process is tainted " + subj.Taint.String() + " (it or a process it came from read untrusted content), so it is not the owner's channel"
			hint = "run it from a fresh terminal that has read nothing an agent or the web wrote"
		}
		s.m.Record(rec)
		return peer, &Response{Refused: true, Rule: v.Rule.ID(), Error: msg, Hint: hint}
	}
	return peer, nil
}

func fileStates(state map[string]string) []evidence.FileState {
	out := make([]evidence.FileState, 0, len(state))
	for p, h := range state {
		out = append(out, evidence.FileState{Path: p, Hash: h})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// takeSnapshot records the state of every guarded file.
func (s *controlServer) takeSnapshot(pid int, req Request) *Response {
	peer, refusal := s.ownerChannel(pid, "snapshot")
	if refusal != nil {
		return refusal
	}
	state, err := s.m.State()
	if err != nil {
		return &Response{Error: "cannot read the guarded files: " + err.Error()}
	}
	p := &evidence.Payload{Detail: req.Label}
	if fs := fileStates(state); len(fs) > 0 {
		p.Files = fs
	}
	subj := peer.Subject()
	id, err := s.m.Record(&evidence.Record{Type: evidence.TypeSnapshot, Principal: subj.Principal.String(),
		Meta: evidence.Meta{Op: "snapshot", Verdict: "allow", Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID,
			Reason: "snapshot of the guarded files"}, Payload: p})
	if err != nil {
		return &Response{Error: "cannot record the snapshot: " + err.Error()}
	}
	b, _ := json.Marshal(map[string]any{"id": id, "files": len(state), "label": req.Label})
	return &Response{OK: true, Data: b}
}

// recovery serialises the operations that change guarded files from the
// owner's channel (restore, approve, burst rollback, journal resume).
var recoveryMu sync.Mutex

// maxRestoreParents keeps a restore record within the evidence format's
// 4096 parents.
const maxRestoreParents = 4000

// restoreScope is what a restore is about: every guarded file (a snapshot,
// a time), or exactly the files it names (one file, a contamination
// scope) — an empty list then means no file at all, never the whole state.
type restoreScope struct {
	whole bool
	paths []string
	// named: the owner named the file itself (FILE --to V), so nothing
	// the plan does to it goes beyond what was asked; source: the path
	// the owner named as poisoned (--contaminated-by PATH): when it is a
	// file, the plan may take it back too.
	named  bool
	source string
	// since is true for the versions the restore undoes (recorded after
	// its target): a change among them that the owner made by hand is
	// thrown away only with the owner's confirmation.
	since func(path string, v snapshot.Version) bool
}

// restoreTarget works out what the request asks the guarded files to
// become, and which files that covers.
func restoreTarget(x *snapshot.Index, req Request) (target snapshot.State, scope restoreScope, reason string, parents []string, err error) {
	switch {
	case req.ContaminatedBy != "":
		sc, err := x.ScopeAt(req.ContaminatedBy, req.SourceVersion)
		if err != nil {
			return nil, restoreScope{}, "", nil, err
		}
		before := x.StateBefore(sc)
		target = snapshot.State{}
		first := map[string]int64{}
		for _, f := range sc.Files {
			target[f.Path] = before[f.Path]
			scope.paths = append(scope.paths, f.Path)
			first[f.Path] = f.First.Idx
		}
		scope.since = func(path string, v snapshot.Version) bool { i, ok := first[path]; return ok && v.Idx >= i }
		if !looksLikeID(req.ContaminatedBy) || req.SourceVersion != "" {
			scope.source = req.ContaminatedBy
		}
		for _, r := range sc.Roots {
			if len(parents) == maxRestoreParents {
				break // a source many sessions read: the reason names it
			}
			parents = append(parents, r.ID)
		}
		what := req.ContaminatedBy
		if req.SourceVersion != "" {
			what += " at version " + req.SourceVersion
		}
		if len(scope.paths) == 0 {
			return target, scope, "no guarded file was changed downstream of " + what, parents, nil
		}
		return target, scope, "undo everything downstream of " + what, parents, nil
	case req.Snapshot != "":
		st, snap, err := x.SnapshotState(req.Snapshot)
		if err != nil {
			return nil, restoreScope{}, "", nil, err
		}
		_, at, err := x.Resolve(snap.ID)
		if err != nil {
			return nil, restoreScope{}, "", nil, err
		}
		return st, restoreScope{whole: true, since: func(_ string, v snapshot.Version) bool { return v.Idx > at }},
			"to snapshot " + snap.ID[:12], []string{snap.ID}, nil
	case req.Before != "":
		t, err := time.Parse(time.RFC3339Nano, req.Before)
		if err != nil {
			return nil, restoreScope{}, "", nil, fmt.Errorf("bad time %q: use RFC 3339", req.Before)
		}
		return x.StateAt(t), restoreScope{whole: true, since: func(_ string, v snapshot.Version) bool { return v.Time.After(t) }},
			"to the state before " + t.UTC().Format(time.RFC3339), nil, nil
	case req.Path != "":
		hist := x.History(req.Path)
		if len(hist) == 0 {
			return nil, restoreScope{}, "", nil, fmt.Errorf("no versions of %s in the log", req.Path)
		}
		var v *snapshot.Version
		if n, err := strconv.Atoi(req.To); err == nil {
			if n < 1 || n > len(hist) {
				return nil, restoreScope{}, "", nil, fmt.Errorf("%s has versions 1 to %d", req.Path, len(hist))
			}
			v = &hist[n-1]
		} else if req.To != "" {
			for i := range hist {
				if strings.HasPrefix(hist[i].Record, req.To) {
					if v != nil {
						return nil, restoreScope{}, "", nil, fmt.Errorf("version %q is ambiguous", req.To)
					}
					v = &hist[i]
				}
			}
		}
		if v == nil {
			return nil, restoreScope{}, "", nil, fmt.Errorf("no version %q of %s (aerfs history %s lists them)", req.To, req.Path, req.Path)
		}
		return snapshot.State{req.Path: v.Hash}, restoreScope{paths: []string{req.Path}, named: true},
			"restore " + req.Path + " to version " + v.Record[:12], []string{v.Record}, nil
	}
	return nil, restoreScope{}, "", nil, fmt.Errorf("say what to restore to: FILE --to V, --snapshot, --before or --contaminated-by")
}

// planRestore is the plan that takes the guarded files on disk to target:
// for a whole-state restore every guarded file (those created since are
// removed); otherwise only the files the scope names, and none when it
// names none. A step goes beyond what the owner named when it removes a
// file, or throws away a change the owner made by hand, that the owner did
// not name (snapshot.PlanStep.Beyond).
func planRestore(x *snapshot.Index, cur, target snapshot.State, scope restoreScope) []snapshot.PlanStep {
	var steps []snapshot.Step
	if scope.whole {
		steps = snapshot.Plan(cur, target)
	} else {
		c, t := snapshot.State{}, snapshot.State{}
		for _, p := range scope.paths {
			if h, ok := cur[p]; ok {
				c[p] = h
			}
			if h := target[p]; h != "" {
				t[p] = h
			}
		}
		steps = snapshot.Plan(c, t)
	}
	plan := x.Describe(steps)
	if scope.named {
		return plan
	}
	for i := range plan {
		st := &plan[i]
		if scope.source != "" && st.Path == scope.source {
			continue // the poisoned file itself: named (a directory names none of its files one by one)
		}
		var why []string
		if st.To == "" {
			why = append(why, "removes the file")
		}
		if mine := x.OwnerChanges(st.Path, scope.since); len(mine) > 0 {
			last := mine[len(mine)-1]
			why = append(why, fmt.Sprintf("throws away %d change(s) you made yourself (the last, version %s, at %s)",
				len(mine), versionNumber(x, st.Path, last.Record), last.Time.UTC().Format(time.RFC3339)))
		}
		st.Beyond = strings.Join(why, "; ")
	}
	return plan
}

// looksLikeID reports whether s can only be meant as a record id (hex, at
// least snapshot.MinPrefix characters): --contaminated-by takes a record
// id or a path.
func looksLikeID(s string) bool {
	if len(s) < snapshot.MinPrefix || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// versionNumber is the number aerfs history gives the version recorded by
// record id.
func versionNumber(x *snapshot.Index, path, id string) string {
	for i, v := range x.History(path) {
		if v.Record == id {
			return strconv.Itoa(i + 1)
		}
	}
	return "?"
}

// RuleConfirm is the rule id of a recovery refused because its plan goes
// beyond what the owner named and the owner did not confirm it.
const RuleConfirm = "RP-confirm"

// RestorePlan is what aerfs restore answers: the plan (done, to do with
// --dry-run, or waiting for --yes).
type RestorePlan struct {
	Reason  string              `json:"reason"`
	Steps   []snapshot.PlanStep `json:"steps"`
	Confirm bool                `json:"needs_confirmation,omitempty"`
}

// ownerIndex admits an owner's recovery request: it checks the channel,
// takes the recovery lock (the caller must call unlock) and reads the log,
// with everything queued so far included.
func (s *controlServer) ownerIndex(pid int, what string) (peer *principal.Resolved, x *snapshot.Index, unlock func(), refusal *Response) {
	peer, refusal = s.ownerChannel(pid, what)
	if refusal != nil {
		return nil, nil, nil, refusal
	}
	recoveryMu.Lock()
	s.m.FlushLog()
	x, err := snapshot.Load(s.stateDir)
	if err != nil {
		recoveryMu.Unlock()
		return nil, nil, nil, &Response{Error: "cannot read the log: " + err.Error()}
	}
	return peer, x, func() { x.Close(); recoveryMu.Unlock() }, nil
}

// restore serves aerfs restore: the plan first, then (unless a dry run, or
// a plan beyond what the owner named that the owner has not confirmed)
// its application through the journal.
func (s *controlServer) restore(pid int, req Request) *Response {
	peer, x, unlock, refusal := s.ownerIndex(pid, "restore")
	if refusal != nil {
		return refusal
	}
	defer unlock()
	cur, err := s.m.State()
	if err != nil {
		return &Response{Error: "cannot read the guarded files: " + err.Error()}
	}
	target, scope, reason, parents, err := restoreTarget(x, req)
	if err != nil {
		return &Response{Error: err.Error(), Hint: "aerfs history FILE, aerfs snapshot list and aerfs scope SOURCE show what there is"}
	}
	plan := RestorePlan{Reason: reason, Steps: planRestore(x, cur, target, scope)}
	plan.Confirm = snapshot.NeedsConfirmation(plan.Steps)
	for _, st := range plan.Steps {
		if st.To != "" && !s.m.HasBlob(st.To) {
			why := "is not in the store"
			if x.Pruned(st.To) {
				why = "was pruned by aerfs gc"
			}
			return &Response{Error: fmt.Sprintf("cannot restore %s: the content of that version (%.12s) %s", st.Path, st.To, why),
				Hint: "aerfs history " + st.Path + " marks the versions whose content is gone; restore a newer one"}
		}
	}
	data, _ := json.Marshal(plan)
	if req.DryRun || len(plan.Steps) == 0 {
		return &Response{OK: true, Data: data}
	}
	if plan.Confirm && !req.Yes {
		subj := peer.Subject()
		s.m.Record(&evidence.Record{Type: evidence.TypeVerdict, Principal: subj.Principal.String(), Parents: parents,
			Meta: evidence.Meta{Op: "restore", Verdict: "deny", Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID,
				Rule: RuleConfirm, Reason: "the plan goes beyond what the owner named and was not confirmed: " + reason}})
		return &Response{Refused: true, Rule: RuleConfirm, Data: data,
			Error: "restore refused: the plan removes files or throws away changes you made yourself that you did not name",
			Hint:  "look at it with aerfs restore --dry-run (same arguments); run it with --yes to confirm"}
	}
	steps := make([]snapshot.Step, len(plan.Steps))
	for i, st := range plan.Steps {
		steps[i] = st.Step
	}
	j := &snapshot.Journal{ID: fmt.Sprintf("restore-%d", time.Now().UnixNano()), Reason: reason, Steps: steps, Done: make([]bool, len(steps))}
	failed, err := runJournal(s.m, s.stateDir, s.log, j, peer.Subject().Principal.String(), peer, parents, "restore")
	if err != nil {
		return &Response{Error: err.Error()}
	}
	if len(failed) > 0 {
		return &Response{Data: data, Error: fmt.Sprintf("restore done except for %d file(s) that could not be written: %s", len(failed), failures(failed)),
			Hint: "the log names them (aerfs log --path PATH); clear what stands in the way (aerfs why PATH) and restore again"}
	}
	return &Response{OK: true, Data: data}
}

// runJournal carries out a multi-file change: the journal is durable
// first, each step is atomic and marked done, the whole change is one
// record, and only then is the journal removed. A crash anywhere leaves a
// journal that the next mount finishes.
//
// A step that cannot be applied (something else stands at its path: a
// directory a session replaced with a symbolic link or a file, a full
// disk) is left and named, in the record and in what runJournal returns
// (failed), and the others go on: one obstacle must neither
// stop the rest nor leave a journal that every later mount fails on.
func runJournal(m *guarded, stateDir string, log zerolog.Logger, j *snapshot.Journal, principal string, peer *principal.Resolved, parents []string, op string) (failed []stepFailure, err error) {
	// The contents the steps name (kept by GuardedState, or by the
	// versions being restored) are durable before the journal naming them.
	if err := m.FlushLog(); err != nil {
		return nil, fmt.Errorf("cannot make the contents to restore durable: %w", err)
	}
	if err := snapshot.WriteJournal(stateDir, j); err != nil {
		return nil, fmt.Errorf("cannot write the restore journal: %w", err)
	}
	failed, err = applyJournal(m, stateDir, j, log)
	if err != nil {
		return nil, fmt.Errorf("restore interrupted: %w (the journal resumes it at the next mount)", err)
	}
	if _, err := recordRestore(m, j, principal, peer, parents, op, failed); err != nil {
		return nil, fmt.Errorf("restore done but not recorded: %w", err)
	}
	return failed, snapshot.RemoveJournal(stateDir)
}

// applyJournal applies the steps not yet done, marking each durable. A
// step whose file changed after the plan was made (it holds neither the
// step's From nor its To: a commit landed meanwhile) is left alone and
// marked done: the plan never overwrites what it did not see.
// recordRestore records only the steps whose file holds their To.
// A step that fails otherwise is left too, and returned in failed; err is
// only the journal itself failing (then the next mount resumes it).
func applyJournal(m *guarded, stateDir string, j *snapshot.Journal, log zerolog.Logger) (failed []stepFailure, err error) {
	delay := stepDelay()
	for _, i := range j.Remaining() {
		st := j.Steps[i]
		if _, _, err := m.setContentFrom(st.Path, st.From, st.To, nil); errors.Is(err, guard.ErrChanged) {
			log.Warn().Err(err).Str("path", st.Path).Msg("restore step left alone: the file changed since the plan")
		} else if err != nil {
			log.Warn().Err(err).Str("path", st.Path).Msg("restore step left: it could not be applied")
			failed = append(failed, stepFailure{st, err.Error()})
		}
		if err := j.MarkDone(stateDir, i); err != nil {
			return failed, err
		}
		log.Info().Str("path", st.Path).Str("to", st.To).Msg("restored")
		if delay > 0 {
			time.Sleep(delay)
		}
	}
	return failed, nil
}

// stepDelay slows restores down between files, so that crash tests can
// kill the daemon in the middle of one. Unset in normal use.
func stepDelay() time.Duration {
	ms, _ := strconv.Atoi(os.Getenv("AERFS_RESTORE_STEP_DELAY_MS"))
	return time.Duration(ms) * time.Millisecond
}

// recordRestore records the steps of j whose file now holds their To (a
// step left alone because the file changed since the plan is named in the
// reason, not recorded as done). No step done: no record.
// stepFailure is a step of a journal that could not be applied, and why.
type stepFailure struct {
	snapshot.Step
	Why string
}

func (f stepFailure) String() string { return f.Path + ": " + f.Why }

// failures prints them for a reason or an error.
func failures(fs []stepFailure) string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return strings.Join(out, "; ")
}

func recordRestore(m *guarded, j *snapshot.Journal, principal string, peer *principal.Resolved, parents []string, op string, failed []stepFailure) (string, error) {
	files := make([]evidence.FileState, 0, len(j.Steps))
	paths := make([]string, 0, len(j.Steps))
	var left []string
	notApplied := map[string]bool{}
	for _, f := range failed {
		notApplied[f.Path] = true
	}
	for _, st := range j.Steps {
		if cur, err := m.hashOf(st.Path); err != nil || cur != st.To {
			if !notApplied[st.Path] {
				left = append(left, st.Path)
			}
			continue
		}
		files = append(files, evidence.FileState{Path: st.Path, OldHash: st.From, Hash: st.To})
		paths = append(paths, st.Path)
	}
	reason := j.Reason
	if len(left) > 0 {
		reason += "; left alone, changed since the plan: " + strings.Join(left, ", ")
	}
	if len(failed) > 0 {
		reason += "; not applied: " + failures(failed)
	}
	if len(files) == 0 {
		if len(failed) > 0 {
			// Nothing changed, but the owner's restore (or a resumed one)
			// must leave a trace of what could not be done.
			_, err := m.Record(&evidence.Record{Type: evidence.TypeVerdict, Principal: principal, Parents: parents,
				Meta: evidence.Meta{Op: op, Verdict: "deny", Reason: reason}})
			return "", err
		}
		return "", nil
	}
	r := &evidence.Record{Type: evidence.TypeRestore, Principal: principal, Parents: parents,
		Meta:    evidence.Meta{Op: op, Verdict: "allow", Reason: reason},
		Payload: &evidence.Payload{Detail: reason, Files: files}}
	if peer != nil {
		r.Meta.Pid, r.Meta.Exe, r.Meta.UID = peer.Proc.ID.Tgid, peer.Proc.Exe, peer.Proc.UID
	}
	id, err := m.Record(r)
	if err == nil {
		m.Expect(guard.Expectation{Record: id, Paths: paths})
	}
	return id, err
}

// resumeJournal finishes a restore that a crash interrupted, before the
// mount serves: the workspace ends fully at the target, and the log says
// the restore was resumed.
func resumeJournal(m *guarded, stateDir string, log zerolog.Logger) error {
	j, err := snapshot.ReadJournal(stateDir)
	if err != nil {
		return fmt.Errorf("restore journal: %w", err)
	}
	if j == nil {
		return nil
	}
	done := len(j.Steps) - len(j.Remaining())
	recoveryMu.Lock()
	defer recoveryMu.Unlock()
	failed, err := applyJournal(m, stateDir, j, log)
	if err != nil {
		return fmt.Errorf("resuming the interrupted restore: %w", err)
	}
	j.Reason = fmt.Sprintf("%s (interrupted after %d of %d files; resumed at mount)", j.Reason, done, len(j.Steps))
	if _, err := recordRestore(m, j, policy.Sys.String(), nil, nil, "restore-resumed", failed); err != nil {
		return err
	}
	log.Warn().Str("journal", j.ID).Msg("interrupted restore resumed")
	return snapshot.RemoveJournal(stateDir)
}

func (s *controlServer) approve(pid int, req Request, approve bool) *Response {
	what := "approve"
	if !approve {
		what = "reject"
	}
	peer, x, unlock, refusal := s.ownerIndex(pid, what)
	if refusal != nil {
		return refusal
	}
	defer unlock()
	var item *snapshot.Pending
	for _, p := range x.Pending() {
		if len(req.ID) >= 8 && strings.HasPrefix(p.ID, req.ID) {
			if item != nil {
				return &Response{Error: fmt.Sprintf("id %q is ambiguous", req.ID)}
			}
			p := p
			item = &p
		}
	}
	if item == nil {
		return &Response{Error: fmt.Sprintf("no pending item %q (already approved or rejected?)", req.ID), Hint: "aerfs pending lists them"}
	}
	subj := peer.Subject()
	rec := &evidence.Record{Principal: subj.Principal.String(), Parents: []string{item.ID},
		Meta:    evidence.Meta{Path: item.Path, Op: what, Verdict: "allow", Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID},
		Payload: &evidence.Payload{OldHash: item.BaseHash, NewHash: item.Hash}}
	if !approve {
		rec.Type, rec.Meta.Reason = evidence.TypeReject, "the owner rejected the quarantined content"
		if _, err := s.m.Record(rec); err != nil {
			return &Response{Error: err.Error()}
		}
		b, _ := json.Marshal(map[string]string{"id": item.ID, "path": item.Path})
		return &Response{OK: true, Data: b}
	}
	cur, err := s.m.hashOf(item.Path)
	if err != nil {
		return &Response{Error: err.Error()}
	}
	if cur != item.BaseHash {
		return &Response{Error: fmt.Sprintf("%s changed since the content was quarantined: approving it would overwrite that change", item.Path),
			Hint: "look at aerfs pending and aerfs diff " + item.Path + ", then reject it or write the content yourself"}
	}
	rec.Type, rec.Meta.Reason = evidence.TypeApprove, "the owner approved exactly the reviewed content"
	aid, err := s.m.Record(rec)
	if err != nil {
		return &Response{Error: err.Error()}
	}
	// The write of the approved content goes through the transaction: its
	// record is durable before the file changes. It is planned from the
	// base the owner reviewed: a commit that lands after the check above
	// is never overwritten (ErrChanged).
	base := item.BaseHash
	if _, _, err := s.m.change(guard.Change{Path: item.Path, Hash: item.Hash, From: &base, Reviewed: true}, func(old string) *evidence.Record {
		typ := evidence.TypeWrite
		if item.Hash == "" {
			typ = evidence.TypeDelete // an approved rollback of a file the session created
		}
		return &evidence.Record{Type: typ, Principal: subj.Principal.String(), Parents: []string{aid},
			Meta: evidence.Meta{Path: item.Path, Op: "approve", Verdict: "allow", Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID,
				Reason: "approved content committed"},
			Payload: &evidence.Payload{OldHash: old, NewHash: item.Hash}}
	}); errors.Is(err, guard.ErrChanged) {
		return &Response{Error: "approved but not written: " + err.Error(),
			Hint: "the approval is recorded; look at aerfs diff " + item.Path + " and write the content with aerfs edit if you still want it"}
	} else if err != nil {
		return &Response{Error: "approved but not written: " + err.Error()}
	}
	b, _ := json.Marshal(map[string]string{"id": item.ID, "path": item.Path})
	return &Response{OK: true, Data: b}
}
