package guard

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/aerfs/aerfs/backing"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard/label"
	"github.com/aerfs/aerfs/guard/txn"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/principal"
)

// promote moves the item at rel (under sessions/<id>/) into the shared
// namespace on behalf of res, if the policy and the act gate allow it,
// through the transaction: the record is durable before the item moves.
// The item keeps its label (it follows the inode). It returns the new
// path.
func (d *Door) promote(res *principal.Resolved, rel string) (string, policy.Verdict, error) {
	h := d.h
	// A directory is decided on a walk of what it holds: nothing may
	// arrive beneath it until it has moved (the namespace lock, as for a
	// directory's rename).
	h.names.Lock()
	defer h.names.Unlock()
	pol := h.gate.Policy()
	st, err := h.dir.Lstat(rel)
	if err != nil {
		return "", policy.Verdict{}, err
	}
	t, l := h.gate.Target(rel, st)
	v, r, err := h.gate.Promote(res, rel, t, l)
	if !v.Allow || err != nil {
		return "", v, err
	}
	if rv, why := h.movable(res, rel, rel, st); rv.Rule != policy.RuleUnset {
		return why, rv, nil
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		// A directory is promoted with everything in it: each file is
		// decided as its own promotion would be, and one refusal keeps
		// the whole directory where it is.
		var fv policy.Verdict
		var fwhy string
		var ferr error
		werr := h.dir.Walk(rel, func(sub string, fst *syscall.Stat_t) {
			if ferr != nil || !fv.Allow && fv.Rule != policy.RuleUnset || fst.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				return
			}
			p := backing.Join(rel, sub)
			ft, fl := h.gate.Target(p, fst)
			var w policy.Verdict
			if w, _, ferr = h.gate.Promote(res, p, ft, fl); !w.Allow {
				fv = w
			} else if w, why := h.movable(res, rel, p, fst); w.Rule != policy.RuleUnset {
				fv, fwhy = w, why
			}
		})
		if ferr != nil {
			return "", v, ferr
		}
		if werr != nil {
			// A part that cannot be read cannot be decided.
			return "", v, fmt.Errorf("promote: %w", werr)
		}
		if !fv.Allow && fv.Rule != policy.RuleUnset {
			return fwhy, fv, nil
		}
	}
	sessions, shared := pol.Namespaces()
	rest := strings.TrimPrefix(rel, sessions+"/"+t.Session+"/")
	if rest == rel || rest == "" {
		return "", v, &os.PathError{Op: "promote", Path: rel, Err: syscall.EINVAL}
	}
	dst := backing.Join(shared, rest)
	if _, err := h.dir.Lstat(dst); err == nil {
		return "", v, &os.PathError{Op: "promote", Path: dst, Err: syscall.EEXIST}
	}
	dir := path.Dir(dst)
	if err := h.dir.MkdirAll(dir); err != nil {
		return "", v, err
	}
	pol = h.gate.Policy()
	guarded := func(p string) bool { c, _, _ := pol.Classify(p); return c.Guarded() }
	defer h.txn.Lock(rel, dst)()
	var perr error
	errno := h.txn.Apply(&txn.Change{
		Keep: []string{rel, dst},
		After: func(old map[string]string) map[string]string {
			out := map[string]string{}
			if guarded(rel) {
				out[rel] = ""
			}
			if guarded(dst) {
				out[dst] = old[rel]
			}
			return out
		},
		Prepare: func(map[string]string) ([]*evidence.Record, syscall.Errno) {
			r.Type = evidence.TypePromote
			r.Payload = &evidence.Payload{From: rel, To: dst}
			return []*evidence.Record{r}, 0
		},
		Publish: func([]string) syscall.Errno {
			sfd, err := h.dir.OpenDir(path.Dir(rel))
			if err != nil {
				perr = err
				return backing.Errno(err)
			}
			defer unix.Close(sfd)
			dfd, err := h.dir.OpenDir(dir)
			if err != nil {
				perr = err
				return backing.Errno(err)
			}
			defer unix.Close(dfd)
			if err := unix.Renameat2(sfd, path.Base(rel), dfd, path.Base(dst), unix.RENAME_NOREPLACE); err != nil {
				perr = &os.PathError{Op: "promote", Path: rel, Err: err}
				return backing.Errno(err)
			}
			return 0
		},
		Done: func(ids []string) syscall.Errno {
			h.idx.SetLast("", rel)
			h.idx.SetLast(ids[0], dst)
			return 0
		},
	})
	if errno != 0 {
		if perr == nil {
			perr = &os.PathError{Op: "promote", Path: rel, Err: errno}
		}
		return "", v, perr
	}
	h.led.Stats.Allowed.Add(1)
	return dst, v, nil
}

// movable refuses (a verdict with its rule; RuleUnset: nothing against) to
// promote the file st at rel, in the promoted item, when something would
// reach the shared file without a promotion: another name of it, or a
// symbolic link leading out of the item, whose target the session may
// still write (RX-linked-promote); a plain descriptor open for writing,
// whose writes the kernel passes on without asking (RW-open-writer). The
// refusal is recorded. The reason's second line says what to do.
func (h *house) movable(res *principal.Resolved, item, rel string, st *syscall.Stat_t) (policy.Verdict, string) {
	rule, reason := policy.RuleUnset, ""
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
		switch {
		case st.Nlink > 1:
			rule, reason = policy.RuleLinkedPromote, rel+" has another name: what is written through it would change the shared file with no promotion\ncopy it to break the link (cp FILE FILE.new && mv FILE.new FILE), then promote"
		case h.opens.Passthrough(label.KeyOf(st), releaseWait, 0) || h.opens.Writing(label.KeyOf(st)):
			rule, reason = policy.RuleOpenWriter, rel+" is open for writing: what its descriptor writes would change the shared file with no promotion\nclose it, or end the session holding it (aerfs session list; aerfs session end ID), then promote"
		}
	case syscall.S_IFLNK:
		target, err := h.dir.Readlink(rel)
		to := path.Join(path.Dir(rel), string(target))
		// Any ".." is refused, not only one that leads out as text: a
		// symbolic link on the way (s -> .) makes "s/s/.." go up twice.
		if err != nil || path.IsAbs(string(target)) || slices.Contains(strings.Split(string(target), "/"), "..") ||
			to != item && !strings.HasPrefix(to, item+"/") {
			rule, reason = policy.RuleLinkedPromote, rel+" is a symbolic link that may lead out of "+item+" (absolute, or through ..): what its session writes there would change the shared item with no promotion\nreplace it with a copy of what it leads to, then promote"
		}
	}
	if rule == policy.RuleUnset {
		return policy.Verdict{}, ""
	}
	why, _, _ := strings.Cut(reason, "\n")
	h.gate.Deny(res, policy.OpPromote, rel, rule.ID(), why)
	return policy.Verdict{Rule: rule}, reason
}
