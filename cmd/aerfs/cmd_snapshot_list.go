package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/snapshot"
)

// newSnapshotCommand is `aerfs snapshot` and its subcommands. Taking a
// snapshot goes through the daemon: set the command's RunE to that action.
func newSnapshotCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "snapshot",
		Short: "Record the state of every guarded file; list snapshots",
		Args:  cobra.NoArgs,
	}
	var label string
	c.Flags().StringVar(&label, "label", "", "a name for the snapshot")
	c.RunE = func(cmd *cobra.Command, args []string) error { return runSnapshotTake(cmd.OutOrStdout(), label) }
	c.AddCommand(newSnapshotListCommand())
	return c
}

type snapshotListOptions struct {
	asJSON bool
}

func newSnapshotListCommand() *cobra.Command {
	var o snapshotListOptions
	c := &cobra.Command{
		Use:   "list",
		Short: "List snapshots, oldest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := findTarget(false)
			if err != nil {
				return err
			}
			return runSnapshotList(cmd.OutOrStdout(), t, o)
		},
	}
	c.Flags().BoolVar(&o.asJSON, "json", false, "print a JSON array of snapshots")
	return c
}

func runSnapshotList(out io.Writer, t *target, o snapshotListOptions) error {
	x, err := recoveryIndex(t.stateDir)
	if err != nil {
		return err
	}
	ss := x.Snapshots()
	if o.asJSON {
		if ss == nil {
			ss = []snapshot.Snapshot{}
		}
		return writeJSON(out, ss)
	}
	if len(ss) == 0 {
		_, err := fmt.Fprintln(out, "no snapshots yet")
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tFILES\tLABEL")
	for _, s := range ss {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", shortRecord(s.ID), formatWhen(s.Time), s.Files, line(s.Label))
	}
	return tw.Flush()
}
