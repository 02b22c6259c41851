package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/snapshot"
)

type scopeOptions struct {
	asJSON  bool
	version string
}

func newScopeCommand() *cobra.Command {
	var o scopeOptions
	c := &cobra.Command{
		Use:   "scope SOURCE",
		Short: "Show every record and file downstream of a source in the provenance graph",
		Long: `Show the contamination scope of a source: every record that descends from it
in the provenance graph (writes by sessions that read it, and what they in
turn tainted), as a tree, and every guarded file those records changed.

SOURCE is a record id (or a prefix of at least 8 characters) or a path in
the workspace, labelled or not, guarded or plain: every record about that
path (or below it) is a root, and so is every reads record that lists it —
the files each session read through the mount, whoever wrote them, even a
file that was there before aerfs. With --source-version, only that version
of the path: the SHA-256 of its content (as sha256sum prints it, or as
'aerfs history' shows it), or a prefix of at least 8 hex digits; a read
whose content aerfs could not hash (too big, or changed before it could)
matches every version. 'aerfs restore --contaminated-by SOURCE' (with the
same --source-version) undoes exactly these changes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := findTarget(false)
			if err != nil {
				return err
			}
			return runScope(cmd.OutOrStdout(), t, o, args[0])
		},
	}
	c.Flags().BoolVar(&o.asJSON, "json", false, "print the scope as JSON")
	c.Flags().StringVar(&o.version, "source-version", "", "only this version of the SOURCE path: its content's SHA-256 (or a prefix)")
	return c
}

func runScope(out io.Writer, t *target, o scopeOptions, source string) error {
	x, err := recoveryIndex(t.stateDir)
	if err != nil {
		return err
	}
	src := source
	if o.version != "" || !looksLikeRecordID(source) {
		if src, err = workspaceRel(t, source); err != nil {
			return err
		}
	}
	sc, err := x.ScopeAt(src, o.version)
	if err != nil {
		if o.version != "" {
			return lookupErr(err, "give the SHA-256 of the content as sha256sum prints it, or leave --source-version out for every version")
		}
		return lookupErr(err, "give a record id from 'aerfs log' or a path in the workspace")
	}
	if o.asJSON {
		return writeJSON(out, sc)
	}
	files := "files"
	if len(sc.Files) == 1 {
		files = "file"
	}
	if o.version != "" {
		src += " at version " + o.version
	}
	fmt.Fprintf(out, "downstream of %s: %d records, %d guarded %s changed\n\n", line(src), sc.Records, len(sc.Files), files)
	var walk func(n *snapshot.ScopeNode, depth int)
	walk = func(n *snapshot.ScopeNode, depth int) {
		fmt.Fprintf(out, "%s%s %s %s %s %s\n", strings.Repeat("  ", depth), line(n.Type), line(orDash(n.Path)), line(n.Principal),
			line(orDash(n.Session)), shortRecord(n.ID))
		for _, c := range n.Children {
			walk(c, depth+1)
		}
	}
	for _, r := range sc.Roots {
		walk(r, 0)
	}
	printWritten(out, t, source, sc)
	if len(sc.Files) == 0 {
		_, err := fmt.Fprintln(out, "\nno guarded file changed")
		return err
	}
	fmt.Fprintln(out, "\naffected files (first contaminated version → content before it):")
	for _, f := range sc.Files {
		before := "absent"
		if f.First.OldHash != "" {
			before = shortRecord(f.First.OldHash)
		}
		fmt.Fprintf(out, "  %s  first %s %s by %s %s (%d contaminated), before: %s\n", line(f.Path), line(f.First.Type),
			shortRecord(f.First.Record), line(f.First.Principal), line(orDash(f.First.Session)), f.Versions, before)
	}
	return nil
}

// printWritten lists the plain files written downstream that are still
// there: aerfs keeps no versions of them. An agent's client loads its own
// state (transcripts, databases) back at its next start, and a session
// that does is tainted by it; moving such a file out of the mount lets the
// client start that part afresh (docs/agents.md, "After a poisoned
// session"). With the workspace mounted, a name that holds another file
// by now (its label is not the scope's) is not listed.
func printWritten(out io.Writer, t *target, source string, sc *snapshot.Scope) {
	var there []string
	if t.mounted {
		items, _, skipped := asideItems(t, sc.Written, sc.IDs())
		for _, it := range items {
			there = append(there, it.rec)
		}
		there = append(there, skipped...) // with why they could not be checked
		sort.Strings(there)
	} else {
		for _, w := range sc.Written {
			if p := recordFile(t, w); p != "" {
				if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
					there = append(there, w)
				}
			}
		}
	}
	if len(there) == 0 {
		return
	}
	fmt.Fprintf(out, "\nplain files written downstream, still there (%d; no versions are kept of them, so restore cannot take them back):\n", len(there))
	for _, w := range there {
		fmt.Fprintf(out, "  %s\n", line(w))
	}
	fmt.Fprintf(out, "hint: a client that loads its own state at start (Codex's databases, Gemini CLI's chats) is tainted by these; with the client stopped, aerfs restore --contaminated-by %s --set-aside DIR%s moves them out of the mount (docs/agents.md, \"After a poisoned session\")\n", line(source), t.flags())
}

// looksLikeRecordID reports whether s can only be meant as a record id:
// hex, at least the shortest accepted prefix.
func looksLikeRecordID(s string) bool {
	if len(s) < snapshot.MinPrefix || len(s) > 64 {
		return false
	}
	for _, c := range strings.ToLower(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
