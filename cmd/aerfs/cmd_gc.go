package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
)

type gcOptions struct {
	keepLast   int
	keepWithin string
	maxSize    string
	dryRun     bool
	asJSON     bool
}

func newGCCommand() *cobra.Command {
	var o gcOptions
	c := &cobra.Command{
		Use:   "gc [--keep-last N] [--keep-within DURATION] [--max-size SIZE] [--dry-run]",
		Short: "Prune old versions' content from the evidence store; records stay (owner only)",
		Long: `gc removes the stored content (blobs) of old versions of guarded files
and keeps every record, so the log still verifies and history still lists
every version ("content pruned" for those whose content is gone). A blob
is kept when it is one of the last --keep-last versions of a file or a
record younger than --keep-within refers to it; --max-size then prunes
the oldest remaining blobs until the store fits. Never pruned: the current
content of every guarded file, the content a recorded write replaced,
pending quarantined content, every snapshot's files. The gc is itself a
record (type gc) whose manifest names each pruned blob and why, so a
verifier tells a pruned blob from a lost one. Only the owner's channel may
gc: a process outside every agent session, through the daemon while the
workspace is mounted, or straight on the state directory when it is not.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGC(cmd.OutOrStdout(), o)
		},
	}
	c.Flags().IntVar(&o.keepLast, "keep-last", 10, "keep the content of the last N versions of every file")
	c.Flags().StringVar(&o.keepWithin, "keep-within", "7d", "keep content referred to by records younger than this (30m, 12h, 7d; 0 = off)")
	c.Flags().StringVar(&o.maxSize, "max-size", "", "then prune the oldest unprotected content until the store fits (e.g. 500M, 2G)")
	c.Flags().BoolVar(&o.dryRun, "dry-run", false, "print what would be pruned; change nothing")
	c.Flags().BoolVar(&o.asJSON, "json", false, "print the result as JSON")
	return c
}

// parseRetention reads a duration that may be given in days ("7d").
func parseRetention(s string) (time.Duration, error) {
	if s == "" || s == "0" {
		return 0, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("bad duration %q", s)
	}
	return v, nil
}

// parseSize reads a byte count with an optional K, M, G or T suffix
// (powers of 1024).
func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	mult := int64(1)
	u := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(s, "B"), "b"))
	for i, suf := range []string{"K", "M", "G", "T"} {
		if t, ok := strings.CutSuffix(u, suf); ok {
			u, mult = t, int64(1)<<(10*(i+1))
			break
		}
	}
	n, err := strconv.ParseInt(u, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

func runGC(out io.Writer, o gcOptions) error {
	within, err := parseRetention(o.keepWithin)
	if err != nil {
		return fail(exitUsage, "--keep-within takes a duration such as 12h or 7d", "%v", err)
	}
	size, err := parseSize(o.maxSize)
	if err != nil {
		return fail(exitUsage, "--max-size takes a size such as 500M or 2G", "%v", err)
	}
	if o.keepLast < 1 {
		return fail(exitUsage, "aerfs gc --help", "--keep-last must be at least 1")
	}
	t, err := findTarget(false)
	if err != nil {
		return err
	}
	var res daemon.GCResult
	if t.mounted {
		req := daemon.Request{Op: "gc", KeepLast: o.keepLast, MaxSize: size, DryRun: o.dryRun}
		if within > 0 {
			req.KeepWithin = within.String()
		}
		resp, err := call(t, req)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(resp.Data, &res); err != nil {
			return err
		}
	} else {
		// Not mounted: straight on the state directory, under the
		// evidence lock (refused while a daemon holds it).
		r, err := daemon.GCUnmounted(t.stateDir, t.workspace, daemon.GCPolicy{KeepLast: o.keepLast, KeepWithin: within, MaxSize: size}, o.dryRun)
		if err != nil {
			return fail(exitError, "is a daemon serving this state directory? aerfs status"+t.flags(), "gc: %v", err)
		}
		res = *r
	}
	if o.asJSON {
		b, err := json.Marshal(res)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(b))
		return err
	}
	verb := "pruned"
	if res.DryRun {
		verb = "would prune"
	}
	fmt.Fprintf(out, "%s %d content blobs (%d bytes); kept %d (%d bytes, %d protected)\n",
		verb, len(res.Pruned), res.PrunedBytes, res.Kept, res.KeptBytes, res.Protected)
	if res.Record != "" {
		fmt.Fprintf(out, "recorded as %s\n", shortRecord(res.Record))
	}
	return nil
}
