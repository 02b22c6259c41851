package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/aerfs/aerfs/configs"
	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/policy"
)

// The further roots of a workspace's policy (docs/agents.md): a file in
// one is named in records, and on the command line, as "@name/rel"; its
// absolute path, or "~/…" in the owner's home, is accepted too.

// policyRoots returns the roots of t's policy with their directories, or
// nil when there are none or the policy cannot be read.
func policyRoots(t *target) []policy.Root {
	if t == nil || t.stateDir == "" {
		return nil
	}
	pol, err := policy.Load(filepath.Join(t.stateDir, daemon.PolicyName))
	if err != nil && t.mounted {
		// A root daemon's policy is its own (and a confined session
		// does not see the state directory): the daemon serving it
		// says which roots it guards.
		return daemonRoots(t)
	}
	if err != nil || len(pol.Roots()) == 0 {
		return nil
	}
	home := ""
	if t.workspace != "" {
		home = daemon.OwnerHome(t.workspace)
	}
	rs, err := pol.ResolveRoots(home, t.workspace, "")
	if err != nil {
		return nil
	}
	return rs
}

// daemonRoots asks the daemon serving t for the further roots it guards,
// nil when none serves it.
func daemonRoots(t *target) []policy.Root {
	resp, err := daemon.Call(t.stateDir, daemon.Request{Op: "status"})
	if err != nil || !resp.OK {
		return nil
	}
	var st daemon.Status
	if json.Unmarshal(resp.Data, &st) != nil {
		return nil
	}
	var out []policy.Root
	for name, dir := range st.Roots {
		out = append(out, policy.Root{Name: strings.TrimPrefix(name, policy.RootPrefix), Dir: dir})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// rootRel turns a FILE argument inside a further root (absolute, or
// "~/…") into its record path "@name/rel".
func rootRel(t *target, arg string) (string, bool) {
	if !filepath.IsAbs(arg) && !strings.HasPrefix(arg, "~/") {
		return "", false
	}
	rs := policyRoots(t)
	if len(rs) == 0 {
		return "", false
	}
	p := arg
	if rest, ok := strings.CutPrefix(arg, "~"); ok && t.workspace != "" {
		p = daemon.OwnerHome(t.workspace) + rest
	}
	p = filepath.Clean(p)
	for _, r := range rs {
		cand := []string{p}
		if a, err := absClean(p); err == nil && a != p {
			cand = append(cand, a)
		}
		for _, c := range cand {
			if within(c, r.Dir) {
				rel := strings.TrimPrefix(strings.TrimPrefix(c, r.Dir), "/")
				if rel == "" {
					return policy.RootPrefix + r.Name, true
				}
				return policy.RootPrefix + r.Name + "/" + path.Clean(filepath.ToSlash(rel)), true
			}
		}
	}
	return "", false
}

// recordFile is the path, as the owner reaches it now, of a record path:
// the workspace's, or a further root's ("@name/rel"); "" when the root is
// not known.
func recordFile(t *target, rel string) string {
	name, rest, ok := strings.Cut(strings.TrimPrefix(rel, policy.RootPrefix), "/")
	if !strings.HasPrefix(rel, policy.RootPrefix) {
		return filepath.Join(t.workspace, filepath.FromSlash(rel))
	}
	if !ok {
		rest = ""
	}
	for _, r := range policyRoots(t) {
		if r.Name == name {
			return filepath.Join(r.Dir, filepath.FromSlash(rest))
		}
	}
	return ""
}

// rootDirs lists the directories of the further roots of t's policy: a
// confined session may write in them (the mount decides each change).
func rootDirs(t *target) []string {
	var out []string
	for _, r := range policyRoots(t) {
		out = append(out, r.Dir)
	}
	return out
}

// checkRunAgent validates aerfs run --agent, and warns when the policy
// does not guard the agent's home directory.
func checkRunAgent(t *target, agent string) error {
	if agent == "" {
		return nil
	}
	root, err := configs.AgentRoot(agent)
	if err != nil {
		return fail(exitUsage, "agents are "+strings.Join(configs.Agents(), ", "), "unknown agent %q", agent)
	}
	for _, r := range policyRoots(t) {
		if r.Name == root {
			return nil
		}
	}
	if v := os.Getenv(mountNSEnv); v != "" && v != mountNS() {
		return nil // said once, by the aerfs run that made the namespaces
	}
	fmt.Fprintf(os.Stderr, "aerfs: warning: the policy guards no home directory of %s (no root %q): its memory there is open; see aerfs init --agent %s and docs/agents.md\n", agent, root, agent)
	return nil
}

// agentEnv is what aerfs run --agent adds to the client's environment. The
// clients find their home directories where they always do (~/.claude,
// ~/.codex, ~/.gemini, ~/.openclaw), which the mount covers; AERFS_AGENT
// tells scripts and hooks which client runs.
func agentEnv(agent string) []string {
	if agent == "" {
		return nil
	}
	return []string{"AERFS_AGENT=" + agent}
}

// mountWorkspace is the workspace of the aerfs mount m: its mountpoint, or,
// for a further root (~/.claude), the workspace its state directory
// belongs to.
func mountWorkspace(m *daemon.MountInfo) string {
	b, err := os.ReadFile(filepath.Join(m.StateDir, "workspace"))
	if ws := strings.TrimSpace(string(b)); err == nil && filepath.IsAbs(ws) && ws != m.Mountpoint {
		if w := daemon.FindMount(ws); w != nil && w.Mountpoint == ws && w.StateDir == m.StateDir {
			return ws
		}
	}
	return m.Mountpoint
}

// printRoots prints the further roots of a status, sorted.
func printRoots(out io.Writer, roots map[string]string) {
	names := make([]string, 0, len(roots))
	for n := range roots {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(out, "root:        %s (mounted; records %s/…)\n", roots[n], n)
	}
}
