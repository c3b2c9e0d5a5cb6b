// Package geminitest runs the real Gemini CLI in tests: it finds the pinned
// binary, and serves a scripted fake of the Gemini API
// (generativelanguage.googleapis.com) on 127.0.0.1 for it to talk to. No
// key, no network. It is the one place that knows the API's request and
// response format; see shared/AGENT-CLIS.md for what the CLI does and how
// it must be run.
//
// A script is a function from the request the CLI sent to the reply it
// gets. The CLI sends the whole conversation every time, so a script finds
// its step in the request: how many function responses it holds
// (Request.ToolResults), what the last one said (Request.LastToolResult).
package geminitest

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

// Version is the Gemini CLI release the tests are written against.
const Version = "0.61.0"

// pinned is the release Binary finds.
var pinned = agentproctest.Pinned{
	Name:    "Gemini CLI",
	Version: Version,
	EnvVar:  "RALPH_TEST_GEMINI",
	Bin:     "gemini",
	Package: "@google/gemini-cli",
	// The CLI writes to ~/.gemini even then.
	VersionEnv: func(home string) []string {
		return append(os.Environ(), "HOME="+home, "TMPDIR="+home, "GEMINI_CLI_NO_RELAUNCH=true")
	},
}

// Binary returns the pinned Gemini CLI: $RALPH_TEST_GEMINI, else <module
// root>/.cache/gemini/node_modules/.bin/gemini. Missing, or not the pinned
// release, it fails the test under CI=true and skips it elsewhere, saying
// how to install it.
func Binary(t testing.TB) string {
	t.Helper()
	return agentproctest.Binary(t, pinned)
}

// Request is the part of a generateContent request that scripts look at.
type Request struct {
	// Model is the model named in the URL path.
	Model string `json:"-"`
	// Method is "streamGenerateContent" or "generateContent".
	Method   string    `json:"-"`
	Contents []Content `json:"contents"`
	// SystemInstruction is the system prompt.
	SystemInstruction *Content `json:"systemInstruction"`
	// Tools are the tools the model is offered.
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
}

// Content is one turn of the conversation.
type Content struct {
	Role  string `json:"role"`
	Parts []Part `json:"parts"`
}

// Part is one part of a turn.
type Part struct {
	Text             string `json:"text,omitempty"`
	FunctionCall     *Call  `json:"functionCall,omitempty"`
	FunctionResponse *struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse,omitempty"`
}

// Call is a function call the model makes.
type Call struct {
	Name string         `json:"name"`
	Args map[string]any `json:"args"`
}

// ToolResults counts the functionResponse parts in the conversation so
// far: the step of a scripted conversation.
func (r Request) ToolResults() int { return len(r.ToolResultTexts()) }

// ToolResultTexts returns each functionResponse's response, as JSON text,
// in order.
func (r Request) ToolResultTexts() []string {
	var out []string
	for _, c := range r.Contents {
		for _, p := range c.Parts {
			if p.FunctionResponse != nil {
				out = append(out, string(p.FunctionResponse.Response))
			}
		}
	}
	return out
}

// LastToolResult is the latest functionResponse's response as JSON text;
// "" when there is none.
func (r Request) LastToolResult() string {
	texts := r.ToolResultTexts()
	if len(texts) == 0 {
		return ""
	}
	return texts[len(texts)-1]
}

// UserText joins the text parts of every user turn: the prompt with the
// CLI's context (GEMINI.md files, the session context), not the tool
// results.
func (r Request) UserText() string {
	var parts []string
	for _, c := range r.Contents {
		if c.Role != "user" {
			continue
		}
		for _, p := range c.Parts {
			if p.Text != "" {
				parts = append(parts, p.Text)
			}
		}
	}
	return strings.Join(parts, "\n")
}

// SystemText is the system instruction as text.
func (r Request) SystemText() string {
	if r.SystemInstruction == nil {
		return ""
	}
	var parts []string
	for _, p := range r.SystemInstruction.Parts {
		parts = append(parts, p.Text)
	}
	return strings.Join(parts, "\n")
}

// ToolNames lists the names of the tools the model is offered.
func (r Request) ToolNames() []string {
	var out []string
	for _, t := range r.Tools {
		for _, d := range t.FunctionDeclarations {
			out = append(out, d.Name)
		}
	}
	return out
}

// Reply is what the fake API answers to one request.
type Reply struct {
	// Status, when not 0, is an HTTP error status answered with Body.
	Status int
	Body   string
	// Parts are the model's reply: text parts, or function calls when
	// Call is set. Each part goes in its own server-sent event, so a
	// text of several parts reaches the CLI as several chunks.
	Parts []Part
	// Stall, when set, sends the first event and then holds the stream
	// open until the client goes away or the test ends.
	Stall bool
	// Thoughts is the usage's thoughtsTokenCount (reasoning tokens).
	Thoughts int
}

// Usage the fake reports for every successful reply: 1000 prompt tokens,
// 200 of them cached, and 50 output tokens.
const (
	PromptTokens = 1000
	CachedTokens = 200
	OutputTokens = 50
)

// Text is a final answer: one text part (chunks, when given more than
// one string: one server-sent event each).
func Text(chunks ...string) Reply {
	var parts []Part
	for _, c := range chunks {
		parts = append(parts, Part{Text: c})
	}
	return Reply{Parts: parts}
}

// Shell is a turn that runs command with the run_shell_command tool.
func Shell(command string) Reply {
	return Call1("run_shell_command", map[string]any{"command": command, "description": "Run a command"})
}

// Call1 is a turn that calls one tool with args.
func Call1(name string, args map[string]any) Reply {
	return Reply{Parts: []Part{{FunctionCall: &Call{Name: name, Args: args}}}}
}

