package main

import (
	"encoding/json"
	"strings"

	"github.com/spf13/cobra"

	"github.com/aerfs/aerfs/configs"
	"github.com/aerfs/aerfs/daemon"
	"github.com/aerfs/aerfs/evidence"
	"github.com/aerfs/aerfs/policy"
)

// Shell completion offers the values aerfs knows: principals and taint
// flags from the policy package, session ids from the daemon, record and
// pending ids from the evidence log. It is wired here, in one place, by
// flag and command name, so commands do not repeat it.

var principalNames = []string{"SYS", "USER", "TOOL_AUTH", "TOOL_UNAUTH", "WEB", "SKILL", "CHANNEL", "EXTERNAL"}

func completeFixed(vals []string, help string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, v := range vals {
			if strings.HasPrefix(v, strings.ToUpper(toComplete)) {
				out = append(out, cobra.CompletionWithDesc(v, help))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeLower completes lower-case values such as agent names.
func completeLower(vals []string, help string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, v := range vals {
			if strings.HasPrefix(v, toComplete) {
				out = append(out, cobra.CompletionWithDesc(v, help))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// taintNames lists every taint flag the policy knows.
func taintNames() []string { return policy.AllTaint.Names() }

// completeTaint completes taint flags not already on the command line.
func completeTaint(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	given := map[string]bool{}
	for _, a := range args {
		given[strings.ToUpper(a)] = true
	}
	var out []cobra.Completion
	for _, n := range taintNames() {
		if !given[n] && strings.HasPrefix(n, strings.ToUpper(toComplete)) {
			out = append(out, n)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeSessions asks the daemon of the current workspace for its
// sessions.
func completeSessions(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	t, err := findTarget(true)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	resp, err := daemon.Call(t.stateDir, daemon.Request{Op: "status"})
	if err != nil || !resp.OK {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var st daemon.Status
	if json.Unmarshal(resp.Data, &st) != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, s := range st.Sessions {
		if strings.HasPrefix(s.ID, toComplete) {
			desc := s.Principal
			if len(s.Taint) > 0 {
				desc += " tainted " + strings.Join(s.Taint, "|")
			}
			out = append(out, cobra.CompletionWithDesc(s.ID, desc))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completePending offers the ids of quarantined content awaiting a
// decision.
func completePending(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	t, err := findTarget(false)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	x, err := recoveryIndex(t.stateDir)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, p := range x.Pending() {
		id := p.ID
		if len(id) > 12 {
			id = id[:12]
		}
		if strings.HasPrefix(id, toComplete) {
			out = append(out, cobra.CompletionWithDesc(id, p.Principal+" "+p.Path))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeRecords offers the ids of the latest records (most recent first).
func completeRecords(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	t, err := findTarget(false)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	type item struct{ id, desc string }
	var all []item
	evidence.ReadAll(t.stateDir, func(idx int64, id string, r *evidence.Record) error {
		if strings.HasPrefix(id, toComplete) {
			all = append(all, item{id[:12], string(r.Type) + " " + r.Meta.Path})
		}
		return nil
	})
	var out []cobra.Completion
	for i := len(all) - 1; i >= 0 && len(out) < 50; i-- {
		out = append(out, cobra.CompletionWithDesc(all[i].id, all[i].desc))
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
}

// addCompletions registers the dynamic completions on the command tree.
func addCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if f := c.Flags().Lookup("principal"); f != nil {
			c.RegisterFlagCompletionFunc("principal", completeFixed(principalNames, "principal"))
		}
		if f := c.Flags().Lookup("session"); f != nil {
			c.RegisterFlagCompletionFunc("session", completeSessions)
		}
		if f := c.Flags().Lookup("agent"); f != nil {
			c.RegisterFlagCompletionFunc("agent", completeLower(configs.Agents(), "agent profile"))
		}
		if f := c.Flags().Lookup("sandbox"); f != nil {
			c.RegisterFlagCompletionFunc("sandbox", completeLower([]string{"on", "off"}, "confinement"))
		}
		switch c.CommandPath() {
		case "aerfs taint":
			c.ValidArgsFunction = completeTaint
		case "aerfs approve", "aerfs reject":
			c.ValidArgsFunction = completePending
		case "aerfs session end", "aerfs session release":
			c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return completeSessions(cmd, args, toComplete)
			}
		case "aerfs prove":
			c.ValidArgsFunction = completeRecords
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}
