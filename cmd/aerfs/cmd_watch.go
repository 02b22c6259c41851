package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/evidence"
)

type watchOptions struct {
	all     bool
	refused bool
	session string
	path    string
}

func newWatchCommand() *cobra.Command {
	var o watchOptions
	c := &cobra.Command{
		Use:   "watch",
		Short: "Live view: one line per verdict as it happens (Ctrl-C stops)",
		Long: `watch follows the evidence log and prints one line per decision as the
daemon records it: time, ALLOW or DENY, the rule that decided, the
principal and session, the operation and the path, and for refusals the
reason. Records that are not decisions (checkpoints of sessions, snapshots)
are left out; aerfs log shows everything.`,
		Example: `  aerfs watch
  aerfs watch --refused
  aerfs watch --session agent --path MEMORY.md
  aerfs watch --all          # the whole log first, then live`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWatch(cmd.Context(), cmd.OutOrStdout(), o)
		},
	}
	c.Flags().BoolVar(&o.all, "all", false, "print the decisions already in the log first")
	c.Flags().BoolVar(&o.refused, "refused", false, "only refusals")
	c.Flags().StringVar(&o.session, "session", "", "only this session's decisions")
	c.Flags().StringVar(&o.path, "path", "", "only decisions about this path (or below it)")
	return c
}

func runWatch(ctx context.Context, out io.Writer, o watchOptions) error {
	t, err := findTarget(false)
	if err != nil {
		return err
	}
	syncLog(t.stateDir)
	from := int64(0)
	if !o.all {
		// Start at the end: count what is there.
		if err := evidence.ReadAll(t.stateDir, func(idx int64, _ string, _ *evidence.Record) error {
			from = idx + 1
			return nil
		}); err != nil {
			return err
		}
	}
	f := evidence.Filter{Session: o.session, Path: strings.TrimPrefix(o.path, "./")}
	color := isTerminal(os.Stdout) && colourOn()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	err = evidence.Follow(ctx, t.stateDir, from, func(idx int64, id string, r *evidence.Record) error {
		if r.Meta.Verdict == "" || !f.Match(r) || (o.refused && r.Meta.Verdict == "allow") {
			return nil
		}
		_, err := fmt.Fprintln(out, watchLine(r, color))
		return err
	})
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return nil
	}
	return err
}

// watchLine is one decision in a fixed layout: every column is always
// there ("-" when empty), so the columns never shift.
func watchLine(r *evidence.Record, color bool) string {
	m := r.Meta
	ts := m.Time
	if t, err := time.Parse(time.RFC3339Nano, m.Time); err == nil {
		ts = t.Local().Format("15:04:05.000")
	}
	verdict := fmt.Sprintf("%-5s", line(strings.ToUpper(m.Verdict)))
	if color {
		switch m.Verdict {
		case "allow":
			verdict = "\033[32m" + verdict + "\033[0m"
		default:
			verdict = "\033[31m" + verdict + "\033[0m"
		}
	}
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	what := dash(line(m.FilePath()))
	if r.Payload != nil && r.Payload.Net != nil {
		what = netSummary(r.Payload.Net) // a connection through the proxy
	}
	// Every field is escaped (internal/printable) before the colour is
	// added: watch writes its own escape sequences, never a session's.
	out := fmt.Sprintf("%s %s %-18s %-11s %-14s %-8s %s", line(ts), verdict, dash(line(m.Rule)), dash(line(r.Principal)),
		dash(line(m.Session)), dash(line(m.Op)), what)
	if m.Verdict != "allow" && m.Reason != "" {
		out += " — " + line(m.Reason)
	}
	return out
}
