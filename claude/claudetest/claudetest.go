// Package claudetest runs the real Claude Code CLI in tests: it finds the
// pinned binary that .ci/run installs, and serves a scripted fake of the
// Anthropic Messages API on 127.0.0.1 for it to talk to. No key, no
// network. It is the one place that knows the API's request and response
// format; the end-to-end tests of package claude and of the ralph CLI both
// use it.
//
// A script is a function from the request the CLI sent to the reply it
// gets. Claude Code sends the whole conversation every time, so a script
// finds its step in the request: how many tool results it holds
// (Request.ToolResults), what the last one said (Request.LastToolResult),
// which prompt started it (Request.UserText). See shared/CLAUDE-CODE.md for
// what the CLI does and how it must be run.
package claudetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/agentproc/agentproctest"
)

// Version is the Claude Code release the tests are written against, the
// one .ci/run installs.
const Version = "2.1.330"

// pinned is the release Binary finds.
var pinned = agentproctest.Pinned{
	Name:    "Claude Code",
	Version: Version,
	EnvVar:  "RALPH_TEST_CLAUDE",
	Bin:     "claude",
	Package: "@anthropic-ai/claude-code",
	// The version is followed by " (Claude Code)".
	IsPinned: func(out string) bool { return strings.HasPrefix(out, Version+" ") },
}

// Binary returns the pinned Claude Code: $RALPH_TEST_CLAUDE, else <module
// root>/.cache/claude/node_modules/.bin/claude. Missing, or not the pinned
// release, it fails the test under CI=true and skips it elsewhere, saying
// how to install it.
func Binary(t testing.TB) string {
	t.Helper()
	return agentproctest.Binary(t, pinned)
}

// Request is the part of a Messages API request that scripts look at.
type Request struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	System   json.RawMessage `json:"system"`
	Messages []Message       `json:"messages"`
	// Tools are the tools the model is offered.
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// Message is one message of the conversation.
type Message struct {
	Role string `json:"role"`
	// Content is a string or a list of content blocks.
	Content json.RawMessage `json:"content"`
}

// contentBlock is a content block of a message.
type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
	// Content is a tool_result's content: a string or text blocks.
	Content json.RawMessage `json:"content"`
	IsError bool            `json:"is_error"`
}

func (m Message) blocks() []contentBlock {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []contentBlock{{Type: "text", Text: s}}
	}
	var bs []contentBlock
	_ = json.Unmarshal(m.Content, &bs)
	return bs
}

// textOf reads content that is a string or a list of text blocks.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []contentBlock
	_ = json.Unmarshal(raw, &bs)
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ToolResults counts the tool_result blocks in the conversation so far: the
// step of a scripted conversation.
func (r Request) ToolResults() int { return len(r.ToolResultTexts()) }

// ToolResultTexts returns the text of every tool_result block, in order.
func (r Request) ToolResultTexts() []string {
	var out []string
	for _, m := range r.Messages {
		for _, b := range m.blocks() {
			if b.Type == "tool_result" {
				out = append(out, textOf(b.Content))
			}
		}
	}
	return out
}

// LastToolResult is the text of the latest tool_result, trimmed; "" when
// there is none.
func (r Request) LastToolResult() string {
	texts := r.ToolResultTexts()
	if len(texts) == 0 {
		return ""
	}
	return strings.TrimSpace(texts[len(texts)-1])
}

// UserText joins the text of every user message (the prompt, with the
// CLI's reminders), not the tool results.
func (r Request) UserText() string {
	var parts []string
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		for _, b := range m.blocks() {
			if b.Type == "text" {
				parts = append(parts, b.Text)
			}
		}
	}
	return strings.Join(parts, "\n")
}

// SystemText is the system prompt as text.
func (r Request) SystemText() string { return textOf(r.System) }

// ToolNames lists the names of the tools the model is offered.
func (r Request) ToolNames() []string {
	out := make([]string, 0, len(r.Tools))
	for _, t := range r.Tools {
		out = append(out, t.Name)
	}
	return out
}

// Block is one content block of a scripted reply: a text block, or a
// tool_use block when Tool is set.
type Block struct {
	Text  string
	Tool  string
	Input map[string]any
}

// Reply is what the fake API answers to one request.
type Reply struct {
	// Status, when not 0, is an HTTP error status answered with Body.
	Status int
	Body   string
	// Header holds extra response headers.
	Header map[string]string
	// Blocks are the streamed message's content blocks.
	Blocks []Block
	// Stop is the stop_reason ("end_turn", "tool_use").
	Stop string
	// StallAt, when > 0, holds the stream open after StallAt-1 blocks
	// (1-based; past the last block: before message_delta) until the
	// client goes away or the test ends.
	StallAt int
}

