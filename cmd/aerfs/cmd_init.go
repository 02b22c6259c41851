package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/configs"
	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
)

func newInitCommand() *cobra.Command {
	var asJSON bool
	var agent string
	c := &cobra.Command{
		Use:   "init [--agent claude-code|codex|gemini|openclaw] WORKSPACE",
		Short: "Create the state directory of a workspace: default policy, evidence key",
		Long: `init creates the state directory of a workspace: the policy file, the
evidence log and its signing key. With --agent it writes the policy of that
agent: the agent's files in the workspace classed, and its directory in the
owner's home (~/.claude, ~/.codex, ~/.gemini, ~/.openclaw/skills) guarded
as a further root by the same daemon and log (docs/agents.md).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !asJSON {
				return runInitAgent(args[0], gopts.state, agent, cmd.OutOrStdout())
			}
			var discard bytes.Buffer
			if err := runInitAgent(args[0], gopts.state, agent, &discard); err != nil {
				return err
			}
			ws, _ := absClean(args[0])
			state := gopts.state
			if state == "" {
				state = findStateDir(ws)
			}
			state, _ = filepath.Abs(state)
			key, _ := os.ReadFile(filepath.Join(state, "evidence", "key.pub"))
			b, _ := json.Marshal(map[string]string{"workspace": ws, "state": state,
				"policy": filepath.Join(state, daemon.PolicyName), "key": strings.TrimSpace(string(key))})
			return writeJSONBytes(cmd.OutOrStdout(), b)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the workspace, state directory, policy and public key as JSON")
	c.Flags().StringVar(&agent, "agent", "", "write the policy of this agent ("+strings.Join(configs.Agents(), ", ")+"), its home directory guarded too")
	return c
}

func runInit(wsArg, state string, out interface{ Write([]byte) (int, error) }) error {
	return runInitAgent(wsArg, state, "", out)
}

func runInitAgent(wsArg, state, agent string, out interface{ Write([]byte) (int, error) }) error {
	pol := configs.DefaultPolicy
	if agent != "" {
		var err error
		if pol, err = configs.AgentPolicy(agent); err != nil {
			return fail(exitUsage, "agents are "+strings.Join(configs.Agents(), ", "), "%v", err)
		}
	}
	ws, err := absClean(wsArg)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return fail(exitNoWorkspace, "create it first, or check the path", "workspace %s does not exist or is not a directory", wsArg)
	}
	if state == "" {
		state = findStateDir(ws)
	}
	state, err = filepath.Abs(state)
	if err != nil {
		return err
	}
	if within(state, ws) {
		return fail(exitUsage, "choose a --state directory outside the workspace", "the state directory %s is inside the workspace: agents could reach it", state)
	}
	if _, err := os.Stat(filepath.Join(state, daemon.PolicyName)); err == nil {
		return fail(exitError, "it is ready: aerfs mount "+ws, "%s is already initialised", state)
	}
	roots, err := checkAgentRoots(pol, ws, state)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, daemon.PolicyName), pol, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, "workspace"), []byte(ws+"\n"), 0o600); err != nil {
		return err
	}
	if err := evidence.Init(state, "aerfs/"+filepath.Base(ws)); err != nil {
		return err
	}
	if os.Geteuid() == 0 {
		// Root starts a new log for the workspace on purpose: the next
		// mount pins this one (daemon/pin.go).
		rws := ws
		if r, err := filepath.EvalSymlinks(ws); err == nil {
			rws = r
		}
		if err := daemon.ForgetPin(rws); err != nil {
			return err
		}
	}
	if def := defaultStateDir(ws); def != state {
		// Leave a pointer where the workspace alone leads, so that later
		// commands find this state directory without --state.
		if err := os.MkdirAll(def, 0o700); err == nil {
			os.WriteFile(filepath.Join(def, stateLink), []byte(state+"\n"), 0o600)
		}
	}
	fmt.Fprintf(out, "initialised %s\nstate:  %s\npolicy: %s\n", ws, state, filepath.Join(state, daemon.PolicyName))
	for _, r := range roots {
		fmt.Fprintf(out, "root:   %s (%s%s/…)\n", r.Dir, policy.RootPrefix, r.Name)
	}
	if agent != "" {
		fmt.Fprintf(out, "next:   aerfs mount %s; then run the agent with: aerfs run --agent %s -- CMD\n", ws, agent)
	}
	return nil
}

// checkAgentRoots parses the policy about to be written and resolves its
// roots for this workspace and state directory: an overlap is refused now,
// not at the first mount.
func checkAgentRoots(pol []byte, ws, state string) ([]policy.Root, error) {
	p, err := policy.Parse(daemon.PolicyName, pol)
	if err != nil {
		return nil, err
	}
	if len(p.Roots()) == 0 {
		return nil, nil
	}
	rs, err := p.ResolveRoots(daemon.OwnerHome(ws), ws, state)
	if err != nil {
		return nil, fail(exitUsage, "choose a workspace and a --state directory outside the agent's home directories (docs/agents.md)", "%v", err)
	}
	return rs, nil
}
