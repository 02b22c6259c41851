package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/guard/explain"
	"github.com/aerfs/aerfs/internal/printable"
)

func newWhyCommand() *cobra.Command {
	var session string
	var asJSON bool
	c := &cobra.Command{
		Use:   "why [PATH | --session S]",
		Short: "Explain a session's taint and refusals, or the last verdicts on a path",
		Long: `why shows the owner what an agent reads in .aerfs/status: for a session
(--session S) its principal, its taint and where the taint came from, its
quarantine, what it cannot do now and its last refusals with rule id,
reason and where the refused content went (the pending id and the aerfs
approve command). For a PATH: its class, its label and the last records
about it. Without arguments: the calling process itself.
A session may ask about itself; about other sessions and paths only the
owner's channel may ask (rule RO-owner).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWhy(cmd.OutOrStdout(), session, args, asJSON)
		},
	}
	c.Flags().StringVar(&session, "session", "", "the session to explain")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func runWhy(out io.Writer, session string, args []string, asJSON bool) error {
	if session != "" && len(args) > 0 {
		return fail(exitUsage, "aerfs why PATH or aerfs why --session S", "give a PATH or --session, not both")
	}
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	req := daemon.Request{Op: "why", Session: session}
	if len(args) == 1 {
		if req.Path, err = workspaceRel(t, args[0]); err != nil {
			return err
		}
	}
	resp, err := call(t, req)
	if err != nil {
		return err
	}
	if asJSON {
		var v any
		json.Unmarshal(resp.Data, &v)
		return writeJSON(out, v)
	}
	var e explain.Explanation
	if err := json.Unmarshal(resp.Data, &e); err != nil {
		return err
	}
	// What the agent reads in .aerfs/status, for the owner: its paths,
	// reasons and causes are a session's text (internal/printable), each
	// field on its line.
	escapeStrings(&e)
	_, err = fmt.Fprint(out, printable.Text(e.Text()))
	return err
}
