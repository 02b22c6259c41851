// Package fakemodel is a scripted language-model server for end-to-end tests
// of real agent clients. It speaks the Anthropic Messages API (Claude Code)
// and the OpenAI Chat Completions and Responses APIs (OpenClaw, Codex), each
// with streaming, and answers every request from a script: the n-th model
// turn of a conversation is the script's n-th step, where n is the number of
// tool results the request carries. A step is an action in generic terms
// (write a file, edit a file, run a shell command, answer with text) which
// the server renders in the requesting client's own tool vocabulary, read
// from the tool list of the request. So each client's own tool code does the
// file operations.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// Kind is what a step asks for.
type Kind int

const (
	Final Kind = iota // answer with Text and end the turn
	Write             // create or replace Path with Content
	Edit              // replace Old by New in Path
	Read              // read Path
	Shell             // run Command
	// Fetch fetches URL with the client's own in-process web tool (Claude
	// Code's WebFetch, OpenClaw's and Gemini CLI's web_fetch); a client
	// without one runs Command in its shell tool instead.
	Fetch
)

// Step is one model turn.
type Step struct {
	Kind    Kind
	Path    string // relative to the client's working directory
	Content string
	Old     string
	New     string
	Command string
	Text    string
	URL     string
}

// Server is a running fake model.
type Server struct {
	URL string // http://127.0.0.1:PORT

	mu     sync.Mutex
	script []Step
	dir    string // the client's working directory: absolute paths for tools that need them
	log    io.Writer
	seq    int
	reqs   int
	tools  map[string]bool // every tool name a client offered (diagnostics)
	lis    net.Listener
	srv    *http.Server
	turns  int // tool-bearing requests answered (the agent's turns)
	errors []string
	bodies []string // request bodies since the last SetScript (Saw)
}

// Start listens on 127.0.0.1 on a random port. Requests and answers are
// appended to logPath when it is not "".
func Start(logPath string) (*Server, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + lis.Addr().String(), lis: lis, log: io.Discard, tools: map[string]bool{}}
	if logPath != "" {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			lis.Close()
			return nil, err
		}
		s.log = f
	}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.handle), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(lis)
	return s, nil
}

// Close stops the server.
func (s *Server) Close() {
	s.srv.Close()
	if c, ok := s.log.(io.Closer); ok {
		c.Close()
	}
}

// SetScript replaces the script; dir is the client's working directory.
func (s *Server) SetScript(dir string, steps []Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = steps
	s.dir = dir
	s.turns = 0
	s.errors = nil
	s.bodies = nil
}

// Saw reports whether a request since the last SetScript carried sub: what
// a tool gave the client reaches the model in the next request.
func (s *Server) Saw(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.bodies {
		if strings.Contains(b, sub) {
			return true
		}
	}
	return false
}

// Turns is the number of agent requests (those offering tools) answered
// since the last SetScript.
func (s *Server) Turns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turns
}

// Errors lists requests the server could not answer from the script (a
// tool the client did not offer, an unknown endpoint).
func (s *Server) Errors() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.errors...)
}

