package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/loop"
)

// End-to-end tests against the real Claude Code CLI (the pinned release
// that .ci/run installs), driven by a fake Anthropic Messages API served on
// 127.0.0.1. No key, no network.

const claudeVersion = "2.1.330"

// realClaude returns the pinned Claude Code binary: $RALPH_TEST_CLAUDE, else
// <module root>/.cache/claude/node_modules/.bin/claude. Missing, it fails
// the test in CI and skips it elsewhere, saying how to install it.
func realClaude(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatal("no go.mod above " + wd)
		}
		root = parent
	}
	p := os.Getenv("RALPH_TEST_CLAUDE")
	if p == "" {
		p = filepath.Join(root, ".cache", "claude", "node_modules", ".bin", "claude")
	}
	if fi, err := os.Stat(p); err != nil || fi.IsDir() {
		msg := fmt.Sprintf("Claude Code %s not found at %s (set RALPH_TEST_CLAUDE, or install it with: "+
			"npm install --no-audit --no-fund --loglevel=error --prefix %s @anthropic-ai/claude-code@%s)",
			claudeVersion, p, filepath.Join(root, ".cache", "claude"), claudeVersion)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	versionOnce.Do(func() {
		out, err := exec.Command(p, "--version").Output()
		version = strings.TrimSpace(string(out))
		if err != nil {
			version = err.Error()
		}
	})
	if !strings.HasPrefix(version, claudeVersion+" ") {
		// The transcripts and the classification are checked against the
		// pinned release; another one is not what CI tests.
		msg := fmt.Sprintf("%s is Claude Code %q, not the pinned %s", p, version, claudeVersion)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

var (
	versionOnce sync.Once
	version     string // of the Claude Code under test
)

// apiRequest is the part of a Messages API request the fake looks at.
type apiRequest struct {
	Model    string          `json:"model"`
	Stream   bool            `json:"stream"`
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// toolResults counts the tool_result blocks in the conversation so far: the
// step of a scripted conversation.
func (r apiRequest) toolResults() int {
	n := 0
	for _, m := range r.Messages {
		var blocks []struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(m.Content, &blocks) == nil {
			for _, b := range blocks {
				if b.Type == "tool_result" {
					n++
				}
			}
		}
	}
	return n
}

// block is one content block of a scripted reply.
type block struct {
	Text  string         // a text block, unless Tool is set
	Tool  string         // a tool_use block's tool name
	Input map[string]any // and its input
}

// reply is what the fake API answers to one request.
type reply struct {
	Status  int               // an HTTP error status; 0 for a streamed message
	Body    string            // the error body
	Header  map[string]string // extra headers
	Blocks  []block
	Stop    string // stop_reason
	StallAt int    // stall after this many blocks, when > 0 (1-based)
}

// fakeAPI is a scripted Messages API.
type fakeAPI struct {
	t      testing.TB
	script func(apiRequest) reply
	url    string

	mu       sync.Mutex
	requests []apiRequest
	stalled  chan struct{} // closed when a reply stalls
	stallOne sync.Once
	done     chan struct{} // closed at the end of the test: stalls give up
}

func newFakeAPI(t testing.TB, script func(apiRequest) reply) *fakeAPI {
	t.Helper()
	f := &fakeAPI{t: t, script: script, stalled: make(chan struct{}), done: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		close(f.done)
		_ = srv.Close()
	})
	f.url = "http://" + ln.Addr().String()
	return f
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	var req apiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, req)
	f.mu.Unlock()

	rep := f.script(req)
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	if rep.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.Status)
		_, _ = io.WriteString(w, rep.Body)
		return
	}
	model := req.Model
	if !req.Stream {
		f.writeJSON(w, model, rep)
		return
	}
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
		"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 1200, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 300},
	}})
	for i, b := range rep.Blocks {
		if rep.StallAt > 0 && i+1 == rep.StallAt {
			f.stall(r)
			return
		}
		if b.Tool != "" {
			send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d_%d", len(req.Messages), i), "name": b.Tool, "input": map[string]any{}}})
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
		f.stall(r)
		return
	}
	send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": rep.Stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 42}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// stall holds the response open, sending nothing, until the client goes
// away or the test ends.
func (f *fakeAPI) stall(r *http.Request) {
	f.stallOne.Do(func() { close(f.stalled) })
	select {
	case <-r.Context().Done():
	case <-f.done:
	}
}

// writeJSON answers a non-streaming request (the CLI's fallback after a
// broken stream) with a plain message.
func (f *fakeAPI) writeJSON(w http.ResponseWriter, model string, rep reply) {
	var content []any
	for i, b := range rep.Blocks {
		if b.Tool != "" {
			content = append(content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_nostream_%d", i), "name": b.Tool, "input": b.Input})
		} else {
			content = append(content, map[string]any{"type": "text", "text": b.Text})
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "msg_fake", "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": rep.Stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 1200, "output_tokens": 42}})
}

func (f *fakeAPI) requestsSeen() []apiRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]apiRequest(nil), f.requests...)
}

