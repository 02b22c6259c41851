package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/snapshot"
)

type diffOptions struct {
	from string
	to   string
}

func newDiffCommand() *cobra.Command {
	var o diffOptions
	c := &cobra.Command{
		Use:   "diff FILE",
		Short: "Print a unified diff between two versions of a guarded file",
		Long: `Print a unified diff between two versions of a guarded file.

A version is a number from 'aerfs history FILE' (1 is the oldest), a
record id (or a prefix of at least 8 characters), or 'current' for the file
as it is in the workspace now. --to defaults to current; --from defaults to
the content just before the --to version (for current: before the latest
recorded version), so 'aerfs diff FILE' shows the last change.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := findTarget(false)
			if err != nil {
				return err
			}
			return runDiff(cmd.OutOrStdout(), t, o, args[0])
		},
	}
	c.Flags().StringVar(&o.from, "from", "", "the old side: a version number, a record id, or current")
	c.Flags().StringVar(&o.to, "to", "current", "the new side: a version number, a record id, or current")
	c.Flags().Bool("no-pager", false, "do not page the output on a terminal ($AERFS_PAGER, $PAGER or less)")
	return c
}

// diffSide is one side of a diff: a version, or the file on disk.
type diffSide struct {
	current bool
	v       *snapshot.Version
}

// parseVersionSpec resolves a --from/--to value against a file's history.
func parseVersionSpec(spec string, hist []snapshot.Version, flag, rel string) (diffSide, error) {
	if spec == "current" {
		return diffSide{current: true}, nil
	}
	hint := "see the versions with: aerfs history " + rel
	if n, err := strconv.Atoi(spec); err == nil {
		if n < 1 || n > len(hist) {
			return diffSide{}, fail(exitUsage, hint, "%s %d: %s has %d versions", flag, n, rel, len(hist))
		}
		return diffSide{v: &hist[n-1]}, nil
	}
	id := strings.ToLower(spec)
	if len(id) < snapshot.MinPrefix {
		return diffSide{}, fail(exitUsage, hint, "%s %q: give a version number, current, or at least %d characters of a record id",
			flag, spec, snapshot.MinPrefix)
	}
	var found *snapshot.Version
	for i := range hist {
		if strings.HasPrefix(hist[i].Record, id) {
			if found != nil && found.Record != hist[i].Record {
				return diffSide{}, fail(exitUsage, hint, "%s %s matches more than one version of %s", flag, spec, rel)
			}
			found = &hist[i]
		}
	}
	if found == nil {
		return diffSide{}, fail(exitUsage, hint, "%s %s is no version of %s", flag, spec, rel)
	}
	return diffSide{v: found}, nil
}

func runDiff(out io.Writer, t *target, o diffOptions, file string) error {
	rel, hist, err := fileHistory(t, file)
	if err != nil {
		return err
	}
	if o.to == "" {
		o.to = "current"
	}
	to, err := parseVersionSpec(o.to, hist, "--to", rel)
	if err != nil {
		return err
	}
	var fromHash string
	fromCurrent := false
	if o.from == "" {
		base := to.v
		if to.current {
			if len(hist) == 0 {
				return fail(exitError, "aerfs keeps versions of guarded files changed while mounted",
					"no recorded versions of %s to compare with", rel)
			}
			base = &hist[len(hist)-1]
		}
		fromHash = base.OldHash
	} else {
		from, err := parseVersionSpec(o.from, hist, "--from", rel)
		if err != nil {
			return err
		}
		fromCurrent = from.current
		if !from.current {
			fromHash = from.v.Hash
		}
	}
	a, aExists, err := sideContent(t, rel, fromCurrent, fromHash)
	if err != nil {
		return err
	}
	toHash := ""
	if to.v != nil {
		toHash = to.v.Hash
	}
	b, bExists, err := sideContent(t, rel, to.current, toHash)
	if err != nil {
		return err
	}
	an, bn := rel, rel
	if !aExists {
		an = "/dev/null"
	}
	if !bExists {
		bn = "/dev/null"
	}
	_, err = fmt.Fprint(out, snapshot.Diff(an, bn, a, b))
	return err
}

func sideContent(t *target, rel string, current bool, hash string) ([]byte, bool, error) {
	if current {
		return readWorkspaceFile(t, rel)
	}
	b, err := blobOrAbsent(t.stateDir, hash)
	return b, hash != "", err
}
