package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
)

type pprofOptions struct {
	out     string
	seconds int
}

func newDebugCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "debug",
		Short: "What the daemon holds and does, for the owner",
		Args:  cobra.NoArgs,
	}
	var o pprofOptions
	p := &cobra.Command{
		Use:   "pprof PROFILE",
		Short: "Write a Go profile of the daemon (heap, allocs, goroutine, cpu …) for go tool pprof",
		Long: `pprof asks the daemon for one of its Go runtime profiles and writes it to a
file for 'go tool pprof': heap (what is live now), allocs, goroutine,
threadcreate, block, mutex, or cpu (--seconds, at most 30). Only the owner's
channel may ask (a process outside every session; rule RO-owner): a profile
shows what the daemon keeps about every session and file. aerfs serves no
profiling endpoint on the network.`,
		Example: "  aerfs debug pprof heap -o heap.pprof && go tool pprof -top heap.pprof",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPprof(cmd.OutOrStdout(), o, args[0])
		},
	}
	p.Flags().StringVarP(&o.out, "output", "o", "", "write the profile to this file (default: PROFILE.pprof)")
	p.Flags().IntVar(&o.seconds, "seconds", 10, "how long a cpu profile runs")
	c.AddCommand(p)
	return c
}

func runPprof(out io.Writer, o pprofOptions, profile string) error {
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	req := daemon.Request{Op: "pprof", Profile: profile}
	if profile == "cpu" {
		req.Seconds = o.seconds
	}
	resp, err := call(t, req)
	if err != nil {
		return err
	}
	var b []byte
	if err := json.Unmarshal(resp.Data, &b); err != nil {
		return fail(exitError, "", "the daemon's answer is not a profile: %v", err)
	}
	file := o.out
	if file == "" {
		file = strings.ReplaceAll(profile, "/", "_") + ".pprof"
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return fail(exitError, "", "cannot write %s: %v", file, err)
	}
	fmt.Fprintf(out, "wrote %s (%d bytes): go tool pprof %s\n", file, len(b), file)
	return nil
}
