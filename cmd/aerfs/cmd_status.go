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
	fmt.Fprintf(out, "passthrough: %v   process events: %v\n", st.Passthrough, st.ProcEvents)
	fmt.Fprintf(out, "sessions by: %s\n", st.Tracking)
	printRoots(out, st.Roots)
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
	fmt.Fprintf(out, "sessions:    %d\n", len(st.Sessions))
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
		if s.Confinement != "" {
			fmt.Fprintf(out, "  %-20s confined: %s\n", "", line(s.Confinement))
		}
		printSessionNet(out, s)
	}
	return nil
}
