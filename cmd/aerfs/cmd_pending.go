package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/snapshot"
)

type pendingOptions struct {
	asJSON bool
}

func newPendingCommand() *cobra.Command {
	var o pendingOptions
	c := &cobra.Command{
		Use:   "pending",
		Short: "List refused writes kept in quarantine, with a diff against the current file",
		Long: `List the writes aerfs refused and kept in quarantine that nobody has
approved or rejected yet. Each comes with a unified diff from the file as
it is now to the quarantined content: what 'aerfs approve ID' would commit.
An item whose file changed since it was refused cannot be approved.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := findTarget(false)
			if err != nil {
				return err
			}
			return runPending(cmd.OutOrStdout(), t, o)
		},
	}
	c.Flags().BoolVar(&o.asJSON, "json", false, "print a JSON array (content is base64)")
	return c
}

// pendingItem is one quarantined write as `aerfs pending` shows it.
type pendingItem struct {
	snapshot.Pending
	CurrentHash string `json:"current_hash,omitempty"` // "" = the file is absent
	Stale       bool   `json:"stale"`                  // the file changed since: approve will fail
	Content     []byte `json:"content,omitempty"`      // the quarantined bytes
	Missing     bool   `json:"content_missing,omitempty"`
	Unreadable  string `json:"current_unreadable,omitempty"` // why the current file could not be read
	Diff        string `json:"diff"`
}

func runPending(out io.Writer, t *target, o pendingOptions) error {
	x, err := recoveryIndex(t.stateDir)
	if err != nil {
		return err
	}
	items := []pendingItem{}
	for _, p := range x.Pending() {
		it := pendingItem{Pending: p}
		cur, exists, err := pendingCurrent(t, x, p.Path)
		var unreadable *unreadableError
		if errors.As(err, &unreadable) {
			// One item's file does not hide the others from the owner.
			it.Unreadable, err = unreadable.Error(), nil
		}
		if err != nil {
			return err
		}
		if exists {
			sum := sha256.Sum256(cur)
			it.CurrentHash = hex.EncodeToString(sum[:])
		}
		it.Stale = it.CurrentHash != p.BaseHash
		if it.Content, err = blobOrAbsent(t.stateDir, p.Hash); err != nil {
			it.Missing = true
		} else {
			an := p.Path
			if !exists {
				an = "/dev/null"
			}
			it.Diff = snapshot.Diff(an, p.Path, cur, it.Content)
		}
		items = append(items, it)
	}
	if o.asJSON {
		return writeJSON(out, items)
	}
	if len(items) == 0 {
		_, err := fmt.Fprintln(out, "nothing in quarantine")
		return err
	}
	for i, it := range items {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "%s  %s  by %s session %s  rule %s  at %s\n", shortRecord(it.ID), line(it.Path), line(it.Principal),
			line(orDash(it.Session)), line(orDash(it.Rule)), formatWhen(it.Time))
		switch {
		case it.Missing:
			fmt.Fprintf(out, "  the quarantined content %.12s is missing from the blob store\n", it.Hash)
			continue
		case it.Unreadable != "":
			fmt.Fprintf(out, "  the current file is not shown: %s\n", line(strings.TrimPrefix(it.Unreadable, "aerfs: ")))
		case it.Stale:
			fmt.Fprintln(out, "  the file changed since this write was refused: approving it would fail")
		}
		if it.Diff == "" {
			fmt.Fprintln(out, "  same as the current file")
			continue
		}
		fmt.Fprint(out, it.Diff)
	}
	fmt.Fprintln(out, "\napprove with 'aerfs approve ID', discard with 'aerfs reject ID'")
	return nil
}

// pendingCurrent reads the file as it is now: from the workspace when one
// is known, else the content the log says it has.
func pendingCurrent(t *target, x *snapshot.Index, rel string) ([]byte, bool, error) {
	if t.workspace != "" {
		return readWorkspaceFile(t, rel)
	}
	h, ok := x.Current()[rel]
	if !ok {
		return nil, false, nil
	}
	b, err := blobOrAbsent(t.stateDir, h)
	return b, true, err
}
