package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/internal/printable"
	"github.com/aerfs/aerfs/snapshot"
)

type gcOptions struct {
	keepLast   int
	keepWithin time.Duration
	maxSize    string
	dryRun     bool
	asJSON     bool
}

func newGCCommand() *cobra.Command {
	o := gcOptions{keepLast: 10, keepWithin: 7 * 24 * time.Hour}
	c := &cobra.Command{
		Use:   "gc",
		Short: "Prune stored content outside a retention policy; records are kept",
		Long: `Remove stored versions of guarded files that fall outside the retention:
every file keeps its last --keep-last distinct versions and every version
younger than --keep-within; then, with --max-size, the oldest of those go
until the store is under the size. The current content of every file, the
content of pending quarantined writes (and the files they would replace),
the newest snapshot and a running restore's content are never removed.

Records are never removed: the log still verifies, and a gc record names
every blob it pruned, so a verifier (aerfs verify, also of an exported
bundle) tells pruned content from lost content. aerfs history marks a
pruned version "content pruned"; it can no longer be restored or diffed.

On a mounted workspace the daemon does it (owner's channel only: refused
from inside a session, rule RO-owner); unmounted, aerfs gc works on the
state directory itself.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGC(cmd.OutOrStdout(), o)
		},
	}
	c.Flags().IntVar(&o.keepLast, "keep-last", o.keepLast, "keep the last N distinct versions of every file (at least 1)")
	c.Flags().DurationVar(&o.keepWithin, "keep-within", o.keepWithin, "keep every version younger than this (0: none by age)")
	c.Flags().StringVar(&o.maxSize, "max-size", "", "then drop the oldest kept versions until the store is under this size (e.g. 500M, 2G)")
	c.Flags().BoolVar(&o.dryRun, "dry-run", false, "say what would be pruned, prune nothing")
	c.Flags().BoolVar(&o.asJSON, "json", false, "print the result as JSON")
	return c
}

func parseSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	mult := int64(1)
	switch u := strings.ToUpper(s[len(s)-1:]); u {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

func runGC(out io.Writer, o gcOptions) error {
	if o.keepLast < 1 {
		return fail(exitUsage, "aerfs gc --keep-last 1 keeps at least the current version", "--keep-last must be at least 1")
	}
	maxBytes, err := parseSize(o.maxSize)
	if err != nil {
		return fail(exitUsage, "aerfs gc --max-size 500M", "--max-size: %v", err)
	}
	t, err := findTargetMountedBySocket()
	if err != nil {
		return err
	}
	var res daemon.GCResult
	pr := startProgress("gc")
	defer pr.done()
	if t.mounted {
		pr.spin("the daemon plans and prunes")
		resp, err := call(t, daemon.Request{Op: "gc", KeepLast: o.keepLast, KeepWithin: o.keepWithin.String(), MaxBytes: maxBytes, DryRun: o.dryRun})
		pr.done()
		if err != nil {
			return err
		}
		if err := json.Unmarshal(resp.Data, &res); err != nil {
			return err
		}
	} else {
		l, err := evidence.Open(t.stateDir)
		if err != nil {
			if strings.Contains(err.Error(), "in use") {
				return fail(exitError, "is a daemon serving it? aerfs status"+t.flags(), "%v", err)
			}
			return fail(exitError, "aerfs verify --state "+t.stateDir, "%v", err)
		}
		defer l.Close()
		pr.spin("reading the versions and pruning")
		x, err := snapshot.Load(t.stateDir)
		if err != nil {
			return err
		}
		r, err := daemon.RunGC(x, t.stateDir, snapshot.Retention{KeepLast: o.keepLast, KeepWithin: o.keepWithin, MaxBytes: maxBytes, Now: time.Now()},
			o.dryRun, nil, l.Prune)
		if err != nil {
			return fail(exitError, "", "gc: %v", err)
		}
		res = *r
		pr.done()
	}
	if o.asJSON {
		return writeJSON(out, res)
	}
	verb := "pruned"
	if res.DryRun {
		verb = "would prune"
	}
	fmt.Fprintf(out, "%s %d stored versions (%s); kept %d (%s)\n", verb, len(res.Prune), humanSize(res.Bytes), res.Kept, humanSize(res.Total))
	printGCItems(out, res.Items)
	if res.Record != "" {
		fmt.Fprintf(out, "gc record %.12s\n", res.Record)
	}
	return nil
}

// printGCItems lists each pruned blob with the versions whose content it
// is, as aerfs history numbers them.
func printGCItems(out io.Writer, items []snapshot.GCItem) {
	for _, it := range items {
		var vs []string
		for _, v := range it.Versions {
			n := fmt.Sprint(v.N)
			if v.N == 0 {
				n = "before 1"
			}
			vs = append(vs, fmt.Sprintf("%s version %s (%s)", printable.Line(v.Path), n, formatWhen(v.Time)))
		}
		what := strings.Join(vs, ", ")
		if what == "" {
			what = "no version (refused content already decided, or content never recorded)"
		}
		fmt.Fprintf(out, "  %.12s  %9s  %s\n", it.Hash, humanSize(it.Size), what)
	}
}

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
