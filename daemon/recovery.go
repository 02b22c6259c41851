package daemon

import (
	"encoding/json"
	"sort"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/principal"
)

// ownerChannel admits a request only from the owner's channel: an
// identified process of a trusted principal that belongs to no session.
// An agent cannot restore, approve or reject, whatever it is told.
func (s *controlServer) ownerChannel(pid int, what string) (*principal.Resolved, *Response) {
	peer := s.reg.Resolve(pid)
	subj := peer.Subject()
	if !subj.Identified || subj.Session != "" || !subj.Principal.Trusted() {
		rec := &evidence.Record{Type: evidence.TypeVerdict, Principal: subj.Principal.String(), Taint: nonNil(subj.Taint.Names()),
			Meta: evidence.Meta{Op: what, Verdict: "deny", Pid: peer.Proc.ID.Tgid, Exe: peer.Proc.Exe, UID: peer.Proc.UID,
				Session: subj.Session, Rule: "RO-owner", Reason: "only the owner's channel (outside every session) may " + what}}
		s.m.Record(rec)
		return peer, &Response{Refused: true, Rule: "RO-owner",
			Error: what + " refused: only the owner's channel (a process outside every session) may " + what,
			Hint:  "run it from your own terminal, not from an agent session"}
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
	state, err := s.m.GuardedState()
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
