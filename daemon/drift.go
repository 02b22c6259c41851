package daemon

import (
	"context"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/rs/zerolog"

	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/guard"
	"github.com/aerfs/aerfs/policy"
)

// # Drift
//
// Operators keep the backing directory private, but when that fails —
// another bind mount, a process that was inside the workspace before the
// mount, root — a guarded file can change without passing the mount. The
// drift watcher notices: it watches the backing directory (through the
// daemon's own descriptor, since the mount covers the workspace path) and
// compares every guarded file that changed with the content aerfs last gave
// it. aerfs's own commits announce their content before they happen, so
// they never look like drift.

type driftWatcher struct {
	m   *guarded
	log zerolog.Logger

	mu      sync.Mutex
	pending map[string]*time.Timer
	w       *fsnotify.Watcher
	base    string
}

// repairDrift records d and, when the policy says so, puts the expected
// content back.
func repairDrift(m *guarded, log zerolog.Logger, d *guard.Drift, when string) {
	v, label, restore := m.Policy().DecideDrift()
	r := &evidence.Record{Type: evidence.TypeDrift, Principal: policy.External.String(), Taint: label.Names(),
		Meta: evidence.Meta{Path: d.Path, Op: "drift", Verdict: "allow", Rule: v.Rule.ID(),
			Reason: "changed in the backing directory " + when + ", not through the mount; labelled EXTERNAL"},
		Payload: &evidence.Payload{OldHash: d.Expected, NewHash: d.Found}}
	id, err := m.Record(r)
	if err != nil {
		log.Error().Err(err).Str("path", d.Path).Msg("drift not recorded")
		return
	}
	m.Expect(guard.Expectation{Record: id, Paths: []string{d.Path}})
	log.Warn().Str("path", d.Path).Str("expected", d.Expected).Str("found", d.Found).Msg("drift")
	note := DriftStatus{Path: d.Path, When: strings.TrimPrefix(when, "while "), At: time.Now().UTC()}
	if !restore {
		m.noteDrift(note)
		return
	}
	defer func() { m.noteDrift(note) }()
	note.Restored = true
	_, _, err = m.setContent(d.Path, d.Expected, func(old string) *evidence.Record {
		return &evidence.Record{Type: evidence.TypeRestore, Principal: policy.Sys.String(), Parents: []string{id},
			Meta:    evidence.Meta{Path: d.Path, Op: "restore", Verdict: "allow", Reason: "on_drift: restore put back the last version aerfs committed"},
			Payload: &evidence.Payload{Detail: "drift repaired", Files: []evidence.FileState{{Path: d.Path, OldHash: old, Hash: d.Expected}}}}
	})
	if err != nil {
		note.Restored = false
		log.Error().Err(err).Str("path", d.Path).Msg("drift not repaired")
	}
}

func startDriftWatcher(ctx context.Context, m *guarded, log zerolog.Logger, guarded []string) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	d := &driftWatcher{m: m, log: log, pending: map[string]*time.Timer{}, w: w, base: m.dir.Path()}
	dirs := map[string]bool{"": true}
	for _, p := range guarded {
		for dir := path.Dir(p); dir != "." && !dirs[dir]; dir = path.Dir(dir) {
			dirs[dir] = true
		}
	}
	for dir := range dirs {
		d.watch(dir)
	}
	// A directory that held no guarded file at mount may get one through
	// the mount: watch it from the first commit on.
	m.Expect(guard.Expectation{OnKnown: func(rel string) {
		if dir := path.Dir(rel); dir != "." {
			d.watch(dir)
		}
	}})
	go d.run(ctx)
	return nil
}

func (d *driftWatcher) watch(dir string) {
	p := d.base
	if dir != "" {
		p += "/" + dir
	}
	if err := d.w.Add(p); err != nil {
		d.log.Debug().Err(err).Str("dir", dir).Msg("not watched")
	}
}

func (d *driftWatcher) run(ctx context.Context) {
	defer d.w.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case err, ok := <-d.w.Errors:
			if !ok {
				return
			}
			d.log.Warn().Err(err).Msg("drift watcher")
		case ev, ok := <-d.w.Events:
			if !ok {
				return
			}
			rel := strings.TrimPrefix(strings.TrimPrefix(ev.Name, d.base), "/")
			if rel == "" || strings.HasPrefix(path.Base(rel), ".aerfs-commit-") {
				continue
			}
			if ev.Has(fsnotify.Create) {
				// A new directory may come to hold guarded files.
				if st, err := d.m.dir.Stat(rel); err == nil && st.IsDir() {
					d.watch(rel)
					continue
				}
			}
			if c, _, _ := d.m.Policy().Classify(rel); !c.Guarded() {
				continue
			}
			d.schedule(rel)
		}
	}
}

// schedule checks rel once the burst of events of one change has passed.
func (d *driftWatcher) schedule(rel string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.pending[rel]; ok {
		t.Reset(50 * time.Millisecond)
		return
	}
	d.pending[rel] = time.AfterFunc(50*time.Millisecond, func() {
		d.mu.Lock()
		delete(d.pending, rel)
		d.mu.Unlock()
		drift, err := d.m.Drift(rel)
		if err != nil {
			d.log.Debug().Err(err).Str("path", rel).Msg("drift check")
			return
		}
		if drift != nil {
			repairDrift(d.m, d.log, drift, "while mounted")
		}
	})
}
