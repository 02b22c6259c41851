package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
	"github.com/aerfs/aerfs/snapshot"
)

func runSnapshotTake(out io.Writer, label string) error {
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	resp, err := call(t, daemon.Request{Op: "snapshot", Label: label})
	if err != nil {
		return err
	}
	var r struct {
		ID    string `json:"id"`
		Files int    `json:"files"`
	}
	json.Unmarshal(resp.Data, &r)
	fmt.Fprintf(out, "snapshot %s: %d guarded files\n", r.ID, r.Files)
	return nil
}

type restoreOptions struct {
	to             string
	snapshot       string
	before         string
	contaminatedBy string
	sourceVersion  string
	setAside       string
	dryRun         bool
	yes            bool
	asJSON         bool
}

func newRestoreCommand() *cobra.Command {
	var o restoreOptions
	c := &cobra.Command{
		Use:   "restore [FILE --to VERSION] [--snapshot ID] [--before TIME] [--contaminated-by SOURCE] [--dry-run]",
		Short: "Return guarded files to a version, a snapshot, a time, or to before a poisoned source (owner only)",
		Long: `restore puts guarded files back. Each file is replaced atomically and the
whole restore is journaled: a crash in the middle is finished at the next
mount. Guarded files created after the target are removed (their content
stays in the log). --contaminated-by undoes every guarded change downstream
of SOURCE (a path or a record id) in the provenance graph and keeps every
unrelated change. Only the owner's channel may restore: a process outside
every agent session.

The plan comes first: --dry-run prints every file it changes, from which
version to which (as aerfs history numbers them), and the diffs. A plan
that goes beyond what you named — it removes a file, or throws away a
change you made yourself, in a file you did not name — is refused (rule
RP-confirm) until you confirm it with --yes. An empty scope is an empty
plan: nothing is restored.

aerfs keeps no versions of plain files, so restore cannot take back a plain
file written downstream (aerfs scope lists them). With --contaminated-by,
--set-aside DIR moves each one still there out of the mount into DIR, under
its path: an agent client's own databases and transcripts a poisoned
session wrote, which the client would load at its next start, go, and the
client starts that part afresh. Stop the client first. Nothing is deleted:
each file is copied and synced before it is removed, and a file behind a
symbolic link is left alone. Only a file whose label the scope's records
gave it moves; a name that another file holds by now is left in place,
and the output says why. DIR must be a directory sessions cannot write
(not beneath /tmp, /var/tmp or the policy's sandbox.writable).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRestore(cmd.OutOrStdout(), o, args)
		},
	}
	c.Flags().StringVar(&o.to, "to", "", "with FILE: the version (a number from aerfs history, or a record id prefix)")
	c.Flags().StringVar(&o.snapshot, "snapshot", "", "a snapshot id (prefix)")
	c.Flags().StringVar(&o.before, "before", "", "a time (RFC 3339) or a duration ago (10m)")
	c.Flags().StringVar(&o.contaminatedBy, "contaminated-by", "", "a path (labelled or not) or record id found to be poisoned")
	c.Flags().StringVar(&o.sourceVersion, "source-version", "", "with --contaminated-by PATH: only that version of it (its content's SHA-256, or a prefix)")
	c.Flags().StringVar(&o.setAside, "set-aside", "", "with --contaminated-by: move the plain files written downstream out of the mount into this directory")
	c.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the plan (every file, from which version to which) and the diffs; change nothing")
	c.Flags().BoolVar(&o.yes, "yes", false, "confirm a plan that removes files or throws away changes you made yourself that you did not name")
	c.Flags().BoolVar(&o.asJSON, "json", false, "print the plan (done or, with --dry-run, to do) as JSON, diffs included")
	return c
}

func runRestore(out io.Writer, o restoreOptions, args []string) error {
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	req := daemon.Request{Op: "restore", Snapshot: o.snapshot, ContaminatedBy: o.contaminatedBy, SourceVersion: o.sourceVersion, DryRun: o.dryRun}
	if o.sourceVersion != "" && o.contaminatedBy == "" {
		return fail(exitUsage, "aerfs restore --help", "--source-version goes with --contaminated-by PATH")
	}
	if o.contaminatedBy != "" && (o.sourceVersion != "" || !looksLikeRecordID(o.contaminatedBy)) {
		rel, err := workspaceRel(t, o.contaminatedBy)
		if err != nil {
			return err
		}
		req.ContaminatedBy = rel
	}
	if len(args) == 1 {
		rel, err := workspaceRel(t, args[0])
		if err != nil {
			return err
		}
		if o.to == "" {
			return fail(exitUsage, "aerfs history "+args[0]+" lists the versions", "restoring a file needs --to VERSION")
		}
		req.Path, req.To = rel, o.to
		if !utf8.ValidString(rel) { // JSON would replace the invalid bytes
			req.Path, req.PathB64 = "", base64.StdEncoding.EncodeToString([]byte(rel))
		}
	}
	if o.before != "" {
		since, err := parseTimeFlag("--before", o.before)
		if err != nil {
			return err
		}
		req.Before = since.UTC().Format(time.RFC3339Nano)
	}
	n := 0
	for _, set := range []bool{req.Path != "" || req.PathB64 != "", req.Snapshot != "", req.Before != "", req.ContaminatedBy != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fail(exitUsage, "aerfs restore --help", "say exactly one of: FILE --to V, --snapshot ID, --before TIME, --contaminated-by SOURCE")
	}
	var aside asideResult
	if o.setAside != "" {
		if req.ContaminatedBy == "" {
			return fail(exitUsage, "aerfs restore --help", "--set-aside goes with --contaminated-by SOURCE")
		}
		if aside.Dir, err = checkAsideDir(t, o.setAside); err != nil {
			return err
		}
	}
	req.Yes = o.yes
	pr := startProgress("restore")
	pr.spin("the daemon plans and restores")
	resp, err := daemon.Call(t.stateDir, req)
	pr.done()
	if err != nil {
		return fail(exitNotMounted, "is the workspace mounted? aerfs status"+t.flags(), "%v", err)
	}
	if !resp.OK && !resp.Refused {
		return fail(exitError, resp.Hint, "%s", resp.Error)
	}
	var plan daemon.RestorePlan
	if len(resp.Data) > 0 {
		if err := json.Unmarshal(resp.Data, &plan); err != nil {
			return err
		}
	}
	if resp.Refused && len(resp.Data) == 0 {
		return fail(exitRefused, resp.Hint, "%s (rule %s)", resp.Error, resp.Rule)
	}
	if aside.Dir != "" && !resp.Refused {
		if err := aside.run(t, req.ContaminatedBy, o.sourceVersion, o.dryRun); err != nil {
			return err
		}
	}
	if o.asJSON {
		type step struct {
			snapshot.PlanStep
			Diff string `json:"diff"`
		}
		res := struct {
			DryRun  bool   `json:"dry_run"`
			Done    bool   `json:"done"`
			Reason  string `json:"reason"`
			Confirm bool   `json:"needs_confirmation"`
			Steps   []step `json:"steps"`
			// SetAside: with --set-aside, the plain files moved (or,
			// with --dry-run, to move) and those that could not be.
			SetAside       []string `json:"set_aside,omitempty"`
			SetAsideLeft   []string `json:"set_aside_left,omitempty"`
			SetAsideFailed []string `json:"set_aside_failed,omitempty"`
		}{o.dryRun, resp.OK && !o.dryRun && len(plan.Steps) > 0, plan.Reason, plan.Confirm, []step{}, aside.moved, aside.left, aside.failed}
		for _, st := range plan.Steps {
			res.Steps = append(res.Steps, step{st,
				snapshot.Diff(st.Path, st.Path, blobOrEmpty(t.stateDir, st.From), blobOrEmpty(t.stateDir, st.To))})
		}
		if err := writeJSON(out, res); err != nil {
			return err
		}
	} else {
		printRestorePlan(out, t, plan, o, resp.Refused)
		aside.print(out, o.dryRun)
	}
	if resp.Refused {
		return fail(exitRefused, resp.Hint, "%s (rule %s)", resp.Error, resp.Rule)
	}
	if len(aside.failed) > 0 {
		return fail(exitError, "nothing was deleted; see each file's reason, fix it (stop the client that holds it) and run the same restore again",
			"%d plain file(s) not set aside", len(aside.failed))
	}
	return nil
}

// asideResult is what --set-aside did (or, with --dry-run, would do).
type asideResult struct {
	Dir                 string
	moved, left, failed []string
}

// run sets aside the plain files written downstream of source (as aerfs
// scope finds them) that are still there.
func (a *asideResult) run(t *target, source, version string, dryRun bool) error {
	sc, err := scopeOf(t, source, version)
	if err != nil {
		return err
	}
	items, left, skipped := asideItems(t, sc.Written, sc.IDs())
	a.left, a.failed = left, append(a.failed, skipped...)
	if dryRun {
		for _, it := range items {
			a.moved = append(a.moved, it.rec)
		}
		return nil
	}
	moved, failed := setAside(a.Dir, items)
	a.moved, a.failed = append(a.moved, moved...), append(a.failed, failed...)
	return nil
}

// scopeOf is the scope of source (a record id, or a path relative to the
// workspace) at version: read from the state directory, or, when the
// state directory is a root daemon's, by the daemon for the owner (as
// aerfs scope is).
func scopeOf(t *target, source, version string) (*snapshot.Scope, error) {
	if stateReadable(t.stateDir) {
		x, err := recoveryIndex(t.stateDir)
		if err != nil {
			return nil, err
		}
		sc, err := x.ScopeAt(source, version)
		if err != nil {
			return nil, lookupErr(err, "give a record id from 'aerfs log' or a path in the workspace")
		}
		return sc, nil
	}
	src := source
	if !looksLikeRecordID(source) && !strings.HasPrefix(source, policy.RootPrefix) {
		src = filepath.Join(t.workspace, filepath.FromSlash(source)) // the daemon's reader has its own working directory
	}
	args := []string{"scope", "--json", src}
	if version != "" {
		args = append(args, "--source-version", version)
	}
	var out, errOut bytes.Buffer
	code, refusal, err := daemon.CallRead(t.stateDir, args, &out, &errOut)
	switch {
	case err != nil:
		return nil, fail(exitNotMounted, "is the workspace mounted? aerfs status"+t.flags(), "reading the scope through the aerfs daemon: %v", err)
	case refusal != nil:
		return nil, fail(exitRefused, refusal.Hint, "%s", refusal.Error)
	case code != 0:
		return nil, fail(code, "", "the scope of %s: %s", line(source), line(strings.TrimSpace(errOut.String())))
	}
	var sc snapshot.Scope
	if err := json.Unmarshal(out.Bytes(), &sc); err != nil {
		return nil, fail(exitError, "", "the scope the aerfs daemon read: %v", err)
	}
	return &sc, nil
}

func (a *asideResult) print(out io.Writer, dryRun bool) {
	if a.Dir == "" {
		return
	}
	verb := "set aside"
	if dryRun {
		verb = "would set aside"
	}
	for _, l := range a.left {
		fmt.Fprintf(out, "left in place: %s\n", line(l))
	}
	if len(a.moved) == 0 && len(a.failed) == 0 {
		fmt.Fprintln(out, "no plain file written downstream is still there: nothing to set aside")
		return
	}
	if len(a.moved) > 0 {
		fmt.Fprintf(out, "%s %d plain file(s) written downstream, into %s:\n", verb, len(a.moved), line(a.Dir))
		for _, m := range a.moved {
			fmt.Fprintf(out, "  %s\n", line(m))
		}
	}
	for _, f := range a.failed {
		fmt.Fprintf(out, "not set aside: %s\n", line(f))
	}
}

// printRestorePlan prints a restore's plan: each file, what happens to
// it, from which version to which, and why a step needs --yes; with
// --dry-run (or when the plan waits for confirmation) the diffs too.
func printRestorePlan(out io.Writer, t *target, plan daemon.RestorePlan, o restoreOptions, refused bool) {
	dryRun := o.dryRun
	if len(plan.Steps) == 0 {
		if o.contaminatedBy != "" {
			fmt.Fprintf(out, "nothing to restore: %s\n", line(plan.Reason))
			return
		}
		fmt.Fprintf(out, "nothing to do: the guarded files are already there (%s)\n", line(plan.Reason))
		return
	}
	verb := "restored"
	switch {
	case refused:
		verb = "not restored (needs --yes)"
	case dryRun:
		verb = "would restore"
	}
	fmt.Fprintf(out, "%s %d file(s): %s\n", verb, len(plan.Steps), line(plan.Reason))
	version := func(n int, h string) string {
		switch {
		case h == "":
			return "absent"
		case n == 0:
			return fmt.Sprintf("content %.12s", h)
		}
		return fmt.Sprintf("version %d (%.12s)", n, h)
	}
	for _, st := range plan.Steps {
		fmt.Fprintf(out, "  %-6s  %s: %s -> %s\n", st.Action, line(st.Path), version(st.FromVersion, st.From), version(st.ToVersion, st.To))
		if st.Beyond != "" {
			fmt.Fprintf(out, "          needs --yes: %s\n", line(st.Beyond))
		}
		if dryRun || refused {
			fmt.Fprint(out, snapshot.Diff(st.Path, st.Path, blobOrEmpty(t.stateDir, st.From), blobOrEmpty(t.stateDir, st.To)))
		}
	}
}

func blobOrEmpty(stateDir, h string) []byte {
	if h == "" {
		return nil
	}
	b, err := evidence.ReadBlob(stateDir, h)
	if err != nil {
		return []byte(fmt.Sprintf("(content %.12s unavailable: %v)\n", h, err))
	}
	return b
}

func newApproveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "approve ID",
		Short: "Commit exactly the quarantined content ID (owner only; fails if the file changed since)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDecide(cmd.OutOrStdout(), "approve", args[0])
		},
	}
}

func newRejectCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "reject ID",
		Short: "Discard the quarantined content ID (owner only; the bytes stay in the log)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDecide(cmd.OutOrStdout(), "reject", args[0])
		},
	}
}

func runDecide(out io.Writer, op, id string) error {
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	resp, err := call(t, daemon.Request{Op: op, ID: id})
	if err != nil {
		return err
	}
	var r struct{ ID, Path string }
	json.Unmarshal(resp.Data, &r)
	done := map[string]string{"approve": "approved", "reject": "rejected"}[op]
	fmt.Fprintf(out, "%s %.12s (%s)\n", done, r.ID, line(r.Path))
	return nil
}
