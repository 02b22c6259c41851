package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

func newManCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "man DIR",
		Short: "Write a man page for aerfs and each of its commands into DIR, with aerfs-policy(5) and mount.fuse.aerfs(8)",
		Example: `  aerfs man /usr/local/share/man/man1 && mandb -q
  aerfs man /tmp/man && man -l /tmp/man/aerfs-run.1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			hdr := &doc.GenManHeader{Title: "AERFS", Section: "1", Source: "aerfs " + buildVersion().Version, Manual: "aerfs manual"}
			if err := doc.GenManTree(root, hdr, args[0]); err != nil {
				return fmt.Errorf("writing man pages: %w", err)
			}
			if err := addManSections(args[0]); err != nil {
				return fmt.Errorf("writing man pages: %w", err)
			}
			if err := writePolicyPage(args[0], hdr.Source); err != nil {
				return fmt.Errorf("writing man pages: %w", err)
			}
			if err := writeMountHelperPage(args[0], hdr.Source); err != nil {
				return fmt.Errorf("writing man pages: %w", err)
			}
			fmt.Fprintf(os.Stderr, "aerfs: man pages written to %s\n", args[0])
			return nil
		},
	}
}
