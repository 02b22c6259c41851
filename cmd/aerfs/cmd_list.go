package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/daemon"
)

// mountedWorkspace is one line of aerfs list: an aerfs mount of this mount
// table (the workspace, with its further roots) and what its daemon says.
type mountedWorkspace struct {
	Workspace string            `json:"workspace"`
	StateDir  string            `json:"state_dir"`
	Roots     map[string]string `json:"roots,omitempty"` // "@name" → directory, as the daemon names them
	// Mountpoints are every aerfs mount of this state directory: the
	// workspace and its roots.
	Mountpoints []string `json:"mountpoints"`
	// What the daemon says; Answer is "" when it answered, otherwise why
	// not.
	PID      int       `json:"pid,omitempty"`
	Sessions int       `json:"sessions"`
	Since    time.Time `json:"since,omitzero"`
	Version  string    `json:"version,omitempty"`
	Answer   string    `json:"not_answering,omitempty"`
}

func newListCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List the mounted workspaces: state directory, daemon, sessions",
		Long: `list reads the mount table (/proc/self/mountinfo) for aerfs mounts, groups a
workspace with its further roots by their state directory, and asks each
daemon for its pid, its live sessions and when it mounted. A mount whose
daemon does not answer (killed, or another user's) is listed with the
reason.`,
		Example: `  aerfs list
  aerfs list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runList(cmd.OutOrStdout(), asJSON)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON array")
	return c
}

func mountedWorkspaces() []mountedWorkspace { return mountedWorkspacesOf("") }

// mountedWorkspacesOf is mountedWorkspaces for the mounts of the state
// directory state only ("": every one). Only the daemons listed are
// asked: one that does not answer holds up its caller for the control
// client's deadline, and must not hold up a question about another
// workspace.
func mountedWorkspacesOf(state string) []mountedWorkspace {
	byState := map[string]*mountedWorkspace{}
	var order []string
	for _, m := range daemon.Mounts() {
		if state != "" && m.StateDir != state {
			continue
		}
		w := byState[m.StateDir]
		if w == nil {
			w = &mountedWorkspace{StateDir: m.StateDir}
			byState[m.StateDir] = w
			order = append(order, m.StateDir)
		}
		w.Mountpoints = append(w.Mountpoints, m.Mountpoint)
		if w.Workspace == "" {
			w.Workspace = mountWorkspace(&m)
		}
	}
	out := make([]mountedWorkspace, 0, len(order))
	for _, s := range order {
		w := byState[s]
		sort.Strings(w.Mountpoints)
		resp, err := daemon.Call(w.StateDir, daemon.Request{Op: "status"})
		var st daemon.Status
		switch {
		case err != nil:
			w.Answer = err.Error()
			if staleMount(w.Workspace) {
				w.Answer = "the daemon is gone (transport endpoint is not connected)"
			}
		case !resp.OK:
			w.Answer = resp.Error
		case json.Unmarshal(resp.Data, &st) != nil:
			w.Answer = "an answer aerfs cannot read"
		default:
			if st.Workspace != "" {
				w.Workspace = st.Workspace
			}
			w.PID, w.Sessions, w.Since, w.Version, w.Roots = st.PID, len(st.Sessions), st.Started, st.Version, st.Roots
		}
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Workspace < out[j].Workspace })
	return out
}

func runList(out io.Writer, asJSON bool) error {
	ws := mountedWorkspaces()
	if asJSON {
		return writeJSON(out, ws)
	}
	if len(ws) == 0 {
		fmt.Fprintln(os.Stderr, "aerfs: no aerfs mount in this mount table")
		return nil
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKSPACE\tDAEMON\tSESSIONS\tMOUNTED SINCE\tSTATE")
	for _, w := range ws {
		if w.Answer != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t%s\n", line(w.Workspace), line(w.StateDir))
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", line(w.Workspace), w.PID, w.Sessions, w.Since.UTC().Format("2006-01-02 15:04:05Z"), line(w.StateDir))
	}
	tw.Flush()
	for _, w := range ws {
		if w.Answer != "" {
			fmt.Fprintf(out, "%s: the daemon does not answer (%s); aerfs unmount %s clears the mount\n", line(w.Workspace), line(w.Answer), line(w.Workspace))
		}
		names := make([]string, 0, len(w.Roots))
		for n := range w.Roots {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(out, "%s: root %s at %s\n", line(w.Workspace), line(n), line(w.Roots[n]))
		}
	}
	return nil
}

// mountedElsewhere lists the workspaces other than ws the state directory
// is mounted at now (stale mounts left by a killed daemon not counted).
func mountedElsewhere(state, ws string) []string {
	var at []string
	for _, w := range mountedWorkspacesOf(state) {
		// The workspace's own mount, when it is still there, is stale
		// (a live one was refused before): mounting over it recovers it.
		if w.StateDir == state && w.Workspace != ws && !staleMount(w.Workspace) {
			at = append(at, w.Workspace)
		}
	}
	return at
}
