// Package opencodetest runs the real OpenCode CLI in tests: it finds the
// pinned binary, and serves a scripted fake of the OpenAI Chat Completions
// API on 127.0.0.1 for it to talk to, through a provider of OpenCode's own
// config ("fake", with the model "fake/fake-model"). No key, no network.
// It is the one place that knows the API's request and response format;
// the end-to-end tests of package opencode use it.
//
// A script is a function from the request the CLI sent to the reply it
// gets. OpenCode sends the whole conversation every time, so a script
// finds its step in the request: how many tool results it holds
// (Request.ToolResults), what the last one said (Request.LastToolResult).
// Requests without tools (OpenCode's title request, which `--title` avoids)
// never reach the script: they get a plain text title. See
// shared/AGENT-CLIS.md for what the CLI does and how it must be run.
package opencodetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/agentproc/agentproctest"
)

// Version is the OpenCode release the tests are written against.
const Version = "1.18.33"

// Model is the fake model's id in OpenCode's terms (provider/model).
const Model = "fake/fake-model"

// pinned is the release Binary finds.
var pinned = agentproctest.Pinned{
	Name:    "OpenCode",
	Version: Version,
	EnvVar:  "RALPH_TEST_OPENCODE",
	Bin:     "opencode",
	Package: "opencode-ai",
	// Even that writes OpenCode's state directories.
	VersionEnv: func(home string) []string {
		return append([]string{"PATH=" + os.Getenv("PATH")}, hermeticEnv(home)...)
	},
}

// Binary returns the pinned OpenCode: $RALPH_TEST_OPENCODE, else <module
// root>/.cache/opencode/node_modules/.bin/opencode. Missing, or not the pinned
// release, it fails the test under CI=true and skips it elsewhere, saying
// how to install it.
func Binary(t testing.TB) string {
	t.Helper()
	return agentproctest.Binary(t, pinned)
}

// Request is the part of a Chat Completions request that scripts look at.
type Request struct {
	Model    string    `json:"model"`
	Stream   bool      `json:"stream"`
	Messages []Message `json:"messages"`
	// Tools are the tools the model is offered.
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// Message is one message of the conversation.
type Message struct {
	Role string `json:"role"`
	// Content is a string or a list of content parts.
	Content json.RawMessage `json:"content"`
	// ToolCallID is set on role "tool" messages.
	ToolCallID string `json:"tool_call_id"`
}

// Text is the message's content as text (its text parts joined).
func (m Message) Text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(m.Content, &parts)
	var out []string
	for _, p := range parts {
		if p.Type == "text" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

// ToolResults counts the role "tool" messages so far: the step of a
// scripted conversation.
func (r Request) ToolResults() int { return len(r.texts("tool")) }

// LastToolResult is the text of the latest tool message, trimmed; "" when
// there is none.
func (r Request) LastToolResult() string {
	texts := r.texts("tool")
	if len(texts) == 0 {
		return ""
	}
	return strings.TrimSpace(texts[len(texts)-1])
}

// SystemText joins the system messages: OpenCode's own prompt, AGENTS.md
// and the config's "instructions" files.
func (r Request) SystemText() string { return strings.Join(r.texts("system"), "\n") }

// UserText joins the user messages.
func (r Request) UserText() string { return strings.Join(r.texts("user"), "\n") }

func (r Request) texts(role string) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == role {
			out = append(out, m.Text())
		}
	}
	return out
}