// Tools lists the tool names the clients offered.
func (s *Server) Tools() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n := range s.tools {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (s *Server) logf(format string, args ...any) {
	fmt.Fprintf(s.log, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05.000")}, args...)...)
}

func (s *Server) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.errors = append(s.errors, msg)
	s.logf("ERROR %s", msg)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs++
	s.bodies = append(s.bodies, string(body))
	s.logf("> %s %s %s", r.Method, r.URL.Path, truncate(string(body), 200000))
	p := r.URL.Path
	switch {
	case strings.HasSuffix(p, "/messages/count_tokens"):
		writeJSON(w, map[string]any{"input_tokens": 100})
	case strings.HasSuffix(p, "/messages"):
		s.anthropic(w, body)
	case strings.HasSuffix(p, "/chat/completions"):
		s.chat(w, body)
	case strings.HasSuffix(p, "/responses"):
		s.responses(w, body)
	case strings.HasSuffix(p, ":countTokens"):
		writeJSON(w, map[string]any{"totalTokens": 100})
	case strings.HasSuffix(p, ":streamGenerateContent"), strings.HasSuffix(p, ":generateContent"):
		s.gemini(w, body, strings.HasSuffix(p, ":streamGenerateContent"))
	case strings.HasSuffix(p, "/models"):
		writeJSON(w, map[string]any{"object": "list", "data": []any{
			map[string]any{"id": "fake-model", "object": "model", "created": 0, "owned_by": "aerfs", "type": "model", "display_name": "fake-model"},
		}, "models": []any{}})
	default:
		s.logf("< 404 for %s", p)
		// Everything else (telemetry, feature flags, account look-ups) is
		// answered with an empty object: a client must not depend on it.
		writeJSON(w, map[string]any{})
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// step returns the step for a conversation carrying n tool results.
func (s *Server) step(n int) Step {
	if n < len(s.script) {
		return s.script[n]
	}
	return Step{Kind: Final, Text: "Done."}
}

func (s *Server) abs(rel string) string {
	if strings.HasPrefix(rel, "/") || s.dir == "" {
		return rel
	}
	return s.dir + "/" + rel
}

// call is a tool call rendered for one client.
type call struct {
	name   string
	args   map[string]any // JSON arguments (function tools)
	custom string         // free-form input (Codex's custom apply_patch)
	isCust bool
}

func has(tools map[string]bool, names ...string) string {
	for _, n := range names {
		if tools[n] {
			return n
		}
	}
	return ""
}

// render turns a step into a tool call among the offered tools.
func (s *Server) render(st Step, tools map[string]bool, custom map[string]bool) (call, error) {
	switch st.Kind {
	case Write:
		if n := has(tools, "Write"); n != "" {
			return call{name: n, args: map[string]any{"file_path": s.abs(st.Path), "content": st.Content}}, nil
		}
		if n := has(tools, "write"); n != "" {
			return call{name: n, args: map[string]any{"path": st.Path, "content": st.Content}}, nil
		}
		if tools["apply_patch"] {
			return s.patch(custom["apply_patch"], addPatch(st.Path, st.Content)), nil
		}
		if n := has(tools, "write_file"); n != "" {
			return call{name: n, args: map[string]any{"file_path": s.abs(st.Path), "content": st.Content}}, nil
		}
	case Edit:
		if n := has(tools, "Edit"); n != "" {
			return call{name: n, args: map[string]any{"file_path": s.abs(st.Path), "old_string": st.Old, "new_string": st.New}}, nil
		}
		if n := has(tools, "edit"); n != "" {
			return call{name: n, args: map[string]any{"path": st.Path, "edits": []any{map[string]any{"oldText": st.Old, "newText": st.New}}}}, nil
		}
		if tools["apply_patch"] {
			return s.patch(custom["apply_patch"], updatePatch(st.Path, st.Old, st.New)), nil
		}
		if n := has(tools, "replace"); n != "" {
			return call{name: n, args: map[string]any{"file_path": s.abs(st.Path), "old_string": st.Old, "new_string": st.New,
				"instruction": "apply the edit"}}, nil
		}
	case Fetch:
		if n := has(tools, "WebFetch"); n != "" {
			return call{name: n, args: map[string]any{"url": st.URL, "prompt": "Return the page's text."}}, nil
		}
		if n := has(tools, "web_fetch"); n != "" && tools["run_shell_command"] {
			// Gemini CLI's web_fetch takes a prompt naming the URLs.
			return call{name: n, args: map[string]any{"prompt": "Return the text of " + st.URL}}, nil
		}
		if n := has(tools, "web_fetch"); n != "" {
			return call{name: n, args: map[string]any{"url": st.URL}}, nil
		}
		if st.Command == "" {
			break
		}
		return s.render(Step{Kind: Shell, Command: st.Command}, tools, custom)
	case Read:
		if n := has(tools, "Read"); n != "" {
			return call{name: n, args: map[string]any{"file_path": s.abs(st.Path)}}, nil
		}
		if n := has(tools, "read"); n != "" {
			return call{name: n, args: map[string]any{"path": st.Path}}, nil
		}
		if n := has(tools, "read_file"); n != "" {
			return call{name: n, args: map[string]any{"file_path": s.abs(st.Path)}}, nil
		}
		st = Step{Kind: Shell, Command: "cat " + shellQuote(st.Path)}
		fallthrough
	case Shell:
		if n := has(tools, "Bash"); n != "" {
			return call{name: n, args: map[string]any{"command": st.Command, "description": "run a command"}}, nil
		}
		if n := has(tools, "exec"); n != "" {
			return call{name: n, args: map[string]any{"command": st.Command}}, nil
		}
		if n := has(tools, "exec_command"); n != "" {
			return call{name: n, args: map[string]any{"cmd": st.Command}}, nil
		}
		if n := has(tools, "run_shell_command"); n != "" {
			return call{name: n, args: map[string]any{"command": st.Command, "description": "run a command"}}, nil
		}
		if n := has(tools, "shell_command"); n != "" {
			return call{name: n, args: map[string]any{"command": st.Command}}, nil
		}
		if n := has(tools, "shell"); n != "" {
			return call{name: n, args: map[string]any{"command": []string{"bash", "-lc", st.Command}}}, nil
		}
	}
	var names []string
	for n := range tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return call{}, fmt.Errorf("no tool for step %+v among %v", st, names)
}

func (s *Server) patch(custom bool, text string) call {
	if custom {
		return call{name: "apply_patch", custom: text, isCust: true}
	}
	return call{name: "apply_patch", args: map[string]any{"input": text}}
}

func addPatch(path, content string) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Add File: " + path + "\n")
	for _, l := range strings.SplitAfter(content, "\n") {
		if l == "" {
			continue
		}
		b.WriteString("+" + strings.TrimSuffix(l, "\n") + "\n")
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

func updatePatch(path, old, new string) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Update File: " + path + "\n@@\n")
	for _, l := range strings.Split(strings.TrimSuffix(old, "\n"), "\n") {
		b.WriteString("-" + l + "\n")
	}
	for _, l := range strings.Split(strings.TrimSuffix(new, "\n"), "\n") {
		b.WriteString("+" + l + "\n")
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (s *Server) id(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s_%06d", prefix, s.seq)
}

// ---- Anthropic Messages ----

func (s *Server) anthropic(w http.ResponseWriter, body []byte) {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	tools := map[string]bool{}
	for _, t := range req.Tools {
		tools[t.Name] = true
		s.tools[t.Name] = true
	}
	results := 0
	for _, m := range req.Messages {
		var blocks []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(m.Content, &blocks) == nil {
			for _, b := range blocks {
				if b.Type == "tool_result" {
					results++
				}
			}
		}
	}
	var content []map[string]any
	stop := "end_turn"
	if len(tools) == 0 {
		// A side request (a title, a summary, a check): plain text.
		content = []map[string]any{{"type": "text", "text": "ok"}}
	} else {
		s.turns++
		st := s.step(results)
		if st.Kind == Final {
			content = []map[string]any{{"type": "text", "text": st.Text}}
		} else if c, err := s.render(st, tools, nil); err != nil {
			s.fail("anthropic: %v", err)
			content = []map[string]any{{"type": "text", "text": "fakemodel: " + err.Error()}}
		} else {
			content = []map[string]any{{"type": "tool_use", "id": s.id("toolu"), "name": c.name, "input": c.args}}
			stop = "tool_use"
		}
	}
	msgID := s.id("msg")
	usage := map[string]any{"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	s.logf("< anthropic results=%d %s", results, mustJSON(content))
	if !req.Stream {
		writeJSON(w, map[string]any{"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	sse := newSSE(w)
	sse.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage}})
	for i, c := range content {
		switch c["type"] {
		case "text":
			sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "text_delta", "text": c["text"]}})
		case "tool_use":
			sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": c["id"], "name": c["name"], "input": map[string]any{}}})
			sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": mustJSON(c["input"])}})
		}
		sse.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	sse.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 10}})
	sse.event("message_stop", map[string]any{"type": "message_stop"})
}

// ---- OpenAI Chat Completions ----

func (s *Server) chat(w http.ResponseWriter, body []byte) {
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
		Tools []struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	tools := map[string]bool{}
	for _, t := range req.Tools {
		tools[t.Function.Name] = true
		s.tools[t.Function.Name] = true
	}
	results := 0
	for _, m := range req.Messages {
		if m.Role == "tool" {
			results++
		}
	}
	text := "ok"
	var tc *call
	if len(tools) > 0 {
		s.turns++
		st := s.step(results)
		if st.Kind == Final {
			text = st.Text
		} else if c, err := s.render(st, tools, nil); err != nil {
			s.fail("chat: %v", err)
			text = "fakemodel: " + err.Error()
		} else {
			tc = &c
		}
	}
	id := s.id("chatcmpl")
	finish := "stop"
	msg := map[string]any{"role": "assistant", "content": text}
	var calls []any
	if tc != nil {
		finish = "tool_calls"
		calls = []any{map[string]any{"index": 0, "id": s.id("call"), "type": "function",
			"function": map[string]any{"name": tc.name, "arguments": mustJSON(tc.args)}}}
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}
	}
	s.logf("< chat results=%d %s", results, mustJSON(msg))
	usage := map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
	if !req.Stream {
		writeJSON(w, map[string]any{"id": id, "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	sse := newSSE(w)
	chunk := func(delta map[string]any, fin any, u any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": fin}}}
		if u != nil {
			c["usage"] = u
		}
		sse.data(c)
	}
	if tc != nil {
		chunk(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}, nil, nil)
	} else {
		chunk(map[string]any{"role": "assistant", "content": text}, nil, nil)
	}
	chunk(map[string]any{}, finish, usage)
	sse.raw("data: [DONE]\n\n")
}

// ---- Gemini generateContent ----

// gemini answers the Gemini API (Gemini CLI with GOOGLE_GEMINI_BASE_URL):
// models/M:generateContent and :streamGenerateContent (SSE with alt=sse).
func (s *Server) gemini(w http.ResponseWriter, body []byte, stream bool) {
	var req struct {
		Contents []struct {
			Role  string                       `json:"role"`
			Parts []map[string]json.RawMessage `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
			URLContext json.RawMessage `json:"urlContext"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	tools := map[string]bool{}
	urlContext := false
	for _, t := range req.Tools {
		urlContext = urlContext || t.URLContext != nil
		for _, f := range t.FunctionDeclarations {
			tools[f.Name] = true
			s.tools[f.Name] = true
		}
	}
	results := 0
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			if _, ok := p["functionResponse"]; ok {
				results++
			}
		}
	}
	part := map[string]any{"text": "ok"}
	switch {
	case urlContext:
		// Gemini CLI's web_fetch first asks the API to fetch the URLs
		// itself (the urlContext tool). The fake API, like the real one
		// before a page it cannot reach, answers with no content: the
		// client then fetches the page in its own process.
		part = map[string]any{"text": ""}
	case len(tools) > 0:
		s.turns++
		st := s.step(results)
		if st.Kind == Final {
			part = map[string]any{"text": st.Text}
		} else if c, err := s.render(st, tools, nil); err != nil {
			s.fail("gemini: %v", err)
			part = map[string]any{"text": "fakemodel: " + err.Error()}
		} else {
			part = map[string]any{"functionCall": map[string]any{"name": c.name, "args": c.args}}
		}
	}
	resp := map[string]any{
		"candidates":    []any{map[string]any{"index": 0, "finishReason": "STOP", "content": map[string]any{"role": "model", "parts": []any{part}}}},
		"usageMetadata": map[string]any{"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
		"modelVersion":  "fake-model",
	}
	s.logf("< gemini results=%d %s", results, mustJSON(part))
	if !stream {
		writeJSON(w, resp)
		return
	}
	newSSE(w).data(resp)
}

// ---- OpenAI Responses ----

func (s *Server) responses(w http.ResponseWriter, body []byte) {
	var req struct {
		Model string            `json:"model"`
		Input []json.RawMessage `json:"input"`
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	tools, custom := map[string]bool{}, map[string]bool{}
	for _, t := range req.Tools {
		if t.Name == "" {
			continue
		}
		tools[t.Name] = true
		s.tools[t.Name] = true
		if t.Type == "custom" {
			custom[t.Name] = true
		}
	}
	results := 0
	for _, raw := range req.Input {
		var it struct {
			Type string `json:"type"`
		}
		json.Unmarshal(raw, &it)
		if strings.HasSuffix(it.Type, "_call_output") {
			results++
		}
	}
	var item map[string]any
	if len(tools) == 0 {
		item = textItem(s.id("msg"), "ok")
	} else {
		s.turns++
		st := s.step(results)
		if st.Kind == Final {
			item = textItem(s.id("msg"), st.Text)
		} else if c, err := s.render(st, tools, custom); err != nil {
			s.fail("responses: %v", err)
			item = textItem(s.id("msg"), "fakemodel: "+err.Error())
		} else if c.isCust {
			item = map[string]any{"type": "custom_tool_call", "id": s.id("ctc"), "status": "completed",
				"call_id": s.id("call"), "name": c.name, "input": c.custom}
		} else {
			item = map[string]any{"type": "function_call", "id": s.id("fc"), "status": "completed",
				"call_id": s.id("call"), "name": c.name, "arguments": mustJSON(c.args)}
		}
	}
	s.logf("< responses results=%d %s", results, mustJSON(item))
	respID := s.id("resp")
	resp := map[string]any{"id": respID, "object": "response", "created_at": time.Now().Unix(), "model": req.Model,
		"status": "in_progress", "output": []any{}}
	sse := newSSE(w)
	seq := 0
	ev := func(typ string, v map[string]any) {
		v["type"] = typ
		v["sequence_number"] = seq
		seq++
		sse.event(typ, v)
	}
	ev("response.created", map[string]any{"response": resp})
	ev("response.output_item.added", map[string]any{"output_index": 0, "item": item})
	if item["type"] == "message" {
		text := item["content"].([]any)[0].(map[string]any)["text"]
		ev("response.output_text.delta", map[string]any{"output_index": 0, "item_id": item["id"], "content_index": 0, "delta": text})
	}
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	done := map[string]any{}
	for k, v := range resp {
		done[k] = v
	}
	done["status"] = "completed"
	done["output"] = []any{item}
	done["usage"] = map[string]any{"input_tokens": 100, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": 10, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 110}
	ev("response.completed", map[string]any{"response": done})
}

func textItem(id, text string) map[string]any {
	return map[string]any{"type": "message", "id": id, "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
}

// ---- SSE ----

type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	f, _ := w.(http.Flusher)
	return &sse{w, f}
}

func (s *sse) raw(str string) {
	io.WriteString(s.w, str)
	if s.f != nil {
		s.f.Flush()
	}
}

func (s *sse) event(name string, v any) { s.raw("event: " + name + "\ndata: " + mustJSON(v) + "\n\n") }
func (s *sse) data(v any)               { s.raw("data: " + mustJSON(v) + "\n\n") }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