// e2eRequest returns a request for a hermetic run of the real CLI against
// the fake API: throwaway HOME and TMPDIR, no telemetry, no retries.
func e2eRequest(t testing.TB, api *fakeAPI) loop.RunRequest {
	t.Helper()
	home := t.TempDir()
	return loop.RunRequest{
		Prompt:    "Do task t-1.",
		Model:     "sonnet",
		Sandboxed: true,
		Dir:       t.TempDir(),
		UseAPIKey: true,
		LogPath:   filepath.Join(t.TempDir(), "iter-1.ndjson"),
		Timeout:   60 * time.Second,
		Env: []string{
			"ANTHROPIC_BASE_URL=" + api.url,
			"ANTHROPIC_API_KEY=sk-ant-test-not-a-key",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"DISABLE_TELEMETRY=1",
			"DISABLE_AUTOUPDATER=1",
			"DISABLE_ERROR_REPORTING=1",
			"CLAUDE_CODE_MAX_RETRIES=0",
			"HOME=" + home,
			"TMPDIR=" + home,
			"CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
			// Whatever the developer's shell holds must not reach the run.
			"CLAUDE_CODE_OAUTH_TOKEN=",
			"ANTHROPIC_AUTH_TOKEN=",
			"ANTHROPIC_MODEL=",
			"ANTHROPIC_CUSTOM_HEADERS=",
			"CLAUDE_CODE_USE_BEDROCK=",
			"CLAUDE_CODE_USE_VERTEX=",
		},
	}
}

// runReal runs the real CLI and fails the test with its stderr and the
// API's requests if Run itself fails.
func runReal(t *testing.T, ctx context.Context, api *fakeAPI, req loop.RunRequest) (loop.RunResult, *collector) {
	t.Helper()
	var c collector
	req.OnEvent = c.add
	r := &Runner{Path: realClaude(t), Grace: 2 * time.Second}
	res, err := r.Run(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("result: %+v", res)
			t.Logf("API requests: %d", len(api.requestsSeen()))
			if raw, err := os.ReadFile(req.LogPath); err == nil {
				t.Logf("raw stream:\n%s", raw)
			}
		}
	})
	return res, &c
}

