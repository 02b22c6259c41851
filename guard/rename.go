package guard

import (
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/flow"
	"github.com/aerfs/aerfs/guard/gate"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/txn"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// Rename decides the source src leaving its name and the content arriving
// at dst; for RENAME_EXCHANGE both ways; for a directory, every file below
// it whose class changes or is guarded. rename is the node's own rename,
// called inside the transaction when a guarded name is touched.
func (d *Door) Rename(c Caller, src, dst string, flags uint32, rename func() syscall.Errno) (errno syscall.Errno) {
	h := d.h
	defer h.renaming(src, dst, flags&unix.RENAME_EXCHANGE != 0)()
	sst, err := h.dir.Lstat(src)
	if err != nil {
		return backing.Errno(err)
	}
	for _, p := range []string{src, dst} {
		if errno := h.refuseHeld(c, p); errno != 0 {
			return errno
		}
	}
	if sst.Mode&syscall.S_IFMT == syscall.S_IFREG {
		// A file the index knows keeps every name it is known under: the
		// new one too (gate.Target decides by all of them).
		k := label.KeyOf(sst)
		if names, more := h.idx.Guarded(k); len(names) > 0 || more {
			defer func() {
				if errno == 0 {
					h.idx.SetGuarded(k, dst)
				}
			}()
		}
	}
	dstSt, _ := h.dir.Lstat(dst)
	renamer := h.gate.Resolve(c).Proc.ID.Tgid
	checks, werr := h.renameChecks(src, dst, sst, dstSt, renamer)
	if flags&unix.RENAME_EXCHANGE != 0 && dstSt != nil {
		more, err := h.renameChecks(dst, src, dstSt, sst, renamer)
		checks = append(checks, more...)
		if werr == nil {
			werr = err
		}
	}
	if werr != nil {
		return h.gate.Refuse(c, policy.OpRenameFrom, src, RuleUnreadableMove,
			"a directory moved with a part aerfs cannot read ("+werr.Error()+"): what it holds cannot be decided")
	}
	res, errno := h.gate.All(c, checks)
	if errno != 0 {
		h.keepRefusedArrival(res, checks, policy.OpRenameTo, src, sst)
		return errno
	}
	exchange := flags&unix.RENAME_EXCHANGE != 0 && dstSt != nil
	forgetReplaced := func() {
		if dstSt != nil && dstSt.Nlink <= 1 && !exchange && dstSt.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			// The file renamed over is gone; its inode number will be reused.
			h.txn.Forget(label.KeyOf(dstSt))
		}
	}
	mv := h.renameMoves(src, dst, sst, exchange)
	// Every file the rename brings under a control name — the source at
	// dst, for an exchange dst's at src, for a directory each file below
	// it — asks the act gate with its own stamp, and every symlink or
	// special object there the gate: all of them may arrive, or nothing
	// moves.
	if errno := h.arrive(c, res, mv); errno != 0 {
		return errno
	}
	if res == nil || !mv.guarded() {
		// What arrives at the client's machinery is lowered by its mover
		// first (moved.go).
		if errno := h.placing(c, &res, dst, sst); errno != 0 {
			return errno
		}
		if exchange {
			if errno := h.placing(c, &res, src, dstSt); errno != 0 {
				return errno
			}
		}
		// The moved inode's ctime moves, and a file renamed over keeps
		// its other names: their labels stay bound (binding.go).
		moved, other := h.hold(src, sst), (*held)(nil)
		if dstSt != nil && (exchange || dstSt.Nlink > 1) {
			other = h.hold(dst, dstSt)
		}
		errno := rename()
		moved.keep(h)
		other.keep(h)
		if errno != 0 {
			return errno
		}
		forgetReplaced()
		h.movedRecord(c, res, "rename", src, dst, sst)
		if exchange {
			h.movedRecord(c, res, "rename", dst, src, dstSt)
		}
		return 0
	}
	defer h.txn.Lock(append(mv.keep(), mv.guardedPaths()...)...)()
	subj := res.Subject()
	verdict := func(to string) policy.Verdict {
		for _, c := range checks {
			if c.Op == policy.OpRenameTo && c.Rel == to {
				return c.V
			}
		}
		return policy.Verdict{}
	}
	return h.txn.Apply(&txn.Change{
		Keep:  mv.keep(),
		After: mv.after,
		Prepare: func(old map[string]string) ([]*evidence.Record, syscall.Errno) {
			var recs []*evidence.Record
			if mv.recordRename {
				// A guarded name (or a directory that may hold some)
				// leaves its place.
				recs = append(recs, h.changeRecord(res, checks[0].V, evidence.TypeRename, src, &evidence.Payload{From: src, To: dst}))
			}
			for _, p := range mv.pairs {
				if p.toGuarded && p.regular {
					// The content under a guarded name changed: a write.
					r := h.gate.WriteRecord(res, subj, p.to, verdict(p.to), label.ClassOf(p.label))
					r.Meta.Op = "rename"
					r.Payload = &evidence.Payload{OldHash: old[p.to], NewHash: old[p.from]}
					recs = append(recs, r)
				}
			}
			return recs, 0
		},
		Publish: func([]string) syscall.Errno { return rename() },
		Done: func(ids []string) syscall.Errno {
			forgetReplaced()
			k := 0
			if mv.recordRename {
				h.idx.SetLast("", src)
				k = 1
			}
			var errno syscall.Errno
			for _, p := range mv.pairs {
				if p.toGuarded && p.regular {
					nst, _ := h.dir.Lstat(p.to)
					hash, _ := h.changes.Expected(p.to)
					l, _ := h.flow.Next(flow.Move{Op: flow.Rename, Subjects: []*principal.Resolved{res}, Sources: []*label.Label{p.label},
						To: flow.Dest{Path: p.to, Hash: hash, Guarded: true}})
					if e := h.txn.Bind(p.to, hash, ids[k], nst, l); e != 0 {
						errno = e
					}
					k++
				}
			}
			return errno
		},
	})
}

