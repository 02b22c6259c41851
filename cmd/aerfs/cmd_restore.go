package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/evidence"
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
	dryRun         bool
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
every agent session.`,
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
	c.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the plan and the diffs; change nothing")
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
	resp, err := call(t, req)
	if err != nil {
		return err
	}
	var plan struct {
		Reason string          `json:"reason"`
		Steps  []snapshot.Step `json:"steps"`
	}
	if err := json.Unmarshal(resp.Data, &plan); err != nil {
		return err
	}
	if o.asJSON {
		type step struct {
			snapshot.Step
			Action string `json:"action"` // remove, create or change
			Diff   string `json:"diff"`
		}
		res := struct {
			DryRun bool   `json:"dry_run"`
			Reason string `json:"reason"`
			Steps  []step `json:"steps"`
		}{o.dryRun, plan.Reason, []step{}}
		for _, st := range plan.Steps {
			action := "change"
			switch {
			case st.To == "":
				action = "remove"
			case st.From == "":
				action = "create"
			}
			res.Steps = append(res.Steps, step{st, action,
				snapshot.Diff(st.Path, st.Path, blobOrEmpty(t.stateDir, st.From), blobOrEmpty(t.stateDir, st.To))})
		}
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(b))
		return err
	}
	if len(plan.Steps) == 0 {
		if o.contaminatedBy != "" {
			fmt.Fprintf(out, "nothing to restore: %s\n", plan.Reason)
			return nil
		}
		fmt.Fprintf(out, "nothing to do: the guarded files are already there (%s)\n", plan.Reason)
		return nil
	}
	verb := "restored"
	if o.dryRun {
		verb = "would restore"
	}
	fmt.Fprintf(out, "%s %d file(s): %s\n", verb, len(plan.Steps), plan.Reason)
	for _, st := range plan.Steps {
		switch {
		case st.To == "":
			fmt.Fprintf(out, "  remove  %s\n", st.Path)
		case st.From == "":
			fmt.Fprintf(out, "  create  %s\n", st.Path)
		default:
			fmt.Fprintf(out, "  change  %s\n", st.Path)
		}
		if o.dryRun {
			a := blobOrEmpty(t.stateDir, st.From)
			b := blobOrEmpty(t.stateDir, st.To)
			fmt.Fprint(out, snapshot.Diff(st.Path, st.Path, a, b))
		}
	}
	return nil
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
	fmt.Fprintf(out, "%s %.12s (%s)\n", done, r.ID, r.Path)
	return nil
}