func TestE2EToolCallThenDone(t *testing.T) {
	api := newFakeAPI(t, func(r apiRequest) reply {
		if r.toolResults() == 0 {
			return reply{Blocks: []block{
				{Text: "I'll run a command."},
				{Tool: "Bash", Input: map[string]any{"command": "echo hello > out.txt", "description": "Write out.txt"}},
			}, Stop: "tool_use"}
		}
		return reply{Blocks: []block{{Text: "All done: wrote out.txt.\n<task-done>t-1</task-done>"}}, Stop: "end_turn"}
	})
	req := e2eRequest(t, api)
	res, c := runReal(t, t.Context(), api, req)

	if res.Class != loop.ClassSuccess {
		t.Fatalf("class %s: %s", res.Class, Describe(res))
	}
	if diff := cmp.Diff("All done: wrote out.txt.\n<task-done>t-1</task-done>", res.Text); diff != "" {
		t.Errorf("Text (-want +got):\n%s", diff)
	}
	if res.Turns != 2 {
		t.Errorf("Turns = %d, want 2", res.Turns)
	}
	if res.CostUSD <= 0 || res.Usage.InputTokens <= 0 || res.Usage.OutputTokens <= 0 || res.Usage.CacheReadTokens <= 0 {
		t.Errorf("cost %v, usage %+v: want them parsed and non-zero", res.CostUSD, res.Usage)
	}
	if res.SessionID == "" || res.Model == "" || res.ExitCode != 0 {
		t.Errorf("session %q, model %q, exit %d", res.SessionID, res.Model, res.ExitCode)
	}
	data, err := os.ReadFile(filepath.Join(req.Dir, "out.txt"))
	if err != nil || string(data) != "hello\n" {
		t.Errorf("out.txt = %q, %v: the Bash tool did not run in the request's Dir", data, err)
	}
	var sawTool bool
	for _, ev := range c.events {
		if ev.Kind == loop.EventToolUse && ev.Tool == "Bash" && ev.Input == "echo hello > out.txt" {
			sawTool = true
		}
	}
	if !sawTool {
		t.Errorf("no Bash tool_use event with its command among %v", c.kinds())
	}
	// The prompt reached the API through stdin.
	reqs := api.requestsSeen()
	if len(reqs) == 0 || !strings.Contains(string(reqs[0].Messages[0].Content), "Do task t-1.") {
		t.Errorf("the first API request does not carry the prompt")
	}
}

func TestE2EAPIErrors(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		header     map[string]string
		oauth      bool // log in as a subscriber (CLAUDE_CODE_OAUTH_TOKEN), not with a key
		wantClass  loop.ErrorClass
		wantStatus int
		wantReset  time.Time
	}{
		{
			name: "429 rate limit", status: 429,
			body:      `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
			wantClass: loop.ClassAPIError, wantStatus: 429,
		},
		{
			name: "529 overloaded", status: 529,
			body:      `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			wantClass: loop.ClassAPIError, wantStatus: 529,
		},
		{
			name: "401 bad key", status: 401,
			body:      `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
			wantClass: loop.ClassAuth, wantStatus: 401,
		},
		{
			// A subscriber's usage limit: the CLI reads the unified
			// rate-limit headers, writes a rejected rate_limit_event and
			// "You've hit your 5-hour limit · resets 6:30pm (UTC)".
			name: "429 usage limit of a subscription", status: 429, oauth: true,
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit. Please try again later."}}`,
			header: map[string]string{
				"anthropic-ratelimit-unified-status":               "rejected",
				"anthropic-ratelimit-unified-reset":                "1784399400",
				"anthropic-ratelimit-unified-representative-claim": "five_hour",
				"anthropic-ratelimit-unified-5h-status":            "rejected",
				"anthropic-ratelimit-unified-5h-reset":             "1784399400",
			},
			wantClass: loop.ClassUsageLimit, wantStatus: 429, wantReset: time.Unix(1784399400, 0).UTC(),
		},
		{
			// The same headers with an API key: an ordinary rate limit.
			name: "429 with limit headers but an API key", status: 429,
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit. Please try again later."}}`,
			header: map[string]string{
				"anthropic-ratelimit-unified-status": "rejected",
				"anthropic-ratelimit-unified-reset":  "1784399400",
			},
			wantClass: loop.ClassAPIError, wantStatus: 429,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI(t, func(apiRequest) reply {
				return reply{Status: tt.status, Body: tt.body, Header: tt.header}
			})
			req := e2eRequest(t, api)
			if tt.oauth {
				req.UseAPIKey = false // ANTHROPIC_API_KEY is removed
				req.Env = append(req.Env, "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-not-a-token")
			}
			res, _ := runReal(t, t.Context(), api, req)
			if res.Class != tt.wantClass || res.APIErrorStatus != tt.wantStatus {
				t.Errorf("got class %s status %d, want %s %d (%s)", res.Class, res.APIErrorStatus, tt.wantClass, tt.wantStatus, Describe(res))
			}
			var gotReset time.Time
			if res.UsageLimit != nil {
				gotReset = res.UsageLimit.ResetsAt
			}
			if diff := cmp.Diff(tt.wantReset, gotReset); diff != "" {
				t.Errorf("ResetsAt (-want +got):\n%s", diff)
			}
			if !res.IsError {
				t.Error("IsError is false")
			}
		})
	}
}

