package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/policy"
)

func newPolicyCommand() *cobra.Command {
	c := &cobra.Command{Use: "policy", Short: "Work with policy files"}
	c.AddCommand(&cobra.Command{
		Use:   "check FILE",
		Short: "Validate a policy file",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPolicyCheck(cmd.OutOrStdout(), args[0])
		},
	})
	return c
}

func runPolicyCheck(out io.Writer, file string) error {
	if _, err := policy.Load(file); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: ok\n", file)
	return nil
}
