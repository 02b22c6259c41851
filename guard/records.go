package guard

import (
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// changeRecord is the record of a delete or rename of rel by res.
func (h *house) changeRecord(res *principal.Resolved, v policy.Verdict, typ, rel string, p *evidence.Payload) *evidence.Record {
	subj := res.Subject()
	op := typ
	switch typ {
	case evidence.TypeDelete:
		op = "unlink"
	case evidence.TypeRename:
		op = "rename"
	}
	return &evidence.Record{Type: typ, Principal: subj.Principal.String(), Taint: ledger.TaintNames(subj.Taint),
		Parents: h.reads.Parents(res, h.idx.Last(rel)),
		Meta: evidence.Meta{Path: rel, Op: op, Verdict: "allow", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe, UID: res.Proc.UID,
			Session: subj.Session, Rule: v.Rule.ID(), Reason: v.Rule.Reason()}, Payload: p}
}