// ToolNames lists the names of the tools the model is offered.
func (r Request) ToolNames() []string {
	out := make([]string, 0, len(r.Tools))
	for _, t := range r.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

// Reply is what the fake API answers to one request.
type Reply struct {
	// Status, when not 0, is an HTTP error status answered with Body.
	Status int
	Body   string
	// Header holds extra response headers (such as retry-after-ms, which
	// OpenCode honours between its retries).
	Header map[string]string
	// Text is the streamed assistant text.
	Text string
	// Tool, when set, is a tool call with Args as its JSON arguments.
	Tool string
	Args map[string]any
	// Stall holds the stream open, after its first chunk, until the client
	// goes away or the test ends.
	Stall bool
}

// Text is a final answer: text, then finish_reason "stop".
func Text(s string) Reply { return Reply{Text: s} }

// Shell is a turn that runs command with OpenCode's bash tool.
func Shell(command string) Reply {
	return Reply{Tool: "bash", Args: map[string]any{"command": command, "description": "Run a command"}}
}

// Status is an HTTP error answer.
func Status(code int, body string) Reply { return Reply{Status: code, Body: body} }

// Stall is an answer that never ends.
func Stall() Reply { return Reply{Stall: true} }

// Cost is the fake model's price in OpenCode's model config, in US dollars
// per million tokens.
type Cost struct {
	Input, Output, CacheRead, CacheWrite float64
}

// The token counts the fake reports on every answer: OpenCode turns them
// into a step_finish with input 800 (cache reads excluded), output 40
// (reasoning excluded), reasoning 10 and cache.read 200.
const (
	PromptTokens     = 1000
	CachedTokens     = 200
	CompletionTokens = 50
	ReasoningTokens  = 10
)

// API is a scripted Chat Completions API on 127.0.0.1.
type API struct {
	// URL is the server's base URL (without /v1).
	URL string
	// Cost, when not nil, gives the fake model prices in the config Env
	// writes: OpenCode then reports a cost.
	Cost *Cost
	// Timeout, when > 0, is the provider's request timeout in milliseconds
	// (OpenCode's "timeout" option; 0 leaves OpenCode's default).
	Timeout int

	// Fake keeps the script, the requests (OpenCode's title requests
	// included) and the stalls; its Stalled is closed when a reply first
	// stalls.
	*agentproctest.Fake[Request, Reply]

	t testing.TB
}

// NewAPI serves script until the end of the test.
func NewAPI(t testing.TB, script func(Request) Reply) *API {
	t.Helper()
	a := &API{Fake: agentproctest.NewFake(script), t: t}
	a.URL = "http://" + a.Serve(t, a)
	return a
}

// Config returns OpenCode's config for the fake: the provider "fake"
// (OpenCode's built-in @ai-sdk/openai-compatible) with the model
// "fake-model", chosen as model and small_model; no autoupdate, no
// sharing.
func (a *API) Config() string {
	model := map[string]any{"name": "Fake", "tool_call": true,
		"limit": map[string]any{"context": 128000, "output": 8000}}
	if c := a.Cost; c != nil {
		model["cost"] = map[string]any{"input": c.Input, "output": c.Output,
			"cache_read": c.CacheRead, "cache_write": c.CacheWrite}
	}
	options := map[string]any{"baseURL": a.URL + "/v1", "apiKey": "dummy"}
	if a.Timeout > 0 {
		options["timeout"] = a.Timeout
	}
	b, err := json.Marshal(map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"provider": map[string]any{"fake": map[string]any{
			"npm": "@ai-sdk/openai-compatible", "name": "Fake", "options": options,
			"models": map[string]any{"fake-model": model}}},
		"model": Model, "small_model": Model,
		"autoupdate": false, "share": "disabled",
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// Env is the environment of a hermetic CLI run against the API, on top of
// the caller's: home is a throwaway HOME (and TMPDIR, and the XDG
// directories under it); Config is written to home/opencode-test.json,
// named by OPENCODE_CONFIG, the way a user names a config of their own
// outside the project; nothing of the developer's own OpenCode settings.
func (a *API) Env(home string) []string {
	path := filepath.Join(home, "opencode-test.json")
	if err := os.WriteFile(path, []byte(a.Config()), 0o644); err != nil {
		a.t.Fatal(err)
	}
	return append(hermeticEnv(home), "OPENCODE_CONFIG="+path)
}

// hermeticEnv points every directory OpenCode writes under home and
// blanks the variables that would bring in the developer's own config.
func hermeticEnv(home string) []string {
	return []string{
		"HOME=" + home,
		"TMPDIR=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"OPENCODE_DISABLE_MODELS_FETCH=true",
		"OPENCODE_DISABLE_AUTOUPDATE=true",
		"OPENCODE_CONFIG=",
		"OPENCODE_CONFIG_DIR=",
		"OPENCODE_CONFIG_CONTENT=",
		"OPENCODE_PERMISSION=",
	}
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
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

	var rep Reply
	if len(req.Tools) == 0 {
		// OpenCode's title request (no --title) or another side request.
		rep = Text("Fake title")
	} else {
		rep = a.Answer(req)
	}
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	if rep.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		_, _ = io.WriteString(w, rep.Body)
		return
	}
	a.writeStream(w, r, req, rep)
}

// writeStream answers with chat.completion.chunk server-sent events and
// data: [DONE]; the usage comes on the last chunk.
func (a *API) writeStream(w http.ResponseWriter, r *http.Request, req Request, rep Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	id := "chatcmpl-" + strconv.Itoa(len(req.Messages))
	send := func(delta map[string]any, finish any, usage map[string]any) {
		chunk := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1795466664,
			"model": req.Model, "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if usage != nil {
			chunk["usage"] = usage
		}
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	send(map[string]any{"role": "assistant", "content": ""}, nil, nil)
	if rep.Stall {
		a.Stall(r)
		return
	}
	finish := "stop"
	if rep.Text != "" {
		send(map[string]any{"content": rep.Text}, nil, nil)
	}
	if rep.Tool != "" {
		args, _ := json.Marshal(rep.Args)
		send(map[string]any{"tool_calls": []any{map[string]any{"index": 0,
			"id": "call_" + strconv.Itoa(req.ToolResults()+1), "type": "function",
			"function": map[string]any{"name": rep.Tool, "arguments": string(args)}}}}, nil, nil)
		finish = "tool_calls"
	}
	send(map[string]any{}, finish, map[string]any{
		"prompt_tokens": PromptTokens, "completion_tokens": CompletionTokens,
		"total_tokens":              PromptTokens + CompletionTokens,
		"prompt_tokens_details":     map[string]any{"cached_tokens": CachedTokens},
		"completion_tokens_details": map[string]any{"reasoning_tokens": ReasoningTokens},
	})
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

// ProcessesWithEnv returns the pids of the live processes (zombies aside)
// whose environment holds the entry kv, such as this test's HOME=…:
// the agents it started and their children (agentproctest.ProcessesWithEnv).
func ProcessesWithEnv(kv string) []int { return agentproctest.ProcessesWithEnv(kv) }
