package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/snapshot"
)

func newEditCommand() *cobra.Command {
	var yes bool
	c := &cobra.Command{
		Use:   "edit FILE",
		Short: "Change a guarded file (SOUL.md …) as the owner: $EDITOR, diff, confirm, commit",
		Long: `edit is the owner's way to change a guarded file, identity files included
(SOUL.md, IDENTITY.md), which no process can change through the mount.
It copies the current content to a private temporary file, opens $EDITOR
on it (vi when unset), shows the diff, asks for confirmation (--yes skips
it) and commits the new content through the daemon as an owner change:
atomic, the previous version kept, recorded (rule RO-owner). If the file
changed meanwhile, nothing is committed. Only the owner's channel may edit
(a process outside every session); from a session it is refused (RO-owner).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEdit(cmd.InOrStdin(), cmd.OutOrStdout(), args[0], yes)
		},
	}
	c.Flags().BoolVarP(&yes, "yes", "y", false, "commit without asking")
	return c
}

// maxEditSize keeps an edit within one control request (the owner's lines
// are at most 12 MiB, the content in base64).
const maxEditSize = 8 << 20

func runEdit(in io.Reader, out io.Writer, arg string, yes bool) error {
	t, err := findTarget(true)
	if err != nil {
		return err
	}
	rel, err := workspaceRel(t, arg)
	if err != nil {
		return err
	}
	resp, err := call(t, daemon.Request{Op: "edit-get", Path: rel})
	if err != nil {
		return err
	}
	var f daemon.EditFile
	if err := json.Unmarshal(resp.Data, &f); err != nil {
		return err
	}
	tmp, err := os.CreateTemp("", "aerfs-edit-*-"+path.Base(rel))
	if err != nil {
		return fail(exitError, "", "cannot make a temporary copy: %v", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(f.Content)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(exitError, "", "cannot write the temporary copy: %v", err)
	}
	editor := os.Getenv("EDITOR")
	if strings.TrimSpace(editor) == "" {
		editor = "vi"
	}
	// $EDITOR may carry arguments ("code --wait"): the shell splits it.
	ed := exec.Command("sh", "-c", editor+` "$1"`, "aerfs-edit", tmp.Name())
	ed.Stdin, ed.Stdout, ed.Stderr = os.Stdin, os.Stderr, os.Stderr
	if err := ed.Run(); err != nil {
		return fail(exitError, "nothing was committed", "the editor (%s) failed: %v", editor, err)
	}
	nw, err := os.ReadFile(tmp.Name())
	if err != nil {
		return fail(exitError, "nothing was committed", "cannot read the edited copy: %v", err)
	}
	if bytes.Equal(nw, f.Content) {
		fmt.Fprintf(out, "%s unchanged: nothing to commit\n", line(rel))
		return nil
	}
	if len(nw) > maxEditSize {
		return fail(exitError, "nothing was committed; write a smaller file, or restore and approve through the mount's usual paths",
			"the edited %s is %d bytes; aerfs edit commits at most %d", rel, len(nw), maxEditSize)
	}
	from := rel
	if f.Hash == "" {
		from = "/dev/null"
	}
	fmt.Fprint(out, snapshot.Diff(from, rel, f.Content, nw))
	if !yes {
		fmt.Fprintf(out, "commit this change to %s? [y/N] ", line(rel))
		flushText(out) // the question is shown before the answer is read
		line, _ := bufio.NewReader(in).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(out, "not committed")
			return fail(exitError, "run aerfs edit "+rel+" again, or pass --yes", "not committed")
		}
	}
	resp, err = call(t, daemon.Request{Op: "edit", Path: rel, Content: nw, BaseHash: f.Hash})
	if err != nil {
		return err
	}
	var r struct {
		Path    string `json:"path"`
		NewHash string `json:"new_hash"`
		Record  string `json:"record"`
	}
	json.Unmarshal(resp.Data, &r)
	fmt.Fprintf(out, "committed %s (content %.12s); recorded %s\n", line(r.Path), r.NewHash, shortRecord(r.Record))
	return nil
}
