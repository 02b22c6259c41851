package daemon

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
	"github.com/aerfs/aerfs/snapshot"
)

// RuleRollbackConflict is the rule id of a burst rollback that could not
// take a session's changes out of a file without touching a later change
// by someone else: the file is left as it is, and the rollback waits in
// aerfs pending for the owner.
const RuleRollbackConflict = "RB-conflict"

// rollbackSession reverts the guarded changes of a session quarantined
// after a burst of refusals, and only those: a plan is computed first,
// file by file (rebase), then applied through the restore journal. A
// change someone else made after the session's first change — the
// owner's line written between two of the agent's writes, another
// session's edit, a change behind aerfs's back — is kept: it is replayed
// onto the file without the session's changes. Where it cannot be (both
// touched the same lines), the file is left alone and the full rollback of
// that file waits in aerfs pending, for the owner to approve or reject
// (rule RB-conflict).
func rollbackSession(m *guarded, stateDir string, log zerolog.Logger, sess *principal.Session) {
	recoveryMu.Lock()
	defer recoveryMu.Unlock()
	m.FlushLog()
	x, err := snapshot.Load(stateDir)
	if err != nil {
		log.Error().Err(err).Msg("burst rollback: cannot read the log")
		return
	}
	defer x.Close()
	var steps []snapshot.Step
	for _, p := range x.Paths() {
		cur, err := m.hashOf(p)
		if err != nil {
			continue
		}
		plan, err := rebaseWithout(x.History(p), sess.ID, cur, m.Blob, m.PutBlob)
		switch {
		case err != nil:
			// The rebase could not be worked out (content unreadable):
			// the file is left as it is and the full rollback waits for
			// the owner, as a conflict does — never only a log line.
			quarantineRollback(m, log, sess.ID, p, cur, &rollbackPlan{conflict: true, naive: firstBefore(x.History(p), sess.ID),
				detail: "the later changes could not be merged back: " + err.Error()})
		case plan == nil:
		case plan.conflict:
			quarantineRollback(m, log, sess.ID, p, cur, plan)
		case plan.to != cur:
			steps = append(steps, snapshot.Step{Path: p, From: cur, To: plan.to})
		}
	}
	if len(steps) == 0 {
		return
	}
	j := &snapshot.Journal{ID: "burst-" + sess.ID, Reason: "burst: roll back what session " + sess.ID + " changed, keeping later changes by others",
		Steps: steps, Done: make([]bool, len(steps))}
	failed, err := runJournal(m, stateDir, log, j, policy.Sys.String(), nil, nil, "burst-rollback")
	if err != nil {
		log.Error().Err(err).Str("session", sess.ID).Msg("burst rollback")
	}
	// A file the rollback could not write waits for the owner, as a
	// conflict does: approving the pending item writes it.
	for _, f := range failed {
		quarantineRollback(m, log, sess.ID, f.Path, f.From, &rollbackPlan{conflict: true, naive: f.To,
			detail: "the rolled-back content could not be written: " + f.Why})
	}
}

// rollbackPlan is what a rollback does to one file.
type rollbackPlan struct {
	to       string // the content to give it ("" = absent)
	conflict bool   // a later change by someone else overlaps the session's
	// naive is the content before the session's first change: what the
	// file would get if every later change went too.
	naive  string
	detail string
}

