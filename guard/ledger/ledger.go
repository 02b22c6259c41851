package ledger

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Recorder is where verdicts, writes and content go. The evidence log
// implements it.
type Recorder interface {
	Append(r *evidence.Record) (string, error)
	// AppendAll makes every record durable in one batch, or none.
	AppendAll(rs ...*evidence.Record) ([]string, error)
	PutBlob(data []byte) (string, error)
	PutBlobFile(path string) (string, error)
	Blob(hash string) ([]byte, error)
	AppendAsync(r *evidence.Record, onErr func(error)) (string, error)
	HasBlob(hash string) bool
	Flush() error
}

// Stats counts verdicts for `aerfs status`.
type Stats struct {
	Allowed, Denied, Committed, Quarantined atomic.Int64
}

// Ledger records for one root of the guard.
type Ledger struct {
	Recorder
	root  string // the further root's name, "" for the workspace
	Log   zerolog.Logger
	Stats *Stats
}

// New is the ledger of the root named root ("" for the workspace).
func New(rec Recorder, root string, log zerolog.Logger) *Ledger {
	return &Ledger{Recorder: rec, root: root, Log: log, Stats: &Stats{}}
}

// Root is the name of the further root, "" for the workspace.
func (l *Ledger) Root() string { return l.root }

// Record queues r for the next group commit without waiting for it to be
// durable: verdicts and taint notes, which must not add a disk flush to
// the system call that caused them. Changes to guarded files use Must.
func (l *Ledger) Record(r *evidence.Record) string {
	l.Fill(r)
	id, err := l.AppendAsync(r, func(err error) {
		l.Log.Error().Err(err).Str("type", r.Type).Msg("evidence append failed")
	})
	if err != nil {
		l.Log.Error().Err(err).Str("type", r.Type).Msg("evidence append failed")
	}
	return id
}

// Must appends r and returns once it is durable.
func (l *Ledger) Must(r *evidence.Record) (string, error) {
	l.Fill(r)
	return l.Append(r)
}

// All makes the records of one change durable together.
func (l *Ledger) All(recs []*evidence.Record) ([]string, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for _, r := range recs {
		if r.Parents == nil {
			r.Parents = []string{}
		}
		if r.Taint == nil {
			r.Taint = []string{}
		}
		if r.Meta.Time == "" {
			r.Meta.Time = now
		}
		if l.root != "" {
			l.rootPaths(r)
		}
	}
	return l.AppendAll(recs...)
}

// Fill completes a record: no nil lists, a time, and the root's paths.
func (l *Ledger) Fill(r *evidence.Record) {
	if r.Parents == nil {
		r.Parents = []string{}
	}
	if r.Taint == nil {
		r.Taint = []string{}
	}
	if r.Meta.Time == "" {
		r.Meta.Time = time.Now().UTC().Format(time.RFC3339Nano)
	}
	if l.root != "" {
		l.rootPaths(r)
	}
}

// Verdict is the record of the policy's verdict v on op at rel for res.
func Verdict(res *principal.Resolved, subj policy.Subject, op policy.Op, rel string, v policy.Verdict) *evidence.Record {
	verdict := "deny"
	if v.Allow {
		verdict = "allow"
	}
	r := &evidence.Record{
		Type:      evidence.TypeVerdict,
		Principal: subj.Principal.String(),
		Taint:     TaintNames(subj.Taint),
		Meta: evidence.Meta{
			Path: rel, Op: OpName(op), Verdict: verdict,
			Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe, UID: res.Proc.UID,
			Session: subj.Session, Rule: v.Rule.ID(), Reason: v.Rule.Reason(),
		},
	}
	if !res.Identified {
		// An unidentified caller is the least trusted principal; the
		// reason says why it could not be identified.
		r.Principal = policy.External.String()
		r.Meta.Reason += ": unidentified caller: " + res.Reason
	}
	return r
}

// Taint is the record of taint a process gained by reading rel.
func Taint(res *principal.Resolved, added policy.Taint, rel, why string) *evidence.Record {
	subj := res.Subject()
	return &evidence.Record{Type: evidence.TypeTaint, Principal: subj.Principal.String(), Taint: TaintNames(added),
		Meta: evidence.Meta{Path: rel, Op: "read", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe, UID: res.Proc.UID,
			Session: subj.Session, Reason: why}}
}

// TaintNames lists the names of t, never nil.
func TaintNames(t policy.Taint) []string {
	n := t.Names()
	if n == nil {
		return []string{}
	}
	return n
}

// OpName is the name records give op.
func OpName(op policy.Op) string {
	switch op {
	case policy.OpLookup:
		return "lookup"
	case policy.OpRead:
		return "read"
	case policy.OpWrite:
		return "write"
	case policy.OpCreate:
		return "create"
	case policy.OpUnlink:
		return "unlink"
	case policy.OpRenameFrom:
		return "rename_from"
	case policy.OpRenameTo:
		return "rename_to"
	case policy.OpLink:
		return "link"
	case policy.OpSetattr:
		return "setattr"
	case policy.OpXattr:
		return "xattr"
	case policy.OpExec:
		return "exec"
	case policy.OpPromote:
		return "promote"
	}
	return "unknown"
}

// RecordPath is the path records give the root-relative path rel: rel
// itself in the workspace, "@name/rel" in a further root.
func (l *Ledger) RecordPath(rel string) string {
	if l.root == "" || strings.HasPrefix(rel, "/") {
		return rel
	}
	if rel == "" {
		return policy.RootPrefix + l.root
	}
	return policy.RootPrefix + l.root + "/" + rel
}

// rootPaths gives the paths of a further root's record their root: every
// path-valued field that is relative to the root (absolute paths, such as
// a mount's, stay as they are).
func (l *Ledger) rootPaths(r *evidence.Record) {
	if p := r.Meta.FilePath(); p != "" || r.Meta.Op != "" {
		r.Meta.SetPath(l.RecordPath(p))
	}
	eachPath(r.Payload, l.RecordPath)
}

// Unroot makes the record paths of this root in r relative to it again
// (Fill gives them their root back): for a record made by the
// workspace's side of the guard for a root's file. nil passes.
func (l *Ledger) Unroot(r *evidence.Record) *evidence.Record {
	if r == nil {
		return nil
	}
	pre := policy.RootPrefix + l.root
	strip := func(p string) string {
		if p == pre {
			return ""
		}
		if rest, ok := strings.CutPrefix(p, pre+"/"); ok {
			return rest
		}
		return p
	}
	if p := r.Meta.FilePath(); p != "" {
		r.Meta.SetPath(strip(p))
	}
	eachPath(r.Payload, strip)
	return r
}

// eachPath rewrites every path of a payload with f.
func eachPath(pl *evidence.Payload, f func(string) string) {
	if pl == nil {
		return
	}
	if p := pl.FromPath(); p != "" {
		pl.From, pl.FromB64 = f(p), ""
	}
	if p := pl.ToPath(); p != "" {
		pl.To, pl.ToB64 = f(p), ""
	}
	for i := range pl.Files {
		if p := pl.Files[i].FilePath(); p != "" {
			pl.Files[i].Path, pl.Files[i].PathB64 = f(p), ""
		}
	}
}
