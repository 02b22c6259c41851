package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
)

func newPromoteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "promote PATH",
		Short: "Move an untainted item from sessions/<id>/ into the shared namespace (owner only)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPromote(cmd.OutOrStdout(), args[0])
		},
	}
}

func runPromote(out io.Writer, p string) error {
	abs, err := filepath.Abs(p)
	if err != nil {
		return err
	}
	if gopts.workspace == "" {
		if m := daemon.FindMount(abs); m != nil {
			gopts.workspace = m.Mountpoint
		}
	}
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(t.workspace, abs)
	if err != nil || !within(abs, t.workspace) {
		return fail(exitUsage, "give a path inside "+t.workspace, "%s is not inside the workspace", p)
	}
	resp, err := call(t, daemon.Request{Op: "promote", Path: rel})
	if err != nil {
		return err
	}
	var r struct{ From, To string }
	json.Unmarshal(resp.Data, &r)
	fmt.Fprintf(out, "promoted %s -> %s\n", line(r.From), line(r.To))
	return nil
}
