package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
)

func newAdoptCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "adopt PATH",
		Short: "Accept a file's current content as the owner's (drop its EXTERNAL label)",
		Long: `adopt is for a file that changed outside the mount (drift: labelled
EXTERNAL, so that every session that reads it is tainted) or that an
untrusted or tainted writer left behind. After reviewing it (aerfs why PATH,
aerfs diff PATH), the owner accepts the current content as theirs: the label
goes, a declassify record says so, and sessions that read it afterwards are
not tainted by it. Only the owner's channel may adopt (rule RO-owner).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAdopt(cmd.OutOrStdout(), args[0])
		},
	}
}

func runAdopt(out io.Writer, arg string) error {
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	rel, err := workspaceRel(t, arg)
	if err != nil {
		return err
	}
	resp, err := call(t, daemon.Request{Op: "adopt", Path: rel})
	if err != nil {
		return err
	}
	var r struct{ Path, Hash, Origin, Taint, Record string }
	json.Unmarshal(resp.Data, &r)
	fmt.Fprintf(out, "adopted %s (content %.12s): label origin %s, taint %s removed; recorded %s\n", line(r.Path), r.Hash, line(r.Origin), line(r.Taint), shortRecord(r.Record))
	return nil
}
