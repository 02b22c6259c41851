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
)

func newInitCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "init WORKSPACE",
		Short: "Create the state directory of a workspace: default policy, evidence key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !asJSON {
				return runInit(args[0], gopts.state, cmd.OutOrStdout())
			}
			var discard bytes.Buffer
			if err := runInit(args[0], gopts.state, &discard); err != nil {
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
			_, err := fmt.Fprintln(cmd.OutOrStdout(), string(b))
			return err
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the workspace, state directory, policy and public key as JSON")
	return c
}

func runInit(wsArg, state string, out interface{ Write([]byte) (int, error) }) error {
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
	if err := os.MkdirAll(state, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, daemon.PolicyName), configs.DefaultPolicy, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(state, "workspace"), []byte(ws+"\n"), 0o600); err != nil {
		return err
	}
	if err := evidence.Init(state, "aerfs/"+filepath.Base(ws)); err != nil {
		return err
	}
	if def := defaultStateDir(ws); def != state {
		// Leave a pointer where the workspace alone leads, so that later
		// commands find this state directory without --state.
		if err := os.MkdirAll(def, 0o700); err == nil {
			os.WriteFile(filepath.Join(def, stateLink), []byte(state+"\n"), 0o600)
		}
	}
	fmt.Fprintf(out, "initialised %s\nstate:  %s\npolicy: %s\n", ws, state, filepath.Join(state, daemon.PolicyName))
	return nil
}
