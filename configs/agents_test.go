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
