package fakemodel

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func post(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The step is chosen by the number of tool results in the request and
// rendered in the vocabulary of the tools offered.
func TestScriptedTurns(t *testing.T) {
	s, err := Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetScript("/ws", []Step{
		{Kind: Write, Path: "a.txt", Content: "x\n"},
		{Kind: Edit, Path: "a.txt", Old: "x\n", New: "y\n"},
		{Kind: Final, Text: "DONE"},
	})

	// Anthropic, first turn: Claude Code's Write with an absolute path.
	out := post(t, s.URL+"/v1/messages", `{"model":"m","stream":true,"tools":[{"name":"Write"},{"name":"Edit"}],
		"messages":[{"role":"user","content":"go"}]}`)
	for _, want := range []string{"event: message_start", `"name":"Write"`, `\"file_path\":\"/ws/a.txt\"`, `"stop_reason":"tool_use"`, "event: message_stop"} {
		if !strings.Contains(out, want) {
			t.Errorf("anthropic answer lacks %s:\n%s", want, out)
		}
	}
	// A side request without tools does not advance the script.
	if out := post(t, s.URL+"/v1/messages", `{"model":"m","messages":[{"role":"user","content":"title?"}]}`); !strings.Contains(out, `"text":"ok"`) {
		t.Errorf("side request: %s", out)
	}

	// Chat Completions with one tool result: OpenClaw's edit.
	out = post(t, s.URL+"/v1/chat/completions", `{"model":"m","stream":true,"tools":[{"type":"function","function":{"name":"edit"}}],
		"messages":[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[]},{"role":"tool","content":"ok"}]}`)
	if !strings.Contains(out, `"name":"edit"`) || !strings.Contains(out, `oldText`) || !strings.Contains(out, "data: [DONE]") {
		t.Errorf("chat answer:\n%s", out)
	}

	// Responses with two tool results: the final text.
	out = post(t, s.URL+"/v1/responses", `{"model":"m","tools":[{"type":"custom","name":"apply_patch"}],
		"input":[{"type":"message"},{"type":"custom_tool_call_output"},{"type":"function_call_output"}]}`)
	if !strings.Contains(out, `"text":"DONE"`) || !strings.Contains(out, "response.completed") {
		t.Errorf("responses answer:\n%s", out)
	}
	// Responses, first turn: Codex's free-form apply_patch.
	out = post(t, s.URL+"/v1/responses", `{"model":"m","tools":[{"type":"custom","name":"apply_patch"}],"input":[]}`)
	if !strings.Contains(out, `"type":"custom_tool_call"`) || !strings.Contains(out, `*** Add File: a.txt\n+x\n`) {
		t.Errorf("responses apply_patch:\n%s", out)
	}
	if s.Turns() != 4 || len(s.Errors()) != 0 {
		t.Errorf("turns %d, errors %v", s.Turns(), s.Errors())
	}
}

// Gemini CLI's web_fetch asks the API to fetch through its urlContext
// tool first: the fake API returns no content (so that the client fetches
// the page itself) and the script does not advance.
func TestGeminiURLContext(t *testing.T) {
	s, err := Start("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetScript("/ws", []Step{{Kind: Fetch, URL: "https://198.20.0.2/notes.html"}, {Kind: Final, Text: "DONE"}})
	out := post(t, s.URL+"/v1beta/models/fake-model:generateContent", `{"contents":[{"role":"user","parts":[{"text":"go"}]}],
		"tools":[{"functionDeclarations":[{"name":"web_fetch"},{"name":"run_shell_command"}]}]}`)
	if !strings.Contains(out, `"name":"web_fetch"`) || !strings.Contains(out, `Return the text of https://198.20.0.2/notes.html`) {
		t.Errorf("web_fetch call:\n%s", out)
	}
	out = post(t, s.URL+"/v1beta/models/gemini-3-flash-preview:generateContent", `{"contents":[{"role":"user","parts":[{"text":"<authorized_urls>"}]}],
		"tools":[{"urlContext":{}}]}`)
	if !strings.Contains(out, `"parts":[{"text":""}]`) {
		t.Errorf("urlContext request answered with content:\n%s", out)
	}
	if s.Turns() != 1 || len(s.Errors()) != 0 {
		t.Errorf("turns %d, errors %v", s.Turns(), s.Errors())
	}
}
