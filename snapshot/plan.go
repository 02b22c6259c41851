package snapshot

import (
	"sort"

	"github.com/aerfs/aerfs/evidence"
)

// State maps workspace-relative paths of guarded files to the hex SHA-256
// of their content. A path not in the map is absent.
type State map[string]string

// Clone returns a copy of s.
func (s State) Clone() State {
	c := make(State, len(s))
	for k, v := range s {
		c[k] = v
	}
	return c
}

// Step changes one file from content From to content To ("" = absent: a
// step with To "" removes the file, one with From "" creates it).
type Step struct {
	Path string `json:"path"`
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

// Plan lists the steps that take cur to target, sorted by path. Files that
// already match are left out.
func Plan(cur, target State) []Step {
	var steps []Step
	for p, h := range target {
		if cur[p] != h {
			steps = append(steps, Step{Path: p, From: cur[p], To: h})
		}
	}
	for p, h := range cur {
		if _, ok := target[p]; !ok {
			steps = append(steps, Step{Path: p, From: h})
		}
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].Path < steps[j].Path })
	return steps
}

// # Plans that cannot surprise
//
// Every owner's recovery — restore, burst rollback, approve, gc — works
// out its plan first and applies it after, as restic's prune does: the
// plan is what --dry-run prints, what the journal carries, and what is
// checked before anything changes. A step that goes beyond what the owner
// named — removing a file, or throwing away a change the owner made by
// hand, when that file was not named — makes the plan wait for the
// owner's confirmation (aerfs restore --yes).

// PlanStep is a step of a plan as the owner reviews it: what happens to
// the file, from which version to which (numbers as aerfs history shows
// them), and why it needs confirmation when it does.
type PlanStep struct {
	Step
	Action      string `json:"action"`                 // create, change or remove
	FromVersion int    `json:"from_version,omitempty"` // the version the file holds now (0: none recorded)
	ToVersion   int    `json:"to_version,omitempty"`   // the version it gets back (0: none recorded, or absent)
	// Beyond says why the step goes beyond what the owner named ("" when
	// it does not): the plan is applied only once the owner confirms.
	Beyond string `json:"beyond,omitempty"`
}

// Describe turns steps into the plan the owner reviews: each step's action
// and the history numbers of the versions it goes from and to.
func (x *Index) Describe(steps []Step) []PlanStep {
	out := make([]PlanStep, 0, len(steps))
	for _, st := range steps {
		ps := PlanStep{Step: st, Action: "change"}
		switch {
		case st.To == "":
			ps.Action = "remove"
		case st.From == "":
			ps.Action = "create"
		}
		hist := x.History(st.Path)
		for i := len(hist) - 1; i >= 0; i-- {
			if ps.FromVersion == 0 && st.From != "" && hist[i].Hash == st.From {
				ps.FromVersion = i + 1
			}
			if ps.ToVersion == 0 && st.To != "" && hist[i].Hash == st.To {
				ps.ToVersion = i + 1
			}
		}
		out = append(out, ps)
	}
	return out
}

// OwnerChanges lists the versions of path for which after is true that
// the owner made by hand: through the mount from a process outside every
// session, or by aerfs edit, approve or restore. A plan that would throw
// them away without the owner having named the file goes beyond what the
// owner asked.
func (x *Index) OwnerChanges(path string, after func(path string, v Version) bool) []Version {
	var out []Version
	for _, v := range x.History(path) {
		if v.Session == "" && v.Principal == "USER" && v.Type != evidence.TypeDrift && after(path, v) {
			out = append(out, v)
		}
	}
	return out
}

// NeedsConfirmation reports whether any step of plan goes beyond what
// the owner named.
func NeedsConfirmation(plan []PlanStep) bool {
	for _, s := range plan {
		if s.Beyond != "" {
			return true
		}
	}
	return false
}
