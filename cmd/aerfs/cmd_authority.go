package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
)

func newAuthorityCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "authority FILE",
		Short: "Show what a file's content may cause: its authority class, origin, sources, attestations and tokens",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAuthority(cmd.OutOrStdout(), args[0], asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON (for an executor deciding whether to act on the file)")
	return c
}

// workspaceRel resolves p to a mounted workspace and a path inside it.
func authorityTarget(p string) (*target, string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, "", err
	}
	if gopts.workspace == "" {
		if m := daemon.FindMount(abs); m != nil {
			gopts.workspace = m.Mountpoint
		}
	}
	t, err := findTarget(true)
	if err != nil {
		return nil, "", err
	}
	rel, err := filepath.Rel(t.workspace, abs)
	if err != nil || !within(abs, t.workspace) {
		return nil, "", fail(exitUsage, "give a path inside "+t.workspace, "%s is not inside the workspace", p)
	}
	return t, rel, nil
}

func runAuthority(out io.Writer, p string, asJSON bool) error {
	t, rel, err := authorityTarget(p)
	if err != nil {
		return err
	}
	resp, err := call(t, daemon.Request{Op: "authority", Path: rel})
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSONBytes(out, resp.Data)
	}
	var info daemon.AuthorityInfo
	if err := json.Unmarshal(resp.Data, &info); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s\n  class   %s (%s)\n  origin  %s", line(info.Path), line(info.Class), line(info.Rule), line(info.Origin))
	if info.Session != "" {
		fmt.Fprintf(out, " in session %s", line(info.Session))
	}
	if !info.Labeled {
		fmt.Fprint(out, " (no label: written by the owner or outside the mount)")
	}
	fmt.Fprintln(out)
	if info.Hash != "" {
		fmt.Fprintf(out, "  content %s\n", info.Hash)
	}
	if info.Record != "" {
		fmt.Fprintf(out, "  record  %s\n", info.Record)
	}
	for _, s := range info.Sources {
		fmt.Fprintf(out, "  from    %s [%s] %.12s\n", line(s.Path), s.Class, s.Hash)
	}
	for _, a := range []string{"exec", "control", "promote"} {
		c := info.May[a]
		fmt.Fprintf(out, "  %-7s %s (%s); attested by %d of %d domains", a, c.Outcome, c.Rule, len(c.Domains), c.K)
		if len(c.Domains) > 0 {
			fmt.Fprintf(out, ": %s", strings.Join(c.Domains, ", "))
		}
		fmt.Fprintln(out)
		for _, at := range c.Attestations {
			state := "counted"
			if !at.Counted {
				state = "ignored"
			}
			fmt.Fprintf(out, "          %s %s@%s (%s)\n", state, line(at.Name), line(at.Domain), at.Rule)
		}
	}
	if len(info.Tokens) > 0 {
		fmt.Fprintf(out, "  tokens  an unspent owner token waits for: %s\n", strings.Join(info.Tokens, ", "))
	}
	return nil
}
