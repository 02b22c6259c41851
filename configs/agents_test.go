package configs_test

import (
	"strings"
	"testing"

	"github.com/aerfs/aerfs/configs"
	"github.com/aerfs/aerfs/policy"
)

func TestAgentPolicies(t *testing.T) {
	want := map[string]struct {
		root   string
		memory string // a path in the root that is memory or control
		wsMem  string // a workspace path the profile adds
	}{
		"claude-code": {"claude", "projects/-w/memory/a.md", "CLAUDE.local.md"},
		"codex":       {"codex", "AGENTS.md", "AGENTS.override.md"},
		"gemini":      {"gemini", "GEMINI.md", "GEMINI.md"},
		"openclaw":    {"openclaw-skills", "x/SKILL.md", "BOOTSTRAP.md"},
	}
	if got := strings.Join(configs.Agents(), ","); got != "claude-code,codex,gemini,openclaw" {
		t.Errorf("Agents() = %s", got)
	}
	for name, w := range want {
		b, err := configs.AgentPolicy(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p, err := policy.Parse(name+".yaml", b)
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, b)
		}
		r, ok := p.Root(w.root)
		if !ok {
			t.Fatalf("%s: no root %s", name, w.root)
		}
		if root, err := configs.AgentRoot(name); err != nil || root != w.root {
			t.Errorf("AgentRoot(%s) = %q, %v; want %q", name, root, err, w.root)
		}
		// The workspace classes are the default's: it covers every
		// known client's files.
		for _, c := range []policy.Class{policy.Identity, policy.Memory, policy.Control, policy.Secret} {
			if got, want := strings.Join(p.Patterns(c), " "), strings.Join(policy.Default().Patterns(c), " "); got != want {
				t.Errorf("%s: %v patterns differ from the default:\n%s\n%s", name, c, got, want)
			}
		}
		if c, _, _ := r.Policy.Classify(w.memory); !c.Guarded() {
			t.Errorf("%s: @%s/%s is %v", name, w.root, w.memory, c)
		}
		if c, _, _ := p.Classify(w.wsMem); c != policy.Memory {
			t.Errorf("%s: workspace %s is %v", name, w.wsMem, c)
		}
		// The rest of the default policy is kept, comments included.
		if !strings.Contains(string(b), "executables:") || !strings.Contains(string(b), "{match: curl, principal: WEB}") ||
			!strings.Contains(string(b), "# Agent profile:") {
			t.Errorf("%s: the written policy lost parts of the default:\n%s", name, b)
		}
		if c, _, _ := p.Classify("SOUL.md"); c != policy.Identity {
			t.Errorf("%s: SOUL.md is %v", name, c)
		}
		// The profile's network block replaces the default's, once.
		if strings.Count(string(b), "\nnetwork:\n") != 1 || p.SandboxNetwork() != policy.NetworkProxy || p.SecretEgress() {
			t.Errorf("%s: network section:\n%s", name, b)
		}
		if c, _ := p.HostChannel("example.org", 443, nil); c != policy.ChannelWeb {
			t.Errorf("%s: example.org is %v", name, c)
		}
	}
	for name, hc := range map[string][3]string{
		"claude-code": {"api.anthropic.com", "statsig.anthropic.com", "o1.ingest.sentry.io"},
		"codex":       {"chatgpt.com", "auth.openai.com", ""},
		"gemini":      {"cloudcode-pa.googleapis.com", "oauth2.googleapis.com", "play.googleapis.com"},
		"openclaw":    {"openrouter.ai", "", ""},
	} {
		b, _ := configs.AgentPolicy(name)
		p, err := policy.Parse(name+".yaml", b)
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []policy.NetChannel{policy.ChannelModel, policy.ChannelTrusted, policy.ChannelDeny} {
			if hc[i] == "" {
				continue
			}
			if c, _ := p.HostChannel(hc[i], 443, nil); c != want {
				t.Errorf("%s: %s is %v, want %v", name, hc[i], c, want)
			}
		}
	}
	if _, err := configs.AgentPolicy("../aerfs"); err == nil {
		t.Error("AgentPolicy accepted a path")
	}
	if _, err := configs.AgentPolicy("cursor"); err == nil || !strings.Contains(err.Error(), "claude-code") {
		t.Errorf("unknown agent: %v", err)
	}
	if _, err := configs.AgentRoot("../aerfs"); err == nil {
		t.Error("AgentRoot accepted a path")
	}
}

// TestAgentMachinery: each profile names its client's own machinery
// narrowly: the files the client writes and runs or loads for itself, not
// the owner's configuration beside them.
func TestAgentMachinery(t *testing.T) {
	for _, c := range []struct {
		agent, root string
		yes, no     []string
	}{
		{"claude-code", "claude",
			[]string{"shell-snapshots/snapshot-bash-1795747531823-0n92ia.sh", "plugins/store/cc-plugin-agents-md_builtin-b049b47b3618.json",
				"plugins/store/cc-plugin-agents-md_builtin-b049b47b3618.json.tmp.2cfcea37",
				"session-env/5f1c2d3e-0000-4000-8000-000000000001/sessionstart-hook-0.sh"},
			[]string{"settings.json", "CLAUDE.md", "plugins/installed_plugins.json", "plugins/known_marketplaces.json",
				"plugins/cache/m/p/1.0.0/hooks/hooks.json", "plugins/marketplaces/m/plugins/p/skills/s/SKILL.md", "plugins/store/x/y.json",
				"skills/s/SKILL.md", "hooks/h.sh", "projects/p/memory/m.md", "shell-snapshots/x/y.sh", "keybindings.json"}},
		{"codex", "codex",
			[]string{"skills/.system/imagegen/SKILL.md", "skills/.system/imagegen/scripts/image_gen.py", "skills/.system/.codex-system-skills.marker",
				"shell_snapshots/01a21ae4-e88f-7700-9a27-2541de850dc2.tmp-1795747539110090527"},
			[]string{"skills/mine/SKILL.md", "config.toml", "AGENTS.md", "rules/default.rules", "prompts/p.md", "auth.json",
				"hooks.json", "plugins/cache/openai-curated/github/1.0.0/.mcp.json", ".tmp/plugins/plugins/x/SKILL.md"}},
		{"openclaw", "openclaw-skills", nil, []string{"x/SKILL.md"}},
	} {
		b, err := configs.AgentPolicy(c.agent)
		if err != nil {
			t.Fatal(err)
		}
		p, err := policy.Parse(c.agent+".yaml", b)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := p.Root(c.root)
		for _, rel := range c.yes {
			if !r.Policy.Machinery(rel) {
				t.Errorf("%s: @%s/%s is not machinery", c.agent, c.root, rel)
			}
		}
		for _, rel := range c.no {
			if r.Policy.Machinery(rel) {
				t.Errorf("%s: @%s/%s is machinery", c.agent, c.root, rel)
			}
		}
		// What is machinery keeps its class: control content there is
		// still guarded (versions, taint), only the act gate's answer for
		// an untainted agent's content changes.
		for _, rel := range c.yes {
			if strings.HasPrefix(rel, "plugins/") || strings.HasPrefix(rel, "skills/") || strings.HasPrefix(rel, "session-env/") {
				if cl, _, _ := r.Policy.Classify(rel); cl != policy.Control {
					t.Errorf("%s: machinery @%s/%s is %v, want control", c.agent, c.root, rel, cl)
				}
			}
		}
	}
}
