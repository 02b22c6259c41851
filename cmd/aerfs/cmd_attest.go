package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
)

func newAttestCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "attest FILE",
		Short: "Attest a file's exact content as a registered attestor (a TOOL_AUTH session named in the policy's attestors)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAttest(cmd.OutOrStdout(), args[0])
		},
	}
}

func runAttest(out io.Writer, p string) error {
	t, rel, err := authorityTarget(p)
	if err != nil {
		return err
	}
	resp, err := call(t, daemon.Request{Op: "attest", Path: rel})
	if err != nil {
		return err
	}
	var r struct {
		Hash, Rule, Domain string
	}
	json.Unmarshal(resp.Data, &r)
	fmt.Fprintf(out, "attested %s (content %.12s) for domain %s (%s)\n", line(rel), r.Hash, line(r.Domain), line(r.Rule))
	return nil
}
