// Package codextest runs the real OpenAI Codex CLI in tests: it finds the
// pinned binary, and serves a scripted fake of the OpenAI Responses API on
// 127.0.0.1 for it to talk to. No key, no login, no network. It is the one
// place that knows the API's request and response format.
//
// A script is a function from the request the CLI sent to the reply it
// gets. Codex sends the whole conversation every time, so a script finds
// its step in the request: how many tool outputs it holds
// (Request.ToolOutputs). See shared/AGENT-CLIS.md for what the CLI does and
// how it must be run.
package codextest

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
	"time"

	"github.com/ralph-dev/ralph/agentproc/agentproctest"
)

// Version is the Codex CLI release the tests are written against.
const Version = "0.169.0"

// Model is the model the hermetic config names: a slug the pinned release
// knows, so that it prints no "Model metadata … not found" notice.
const Model = "gpt-5.5"

// pinned is the release Binary finds.
var pinned = agentproctest.Pinned{
	Name:     "Codex CLI",
	Version:  Version,
	EnvVar:   "RALPH_TEST_CODEX",
	Bin:      "codex",
	Package:  "@openai/codex",
	IsPinned: func(out string) bool { return out == "codex-cli "+Version },
	Mismatch: func(path, out string) string {
		return fmt.Sprintf("%s is %q, not the pinned Codex CLI %s", path, out, Version)
	},
	VersionEnv: func(string) []string { return append(os.Environ(), "CODEX_HOME="+os.TempDir()) },
}

// Binary returns the pinned Codex CLI: $RALPH_TEST_CODEX, else <module
// root>/.cache/codex/node_modules/.bin/codex. Missing, or not the pinned
// release, it fails the test under CI=true and skips it elsewhere, saying
// how to install it.
func Binary(t testing.TB) string {
	t.Helper()
	return agentproctest.Binary(t, pinned)
}

// Request is the part of a Responses API request that scripts look at.
type Request struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	// Instructions is the request's instructions field (Codex leaves it
	// empty: its base prompt is a developer message).
	Instructions string `json:"instructions"`
	Input        []Item `json:"input"`
	Tools        []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
	Reasoning *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
}

// Item is one item of a request's input: a message, a function call the
// model made, or a function call's output.
type Item struct {
	Type      string `json:"type"`
	Role      string `json:"role"`
	Name      string `json:"name"`
	CallID    string `json:"call_id"`
	Arguments string `json:"arguments"`
	// Content is a message's content: a string or a list of parts.
	Content json.RawMessage `json:"content"`
	// Output is a function_call_output's output: a string or a list of parts.
	Output json.RawMessage `json:"output"`
}

// textOf reads content that is a string or a list of parts with a text.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var out []string
	for _, p := range parts {
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return strings.Join(out, "\n")
}

// Text is the item's text: a message's content or a function output.
func (it Item) Text() string {
	if it.Type == "function_call_output" {
		return textOf(it.Output)
	}
	return textOf(it.Content)
}

// ToolOutputs returns the output of every function call so far, in order:
// their number is the step of a scripted conversation.
func (r Request) ToolOutputs() []string {
	var out []string
	for _, it := range r.Input {
		if it.Type == "function_call_output" {
			out = append(out, it.Text())
		}
	}
	return out
}

// Messages returns the text of every message of role ("developer",
// "user", "assistant"), in order.
func (r Request) Messages(role string) []string {
	var out []string
	for _, it := range r.Input {
		if it.Type == "message" && it.Role == role {
			out = append(out, it.Text())
		}
	}
	return out
}

// ToolNames lists the names of the tools the model is offered.
func (r Request) ToolNames() []string {
	out := make([]string, 0, len(r.Tools))
	for _, t := range r.Tools {
		out = append(out, t.Name)
	}
	return out
}

// Reply is what the fake API answers to one request.
type Reply struct {
	// Status, when not 0, is an HTTP error status answered with Body.
	Status int
	Body   string
	// Header holds extra response headers.
	Header map[string]string
	// Text is an assistant message; Shell, when not empty, a call of
	// the exec_command tool with this command (after Text, if any).
	Text  string
	Shell string
	// Stall holds the stream open after response.created until the
	// client goes away or the test ends.
	Stall bool
}

// Text is a final answer.
func Text(s string) Reply { return Reply{Text: s} }

// Shell is a turn that runs cmd with the exec_command tool.
func Shell(cmd string) Reply { return Reply{Shell: cmd} }

// Status is an HTTP error with a JSON body.
func Status(code int, body string) Reply { return Reply{Status: code, Body: body} }

// Stall is a stream that starts and then sends nothing.
func Stall() Reply { return Reply{Stall: true} }

// UsageLimit is the 429 the OpenAI API answers when a ChatGPT plan's usage
// limit is reached: an error of type usage_limit_reached, with the reset
// time as a Unix time (resets_at) and in seconds from now.
func UsageLimit(resetsAt time.Time) Reply {
	body, _ := json.Marshal(map[string]any{"error": map[string]any{
		"type":              "usage_limit_reached",
		"message":           "The usage limit has been reached",
		"plan_type":         "plus",
		"resets_at":         resetsAt.Unix(),
		"resets_in_seconds": int64(time.Until(resetsAt).Seconds()),
	}})
	return Status(http.StatusTooManyRequests, string(body))
}

// The token counts of every reply's response.completed.
const (
	UsageInput     = 2000 // input_tokens, cached ones included
	UsageCached    = 400  // input_tokens_details.cached_tokens
	UsageOutput    = 100  // output_tokens, reasoning included
	UsageReasoning = 20   // output_tokens_details.reasoning_tokens
)

