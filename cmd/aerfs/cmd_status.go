package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
)

func newStatusCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the mount, the policy, the sessions and the verdict counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatus(cmd.OutOrStdout(), asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func runStatus(out io.Writer, asJSON bool) error {
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	resp, err := call(t, daemon.Request{Op: "status"})
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSONBytes(out, resp.Data)
	}
	var st daemon.Status
	if err := json.Unmarshal(resp.Data, &st); err != nil {
		return err
	}
	fmt.Fprintf(out, "workspace:   %s (mounted, daemon pid %d, since %s)\n", st.Workspace, st.PID, st.Started.Format("2006-01-02 15:04:05Z"))
	fmt.Fprintf(out, "state:       %s (%s)\npolicy:      %s\n", st.StateDir, stateSummary(&st), st.Policy)
	fmt.Fprintf(out, "passthrough: %v   process events: %v   cached callers checked by: %s\n", st.Passthrough, st.ProcEvents, st.CachedCallers)
	fmt.Fprintf(out, "sessions by: %s\n", st.Tracking)
	printRoots(out, st.Roots)
	if len(st.PolicyHeld) > 0 {
		fmt.Fprintf(out, "policy held: %s open for writing, not guarded until closed (RW-open-writer): %s\n",
			plural(len(st.PolicyHeld), "a file the policy guards is", "files the policy guards are"), line(strings.Join(st.PolicyHeld, ", ")))
	}
	if st.LogHealthy && st.LogLastError == "" {
		fmt.Fprintf(out, "evidence:    log healthy\n")
	} else if st.LogHealthy {
		fmt.Fprintf(out, "evidence:    log healthy (recovered by itself; last error %s: %s)\n",
			st.LogLastErrAt.Format("2006-01-02 15:04:05Z"), line(st.LogLastError))
	} else {
		fmt.Fprintf(out, "evidence:    LOG FAILING — guarded changes are refused until it recovers: %s\n", line(st.LogLastError))
	}
	fmt.Fprintf(out, "since mount: %d allowed, %d denied; %d guarded commits, %d quarantined; %d labelled files\n",
		st.Allowed, st.Denied, st.Committed, st.Quarantined, st.Labels)
	printDrift(out, "drift:       ", &st, t.flags())
	fmt.Fprintf(out, "sessions:    %d\n", len(st.Sessions))
	// A confinement report is a few hundred characters of paths: status
	// names what each session got, --verbose (and aerfs session list) the
	// whole report, wrapped.
	for _, s := range st.Sessions {
		taint := strings.Join(s.Taint, "|")
		if taint == "" {
			taint = "none"
		}
		held := ""
		if s.Quarantined {
			held = "  QUARANTINED (burst of refusals)"
		}
		fmt.Fprintf(out, "  %-20s %-11s taint=%s live=%d%s\n", line(s.ID), line(s.Principal), line(taint), s.Live, held)
		if c := line(s.Confinement); c != "" {
			if !gopts.verbose {
				c = confinementSummary(c)
			}
			for i, l := range wrapList(c, statusWidth-len(confinedIndent)) {
				lead := "  " + strings.Repeat(" ", 20) + " confined: "
				if i > 0 {
					lead = confinedIndent
				}
				fmt.Fprintf(out, "%s%s\n", lead, l)
			}
		}
		printSessionNet(out, s)
	}
	return nil
}

// maxDriftLines is how many drifted paths mount and status name, one a
// line; past it they give the count and the command that lists them all.
const maxDriftLines = 10

// printDrift says which guarded files changed outside the mount since the
// daemon started (at mount: while it was unmounted), a line each, and how
// to see and settle them. lead starts the first line; flags are the
// workspace and state flags of the commands it names.
func printDrift(out io.Writer, lead string, st *daemon.Status, flags string) {
	if st.DriftCount == 0 {
		return
	}
	unmounted := 0
	for _, d := range st.Drift {
		if d.When == "unmounted" {
			unmounted++
		}
	}
	when := "outside the mount"
	if unmounted == len(st.Drift) && st.DriftCount == len(st.Drift) {
		when = "while unmounted"
	}
	fmt.Fprintf(out, "%s%d guarded %s changed %s (drift, labelled EXTERNAL):\n", lead, st.DriftCount, plural(st.DriftCount, "file", "files"), when)
	for i, d := range st.Drift {
		if i == maxDriftLines {
			break
		}
		what := "kept, labelled EXTERNAL"
		if d.Restored {
			what = "put back to the version aerfs committed (on_drift: restore)"
		}
		fmt.Fprintf(out, "  %s  (found %s, %s; %s)\n", line(d.Path), d.At.Format("2006-01-02 15:04:05Z"), d.When, what)
	}
	if more := st.DriftCount - min(len(st.Drift), maxDriftLines); more > 0 {
		fmt.Fprintf(out, "  … and %d more\n", more)
	}
	fmt.Fprintf(out, "  all of them: aerfs log --type drift%s; accept a change: aerfs adopt%s PATH; undo it: aerfs restore%s PATH --to VERSION (aerfs history PATH)\n", flags, flags, flags)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// confinementSummary names the parts of a confinement report without
// their paths ("landlock abi 7, writes, hidden, user+mount+net namespaces,
// seccomp …"), and what the kernel showed only as a count; the report is
// one of aerfs run's, checked by the daemon (docs/confinement.md).
func confinementSummary(c string) string {
	what, kernel, _ := strings.Cut(c, "; kernel: ")
	var parts []string
	for _, clause := range strings.Split(what, ", ") {
		head := clause
		if i := strings.Index(head, " ("); i >= 0 {
			head = head[:i]
		}
		if i := strings.Index(head, " /"); i >= 0 {
			head = head[:i]
		}
		if head != "" {
			parts = append(parts, head)
		}
	}
	s := strings.Join(parts, ", ")
	if kernel != "" {
		s += "; the kernel shows it (--verbose: every path and what /proc shows)"
	}
	return s
}

// statusWidth is the width status wraps long lists to.
const statusWidth = 100

// confinedIndent starts the continuation lines of a confinement report.
var confinedIndent = strings.Repeat(" ", 33)

// wrapList cuts a report made of clauses ("a, b; c, d") into lines of at
// most width characters, between clauses where it can, between words
// where a clause is longer than a line. Every character is kept.
func wrapList(s string, width int) []string {
	var out []string
	cur := ""
	put := func(piece string) {
		if cur != "" && len(cur)+len(piece) > width {
			out = append(out, strings.TrimRight(cur, " "))
			cur = strings.TrimLeft(piece, " ")
			return
		}
		cur += piece
	}
	for _, clause := range splitAfterAny(s, ", ", "; ") {
		if len(clause) <= width {
			put(clause)
			continue
		}
		for _, w := range strings.SplitAfter(clause, " ") {
			put(w)
		}
	}
	if cur != "" {
		out = append(out, strings.TrimRight(cur, " "))
	}
	return out
}

// splitAfterAny cuts s after each separator, keeping the separators.
func splitAfterAny(s string, seps ...string) []string {
	var out []string
	for s != "" {
		at := -1
		n := 0
		for _, sep := range seps {
			if i := strings.Index(s, sep); i >= 0 && (at < 0 || i < at) {
				at, n = i, len(sep)
			}
		}
		if at < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:at+n])
		s = s[at+n:]
	}
	return out
}