// rebaseWithout works out the content of a file (history hist, current
// content cur) without the changes of session id: from the content before
// its first change, every later change by someone else is merged back in
// (snapshot.Merge3), the session's own are left out. nil: the session
// never changed the file.
func rebaseWithout(hist []snapshot.Version, id, cur string, blob func(string) ([]byte, error), put func([]byte) (string, error)) (*rollbackPlan, error) {
	first := -1
	for i, v := range hist {
		if v.Session == id && (v.Type == evidence.TypeWrite || v.Type == evidence.TypeDelete || v.Type == evidence.TypeRename) {
			first = i
			break
		}
	}
	if first < 0 {
		return nil, nil
	}
	plan := &rollbackPlan{to: hist[first].OldHash, naive: hist[first].OldHash}
	// Later changes by others, and a change found on disk that no record
	// names (drift not yet recorded), in order.
	type change struct {
		from, to, who string
	}
	var later []change
	for _, v := range hist[first+1:] {
		if v.Session != id {
			later = append(later, change{v.OldHash, v.Hash, v.Principal + " " + v.Session})
		}
	}
	if last := hist[len(hist)-1].Hash; cur != last {
		later = append(later, change{last, cur, "a change not yet recorded"})
	}
	read := func(h string) ([]byte, error) {
		if h == "" {
			return nil, nil
		}
		// Through the log: content a merge above has just stored may be
		// held in memory until the next checkpoint, not yet on disk.
		return blob(h)
	}
	var kept []string
	for _, c := range later {
		if c.from == plan.to {
			plan.to = c.to // made on top of the content without the session's changes
			kept = append(kept, strings.TrimSpace(c.who))
			continue
		}
		if c.from == "" || c.to == "" || plan.to == "" {
			// A file created or removed on one side: nothing to merge.
			plan.conflict = true
			plan.detail = "a later change by " + strings.TrimSpace(c.who) + " creates or removes the file"
			return plan, nil
		}
		base, err := read(c.from)
		if err != nil {
			return nil, fmt.Errorf("content %.12s: %w", c.from, err)
		}
		theirs, err := read(c.to)
		if err != nil {
			return nil, fmt.Errorf("content %.12s: %w", c.to, err)
		}
		ours, err := read(plan.to)
		if err != nil {
			return nil, fmt.Errorf("content %.12s: %w", plan.to, err)
		}
		merged, ok := snapshot.Merge3(base, ours, theirs)
		if !ok {
			plan.conflict = true
			plan.detail = "a later change by " + strings.TrimSpace(c.who) + " touches the same lines as the session's"
			return plan, nil
		}
		switch {
		case bytes.Equal(merged, theirs):
			plan.to = c.to
		default:
			h, err := put(merged)
			if err != nil {
				return nil, err
			}
			plan.to = h
		}
		kept = append(kept, strings.TrimSpace(c.who))
	}
	if len(kept) > 0 {
		plan.detail = "kept later changes by " + strings.Join(kept, ", ")
	}
	return plan, nil
}

// firstBefore is the content of a file before session id's first change of
// it ("" when the session created it, or never changed it).
func firstBefore(hist []snapshot.Version, id string) string {
	for _, v := range hist {
		if v.Session == id && (v.Type == evidence.TypeWrite || v.Type == evidence.TypeDelete || v.Type == evidence.TypeRename) {
			return v.OldHash
		}
	}
	return ""
}

// rollbackPending is the detail of a burst rollback waiting in aerfs
// pending. (logindex folds an item of op burst-rollback even when it names
// no content: approving it removes the file.)
const rollbackPending = "burst rollback waiting for the owner"

// quarantineRollback leaves a file whose rollback conflicts as it is and
// puts the full rollback (the content before the session's first change)
// in aerfs pending: the owner approves it (every later change goes too) or
// rejects it (the file stays).
func quarantineRollback(m *guarded, log zerolog.Logger, id, p, cur string, plan *rollbackPlan) {
	reason := "burst rollback of session " + id + " left the file as it is: " + plan.detail
	r := &evidence.Record{Type: evidence.TypeVerdict, Principal: policy.Sys.String(),
		Meta: evidence.Meta{Path: p, Op: "burst-rollback", Verdict: "deny", Session: id, Rule: RuleRollbackConflict, Reason: reason}}
	// A pending item: approving it commits the content before the
	// session's first change, exactly (none, for a file the session
	// created: approving removes it).
	r.Type = evidence.TypeQuarantine
	r.Meta.Reason = reason + "; approve the pending item to roll the file back anyway"
	r.Payload = &evidence.Payload{OldHash: cur, NewHash: plan.naive, Detail: rollbackPending}
	if _, err := m.Record(r); err != nil {
		log.Error().Err(err).Str("path", p).Msg("burst rollback conflict not recorded")
		return
	}
	log.Warn().Str("path", p).Str("session", id).Str("rule", RuleRollbackConflict).Msg(reason)
}
