package guard

import (
	"fmt"
	"os"
	"path"
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
	if rv := h.movable(res, rel, st); rv.Rule != policy.RuleUnset {
		return "", rv, nil
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		// A directory is promoted with everything in it: each file is
		// decided as its own promotion would be, and one refusal keeps
		// the whole directory where it is.
		var fv policy.Verdict
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
			} else if w = h.movable(res, p, fst); w.Rule != policy.RuleUnset {
				fv = w
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
			return "", fv, nil
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
// promote the file st at rel when a name would reach the shared file
// without a promotion: another name of it (RX-linked-promote), or a plain
// descriptor open for writing, whose writes the kernel passes on without
// asking (RW-open-writer). The refusal is recorded.
func (h *house) movable(res *principal.Resolved, rel string, st *syscall.Stat_t) policy.Verdict {
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return policy.Verdict{}
	}
	rule := policy.RuleUnset
	switch {
	case st.Nlink > 1:
		rule = policy.RuleLinkedPromote
	case h.opens.Passthrough(label.KeyOf(st), releaseWait, 0):
		rule = policy.RuleOpenWriter
	default:
		return policy.Verdict{}
	}
	h.gate.Deny(res, policy.OpPromote, rel, rule.ID(), rule.Reason())
	return policy.Verdict{Rule: rule}
}