// Status is an HTTP error with a Google API error body: {"error": {"code",
// "message", "status"}}.
func Status(code int, message string) Reply {
	status := map[int]string{400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
		404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}[code]
	if status == "" {
		status = "UNKNOWN"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": message, "status": status}})
	return Reply{Status: code, Body: string(b)}
}

// DailyQuota is the 429 the Gemini API sends when a per-day quota is
// spent: RESOURCE_EXHAUSTED with a QuotaFailure whose quotaId says
// PerDay, and a RetryInfo. The pinned CLI turns it into a
// TerminalQuotaError ("You have exhausted your daily quota on this
// model.") and does not retry it.
func DailyQuota() Reply {
	return quota429("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "20s")
}

// QuotaRetryAfter is a 429 RESOURCE_EXHAUSTED whose RetryInfo asks for
// retryDelay (such as "3600s"). The pinned CLI turns a delay over 300 s
// into a TerminalQuotaError whose message ends "Suggested retry after
// <delay>."; a shorter one is retried (a RetryableQuotaError).
func QuotaRetryAfter(retryDelay string) Reply {
	return quota429("GenerateContentInputTokensPerModelPerMinute-FreeTier", retryDelay)
}

func quota429(quotaID, retryDelay string) Reply {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"code":    429,
		"message": "You exceeded your current quota, please check your plan and billing details.",
		"status":  "RESOURCE_EXHAUSTED",
		"details": []any{
			map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
				"violations": []any{map[string]any{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
					"quotaId": quotaID}}},
			map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retryDelay},
		},
	}})
	return Reply{Status: 429, Body: string(b)}
}

// Stall is a reply that sends a first text chunk and then nothing more
// until the client goes away or the test ends.
func Stall() Reply {
	return Reply{Parts: []Part{{Text: "Thinking"}}, Stall: true}
}

// API is a scripted Gemini API on 127.0.0.1.
type API struct {
	// URL is the server's base URL, for GOOGLE_GEMINI_BASE_URL.
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
	a.URL = "http://" + a.Serve(t, a)
	return a
}

// Settings is the $HOME/.gemini/settings.json of a test run: API-key auth
// (without it GOOGLE_GEMINI_BASE_URL switches the CLI to "gateway" auth,
// which headless mode refuses), one attempt per request (the default 10,
// with backoff, take minutes against a failing fake), no usage
// statistics (they make DNS lookups of Google hosts).
const Settings = `{"security":{"auth":{"selectedType":"gemini-api-key"}},` +
	`"general":{"maxAttempts":1},"privacy":{"usageStatisticsEnabled":false}}`

// Env writes home/.gemini/settings.json (Settings) and returns the
// environment of a hermetic CLI run against the API, on top of the
// caller's: home is a throwaway HOME, and TMPDIR (the CLI leaves error
// reports there); a dummy key; nothing of the developer's own login.
func (a *API) Env(home string) []string {
	a.t.Helper()
	dir := filepath.Join(home, ".gemini")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		a.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), []byte(Settings), 0o644); err != nil {
		a.t.Fatal(err)
	}
	return []string{
		"HOME=" + home,
		"TMPDIR=" + home,
		"GEMINI_API_KEY=test-not-a-key",
		"GOOGLE_GEMINI_BASE_URL=" + a.URL,
		"GOOGLE_API_KEY=",
		"GOOGLE_GENAI_USE_VERTEXAI=",
		"GOOGLE_GENAI_USE_GCA=",
		"GOOGLE_CLOUD_PROJECT=",
		"GOOGLE_APPLICATION_CREDENTIALS=",
		"GEMINI_MODEL=",
		"GEMINI_SYSTEM_MD=",
		"NO_COLOR=1",
	}
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	model, method, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1beta/models/"), ":")
	if r.Method != http.MethodPost || !ok || !strings.HasPrefix(r.URL.Path, "/v1beta/models/") {
		http.Error(w, `{"error":{"code":404,"message":"geminitest: no such endpoint","status":"NOT_FOUND"}}`, http.StatusNotFound)
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
	req.Model, req.Method = model, method
	if method == "countTokens" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"totalTokens":1000}`)
		return
	}
	n := a.Record(req)

	rep := a.Answer(req)
	if rep.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		_, _ = io.WriteString(w, rep.Body)
		return
	}
	usage := map[string]any{"promptTokenCount": PromptTokens, "candidatesTokenCount": OutputTokens,
		"cachedContentTokenCount": CachedTokens, "thoughtsTokenCount": rep.Thoughts,
		"totalTokenCount": PromptTokens + OutputTokens + rep.Thoughts}
	event := func(parts []Part, last bool) map[string]any {
		var ps []any
		for _, p := range parts {
			if p.FunctionCall != nil {
				ps = append(ps, map[string]any{"functionCall": map[string]any{"name": p.FunctionCall.Name, "args": p.FunctionCall.Args}})
			} else {
				ps = append(ps, map[string]any{"text": p.Text})
			}
		}
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": ps}, "index": 0}
		ev := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": "resp-" + strconv.Itoa(n)}
		if last {
			cand["finishReason"] = "STOP"
			ev["usageMetadata"] = usage
		}
		return ev
	}
	if method != "streamGenerateContent" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(event(rep.Parts, true))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	send := func(data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	for i, p := range rep.Parts {
		send(event([]Part{p}, i == len(rep.Parts)-1 && !rep.Stall))
		if rep.Stall {
			a.Stall(r)
			return
		}
	}
}

// ProcessesWithEnv returns the pids of the live processes (zombies aside)
// whose environment holds the entry kv, such as this test's GOOGLE_GEMINI_BASE_URL:
// the agents it started and their children (agentproctest.ProcessesWithEnv).
func ProcessesWithEnv(kv string) []int { return agentproctest.ProcessesWithEnv(kv) }