// renaming takes the namespace lock for a rename of src to dst: for
// writing when a directory moves (its walk and its rename are one step
// against every change that adds a name), for reading otherwise. It
// returns the unlock.
func (h *house) renaming(src, dst string, exchange bool) func() {
	isDir := func(rel string) bool {
		st, err := h.dir.Lstat(rel)
		return err == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR
	}
	moves := func() bool { return isDir(src) || exchange && isDir(dst) }
	for {
		if moves() {
			h.names.Lock()
			return h.names.Unlock
		}
		h.names.RLock()
		if !moves() {
			return h.names.RUnlock
		}
		// A directory arrived at the name meanwhile (a rename that held
		// the lock): take it for writing.
		h.names.RUnlock()
	}
}

// arrive decides what a rename brings under control-class names (each
// regular file through the act gate with its own stamp) and every symlink
// or special object it brings where the gate decides them (Gate.Link: at a
// control name, or where it would make a guarded name serve what the
// policy does not guard the same way), a directory's entries included.
// The first refusal refuses the whole rename.
func (h *house) arrive(c Caller, res *principal.Resolved, mv *moves) syscall.Errno {
	pol := h.gate.Policy()
	for _, p := range mv.pairs {
		var errno syscall.Errno
		if p.kind != syscall.S_IFDIR && !p.regular {
			errno = h.linkArrives(c, &res, policy.OpRenameTo, p.from, p.to, p.kind)
		} else if cl, _, _ := pol.Classify(p.to); p.regular && cl == policy.Control {
			if res == nil {
				res = h.gate.Resolve(c)
			}
			errno = h.gate.Control(c, res, "rename", p.to, p.label)
		}
		if errno != 0 {
			return errno
		}
	}
	return 0
}

// linkArrives decides a symlink, FIFO, socket or device (kind; 0: gone)
// at from arriving at to, renamed or linked there, as one made there
// (Gate.Link), where the gate asks anything: at a control name, or where
// it would make a guarded name serve what the policy does not guard the
// same way. *res is resolved when it is needed and still nil.
func (h *house) linkArrives(c Caller, res **principal.Resolved, op policy.Op, from, to string, kind uint32) syscall.Errno {
	pol := h.gate.Policy()
	symlink, target := kind == syscall.S_IFLNK, ""
	if symlink {
		target, _ = h.linkTarget(from)
	}
	if cl, _, _ := pol.Classify(to); cl != policy.Control && !pol.SymlinkUnguards(to, target) {
		return 0
	}
	if *res == nil {
		*res = h.gate.Resolve(c)
	}
	return h.gate.Link(*res, op, to, target, symlink)
}

// move is one name a rename moves: from, to, and what is guarded.
type move struct {
	from, to               string
	fromGuarded, toGuarded bool
	regular                bool
	kind                   uint32       // the file type (S_IFMT)
	label                  *label.Label // the moved content's (nil: unlabelled)
}

// moves is every name a rename moves (a directory's files below it too;
// both ways for an exchange).
type moves struct {
	pairs        []move
	recordRename bool
}

