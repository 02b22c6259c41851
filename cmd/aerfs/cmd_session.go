package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
)

func newSessionCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "session",
		Short: "List, release and end agent sessions",
		Long: `session shows the owner every session: its principal, its taint and where
the taint came from, whether a burst of refusals quarantined it, the
confinement it was started with, and when it started. release lifts a burst
quarantine and end kills a session's processes; both only from the owner's
channel (a process outside every session), refused elsewhere with rule
RO-owner, and recorded.`,
		Args: cobra.NoArgs,
	}
	var asJSON, all bool
	list := &cobra.Command{
		Use:   "list",
		Short: "List the sessions with their taint, quarantine and confinement",
		Long: `list shows the live sessions: those with a process left, or not yet
ended. A session ends when the process it was registered for exits or the
owner ends it; once none of its processes is left the daemon forgets it
(it stays in the log: --all lists it, and its id stays bound to its
registration — rejoin it with aerfs run --resume --session ID).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSessionList(cmd.OutOrStdout(), asJSON, all)
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	list.Flags().BoolVar(&all, "all", false, "also the sessions that ended, from the log")
	release := &cobra.Command{
		Use:   "release SESSION",
		Short: "Lift the burst quarantine of a session (the owner only)",
		Long: `release lifts the quarantine a burst of refusals put on a session (and on
the sessions started from it). Its taint stays, and what the burst rolled
back stays rolled back. Only the owner's channel may release (rule RO-owner).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSessionRelease(cmd.OutOrStdout(), args[0])
		},
	}
	end := &cobra.Command{
		Use:   "end SESSION",
		Short: "Kill every process of a session and end it (the owner only)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSessionEnd(cmd.OutOrStdout(), args[0])
		},
	}
	c.AddCommand(list, release, end)
	return c
}

func runSessionList(out io.Writer, asJSON, all bool) error {
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	resp, err := call(t, daemon.Request{Op: "session-list", All: all})
	if err != nil {
		return err
	}
	var list []daemon.SessionInfo
	if err := json.Unmarshal(resp.Data, &list); err != nil {
		return err
	}
	if asJSON {
		return writeJSON(out, list)
	}
	if len(list) == 0 {
		_, err := fmt.Fprintln(out, "no sessions")
		return err
	}
	for _, s := range list {
		state := "running"
		switch {
		case !s.Ended.IsZero():
			state = "ended " + formatWhen(s.Ended)
		case s.Live == 0:
			state = "no live process"
		}
		fmt.Fprintf(out, "%s  %s  started %s  %s (%d live)\n", line(s.ID), line(s.Principal), formatWhen(s.Started), state, s.Live)
		if s.Parent != "" {
			fmt.Fprintf(out, "  started from: %s\n", line(s.Parent))
		}
		for i, l := range wrapList(line(orDash(s.Confinement)), statusWidth-16) {
			lead := "  confinement:  "
			if i > 0 {
				lead = strings.Repeat(" ", 16)
			}
			fmt.Fprintf(out, "%s%s\n", lead, l)
		}
		if len(s.Taint) == 0 {
			fmt.Fprintf(out, "  taint:        none\n")
		} else {
			fmt.Fprintf(out, "  taint:        %s\n", line(strings.Join(s.Taint, "|")))
			for _, c := range s.TaintCauses {
				what := c.Path
				if what == "" {
					what = c.Exe
				}
				fmt.Fprintf(out, "    %s  +%s: %s %s\n", formatWhen(c.Time), line(strings.Join(c.Taint, "|")), line(c.Reason), line(what))
			}
		}
		if s.Quarantined {
			fmt.Fprintf(out, "  quarantine:   QUARANTINED %s\n", line(s.Quarantine))
			fmt.Fprintf(out, "                lift it with: aerfs session release %s%s\n", line(s.ID), line(t.stateFlag()))
		} else {
			fmt.Fprintf(out, "  quarantine:   no\n")
		}
		if s.LastRefusal != nil {
			r := s.LastRefusal
			fmt.Fprintf(out, "  refusals:     %d recent; last %s %s %s (%s)\n", s.Refusals, formatWhen(r.Time), line(r.Op), line(r.Path), line(r.Rule))
		}
	}
	return nil
}

func runSessionRelease(out io.Writer, id string) error {
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	resp, err := call(t, daemon.Request{Op: "session-release", Session: id})
	if err != nil {
		return err
	}
	var r struct {
		Session  string
		Released []string
		Taint    []string
	}
	json.Unmarshal(resp.Data, &r)
	fmt.Fprintf(out, "released %s: its changes are decided again (taint: %s)\n", line(strings.Join(r.Released, ", ")), line(orDash(strings.Join(r.Taint, "|"))))
	return nil
}

func runSessionEnd(out io.Writer, id string) error {
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	resp, err := call(t, daemon.Request{Op: "session-end", Session: id})
	if err != nil {
		return err
	}
	var r struct {
		Session string
		Left    int
	}
	json.Unmarshal(resp.Data, &r)
	if r.Left > 0 {
		fmt.Fprintf(out, "ended session %s; %d processes are still exiting\n", line(r.Session), r.Left)
		return nil
	}
	fmt.Fprintf(out, "ended session %s: its processes were killed\n", line(r.Session))
	return nil
}

// noteJoined tells aerfs run's user, in one line on stderr, that the
// session it joins already carries taint or a quarantine: the command will
// be refused memory writes from its first moment.
func noteJoined(session string, joined, quarantined bool, taint []string) {
	if !joined || (!quarantined && len(taint) == 0) {
		return
	}
	var what []string
	if len(taint) > 0 {
		what = append(what, "tainted "+strings.Join(taint, "|"))
	}
	if quarantined {
		what = append(what, "QUARANTINED after a burst of refusals")
	}
	fmt.Fprintf(os.Stderr, "aerfs: joining session %s, which is already %s; see aerfs why --session %s\n", session, strings.Join(what, " and "), session)
}