// API is a scripted Responses API on 127.0.0.1.
type API struct {
	// URL is the server's base URL, with /v1: the provider's base_url.
	URL string

	// Fake keeps the script, the requests and the stalls; its Stalled is
	// closed when a reply first stalls.
	*agentproctest.Fake[Request, Reply]

	t testing.TB
}

// NewAPI serves script until the end of the test.
func NewAPI(t testing.TB, script func(Request) Reply) *API {
	t.Helper()
	a := &API{Fake: agentproctest.NewFake(script), t: t}
	a.URL = "http://" + a.Serve(t, a) + "/v1"
	return a
}

// Env is the environment of a hermetic CLI run against the API, on top of
// the caller's; see Config for the config it writes.
func (a *API) Env(home string) []string {
	a.t.Helper()
	return Env(a.t, home, a.URL)
}

// Env writes a hermetic Codex config naming the provider at baseURL to
// home/.codex/config.toml and returns the environment to run the CLI with:
// home as HOME, home/.codex as CODEX_HOME, home/tmp as TMPDIR (a
// CODEX_HOME inside TMPDIR makes Codex refuse to create its helper
// binaries, and then every command of --sandbox read-only fails with
// "bwrap: execvp codex-linux-sandbox"), the provider's key
// variable, and nothing of the developer's own login or provider. The
// config turns both retries off and the stream idle timeout down to 5 s,
// so that errors end a run in about a second.
func Env(t testing.TB, home, baseURL string) []string {
	t.Helper()
	return EnvRetries(t, home, baseURL, 0)
}

// EnvRetries is Env with Codex's retries set to retries (see Config).
func EnvRetries(t testing.TB, home, baseURL string, retries int) []string {
	t.Helper()
	codexHome, tmp := filepath.Join(home, ".codex"), filepath.Join(home, "tmp")
	for _, dir := range []string{codexHome, tmp} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(Config(baseURL, retries)), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{
		"HOME=" + home,
		"CODEX_HOME=" + codexHome,
		"TMPDIR=" + tmp,
		"FAKE_API_KEY=sk-test-not-a-key",
		"OPENAI_API_KEY=",
		"OPENAI_BASE_URL=",
		"CODEX_API_KEY=",
		"RUST_LOG=",
	}
}

// Config is a Codex config.toml that makes the fake at baseURL its model
// provider ("fake", key in $FAKE_API_KEY), with retries request and stream
// retries (0: none; negative: Codex's defaults, 4 and 5) and a 5 s stream
// idle timeout (the default is about 300 s).
func Config(baseURL string, retries int) string {
	if retries < 0 {
		return fmt.Sprintf(`model = %q
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = %q
env_key = "FAKE_API_KEY"
wire_api = "responses"
stream_idle_timeout_ms = 5000
`, Model, baseURL)
	}
	return fmt.Sprintf(`model = %q
model_provider = "fake"

[model_providers.fake]
name = "fake"
base_url = %q
env_key = "FAKE_API_KEY"
wire_api = "responses"
request_max_retries = %d
stream_max_retries = %d
stream_idle_timeout_ms = 5000
`, Model, baseURL, retries, retries)
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
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
	n := a.Record(req)

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
	a.writeStream(w, r, req, rep, n)
}

// writeStream answers with server-sent events.
func (a *API) writeStream(w http.ResponseWriter, r *http.Request, req Request, rep Reply, n int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	send := func(data map[string]any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", data["type"], b)
		if fl != nil {
			fl.Flush()
		}
	}
	respID := "resp_" + strconv.Itoa(n)
	send(map[string]any{"type": "response.created", "response": map[string]any{"id": respID, "model": req.Model}})
	if rep.Stall {
		a.Stall(r)
		return
	}
	idx := 0
	if rep.Text != "" {
		id := "msg_" + strconv.Itoa(n)
		send(map[string]any{"type": "response.output_item.added", "output_index": idx,
			"item": map[string]any{"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []any{}}})
		send(map[string]any{"type": "response.output_text.delta", "item_id": id, "output_index": idx, "content_index": 0, "delta": rep.Text})
		send(map[string]any{"type": "response.output_item.done", "output_index": idx,
			"item": map[string]any{"type": "message", "id": id, "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}}}})
		idx++
	}
	if rep.Shell != "" {
		args, _ := json.Marshal(map[string]any{"cmd": rep.Shell})
		item := map[string]any{"type": "function_call", "id": "fc_" + strconv.Itoa(n), "call_id": "call_" + strconv.Itoa(n),
			"name": "exec_command", "arguments": string(args), "status": "completed"}
		send(map[string]any{"type": "response.output_item.added", "output_index": idx, "item": item})
		send(map[string]any{"type": "response.output_item.done", "output_index": idx, "item": item})
	}
	send(map[string]any{"type": "response.completed", "response": map[string]any{"id": respID, "model": req.Model,
		"usage": map[string]any{
			"input_tokens": UsageInput, "input_tokens_details": map[string]any{"cached_tokens": UsageCached},
			"output_tokens": UsageOutput, "output_tokens_details": map[string]any{"reasoning_tokens": UsageReasoning},
			"total_tokens": UsageInput + UsageOutput,
		}}})
}

// ProcessesWithEnv returns the pids of the live processes (zombies aside)
// whose environment holds the entry kv, such as this test's CODEX_HOME:
// the agents it started and their children (agentproctest.ProcessesWithEnv).
func ProcessesWithEnv(kv string) []int { return agentproctest.ProcessesWithEnv(kv) }
