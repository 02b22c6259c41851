package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/policy"
)

func newTaintCommand() *cobra.Command {
	var session string
	c := &cobra.Command{
		Use:   "taint --session S FLAG...",
		Short: "Declare that a session has read untrusted data (taint only grows)",
		Long: `taint adds taint flags to a session. A session may declare taint for itself
and for the sessions started from within it; the owner, outside every
session, for any session. Anything else is refused (exit 4, rule RC-control).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTaint(cmd.OutOrStdout(), session, args)
		},
	}
	c.Flags().StringVar(&session, "session", "", "the session to taint (required)")
	c.MarkFlagRequired("session")
	return c
}

func runTaint(out io.Writer, session string, flags []string) error {
	for _, f := range flags {
		if _, err := policy.ParseTaint(f); err != nil {
			return fail(exitUsage, "taint flags are UNTRUSTED, INJECTION_SUSPECT, PROXY_DERIVED, SECRET_RISK, CROSS_SESSION, TOOL_OUTPUT, SKILL_OUTPUT, WEB_DERIVED", "unknown taint flag %q", f)
		}
	}
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	resp, err := call(t, daemon.Request{Op: "taint", Session: session, Flags: flags})
	if err != nil {
		return err
	}
	var r struct {
		Session string
		Taint   []string
	}
	json.Unmarshal(resp.Data, &r)
	fmt.Fprintf(out, "session %s taint: %s\n", line(r.Session), line(strings.Join(r.Taint, "|")))
	return nil
}
