package daemon

import (
	"encoding/json"
	"fmt"
	"github.com/aerfs/aerfs/authority"
	"os"
	"time"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
	"github.com/aerfs/aerfs/snapshot"
)

// GCResult is what aerfs gc reports.
type GCResult struct {
	snapshot.GCPlan
	DryRun bool   `json:"dry_run"`
	Record string `json:"record,omitempty"` // the gc record's id
}

// Pruner removes content blobs that nothing needs any more, deciding
// among candidates (chosen from the log's first since records) under the
// same serialisation as the commits: evidence.Log.Prune.
type Pruner func(r *evidence.Record, candidates []string, since int64) (id string, pruned []string, err error)

// RunGC is aerfs gc, a plan first and then its application (the shape of
// restic's prune): the plan chooses the content blobs of stateDir outside
// ret from the history read in x (snapshot.PlanGC); a dry run returns it.
// Otherwise prune decides, in the committer, which of them go — a
// candidate a record appended since x was read names stays — and removes
// them after a gc record naming them is durable. Records are never
// pruned. The blobs a restore journal still needs are kept.
func RunGC(x *snapshot.Index, stateDir string, ret snapshot.Retention, dryRun bool, by *principal.Resolved, prune Pruner) (*GCResult, error) {
	stored, err := evidence.StoredBlobs(stateDir)
	if err != nil {
		return nil, fmt.Errorf("cannot list the stored content: %w", err)
	}
	var held []string
	if j, err := snapshot.ReadJournal(stateDir); err != nil {
		return nil, fmt.Errorf("restore journal: %w", err)
	} else if j != nil {
		for _, st := range j.Steps {
			held = append(held, st.From, st.To)
		}
	}
	res := &GCResult{GCPlan: x.PlanGC(ret, stored, held), DryRun: dryRun}
	if dryRun || len(res.Prune) == 0 {
		return res, nil
	}
	r := &evidence.Record{Principal: policy.User.String(),
		Meta: evidence.Meta{Op: "gc", Verdict: "allow", UID: uint32(os.Getuid()), Rule: policy.RuleOwner.ID(),
			Reason: "the owner pruned stored content outside the retention; records are kept"},
		Payload: &evidence.Payload{Detail: fmt.Sprintf("keep-last %d, keep-within %s, max-size %d bytes",
			ret.KeepLast, ret.KeepWithin, ret.MaxBytes)}}
	if by != nil {
		r.Principal = by.Subject().Principal.String()
		r.Meta.Pid, r.Meta.Exe, r.Meta.UID = by.Proc.ID.Tgid, by.Proc.Exe, by.Proc.UID
	}
	id, pruned, err := prune(r, res.Prune, x.Through())
	res.GCPlan = res.GCPlan.Only(pruned)
	res.Record = id
	return res, err
}

// gc serves aerfs gc for a mounted workspace: owner channel only.
func (s *controlServer) gc(pid int, req Request) *Response {
	peer, x, unlock, refusal := s.ownerIndex(pid, "gc")
	if refusal != nil {
		return refusal
	}
	defer unlock()
	if s.prune == nil {
		return &Response{Error: "this daemon cannot prune its store"}
	}
	within, err := time.ParseDuration(req.KeepWithin)
	if req.KeepWithin == "" {
		within, err = 0, nil
	}
	if err != nil || req.KeepLast < 1 || req.MaxBytes < 0 {
		return &Response{Error: "bad retention", Hint: "aerfs gc --keep-last N (≥ 1) --keep-within DURATION --max-size BYTES"}
	}
	res, err := RunGC(x, s.stateDir, snapshot.Retention{KeepLast: req.KeepLast, KeepWithin: within, MaxBytes: req.MaxBytes, Now: time.Now()},
		req.DryRun, peer, s.prune)
	if err != nil {
		return &Response{Error: err.Error()}
	}
	if !req.DryRun {
		gone := make([]authority.Hash, 0, len(res.Prune))
		for _, h := range res.Prune {
			if ah, err := authority.ParseHash(h); err == nil {
				gone = append(gone, ah)
			}
		}
		s.m.Authority().Monitor().Forget(gone)
	}
	b, _ := json.Marshal(res)
	return &Response{OK: true, Data: b}
}
