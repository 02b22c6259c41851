package tracking

import (
	"fmt"

	"github.com/aerfs/aerfs/principal"
)

// WriterSet is every process that wrote through a handle (its opener
// included), each with the resolutions seen while it wrote. The zero value
// is ready to use; the handle's lock guards it.
type WriterSet struct {
	order []principal.ProcID
	seen  map[principal.ProcID][]*principal.Resolved
}

// Note adds res (a resolution of a process that writes through the
// handle). Resolutions are few per process: the registry hands out the
// same one until something about the process changes.
func (w *WriterSet) Note(res *principal.Resolved) {
	if res == nil || !res.Identified {
		return
	}
	if w.seen == nil {
		w.seen = map[principal.ProcID][]*principal.Resolved{}
	}
	id := res.Proc.ID
	rs, known := w.seen[id]
	if !known {
		w.order = append(w.order, id)
	}
	for _, r := range rs {
		if r == res {
			return
		}
	}
	if len(rs) >= 8 {
		// Keep the first (the identity it opened or first wrote with) and
		// the latest ones.
		rs = append(rs[:1], rs[2:]...)
	}
	w.seen[id] = append(rs, res)
}

// Now resolves every writer afresh and returns every resolution a
// decision about what they wrote must hold for: each writer as it is now
// (a live process is resolved again by its tgid and must still be the
// same process) and as it was when it wrote. Principals only go down and
// taint only goes up, so deciding for all of them is deciding for the
// worst. A writer that exited is decided by its last resolutions, whose
// session taint is live. The first element is the subject the change is
// recorded under: the opener as it is now.
func (w *WriterSet) Now(reg *principal.Registry) []*principal.Resolved {
	var out []*principal.Resolved
	for _, id := range w.order {
		if now := resolveNow(reg, id); now != nil {
			w.Note(now)
			out = append(out, now)
		}
	}
	for _, id := range w.order {
		out = append(out, w.seen[id]...)
	}
	return out
}

// resolveNow resolves the process id as it is now: nil when it has
// exited, an unidentified subject when it is alive but cannot be resolved
// as itself.
func resolveNow(reg *principal.Registry, id principal.ProcID) *principal.Resolved {
	if !principal.Alive(id) {
		return nil
	}
	res := reg.Resolve(id.Tgid)
	if res.Identified && res.Proc.ID == id {
		return res
	}
	if !principal.Alive(id) {
		return nil
	}
	reason := res.Reason
	if res.Identified {
		reason = fmt.Sprintf("pid %d is now process %s", id.Tgid, res.Proc.ID)
	}
	return &principal.Resolved{Reason: fmt.Sprintf("writer %s could not be resolved again at commit: %s", id, reason)}
}
