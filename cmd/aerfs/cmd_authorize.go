package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
)

func newAuthorizeCommand() *cobra.Command {
	var action, ttl, check string
	c := &cobra.Command{
		Use:   "authorize FILE --for exec|control|promote [--ttl 10m] | authorize --check TOKEN FILE --for ACTION",
		Short: "Mint a single-use owner token for one action on a file's exact content (owner only), or check and spend one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if action == "" {
				return fail(exitUsage, "aerfs authorize FILE --for exec|control|promote", "--for is required")
			}
			if check != "" {
				return runAuthorizeCheck(cmd.OutOrStdout(), args[0], action, check)
			}
			return runAuthorize(cmd.OutOrStdout(), args[0], action, ttl)
		},
	}
	c.Flags().StringVar(&action, "for", "", "the action: exec, control or promote")
	c.Flags().StringVar(&ttl, "ttl", "10m", "how long the token stays valid (at most 24h)")
	c.Flags().StringVar(&check, "check", "", "verify and spend TOKEN for the action on FILE (for an executor outside the mount)")
	return c
}

func runAuthorize(out io.Writer, p, action, ttl string) error {
	t, rel, err := authorityTarget(p)
	if err != nil {
		return err
	}
	resp, err := call(t, daemon.Request{Op: "authorize", Path: rel, For: action, TTL: ttl})
	if err != nil {
		return err
	}
	var r daemon.AuthorizeResult
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s\n", r.Token)
	fmt.Fprintf(out, "# single use: %s of %s (content %.12s) until %s; shown once\n", line(r.Action), line(r.Path), r.Hash, line(r.Expiry))
	return nil
}

func runAuthorizeCheck(out io.Writer, p, action, token string) error {
	t, rel, err := authorityTarget(p)
	if err != nil {
		return err
	}
	if _, err := call(t, daemon.Request{Op: "authorize-check", Path: rel, For: action, Token: token}); err != nil {
		return err
	}
	fmt.Fprintf(out, "token valid for %s of %s; spent\n", line(action), line(rel))
	return nil
}