func TestE2EStallAndCancel(t *testing.T) {
	stallScript := func(apiRequest) reply {
		return reply{Blocks: []block{{Text: "Partial answer"}, {Text: "never sent"}}, Stop: "end_turn", StallAt: 2}
	}
	t.Run("idle timeout kills a stalled stream", func(t *testing.T) {
		api := newFakeAPI(t, stallScript)
		req := e2eRequest(t, api)
		req.IdleTimeout = 3 * time.Second
		start := time.Now()
		res, _ := runReal(t, t.Context(), api, req)
		elapsed := time.Since(start)
		if res.Class != loop.ClassIdleTimeout {
			t.Errorf("class %s, want idle_timeout (%s)", res.Class, Describe(res))
		}
		if elapsed > 15*time.Second {
			t.Errorf("took %v: the idle timeout did not cut the stall short", elapsed)
		}
	})
	t.Run("cancel mid-stream", func(t *testing.T) {
		api := newFakeAPI(t, stallScript)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			select {
			case <-api.stalled:
				cancel()
			case <-ctx.Done():
			}
		}()
		start := time.Now()
		res, _ := runReal(t, ctx, api, e2eRequest(t, api))
		elapsed := time.Since(start)
		if res.Class != loop.ClassCancelled {
			t.Errorf("class %s, want cancelled (%s)", res.Class, Describe(res))
		}
		if elapsed > 15*time.Second {
			t.Errorf("took %v to cancel", elapsed)
		}
	})
}

// findProcess returns the pid of a process whose environment holds kv
// (each test's fake API address is unique), or 0.
func findProcess(kv string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for _, v := range strings.Split(string(env), "\x00") {
			if v == kv {
				return pid
			}
		}
	}
	return 0
}

