package flow

import (
	"fmt"
	"syscall"

	"github.com/aerfs/aerfs/authority"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/guard/tracking"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Op is an operation that moves content.
type Op int

const (
	// Read: a subject opened a file for reading (or looked up an object,
	// or followed a symlink); the file's label flows into the subject.
	Read Op = iota
	// Exec: a subject opened a file to execute it; as Read.
	Exec
	// Open: a plain file opened for writing (Truncated: with O_TRUNC).
	Open
	// Flush: a written plain handle was flushed or released.
	Flush
	// Change: a plain file changed in place without a handle (its size
	// set, its extended attributes set or removed).
	Change
	// Commit: staged content committed to a guarded file.
	Commit
	// Rename: content moved under a guarded name.
	Rename
	// Make: a symlink, FIFO, socket or device node made.
	Make
	// Lookup: a FIFO, socket or device node looked up (a potential writer).
	Lookup
	// Restore: the owner's channel put content at a guarded name
	// (restore, approve, edit, rollback, drift repair, completion).
	Restore
	// Adopt: the owner accepted a file's current content as its own.
	Adopt
	// Drift: content changed outside the mount.
	Drift
	// Place: a plain file moved (renamed, linked) to a name where what
	// it is decides what it may do (the client's machinery): the mover
	// lowers its label as a writer of it would.
	Place
)

// Move is one flow of content.
type Move struct {
	Op Op
	// Subjects are the processes that moved the content, as they are
	// now; the first is the one records name.
	Subjects []*principal.Resolved
	// Sources are the labels of what flowed in (nil: unlabelled).
	Sources []*label.Label
	// To is the destination.
	To Dest
	// Add is, for a read, the taint the policy's verdict says the reader
	// gains (the label's, SECRET_RISK for a secret).
	Add policy.Taint
}

// Dest is where content flows to: a file.
type Dest struct {
	Path string
	// Stat is the destination's inode when the label is stored here
	// (Open, Flush, Truncate, Make, Lookup); nil otherwise.
	Stat *syscall.Stat_t
	// Hash is the content's SHA-256 when known ("" for a plain file).
	Hash string
	// Truncated: the write does not extend the content the source label
	// describes.
	Truncated bool
	// Guarded: the destination is a guarded file (bound by hash, always
	// labelled).
	Guarded bool
}

// Config is what the flow works with.
type Config struct {
	Labels    *label.Store
	Authority *authority.Monitor
	Reads     *tracking.Reads
	Objects   *tracking.Objects
	Ledger    *ledger.Ledger
	Index     *tracking.Index
	Opens     *tracking.Opens
	// Forget forgets an inode whose number was given to a new file.
	Forget func(label.Key)
}

// Flow applies the label rules of one root.
type Flow struct{ c Config }

// New is the flow of a root.
func New(c Config) *Flow { return &Flow{c: c} }

// Authority is the authority monitor the flow stamps with.
func (f *Flow) Authority() *authority.Monitor { return f.c.Authority }

// Next is the one label-flow function: it computes the label of the
// destination from what flowed in (Move) and applies it where no
// transaction publishes it. It returns the new label (nil: none needed,
// the content is the owner's, clean and act), and an error when a label
// that is not the owner's clean one could not be stored (a full or failing
// state disk): the caller refuses the operation, or says it failed, since
// content whose label is lost would be taken as clean at the next mount.
func (f *Flow) Next(m Move) (*label.Label, error) {
	switch m.Op {
	case Open:
		return f.open(m)
	case Flush:
		return f.flush(m, "close", "the writers at close, as they are now, lower the file's label (a writer read lower content, was tainted or became untrusted while the file was open)")
	case Place:
		return f.flush(m, "place", "moved to the client's machinery: the mover lowers the file's label as a writer would (a session that read untrusted content chooses what the client runs)")
	case Make:
		return f.make(m)
	case Lookup:
		return f.lookup(m)
	}
	return f.next(m), nil
}

// next is Next for the operations that store no label here: a read
// stores none, and a transaction publishes and binds the others.
func (f *Flow) next(m Move) *label.Label {
	switch m.Op {
	case Read, Exec:
		f.read(m)
		return nil
	case Change:
		return f.change(m)
	case Commit:
		// The meet of every writer (the first, the opener as it is now,
		// binds the class to the content's hash) and of the content the
		// commit extends (Sources: an append keeps what it appends to).
		res := m.Subjects[0]
		h, _ := authority.ParseHash(m.To.Hash)
		st := f.c.Authority.Write(authWriter(res, res.Subject()), m.To.Path, h)
		st.Session = res.Subject().Session
		l := writer(res.Subject())
		if l == nil {
			l = &label.Label{Origin: res.Subject().Principal}
		}
		l.Stamp = &st
		for _, w := range m.Subjects[1:] {
			l = lower(l, f.wrote(w))
		}
		for _, src := range m.Sources {
			l = lower(l, src)
		}
		l.Hash, l.Stamp.Hash = m.To.Hash, h
		return l
	case Rename:
		return f.rename(m)
	case Restore:
		if !m.To.Guarded {
			return nil
		}
		// Content put back gets the label its version had (Sources: the
		// labels it was published with): an EXTERNAL drift, a WEB
		// writer's or an agent's inform content restored stays what it
		// was. Content the owner wrote or reviewed (an edit, an approval)
		// comes with no source and is the owner's.
		var l *label.Label
		for _, src := range m.Sources {
			if src != nil {
				l = lower(l, src)
			}
		}
		if l == nil {
			return &label.Label{Origin: policy.User, Hash: m.To.Hash}
		}
		l.Record = ""
		l.Hash = m.To.Hash
		return l
	case Adopt:
		if !m.To.Guarded {
			return nil
		}
		return &label.Label{Origin: policy.User, Hash: m.To.Hash}
	case Drift:
		return &label.Label{Origin: policy.External, Taint: policy.Untrusted, Hash: m.To.Hash}
	}
	return nil
}

// writer is the label a subject's write gives content: nil for a clean
// USER or SYS writer.
func writer(subj policy.Subject) *label.Label {
	if subj.Taint == 0 && subj.Principal.Trusted() {
		return nil
	}
	return &label.Label{Origin: subj.Principal, Taint: subj.Taint | policy.OriginTaint(subj.Principal), Session: subj.Session}
}

// meet is the label of content made of a and b: the lower origin, the
// union of taint. nil is the owner's clean content.
func meet(a, b *label.Label) *label.Label {
	if a == nil {
		return b
	}
	if b == nil {
		c := *a
		return &c
	}
	c := *b
	c.Taint |= a.Taint
	c.Origin = policy.Lower(a.Origin, b.Origin)
	return &c
}

// authWriter is the authority subject of res. Its reads and writes are
// kept under the same key as its provenance reads (its session, or the
// process).
func authWriter(res *principal.Resolved, subj policy.Subject) authority.Writer {
	return authority.Writer{Principal: subj.Principal, Taint: subj.Taint, Session: AuthorityKey(res), Identified: res.Identified,
		Agent: res.Session != nil && res.Session.Agent() != ""}
}

// AuthorityKey is the key the authority monitor keeps res's reads under:
// its session, or the process outside sessions.
func AuthorityKey(res *principal.Resolved) string {
	if res.Session != nil {
		return SessionKey(res.Session.ID)
	}
	return "p:" + res.Proc.ID.String()
}

// SessionKey is the authority key of the session with this id.
func SessionKey(id string) string { return "s:" + id }

// stamp binds the class of a write by res to rel (hash "" for a plain
// file, whose content is not hashed). prev is the label of the content the
// write extends (nil for a new or truncated file): the result is at most
// its class. The result is nil when the content is act and nothing else
// needs a label.
func (f *Flow) stamp(res *principal.Resolved, rel, hash string, nl, prev *label.Label) *label.Label {
	subj := res.Subject()
	var h authority.Hash
	if hash != "" {
		h, _ = authority.ParseHash(hash)
	}
	st := f.c.Authority.Write(authWriter(res, subj), rel, h)
	st.Session = subj.Session
	if prev != nil {
		if p := label.StampOf(prev); p.Class < st.Class {
			st.Class, st.Rule, st.Sources = p.Class, authority.RuleWriteSource, append([]authority.Source(nil), p.Sources...)
		}
	}
	if nl == nil {
		if st.Class == authority.Act {
			return nil
		}
		nl = &label.Label{Origin: subj.Principal, Session: subj.Session}
	}
	nl.Stamp = &st
	return nl
}

// read lets the label of what the subjects read flow into them.
func (f *Flow) read(m Move) {
	var l *label.Label
	if len(m.Sources) > 0 {
		l = m.Sources[0]
	}
	for _, res := range m.Subjects {
		if m.Add != 0 && res.AddTaint(m.Add) {
			f.c.Ledger.Record(ledger.Taint(res, m.Add, m.To.Path, "read a labelled file"))
		}
		if l == nil {
			continue
		}
		if l.Record != "" {
			f.c.Reads.Labelled(res, l.Record)
		}
		f.c.Authority.Read(AuthorityKey(res), m.To.Path, label.StampOf(l))
	}
}

// open labels a plain file opened for writing: what it held (unless
// truncated) met with the writer.
func (f *Flow) open(m Move) (*label.Label, error) {
	res := m.Subjects[0]
	subj := res.Subject()
	var old *label.Label
	if len(m.Sources) > 0 {
		old = m.Sources[0]
	}
	var nl *label.Label
	kept := old // the content the file keeps, whose record is a parent
	if m.To.Truncated && !f.c.Opens.Writing(label.KeyOf(m.To.Stat)) {
		kept = nil
		// Cut to nothing, the file holds only what this writer writes.
		// Not while another handle is open for writing: what it writes
		// next lands in the same file, and its label stays until its
		// own close recomputes it.
		nl = f.stamp(res, m.To.Path, "", writer(subj), nil)
	} else {
		nl = f.stamp(res, m.To.Path, "", meet(old, writer(subj)), old)
	}
	if nl != nil {
		nl.Bind(m.To.Stat)
		if writer(subj) != nil || nl.Stamp != nil && nl.Stamp.Class != authority.Act {
			// The provenance DAG reaches plain files through this record:
			// whoever reads the file later names it as a parent.
			nl.Record = f.c.Ledger.Record(&evidence.Record{Type: evidence.TypeWrite, Principal: subj.Principal.String(),
				Taint: ledger.TaintNames(nl.Taint), Parents: withRecord(f.parents(res, m.To.Path), kept),
				Meta: evidence.Meta{Path: m.To.Path, Op: "open", Verdict: "allow", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe,
					UID: res.Proc.UID, Session: subj.Session, Rule: policy.RulePlain.ID(), Reason: "written by a labelled writer",
					Class: label.ClassOf(nl)}})
		}
	}
	if nl == nil || nl.Record == "" {
		f.provenance(res, m.To.Path, "open", nl)
	}
	if nl != nil || old != nil {
		// A label removed (a clean writer truncated the file) that stays
		// in the journal is stricter than the content: only a label that
		// could not be kept is an error.
		if err := f.store(m.To, nl); err != nil && nl != nil {
			return nl, err
		}
	}
	if nl != nil {
		f.reached(label.KeyOf(m.To.Stat), m.To.Path, nl)
	}
	return nl, nil
}

// flush recomputes a plain file's label at a close of a handle that wrote
// it, from every process that wrote through the handle as they are now
// (Subjects: a writer that read lower content, joined a tainted session
// or exec'd an untrusted program since the open lowers it): the label it
// has met with each writer's. A lower label is recorded, stored, and
// reaches the file's readers.
func (f *Flow) flush(m Move, op, reason string) (*label.Label, error) {
	k := label.KeyOf(m.To.Stat)
	cur := f.c.Labels.Get(k)
	nl := cur
	for _, w := range m.Subjects {
		nl = lower(nl, f.wrote(w))
	}
	if label.Same(nl, cur) {
		for _, w := range m.Subjects {
			f.provenance(w, m.To.Path, "close", cur)
		}
		return cur, nil
	}
	res := m.Subjects[0]
	subj := res.Subject()
	nl.Bind(m.To.Stat)
	nl.Record = f.c.Ledger.Record(&evidence.Record{Type: evidence.TypeWrite, Principal: nl.Origin.String(),
		Taint: ledger.TaintNames(nl.Taint), Parents: withRecord(f.parents(res, m.To.Path), cur),
		Meta: evidence.Meta{Path: m.To.Path, Op: op, Verdict: "allow", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe,
			UID: res.Proc.UID, Session: subj.Session, Rule: nl.Stamp.Rule.ID(), Reason: reason,
			Class: nl.Stamp.Class.String()}})
	err := f.store(m.To, nl)
	// The label is kept in memory even when the journal could not take it:
	// the readers of this mount are tainted all the same.
	f.reached(k, m.To.Path, nl)
	return nl, err
}

// wrote is the label content written by res gets: its origin and taint,
// and the class its principal and what its session read allow (nil: the
// owner's clean act content).
func (f *Flow) wrote(res *principal.Resolved) *label.Label {
	subj := res.Subject()
	w := authWriter(res, subj)
	class, rule := f.c.Authority.Config().Base(&w)
	var sources []authority.Source
	if floor, src := f.c.Authority.Floor(w.Session); floor < class {
		class, rule, sources = floor, authority.RuleWriteSource, src
	}
	l := writer(subj)
	if l == nil {
		if class == authority.Act {
			return nil
		}
		l = &label.Label{Origin: subj.Principal, Session: subj.Session}
	}
	l.Stamp = &authority.Stamp{Class: class, Rule: rule, Origin: subj.Principal, Session: subj.Session, Sources: sources}
	return l
}

// lower is the label of content made of what a and b describe: the lower
// origin, the union of taint, the lower class (a's on a tie). nil is the
// owner's clean act content.
func lower(a, b *label.Label) *label.Label {
	if b == nil {
		if a == nil {
			return nil
		}
		c := *a
		if a.Stamp != nil {
			st := *a.Stamp
			c.Stamp = &st
		}
		return &c
	}
	c := meet(a, b)
	sa, sb := label.StampOf(a), label.StampOf(b)
	st := *sa
	if sb.Class < sa.Class {
		st = *sb
	}
	c.Stamp = &st
	return c
}

// reached lets content labelled l, written into k under its readers (the
// handles open to read it, and those opened while it was being written:
// tracking.Opens), flow into them as reading it would: kernel passthrough
// serves their reads, which the daemon never sees.
func (f *Flow) reached(k label.Key, rel string, l *label.Label) {
	t, st := l.ReadTaint(), label.StampOf(l)
	if t == 0 && st.Class == authority.Act {
		return
	}
	for _, r := range f.c.Opens.Readers(k) {
		if r.AddTaint(t) {
			f.c.Ledger.Record(ledger.Taint(r, t, rel, "read a file whose content changed under it: "+l.Origin.String()+" wrote it while it was open"))
		}
		f.c.Authority.Read(AuthorityKey(r), rel, st)
	}
}

// change is the label of a plain file a writer changed in place: what it
// held met with the writer. The caller stores it before the change: a
// label that cannot be kept would be lost taint.
func (f *Flow) change(m Move) *label.Label {
	var old *label.Label
	if len(m.Sources) > 0 {
		old = m.Sources[0]
	}
	res := m.Subjects[0]
	subj := res.Subject()
	nl := meet(old, writer(subj))
	if nl != nil && !label.Same(nl, old) {
		// The provenance graph reaches the file through this record, as
		// through an open's (aerfs scope of what tainted the changer).
		nl.Record = f.c.Ledger.Record(&evidence.Record{Type: evidence.TypeWrite, Principal: subj.Principal.String(),
			Taint: ledger.TaintNames(nl.Taint), Parents: withRecord(f.parents(res, m.To.Path), old),
			Meta: evidence.Meta{Path: m.To.Path, Op: "change", Verdict: "allow", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe,
				UID: res.Proc.UID, Session: subj.Session, Rule: policy.RulePlain.ID(),
				Reason: "changed in place (size or extended attributes) by a labelled writer", Class: label.ClassOf(nl)}})
	}
	return nl
}

// withRecord adds the record that labelled l (when there is one) to
// parents: content that keeps l's descends from it.
func withRecord(parents []string, l *label.Label) []string {
	if l == nil || l.Record == "" {
		return parents
	}
	for _, p := range parents {
		if p == l.Record {
			return parents
		}
	}
	return append(parents, l.Record)
}

// rename is the label of content renamed (or linked) under a guarded
// name: the source's — its stamp and its taint — met with the renamer's
// origin and taint, which can only lower it. A rename is not a write: it
// never raises the class.
func (f *Flow) rename(m Move) *label.Label {
	subj := m.Subjects[0].Subject()
	var src *label.Label
	if len(m.Sources) > 0 {
		src = m.Sources[0]
	}
	l := meet(src, writer(subj))
	if l == nil {
		l = &label.Label{Origin: subj.Principal}
	}
	if src != nil {
		st := *label.StampOf(src)
		l.Stamp = &st
	}
	l.Hash = m.To.Hash
	return l
}

// make labels a symlink, FIFO, socket or device node its maker made, when
// the maker is untrusted or tainted.
func (f *Flow) make(m Move) (*label.Label, error) {
	res := m.Subjects[0]
	k := label.KeyOf(m.To.Stat)
	nl := writer(res.Subject())
	if nl == nil {
		// A label left on a reused inode number (its object removed
		// behind aerfs's back) does not belong to this new object.
		if f.c.Labels.Get(k) != nil {
			f.c.Forget(k)
		}
		return nil, nil
	}
	nl.Kind = m.To.Stat.Mode & syscall.S_IFMT
	return nl, f.object(res, m.To, nl, "created by a labelled writer")
}

// lookup counts an untrusted or tainted subject that looks an object up
// as a potential writer: its principal and taint are merged into the
// object's label, and whoever looked the object up before (and may be
// reading what it writes) is tainted.
func (f *Flow) lookup(m Move) (*label.Label, error) {
	res := m.Subjects[0]
	var l *label.Label
	if len(m.Sources) > 0 {
		l = m.Sources[0]
	}
	k := label.KeyOf(m.To.Stat)
	var added policy.Taint
	var err error
	nl := l
	if wl := writer(res.Subject()); wl != nil {
		nl = meet(l, wl)
		nl.Kind = m.To.Stat.Mode & syscall.S_IFMT
		if l == nil || nl.Taint != l.Taint || nl.Origin != l.Origin {
			err = f.object(res, m.To, nl, "looked up by a labelled subject: a potential writer")
		}
		added = nl.Taint
	}
	prev := f.c.Objects.Looked(k, res)
	if added != 0 {
		for _, p := range prev {
			if p != res && p.AddTaint(added) {
				f.c.Ledger.Record(ledger.Taint(p, added, m.To.Path, "read a labelled file"))
			}
		}
	}
	return nl, err
}

// object stores nl for the object and records why.
func (f *Flow) object(res *principal.Resolved, to Dest, nl *label.Label, why string) error {
	subj := res.Subject()
	nl.Bind(to.Stat)
	nl.Record = f.c.Ledger.Record(&evidence.Record{Type: evidence.TypeWrite, Principal: subj.Principal.String(),
		Taint: ledger.TaintNames(nl.Taint), Parents: f.parents(res, to.Path),
		Meta: evidence.Meta{Path: to.Path, Op: "label", Verdict: "allow", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe,
			UID: res.Proc.UID, Session: subj.Session, Rule: policy.RulePlain.ID(), Reason: why}})
	return f.store(to, nl)
}

// provenance records a write of the plain file rel by res that no label
// records (a clean writer's), when res read something through the mount
// since it last wrote rel: the file carries no label, so this record,
// naming what res read as parents, is what puts whoever reads the file
// later downstream of those reads (aerfs scope, restore --contaminated-by).
// The record names the class of the file's label l as it stands (act for
// none), as every write record does.
func (f *Flow) provenance(res *principal.Resolved, rel, op string, l *label.Label) {
	ps := f.c.Reads.Wrote(res, rel, f.c.Index.Last(rel))
	if ps == nil {
		return
	}
	subj := res.Subject()
	f.c.Ledger.Record(&evidence.Record{Type: evidence.TypeWrite, Principal: subj.Principal.String(),
		Taint: ledger.TaintNames(subj.Taint), Parents: ps,
		Meta: evidence.Meta{Path: rel, Op: op, Verdict: "allow", Pid: res.Proc.ID.Tgid, Exe: res.Proc.Exe,
			UID: res.Proc.UID, Session: subj.Session, Rule: policy.RulePlain.ID(),
			Reason: "written by a writer that read files through the mount (provenance)", Class: label.ClassOf(l)}})
}

// parents is the parents of a record of a change of rel by res.
func (f *Flow) parents(res *principal.Resolved, rel string) []string {
	return f.c.Reads.Parents(res, f.c.Index.Last(rel))
}

// store stores l (nil removes) for the destination's inode.
func (f *Flow) store(to Dest, l *label.Label) error {
	err := f.c.Labels.Set(label.KeyOf(to.Stat), l)
	if err != nil {
		f.c.Ledger.Log.Error().Err(err).Str("path", to.Path).Msg("label not stored")
		return fmt.Errorf("aerfs: the label of %s could not be stored: %w", to.Path, err)
	}
	return nil
}