// Text is a final answer: one text block, end_turn.
func Text(text string) Reply {
	return Reply{Blocks: []Block{{Text: text}}, Stop: "end_turn"}
}

// Bash is a turn that runs command with the Bash tool.
func Bash(command string) Reply {
	return Reply{Blocks: []Block{
		{Text: "Running a command."},
		{Tool: "Bash", Input: map[string]any{"command": command, "description": "Run a command"}},
	}, Stop: "tool_use"}
}

// API is a scripted Messages API on 127.0.0.1.
type API struct {
	// URL is the server's base URL, for ANTHROPIC_BASE_URL.
	URL string

	// Fake keeps the script, the requests and the stalls; its Stalled is
	// closed when a reply first stalls.
	*agentproctest.Fake[Request, Reply]
}

// NewAPI serves script until the end of the test.
func NewAPI(t testing.TB, script func(Request) Reply) *API {
	t.Helper()
	a := &API{Fake: agentproctest.NewFake(script)}
	a.URL = "http://" + a.Serve(t, a)
	return a
}

// IsSandbox is the entry a test adds to the environment of the real CLI
// when it runs it with --dangerously-skip-permissions (a work session)
// outside ralph's sandbox: as root, Claude Code refuses that flag unless
// IS_SANDBOX=1, and ralph sets the variable only inside its own sandbox
// (claude.Env). The tests' machines (CI containers, throwaway VMs) are
// sandboxes in that sense, which is what the entry says; Env leaves it
// out, so that a test of ralph's own hand-over sees ralph's doing.
const IsSandbox = "IS_SANDBOX=1"

// Env is the environment of a hermetic CLI run against the API, on top of
// the caller's: home is a throwaway HOME (and TMPDIR: the CLI leaves files
// there); no telemetry, no retries, and nothing of the developer's own
// login or model settings.
func (a *API) Env(home string) []string {
	return []string{
		"ANTHROPIC_BASE_URL=" + a.URL,
		"ANTHROPIC_API_KEY=sk-ant-test-not-a-key",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
		"CLAUDE_CODE_MAX_RETRIES=0",
		"HOME=" + home,
		"TMPDIR=" + home,
		"CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
		"CLAUDE_CODE_OAUTH_TOKEN=",
		"ANTHROPIC_AUTH_TOKEN=",
		"ANTHROPIC_MODEL=",
		"ANTHROPIC_CUSTOM_HEADERS=",
		"CLAUDE_CODE_USE_BEDROCK=",
		"CLAUDE_CODE_USE_VERTEX=",
	}
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		// Anything else (a HEAD / probe): a plain OK.
		w.WriteHeader(http.StatusOK)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req Request
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a.Record(req)

	rep := a.Answer(req)
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	if rep.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		_, _ = io.WriteString(w, rep.Body)
		return
	}
	if !req.Stream {
		a.writeJSON(w, req.Model, rep)
		return
	}
	a.writeStream(w, r, req, rep)
}

// writeStream answers a streaming request with server-sent events.
func (a *API) writeStream(w http.ResponseWriter, r *http.Request, req Request, rep Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		if fl != nil {
			fl.Flush()
		}
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 1200, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 300},
	}})
	for i, b := range rep.Blocks {
		if rep.StallAt > 0 && i+1 == rep.StallAt {
			a.Stall(r)
			return
		}
		if b.Tool != "" {
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": toolUseID(len(req.Messages), i), "name": b.Tool, "input": map[string]any{}}})
			in, _ := json.Marshal(b.Input)
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		} else {
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "text_delta", "text": b.Text}})
		}
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	if rep.StallAt > len(rep.Blocks) {
		a.Stall(r)
		return
	}
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": rep.Stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 42}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

func toolUseID(messages, block int) string {
	return "toolu_" + strconv.Itoa(messages) + "_" + strconv.Itoa(block)
}

// writeJSON answers a non-streaming request (the CLI's fallback after a
// broken stream) with a plain message.
func (a *API) writeJSON(w http.ResponseWriter, model string, rep Reply) {
	var content []any
	for i, b := range rep.Blocks {
		if b.Tool != "" {
			content = append(content, map[string]any{"type": "tool_use", "id": toolUseID(0, i), "name": b.Tool, "input": b.Input})
		} else {
			content = append(content, map[string]any{"type": "text", "text": b.Text})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": rep.Stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 1200, "output_tokens": 42}})
}

// ProcessesWithEnv returns the pids of the live processes (zombies aside)
// whose environment holds the entry kv, such as this test's ANTHROPIC_BASE_URL:
// the agents it started and their children (agentproctest.ProcessesWithEnv).
func ProcessesWithEnv(kv string) []int { return agentproctest.ProcessesWithEnv(kv) }
