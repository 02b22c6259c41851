package guard

import (
	"syscall"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/flow"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// # Plain content that moves
//
// A rename or a link of a plain file puts no byte in it, so its label
// stays (binding.go) — but where it arrives can matter, and who moved it:
//
//   - At a name of the client's machinery (policy.Policy.Machinery) what
//     the file is decides whether the client runs it: the mover lowers
//     its label as a writer of it would (flow.Place), before the move, so
//     that a session that read untrusted content cannot choose what an
//     untainted one runs by moving that one's draft into place. A
//     directory cannot be moved onto machinery by such a session at all
//     (its files would arrive unseen): RX-machinery-move.
//   - The provenance graph follows it: the move of a file whose label is
//     in the graph is recorded as a write of its new name, with the
//     record that labelled it as a parent, and a session's move of a
//     directory as a rename, so that aerfs scope still finds what a
//     poisoned session wrote after it was renamed.

// RuleMachineryMove is the rule id of a directory moved onto the client's
// machinery by a session that read untrusted content or is below USER.
const RuleMachineryMove = "RX-machinery-move"

// placing lowers, before the move, the label of what a rename or link
// brings to a machinery name: the file st arriving at to, or for a
// directory its refusal. *res is resolved when needed.
func (h *house) placing(c Caller, res **principal.Resolved, to string, st *syscall.Stat_t) syscall.Errno {
	if st == nil {
		return 0
	}
	pol := h.gate.Policy()
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		if !pol.Machinery(to) {
			return 0
		}
		if *res == nil {
			*res = h.gate.Resolve(c)
		}
		defer h.opens.Binding(label.KeyOf(st))()
		if _, err := h.flow.Next(flow.Move{Op: flow.Place, Subjects: []*principal.Resolved{*res}, To: flow.Dest{Path: to, Stat: st}}); err != nil {
			return syscall.EIO
		}
	case syscall.S_IFDIR:
		if !pol.MachineryWithin(to) {
			return 0
		}
		if *res == nil {
			*res = h.gate.Resolve(c)
		}
		if subj := (*res).Subject(); subj.Taint != 0 || !subj.Principal.Trusted() || !(*res).Identified {
			return h.gate.Deny(*res, policy.OpRenameTo, to, RuleMachineryMove,
				"a session that read untrusted content, or below USER, may not move a directory onto the client's machinery: the files in it would arrive where the client runs them")
		}
	}
	return 0
}

// movedRecord records, after a rename or link of a plain name from → to
// (st: what moved), what the provenance graph needs: a labelled file's
// new name, a session's directory move. op is "rename" or "link".
func (h *house) movedRecord(c Caller, res *principal.Resolved, op, from, to string, st *syscall.Stat_t) {
	if st == nil {
		return
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		l := h.labels.Get(label.KeyOf(st))
		inGraph := l != nil && l.Kind == 0 && l.Record != ""
		if !inGraph && op != "link" {
			return // not in the graph: nothing to follow
		}
		if res == nil {
			res = h.gate.Resolve(c)
		}
		if !inGraph && res.Session == nil {
			return // the owner's own link of clean content
		}
		// A session's link of any file: what it writes through the new
		// name is in the file under both (aerfs scope names both).
		last := ""
		if inGraph {
			last = l.Record
		} else {
			l = nil
		}
		subj := res.Subject()
		h.led.Record(&evidence.Record{Type: evidence.TypeWrite, Principal: subj.Principal.String(), Taint: ledger.TaintNames(labelTaint(l)),
			Parents: h.reads.Parents(res, last),
			Meta: evidence.Meta{Path: to, Op: op, Verdict: "allow", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe, UID: res.Proc.UID,
				Session: subj.Session, Rule: policy.RulePlain.ID(), Reason: movedReason(inGraph, op, from),
				Class: label.ClassOf(l)},
			Payload: &evidence.Payload{From: from, To: to}})
	case syscall.S_IFDIR:
		if op != "rename" {
			return
		}
		if res == nil {
			res = h.gate.Resolve(c)
		}
		if res.Session == nil {
			return // the owner's own moves: no session's provenance to follow
		}
		h.led.Record(h.changeRecord(res, policy.Verdict{Allow: true, Rule: policy.RulePlain}, evidence.TypeRename, from, &evidence.Payload{From: from, To: to}))
	}
}

func labelTaint(l *label.Label) policy.Taint {
	if l == nil {
		return 0
	}
	return l.Taint
}

func movedReason(inGraph bool, op, from string) string {
	if !inGraph {
		return "a session linked the file here from " + from + ": what it writes through either name is in the file under both"
	}
	return "a labelled file " + map[string]string{"rename": "renamed", "link": "linked"}[op] + " here from " + from + ": its provenance follows it"
}
