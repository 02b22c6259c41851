package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// examples is the Example: block of each command's --help, by command path.
// They live here, together, so that they read as one manual and a test can
// check that no command is without one (TestEveryCommandHasAnExample).
// Commands that set their own Example keep it.
var examples = map[string]string{
	"aerfs": `  aerfs init ~/agent && aerfs mount ~/agent
  aerfs run --principal WEB --session browse -- python3 fetch.py
  aerfs log --type verdict`,
	"aerfs init": `  aerfs init ~/agent
  aerfs init --state /var/lib/aerfs/agent ~/agent`,
	"aerfs mount": `  aerfs mount ~/agent
  aerfs mount --state /var/lib/aerfs/agent ~/agent
  aerfs mount --foreground --debug ~/agent     # serve in this terminal, log every request`,
	"aerfs unmount": `  aerfs unmount ~/agent`,
	"aerfs gc": `  aerfs gc --dry-run
  aerfs gc --keep-last 20 --keep-within 720h
  aerfs gc --keep-last 3 --keep-within 0 --max-size 500M`,
	"aerfs run": `  aerfs run --principal USER --session agent -- claude
  aerfs run --principal WEB --session browse -- python3 fetch.py https://example.com
  aerfs run -- sh     # a new session under your own principal`,
	"aerfs status": `  aerfs status
  aerfs status --json | jq '.sessions[] | select(.quarantined)'
  aerfs status --state /var/lib/aerfs/agent`,
	"aerfs log": `  aerfs log
  aerfs log --type verdict --session browse
  aerfs log --json --path MEMORY.md | jq .record.meta.rule
  aerfs log -f`,
	"aerfs taint": `  aerfs taint --session agent WEB_DERIVED
  aerfs taint --session agent INJECTION_SUSPECT TOOL_OUTPUT`,
	"aerfs promote": `  aerfs promote sessions/agent/notes.md`,
	"aerfs authority": `  aerfs authority sessions/agent/summary.md
  aerfs authority --json out/payment.json | jq .may.exec.outcome`,
	"aerfs attest": `  aerfs run --principal TOOL_AUTH --session erp-registry -- aerfs attest out/payment.json`,
	"aerfs authorize": `  aerfs authorize tools/deploy.sh --for exec --ttl 10m
  aerfs authorize --check "$TOKEN" out/payment.json --for exec     # an executor spends it`,
	"aerfs policy": `  aerfs policy check ~/.local/state/aerfs/agent-1a2b/aerfs.yaml`,
	"aerfs policy check": `  aerfs policy check aerfs.yaml
  aerfs policy check configs/aerfs.yaml && echo valid`,
	"aerfs key": `  aerfs key > aerfs.pub
  aerfs verify --key @aerfs.pub evidence.zip`,
	"aerfs export": `  aerfs export -o evidence.zip
  aerfs export -o incident/ --since 2h --session browse
  aerfs export -o memory.zip --path MEMORY.md`,
	"aerfs verify": `  aerfs verify --key @aerfs.pub evidence.zip
  aerfs verify --state ~/.local/state/aerfs/agent-1a2b`,
	"aerfs prove": `  aerfs prove 3f2a9c1b
  aerfs prove 42`,
	"aerfs history": `  aerfs history MEMORY.md
  aerfs history skills/notes/SKILL.md`,
	"aerfs diff": `  aerfs diff MEMORY.md
  aerfs diff MEMORY.md --from 2 --to 5`,
	"aerfs scope": `  aerfs scope skills/x/SKILL.md
  aerfs scope notes/fetched-page.txt`,
	"aerfs pending": `  aerfs pending`,
	"aerfs approve": `  aerfs pending && aerfs approve 7c1e90d2`,
	"aerfs reject":  `  aerfs reject 7c1e90d2`,
	"aerfs snapshot": `  aerfs snapshot --label before-upgrade
  aerfs snapshot list`,
	"aerfs snapshot list": `  aerfs snapshot list`,
	"aerfs restore": `  aerfs restore MEMORY.md --to 3
  aerfs restore --snapshot 1a2b3c4d
  aerfs restore --before 10m --dry-run
  aerfs restore --contaminated-by skills/x/SKILL.md`,
	"aerfs completion": `  aerfs completion bash > /etc/bash_completion.d/aerfs
  aerfs completion zsh > "${fpath[1]}/_aerfs"`,
	"aerfs completion bash":       `  aerfs completion bash > /etc/bash_completion.d/aerfs`,
	"aerfs completion zsh":        `  aerfs completion zsh > "${fpath[1]}/_aerfs"`,
	"aerfs completion fish":       `  aerfs completion fish > ~/.config/fish/completions/aerfs.fish`,
	"aerfs completion powershell": `  aerfs completion powershell | Out-String | Invoke-Expression`,
	"aerfs session": `  aerfs session list
  aerfs session release agent
  aerfs session end browse`,
	"aerfs session list": `  aerfs session list
  aerfs session list --all   # the sessions that ended too, from the log
  aerfs session list --json | jq '.[] | select(.quarantined) | .id'`,
	"aerfs session release": `  aerfs session release agent`,
	"aerfs session end":     `  aerfs session end browse`,
	"aerfs why": `  aerfs why --session agent
  aerfs why MEMORY.md
  cat .aerfs/status     # what an agent reads about itself`,
	"aerfs edit": `  aerfs edit SOUL.md
  EDITOR=nano aerfs edit IDENTITY.md
  EDITOR='sed -i s/old/new/' aerfs edit --yes SOUL.md`,
	"aerfs adopt": `  aerfs why SOUL.md && aerfs diff SOUL.md && aerfs adopt SOUL.md`,
	"aerfs debug": `  aerfs debug pprof heap -o heap.pprof && go tool pprof -top heap.pprof`,
}

// addExamples fills in the Example: block of every command that has none.
func addExamples(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Example == "" {
			c.Example = examples[c.CommandPath()]
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// commandsWithoutExample lists the commands (help aside) whose --help
// shows no example.
func commandsWithoutExample(root *cobra.Command) []string {
	var out []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return // not for users: the daemon's own child
		}
		if c.Name() != "help" && strings.TrimSpace(c.Example) == "" {
			out = append(out, c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	return out
}
