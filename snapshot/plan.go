package snapshot

import "sort"

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
