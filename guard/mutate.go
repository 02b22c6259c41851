package guard

import (
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/flow"
	"github.com/aerfs/aerfs/guard/gate"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/ledger"
	"github.com/aerfs/aerfs/guard/txn"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Make decides making a directory, a symlink, a FIFO, a socket or a
// device node at rel (name is its last element), calls make, the node's
// own *at call, and labels what an untrusted or tainted maker made (dir:
// a directory, which carries no label). It reports whether the new entry
// must never be cached (a special object, a labelled symlink).
func (d *Door) Make(c Caller, rel, name string, dir bool, symlink string, make func() syscall.Errno) (neverCache bool, errno syscall.Errno) {
	if isReserved(name) {
		return false, syscall.EACCES
	}
	h := d.h
	h.names.RLock()
	defer h.names.RUnlock()
	t, l := h.gate.Target(rel, nil)
	// Directories, symlinks, FIFOs and devices never count as the first
	// creation of an identity file: only regular content does.
	t.Absent = false
	if _, errno := h.gate.All(c, []gate.Check{{Op: policy.OpCreate, Rel: rel, T: t, L: l, Durable: true}}); errno != 0 {
		return false, errno
	}
	if !dir {
		if errno := h.gate.Link(h.gate.Resolve(c), policy.OpCreate, rel, symlink, symlink != ""); errno != 0 {
			return false, errno
		}
	}
	if errno := make(); errno != 0 || dir {
		return false, errno
	}
	st, err := h.dir.Lstat(rel)
	if err != nil {
		return false, 0
	}
	kind := st.Mode & syscall.S_IFMT
	if kind != syscall.S_IFLNK && !IsObject(kind) {
		return false, 0
	}
	nl, err := h.flow.Next(flow.Move{Op: flow.Make, Subjects: []*principal.Resolved{h.gate.Resolve(c)}, To: flow.Dest{Path: rel, Stat: st}})
	if err != nil {
		// An untrusted maker's object whose label cannot be kept would be
		// unlabelled at the next mount: it is taken back (it holds no data).
		h.dir.Unlink(rel, 0)
		return false, syscall.EIO
	}
	return IsObject(kind) || nl != nil, 0
}

// withSource marks t as receiving the content labelled l of the file st:
// a rename or link onto a name is a write of that content. Onto a guarded
// name, a file open for writing through a plain handle says so: the
// kernel would serve that handle's later writes to the guarded file
// (policy.RuleOpenWriter). A handle the renaming process itself holds is
// not counted (renamer, its tgid; 0 for a link, which leaves the old name
// in place): writers that publish a temporary file by renaming it while
// it is still open, and close it right after (OpenClaw's file library
// does), commit as writers that close first. Files a renamed directory
// carries are decided with renamer 0: every handle counts.
func (h *house) withSource(t *policy.Target, l *label.Label, st *syscall.Stat_t, renamer int) {
	t.HasSource = true
	t.SourceOrigin = policy.User
	if l != nil {
		t.SourceOrigin = l.Origin
		t.SourceTaint = l.Taint
	}
	if st != nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && (t.Class.Guarded() || t.Namespace == policy.NSShared) {
		t.SourceWriting = h.opens.Passthrough(label.KeyOf(st), releaseWait, renamer)
	}
}

// releaseWait is how long a rename or link onto a guarded name waits for
// the release of a plain handle already closed (the kernel sends it after
// close returns) before deciding that the file is still open for writing.
const releaseWait = 250 * time.Millisecond

// Link gives the file src a second name dst: decided as a mutation of the
// file when it is guarded, and as a write of its content under the new
// name. link is the node's own link.
func (d *Door) Link(c Caller, src, dst string, link func() syscall.Errno) (policy.Class, policy.Namespace, syscall.Errno) {
	h := d.h
	h.names.RLock()
	defer h.names.RUnlock()
	for _, p := range []string{src, dst} {
		if errno := h.refuseHeld(c, p); errno != 0 {
			return 0, 0, errno
		}
	}
	sst, err := h.dir.Lstat(src)
	if err != nil {
		return 0, 0, backing.Errno(err)
	}
	ts, ls := h.gate.Target(src, sst)
	td, _ := h.gate.Target(dst, nil)
	if sst.Mode&syscall.S_IFMT == syscall.S_IFREG && ts.Class != policy.Plain && td.Class != policy.Plain && ts.Class != td.Class {
		// One file, one class: writes through the new name would be
		// decided as its class, not the file's (a memory name on a skill).
		return 0, 0, h.gate.Deny(h.gate.Resolve(c), policy.OpLink, dst, RuleLinkClasses,
			fmt.Sprintf("a hard link may not give a %s file a %s name: writes through one name would be decided as the other's class", ts.Class, td.Class))
	}
	td.Absent = td.Absent && sst.Mode&syscall.S_IFMT == syscall.S_IFREG
	if ts.Class != policy.Plain {
		td.Class = policy.Strictest(td.Class, ts.Class)
	}
	h.withSource(&td, ls, sst, 0)
	// A symlink or special object linked to a guarded name is no content
	// the transaction records: its verdict is made durable first.
	special := sst.Mode&syscall.S_IFMT != syscall.S_IFREG
	checks := []gate.Check{{Op: policy.OpLink, Rel: src, T: ts, L: ls}, {Op: policy.OpLink, Rel: dst, T: td, Durable: special}}
	res, errno := h.gate.All(c, checks)
	if errno != 0 {
		h.keepRefusedArrival(res, checks, policy.OpLink, src, sst)
		return 0, 0, errno
	}
	if special {
		// A second name of a symlink, FIFO, socket or device is decided
		// as one made there.
		if errno := h.linkArrives(c, &res, policy.OpLink, src, dst, sst.Mode&syscall.S_IFMT); errno != 0 {
			return 0, 0, errno
		}
	}
	if errno := h.gate.Control(c, res, "link", dst, ls); errno != 0 {
		return 0, 0, errno
	}
	if sst.Mode&syscall.S_IFMT == syscall.S_IFREG && (ts.Class != policy.Plain || ts.Namespace.Entered()) {
		// The new name is decided as the file's (gate.Target).
		h.idx.SetGuarded(label.KeyOf(sst), src)
	}
	if cl, _, _ := h.gate.Policy().Classify(dst); !cl.Guarded() || sst.Mode&syscall.S_IFMT != syscall.S_IFREG || res == nil {
		// What arrives at the client's machinery is lowered by its
		// linker first (moved.go).
		if errno := h.placing(c, &res, dst, sst); errno != 0 {
			return 0, 0, errno
		}
		linked := h.hold(src, sst) // a link moves the inode's ctime (binding.go)
		errno := link()
		linked.keep(h)
		if errno == 0 {
			h.movedRecord(c, res, "link", src, dst, sst)
		}
		return td.Class, td.Namespace, errno
	}
	// The content arrives under a guarded name: a write of it.
	defer h.txn.Lock(src, dst)()
	subj := res.Subject()
	var hash string
	errno = h.txn.Apply(&txn.Change{
		Keep:  []string{src, dst},
		After: func(old map[string]string) map[string]string { return map[string]string{dst: old[src]} },
		Prepare: func(old map[string]string) ([]*evidence.Record, syscall.Errno) {
			hash = old[src]
			r := h.gate.WriteRecord(res, subj, dst, checks[1].V, label.ClassOf(ls))
			r.Meta.Op = "link"
			r.Payload = &evidence.Payload{OldHash: old[dst], NewHash: hash}
			return []*evidence.Record{r}, 0
		},
		Publish: func([]string) syscall.Errno { return link() },
		Done: func(ids []string) syscall.Errno {
			// The two names share the inode and its label: the source's,
			// met with the linker's.
			h.idx.SetLast(ids[0], dst)
			nst, _ := h.dir.Lstat(dst)
			l, _ := h.flow.Next(flow.Move{Op: flow.Rename, Subjects: []*principal.Resolved{res}, Sources: []*label.Label{ls},
				To: flow.Dest{Path: dst, Hash: hash, Guarded: true}})
			return h.txn.Label(nst, hash, ids[0], l)
		},
	})
	return td.Class, td.Namespace, errno
}

// RuleLinkClasses is the rule id of a hard link refused because it would
// give a file a name of another class (both not plain): a file has one
// class, and writes through each name are decided as that name's.
const RuleLinkClasses = "RX-link-classes"

// Unlink removes the name rel. A guarded one goes through the transaction:
// its content is kept and the delete recorded before the name goes.
func (d *Door) Unlink(c Caller, rel string) syscall.Errno {
	h := d.h
	if errno := h.refuseHeld(c, rel); errno != 0 {
		return errno
	}
	st, err := h.dir.Lstat(rel)
	if err != nil {
		return backing.Errno(err)
	}
	t, l := h.gate.Target(rel, st)
	checks := []gate.Check{{Op: policy.OpUnlink, Rel: rel, T: t, L: l}}
	res, errno := h.gate.All(c, checks)
	if errno != 0 {
		return errno
	}
	if !t.Class.Guarded() || res == nil {
		var others *held
		if st.Nlink > 1 {
			others = h.hold(rel, st) // its other names: the unlink moves their ctime (binding.go)
		}
		errno := backing.Errno(h.dir.Unlink(rel, 0))
		others.keep(h)
		if errno != 0 {
			return errno
		}
		if st.Nlink <= 1 {
			h.txn.Forget(label.KeyOf(st))
		}
		return 0
	}
	defer h.txn.Lock(rel)()
	var gone *syscall.Stat_t
	return h.txn.Apply(&txn.Change{
		Keep:  []string{rel},
		After: func(map[string]string) map[string]string { return map[string]string{rel: ""} },
		Prepare: func(old map[string]string) ([]*evidence.Record, syscall.Errno) {
			return []*evidence.Record{h.changeRecord(res, checks[0].V, evidence.TypeDelete, rel, &evidence.Payload{OldHash: old[rel]})}, 0
		},
		Publish: func([]string) syscall.Errno {
			gone, _ = h.dir.Lstat(rel) // a commit since the decision may have replaced the inode
			return backing.Errno(h.dir.Unlink(rel, 0))
		},
		Done: func(ids []string) syscall.Errno {
			if gone != nil && gone.Nlink <= 1 {
				h.txn.Forget(label.KeyOf(gone))
			}
			h.idx.SetLast(ids[0], rel)
			return 0
		},
	})
}

// Rmdir removes the directory rel.
func (d *Door) Rmdir(c Caller, rel string) syscall.Errno {
	t, _ := d.h.gate.Target(rel, nil)
	if _, errno := d.h.gate.All(c, []gate.Check{{Op: policy.OpUnlink, Rel: rel, T: t, Durable: true}}); errno != 0 {
		return errno
	}
	return backing.Errno(d.h.dir.Unlink(rel, unix.AT_REMOVEDIR))
}

// keepRefusedArrival keeps the content of a rename or link refused at a
// guarded name (an editor's or an agent's temporary file renamed over
// MEMORY.md) in quarantine, as a refused commit's is: aerfs pending shows
// it with a diff and aerfs approve commits it.
func (h *house) keepRefusedArrival(res *principal.Resolved, checks []gate.Check, op policy.Op, src string, sst *syscall.Stat_t) {
	if res == nil || sst == nil || sst.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	for _, c := range checks {
		if c.Op != op || c.V.Allow || c.V.Rule == policy.RuleUnset || c.Rel == src || !c.T.Class.Guarded() {
			continue
		}
		hash, err := h.txn.Store(src)
		if err != nil {
			h.led.Log.Error().Err(err).Str("path", c.Rel).Msg("refused content not kept")
			return
		}
		base, _ := h.txn.Keep(c.Rel)
		r := ledger.Verdict(res, res.Subject(), op, c.Rel, c.V)
		r.Type, r.Meta.Verdict = evidence.TypeQuarantine, "deny"
		r.Payload = &evidence.Payload{OldHash: base, NewHash: hash, From: src, Detail: "quarantined"}
		if _, err := h.led.Must(r); err != nil {
			h.led.Log.Error().Err(err).Str("path", c.Rel).Msg("refused content not recorded")
			return
		}
		h.led.Stats.Quarantined.Add(1)
		h.led.Log.Info().Str("path", c.Rel).Str("from", src).Str("rule", r.Meta.Rule).Str("blob", hash).Msg("content kept in quarantine")
		return
	}
}