func (h *house) renameMoves(src, dst string, sst *syscall.Stat_t, exchange bool) *moves {
	pol := h.gate.Policy()
	mv := &moves{}
	add := func(from, to string, st *syscall.Stat_t) {
		cf, _, _ := pol.Classify(from)
		ct, _, _ := pol.Classify(to)
		m := move{from: from, to: to, fromGuarded: cf.Guarded(), toGuarded: ct.Guarded(),
			regular: st != nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG}
		if st != nil {
			m.kind = st.Mode & syscall.S_IFMT
		}
		if m.toGuarded && m.regular {
			_, m.label = h.gate.Target(from, st)
		}
		mv.pairs = append(mv.pairs, m)
	}
	isDir := sst.Mode&syscall.S_IFMT == syscall.S_IFDIR
	add(src, dst, sst)
	if exchange {
		dstSt, _ := h.dir.Lstat(dst)
		add(dst, src, dstSt)
	}
	if isDir && (pol.MayContainGuarded(src) || pol.MayContainGuarded(dst)) {
		_ = h.dir.Walk(src, func(sub string, st *syscall.Stat_t) { // read whole by renameChecks, under the namespace lock
			add(backing.Join(src, sub), backing.Join(dst, sub), st)
		})
	}
	if dstSt, _ := h.dir.Lstat(dst); exchange && dstSt != nil && dstSt.Mode&syscall.S_IFMT == syscall.S_IFDIR &&
		(pol.MayContainGuarded(src) || pol.MayContainGuarded(dst)) {
		_ = h.dir.Walk(dst, func(sub string, st *syscall.Stat_t) {
			add(backing.Join(dst, sub), backing.Join(src, sub), st)
		})
	}
	cs, _, _ := pol.Classify(src)
	mv.recordRename = cs.Guarded() || isDir && (pol.MayContainGuarded(src) || pol.MayContainGuarded(dst))
	return mv
}

// guarded reports whether the rename touches a guarded name.
func (mv *moves) guarded() bool {
	if mv.recordRename {
		return true
	}
	for _, p := range mv.pairs {
		if p.fromGuarded || p.toGuarded {
			return true
		}
	}
	return false
}

// keep is every path whose content the rename needs: each guarded name's
// previous version and each source of content arriving at a guarded name.
func (mv *moves) keep() []string {
	var out []string
	for _, p := range mv.pairs {
		if p.fromGuarded || p.toGuarded && p.regular {
			out = append(out, p.from)
		}
		if p.toGuarded {
			out = append(out, p.to)
		}
	}
	return out
}

func (mv *moves) guardedPaths() []string {
	var out []string
	for _, p := range mv.pairs {
		if p.fromGuarded {
			out = append(out, p.from)
		}
		if p.toGuarded {
			out = append(out, p.to)
		}
	}
	return out
}

// after is what every guarded name holds once the rename is published.
func (mv *moves) after(old map[string]string) map[string]string {
	out := map[string]string{}
	for _, p := range mv.pairs {
		if p.fromGuarded {
			if _, set := out[p.from]; !set {
				out[p.from] = ""
			}
		}
	}
	for _, p := range mv.pairs {
		if p.toGuarded {
			out[p.to] = old[p.from]
		}
	}
	return out
}

// renameChecks lists what moving src (stat sst) to dst needs.
func (h *house) renameChecks(src, dst string, sst, dstSt *syscall.Stat_t, renamer int) ([]gate.Check, error) {
	ts, ls := h.gate.Target(src, sst)
	td, ld := h.gate.Target(dst, dstSt)
	td.Absent = td.Absent && sst.Mode&syscall.S_IFMT == syscall.S_IFREG
	if ts.Class != policy.Plain && sst.Mode&syscall.S_IFMT == syscall.S_IFREG {
		// A guarded inode under a plain name keeps its class.
		if c, _, _ := h.gate.Policy().Classify(dst); c == policy.Plain {
			td.Class = ts.Class
		}
	}
	h.withSource(&td, ls, sst, renamer)
	checks := []gate.Check{{Op: policy.OpRenameFrom, Rel: src, T: ts, L: ls}, {Op: policy.OpRenameTo, Rel: dst, T: td, L: ld}}
	if sst.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		pol := h.gate.Policy()
		if pol.MayContainGuarded(src) || pol.MayContainGuarded(dst) {
			err := h.dir.Walk(src, func(sub string, st *syscall.Stat_t) {
				from, to := backing.Join(src, sub), backing.Join(dst, sub)
				tf, lf := h.gate.Target(from, st)
				tt, _ := h.gate.Target(to, nil)
				// The renamer's own descriptors count here: its exception
				// is for a temporary file it publishes by renaming that
				// file itself, not for files a directory carries along.
				h.withSource(&tt, lf, st, 0)
				checks = append(checks, gate.Check{Op: policy.OpRenameFrom, Rel: from, T: tf, L: lf}, gate.Check{Op: policy.OpRenameTo, Rel: to, T: tt})
			})
			return checks, err
		}
	}
	return checks, nil
}

// RuleUnreadableMove is the rule id of a directory rename refused because
// part of what it holds cannot be read, so cannot be decided.
const RuleUnreadableMove = "RX-unreadable-move"
