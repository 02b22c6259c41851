package fs

import (
	"fmt"
	"strings"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
)

// RootName is the name of the further root the monitor guards, "" for the
// workspace.
func (m *Monitor) RootName() string { return m.root }

// RecordPath is the path records give the root-relative path rel: rel
// itself in the workspace, "@name/rel" in a further root.
func (m *Monitor) RecordPath(rel string) string {
	if m.root == "" || strings.HasPrefix(rel, "/") {
		return rel
	}
	if rel == "" {
		return policy.RootPrefix + m.root
	}
	return policy.RootPrefix + m.root + "/" + rel
}

// rootPaths gives the paths of a further root's record their root: every
// path-valued field that is relative to the root (absolute paths, such as
// a mount's, stay as they are).
func (m *Monitor) rootPaths(r *evidence.Record) {
	if p := r.Meta.FilePath(); p != "" || r.Meta.Op != "" {
		r.Meta.SetPath(m.RecordPath(p))
	}
	pl := r.Payload
	if pl == nil {
		return
	}
	if p := pl.FromPath(); p != "" {
		pl.From, pl.FromB64 = m.RecordPath(p), ""
	}
	if p := pl.ToPath(); p != "" {
		pl.To, pl.ToB64 = m.RecordPath(p), ""
	}
	for i := range pl.Files {
		f := &pl.Files[i]
		if p := f.FilePath(); p != "" {
			f.Path, f.PathB64 = m.RecordPath(p), ""
		}
	}
}

// AddRoot attaches the monitor of a further root to the workspace's
// monitor, before either serves: the recovery primitives (HashRel,
// GuardedState, SetContent, CheckDrift, the expected contents, the last
// records) take record paths, and route "@name/…" to the root's monitor,
// so that restore, approve, the burst rollback and the drift check at
// mount work on every root through the workspace's monitor. A root's
// policy follows the workspace's (SetPolicy).
func (m *Monitor) AddRoot(r *Monitor) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.roots == nil {
		m.roots = map[string]*Monitor{}
	}
	m.roots[r.root] = r
}

// Roots returns the monitors of the further roots.
func (m *Monitor) Roots() []*Monitor {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Monitor, 0, len(m.roots))
	for _, r := range m.roots {
		out = append(out, r)
	}
	return out
}

// route returns the monitor of the further root a record path names, and
// the path relative to it.
func (m *Monitor) route(p string) (*Monitor, string, bool) {
	if m.root != "" || !strings.HasPrefix(p, policy.RootPrefix) {
		return nil, "", false
	}
	name, rel, ok := policy.SplitRootPath(p)
	if !ok {
		return nil, "", false
	}
	m.mu.Lock()
	r := m.roots[name]
	m.mu.Unlock()
	return r, rel, r != nil
}

// rootsState adds the guarded state of every further root to out, by
// record path.
func (m *Monitor) rootsState(out map[string]string) error {
	for _, r := range m.Roots() {
		st, err := r.GuardedState()
		if err != nil {
			return fmt.Errorf("root %s: %w", r.root, err)
		}
		for p, h := range st {
			out[r.RecordPath(p)] = h
		}
	}
	return nil
}

// splitExpected hands each further root its part of state (record paths)
// and returns the workspace's.
func (m *Monitor) splitExpected(state map[string]string) map[string]string {
	per := map[*Monitor]map[string]string{}
	for _, r := range m.Roots() {
		per[r] = map[string]string{}
	}
	own := map[string]string{}
	for p, h := range state {
		if r, rel, ok := m.route(p); ok {
			per[r][rel] = h
			continue
		}
		own[p] = h
	}
	for r, st := range per {
		r.SetExpected(st)
	}
	return own
}

// rootsPolicy gives each further root its part of p. A root p no longer
// has keeps its policy until the next mount (it stays mounted and guarded).
func (m *Monitor) rootsPolicy(p *policy.Policy) {
	for _, r := range m.Roots() {
		if rp, ok := p.Root(r.root); ok {
			r.SetPolicy(rp.Policy)
		} else {
			m.log.Warn().Str("root", r.root).Msg("the policy no longer names this root: it stays guarded by its old rules until the next mount")
		}
	}
}

// routeLastRecord sets the last record of the paths in further roots and
// returns the others.
func (m *Monitor) routeLastRecord(id string, paths []string) []string {
	own := paths[:0:0]
	for _, p := range paths {
		if r, sub, ok := m.route(p); ok {
			r.SetLastRecord(id, sub)
			continue
		}
		own = append(own, p)
	}
	return own
}

// IsRootPath reports whether the record path p names a file of a further
// root attached to this monitor.
func (m *Monitor) IsRootPath(p string) bool {
	_, _, ok := m.route(p)
	return ok
}

// unrootMaker adapts a record maker of the workspace's monitor, which names
// paths as records do ("@name/…"), to this root's monitor, whose records
// get their root when they are filled.
func (m *Monitor) unrootMaker(mk func(string) *evidence.Record) func(string) *evidence.Record {
	if mk == nil {
		return nil
	}
	return func(old string) *evidence.Record {
		r := mk(old)
		if r != nil {
			m.unrootPaths(r)
		}
		return r
	}
}

// unrootPaths makes the record paths of this root in r relative to it
// again (fillRecord gives them their root back).
func (m *Monitor) unrootPaths(r *evidence.Record) {
	pre := policy.RootPrefix + m.root
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
	pl := r.Payload
	if pl == nil {
		return
	}
	if p := pl.FromPath(); p != "" {
		pl.From, pl.FromB64 = strip(p), ""
	}
	if p := pl.ToPath(); p != "" {
		pl.To, pl.ToB64 = strip(p), ""
	}
	for i := range pl.Files {
		if p := pl.Files[i].FilePath(); p != "" {
			pl.Files[i].Path, pl.Files[i].PathB64 = strip(p), ""
		}
	}
}

// unroot is unrootPaths for a record maker's result (nil passes).
func (m *Monitor) unroot(r *evidence.Record) *evidence.Record {
	if r != nil {
		m.unrootPaths(r)
	}
	return r
}
