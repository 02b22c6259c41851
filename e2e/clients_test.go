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
	command func(t *testing.T, c *client, home, prompt string) ([]string, []string)
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

func (c *client) commandFor(t *testing.T, home, prompt string) ([]string, []string) {
	return c.command(t, c, home, prompt)
}

var claude = &client{
	name:   "claude-code",
	bin:    "claude/node_modules/.bin/claude",
	memory: "CLAUDE.md",
	command: func(t *testing.T, c *client, home, prompt string) ([]string, []string) {
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
	command: func(t *testing.T, c *client, home, prompt string) ([]string, []string) {
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

var clients = []*client{claude, codex, openclaw}

var openclaw = &client{
	name:   "openclaw",
	bin:    "openclaw/node_modules/.bin/openclaw",
	memory: "AGENTS.md",
	command: func(t *testing.T, c *client, home, prompt string) ([]string, []string) {
		t.Fatal("openclaw: not configured yet")
		return nil, nil
	},
}