// TestE2ESIGINT interrupts the real CLI mid-stream with SIGINT, as a
// terminal would: it exits 0 with error_during_execution, which is an
// agent error when ralph did not ask for it.
func TestE2ESIGINT(t *testing.T) {
	api := newFakeAPI(t, func(apiRequest) reply {
		return reply{Blocks: []block{{Text: "Partial answer"}, {Text: "never sent"}}, Stop: "end_turn", StallAt: 2}
	})
	go func() {
		select {
		case <-api.stalled:
		case <-t.Context().Done():
			return
		}
		// The agent is the process with this test's API address (it runs
		// no tool while the reply stalls, so it is the only one).
		for range 100 {
			if pid := findProcess("ANTHROPIC_BASE_URL=" + api.url); pid != 0 {
				_ = syscall.Kill(pid, syscall.SIGINT)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	req := e2eRequest(t, api)
	req.IdleTimeout = 20 * time.Second
	res, _ := runReal(t, t.Context(), api, req)
	if res.ExitCode != 0 || res.Subtype != "error_during_execution" {
		t.Errorf("exit %d, subtype %q: the CLI's SIGINT behaviour changed", res.ExitCode, res.Subtype)
	}
	if res.Class != loop.ClassAgentError {
		t.Errorf("class %s, want agent_error (%s)", res.Class, Describe(res))
	}
}

// A 1 MB system prompt reaches the API through a file, appended to Claude
// Code's own system prompt (whose tool instructions stay) by default, in
// place of it with ReplaceSystemPrompt.
func TestE2EBigSystemPrompt(t *testing.T) {
	const marker = "RALPH-SYSTEM-PROMPT-END"
	// ownPrompt is a phrase of Claude Code's own system prompt.
	const ownPrompt = "Claude Code"
	big := strings.Repeat("You are a careful engineer. Follow the plan.\n", (1<<20)/45+1) + marker
	tests := []struct {
		name    string
		replace bool
	}{
		{name: "appended"},
		{name: "replacing", replace: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var gotSystem int
			var keptOwn bool
			api := newFakeAPI(t, func(r apiRequest) reply {
				if strings.Contains(string(r.System), marker) {
					mu.Lock()
					gotSystem = max(gotSystem, len(r.System))
					keptOwn = strings.Contains(strings.Replace(string(r.System), big, "", 1), ownPrompt)
					mu.Unlock()
					return reply{Blocks: []block{{Text: "<task-done>t-1</task-done>"}}, Stop: "end_turn"}
				}
				return reply{Blocks: []block{{Text: "no system prompt"}}, Stop: "end_turn"}
			})
			req := e2eRequest(t, api)
			req.SystemPrompt, req.ReplaceSystemPrompt = big, tt.replace
			res, _ := runReal(t, t.Context(), api, req)
			if res.Class != loop.ClassSuccess || res.Text != "<task-done>t-1</task-done>" {
				t.Fatalf("class %s, text %q: the 1 MB system prompt did not reach the API", res.Class, res.Text)
			}
			mu.Lock()
			defer mu.Unlock()
			if gotSystem < len(big) {
				t.Errorf("system prompt in the request: %d bytes, want at least %d", gotSystem, len(big))
			}
			if keptOwn == tt.replace {
				t.Errorf("Claude Code's own system prompt kept: %v; want %v", keptOwn, !tt.replace)
			}
		})
	}
}

// BenchmarkRunOverhead measures ralph's own time around one real CLI run
// (a Bash tool call, then the final text, against the fake API), from
// marks inside Run: before the agent is started (temporary system prompt
// file, log file, pipes, arguments, environment) and after it exits
// (reaping the group, draining the stream, classifying). Parsing and
// logging run while the agent runs, on another goroutine, so they add to
// the wall time only if they fall behind. Metrics: the CLI's own time per
// run (spawn to exit), ralph's time per run, and ralph's share in percent.
// bare-ms/op is the same CLI run with plain os/exec, stdout discarded, for
// comparison (interleaved with the measured runs; noisy on a shared
// machine).
func BenchmarkRunOverhead(b *testing.B) {
	path := realClaude(b)
	api := newFakeAPI(b, func(r apiRequest) reply {
		if r.toolResults() == 0 {
			return reply{Blocks: []block{
				{Text: "I'll run a command."},
				{Tool: "Bash", Input: map[string]any{"command": "echo hello > out.txt", "description": "Write out.txt"}},
			}, Stop: "tool_use"}
		}
		return reply{Blocks: []block{{Text: "<task-done>t-1</task-done>"}}, Stop: "end_turn"}
	})
	var marks map[string]time.Time
	r := &Runner{Path: path, Grace: 2 * time.Second}
	r.trace = func(stage string) { marks[stage] = time.Now() }

	var agent, own, bare time.Duration
	runs := 0
	for b.Loop() {
		// The same session without ralph: plain os/exec, the same
		// arguments and system prompt file, stdout discarded.
		req := e2eRequest(b, api)
		req.SystemPrompt = "You are a careful engineer."
		spFile := filepath.Join(b.TempDir(), "system.md")
		if err := os.WriteFile(spFile, []byte(req.SystemPrompt), 0o644); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(path, Args(req, spFile)...)
		cmd.Dir, cmd.Env = req.Dir, Env(os.Environ(), req)
		cmd.Stdin, cmd.Stdout = strings.NewReader(req.Prompt), io.Discard
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("bare run: %v", err)
		}
		bare += time.Since(t0)

		req = e2eRequest(b, api)
		req.SystemPrompt = "You are a careful engineer."
		marks = map[string]time.Time{}
		res, err := r.Run(b.Context(), req)
		if err != nil || res.Class != loop.ClassSuccess {
			b.Fatalf("run: %v %s", err, Describe(res))
		}
		agent += marks["exited"].Sub(marks["spawn"])
		own += marks["spawn"].Sub(marks["enter"]) + marks["return"].Sub(marks["exited"])
		runs++
	}
	b.ReportMetric(float64(agent.Milliseconds())/float64(runs), "agent-ms/op")
	b.ReportMetric(float64(own.Microseconds())/float64(runs), "ralph-µs/op")
	b.ReportMetric(100*float64(own)/float64(agent), "overhead-%")
	b.ReportMetric(float64(bare.Milliseconds())/float64(runs), "bare-ms/op")
}
