package claude

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/claude/claudetest"
	"github.com/ralph-dev/ralph/loop"
)

// End-to-end tests against the real Claude Code CLI (the pinned release
// that .ci/run installs), driven by a fake Anthropic Messages API served on
// 127.0.0.1. No key, no network.

// e2eRequest returns a request for a hermetic run of the real CLI against
// the fake API: throwaway HOME and TMPDIR, no telemetry, no retries.
func e2eRequest(t testing.TB, api *claudetest.API) loop.RunRequest {
	t.Helper()
	return loop.RunRequest{
		Prompt:    "Do task t-1.",
		Model:     "sonnet",
		Sandboxed: true,
		Dir:       t.TempDir(),
		UseAPIKey: true,
		LogPath:   filepath.Join(t.TempDir(), "iter-1.ndjson"),
		Timeout:   60 * time.Second,
		Env:       append(api.Env(t.TempDir()), claudetest.IsSandbox), // Sandboxed, as root
	}
}

// runReal runs the real CLI and fails the test with its stderr and the
// API's requests if Run itself fails.
func runReal(t *testing.T, ctx context.Context, api *claudetest.API, req loop.RunRequest) (loop.RunResult, *collector) {
	t.Helper()
	var c collector
	req.OnEvent = c.add
	r := &Runner{Path: claudetest.Binary(t), Grace: 2 * time.Second}
	res, err := r.Run(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("result: %+v", res)
			t.Logf("API requests: %d", len(api.Requests()))
			if raw, err := os.ReadFile(req.LogPath); err == nil {
				t.Logf("raw stream:\n%s", raw)
			}
		}
	})
	return res, &c
}

func TestE2EToolCallThenDone(t *testing.T) {
	api := claudetest.NewAPI(t, func(r claudetest.Request) claudetest.Reply {
		if r.ToolResults() == 0 {
			return claudetest.Reply{Blocks: []claudetest.Block{
				{Text: "I'll run a command."},
				{Tool: "Bash", Input: map[string]any{"command": "echo hello > out.txt", "description": "Write out.txt"}},
			}, Stop: "tool_use"}
		}
		return claudetest.Reply{Blocks: []claudetest.Block{{Text: "All done: wrote out.txt.\n<task-done>t-1</task-done>"}}, Stop: "end_turn"}
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
	reqs := api.Requests()
	if len(reqs) == 0 || !strings.Contains(reqs[0].UserText(), "Do task t-1.") {
		t.Errorf("the first API request does not carry the prompt")
	}
}

// TestE2ERootRefusal: as root, outside ralph's sandbox and without
// IS_SANDBOX=1 in its environment, the real CLI refuses
// --dangerously-skip-permissions
// (ARCHITECTURE.md §7.7): the runner reports ClassRefused in words that say
// what to do, and nothing reached the API. The verifier's session, which
// skips no permission, runs.
func TestE2ERootRefusal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("Claude Code refuses only root")
	}
	api := claudetest.NewAPI(t, func(claudetest.Request) claudetest.Reply { return claudetest.Text("<verify-pass/>") })
	t.Setenv(EnvIsSandbox, "")
	os.Unsetenv(EnvIsSandbox) // t.Setenv restores it afterwards
	req := e2eRequest(t, api)
	req.Env = api.Env(t.TempDir()) // without claudetest.IsSandbox
	res, _ := runReal(t, t.Context(), api, req)
	if res.Class != loop.ClassRefused || res.Text != RootRefusal {
		t.Fatalf("class %s: %s\nstderr: %s", res.Class, Describe(res), res.Stderr)
	}
	if n := len(api.Requests()); n != 0 {
		t.Errorf("%d requests reached the API", n)
	}

	req = e2eRequest(t, api)
	req.Env = api.Env(t.TempDir())
	req.Sandboxed, req.Tools = false, loop.VerifierTools
	if res, _ := runReal(t, t.Context(), api, req); res.Class != loop.ClassSuccess {
		t.Fatalf("the verifier's session: class %s: %s", res.Class, Describe(res))
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
			api := claudetest.NewAPI(t, func(claudetest.Request) claudetest.Reply {
				return claudetest.Reply{Status: tt.status, Body: tt.body, Header: tt.header}
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
	stallScript := func(claudetest.Request) claudetest.Reply {
		return claudetest.Reply{Blocks: []claudetest.Block{{Text: "Partial answer"}, {Text: "never sent"}}, Stop: "end_turn", StallAt: 2}
	}
	t.Run("idle timeout kills a stalled stream", func(t *testing.T) {
		api := claudetest.NewAPI(t, stallScript)
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
		api := claudetest.NewAPI(t, stallScript)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() {
			select {
			case <-api.Stalled:
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

// TestE2ESIGINT interrupts the real CLI mid-stream with SIGINT, as a
// terminal would: it exits 0 with error_during_execution, which is an
// agent error when ralph did not ask for it.
func TestE2ESIGINT(t *testing.T) {
	api := claudetest.NewAPI(t, func(claudetest.Request) claudetest.Reply {
		return claudetest.Reply{Blocks: []claudetest.Block{{Text: "Partial answer"}, {Text: "never sent"}}, Stop: "end_turn", StallAt: 2}
	})
	go func() {
		select {
		case <-api.Stalled:
		case <-t.Context().Done():
			return
		}
		// The agent is the process with this test's API address (it runs
		// no tool while the reply stalls, so it is the only one).
		for range 100 {
			if pids := claudetest.ProcessesWithEnv("ANTHROPIC_BASE_URL=" + api.URL); len(pids) > 0 {
				sendSignal(pids[0], syscall.SIGINT)
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
			api := claudetest.NewAPI(t, func(r claudetest.Request) claudetest.Reply {
				if strings.Contains(r.SystemText(), marker) {
					mu.Lock()
					gotSystem = max(gotSystem, len(r.SystemText()))
					keptOwn = strings.Contains(strings.Replace(r.SystemText(), big, "", 1), ownPrompt)
					mu.Unlock()
					return claudetest.Reply{Blocks: []claudetest.Block{{Text: "<task-done>t-1</task-done>"}}, Stop: "end_turn"}
				}
				return claudetest.Reply{Blocks: []claudetest.Block{{Text: "no system prompt"}}, Stop: "end_turn"}
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
	path := claudetest.Binary(b)
	api := claudetest.NewAPI(b, func(r claudetest.Request) claudetest.Reply {
		if r.ToolResults() == 0 {
			return claudetest.Reply{Blocks: []claudetest.Block{
				{Text: "I'll run a command."},
				{Tool: "Bash", Input: map[string]any{"command": "echo hello > out.txt", "description": "Write out.txt"}},
			}, Stop: "tool_use"}
		}
		return claudetest.Reply{Blocks: []claudetest.Block{{Text: "<task-done>t-1</task-done>"}}, Stop: "end_turn"}
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
		cmd.Dir, cmd.Env = req.Dir, Env(os.Environ(), req, false)
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

// A verifier session (not sandboxed, Tools = loop.VerifierTools) is offered
// those tools and no others — not Edit, Write or Agent — and its Bash
// still runs without a permission prompt, even a command that writes a
// file (as test runs write caches), which -p mode would refuse unless
// pre-approved.
func TestE2EVerifierTools(t *testing.T) {
	api := claudetest.NewAPI(t, func(r claudetest.Request) claudetest.Reply {
		if r.ToolResults() == 0 {
			return claudetest.Bash("echo hi | tee out.txt")
		}
		return claudetest.Text("<verify-pass/>")
	})
	req := e2eRequest(t, api)
	req.Sandboxed, req.Tools = false, loop.VerifierTools
	res, _ := runReal(t, t.Context(), api, req)
	if res.Class != loop.ClassSuccess || res.Text != "<verify-pass/>" {
		t.Fatalf("class %s, text %q: %s", res.Class, res.Text, Describe(res))
	}
	reqs := api.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d API requests, want 2 (the Bash call, then the verdict)", len(reqs))
	}
	for i, r := range reqs {
		var offered []string
		for _, name := range r.ToolNames() {
			// An internal placeholder of the CLI, not a tool the model
			// can call.
			if name != "DeferredToolPlaceholder" {
				offered = append(offered, name)
			}
		}
		slices.Sort(offered)
		if diff := cmp.Diff([]string{"Bash", "Glob", "Grep", "Read"}, offered); diff != "" {
			t.Errorf("request %d: tools offered (-want +got):\n%s", i+1, diff)
		}
	}
	// The Bash call ran: no permission prompt stopped it.
	if got := reqs[1].LastToolResult(); got != "hi" {
		t.Errorf("Bash tool result %q, want %q", got, "hi")
	}
}

// A result ends the session: the real CLI, stopped by its own SessionEnd
// hook right after its result line (state T, for good), is stopped by ralph
// after the result grace, and its result stands — no waiting for the idle
// timeout, nothing left running.
func TestE2EResultThenHang(t *testing.T) {
	api := claudetest.NewAPI(t, func(claudetest.Request) claudetest.Reply {
		return claudetest.Text("All done.\n<task-done>t-1</task-done>")
	})
	req := e2eRequest(t, api)
	req.IdleTimeout = time.Minute
	hook := `{"hooks":{"SessionEnd":[{"hooks":[{"type":"command","command":"kill -STOP $PPID"}]}]}}`
	if err := os.MkdirAll(filepath.Join(req.Dir, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(req.Dir, ".claude", "settings.json"), []byte(hook), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, _ := runReal(t, t.Context(), api, req)
	elapsed := time.Since(start)
	if res.Class != loop.ClassSuccess || res.Text != "All done.\n<task-done>t-1</task-done>" {
		t.Errorf("class %s, text %q, want the result as it was: %s", res.Class, res.Text, Describe(res))
	}
	if !strings.Contains(res.Stderr, "did not exit within") {
		t.Errorf("Stderr = %q: the hook did not hold the CLI, or ralph did not say it stopped it", res.Stderr)
	}
	// The result grace (5 s) and a SIGTERM that ends the CLI at once once
	// continued; the idle timeout is a minute.
	if elapsed > 20*time.Second {
		t.Errorf("Run took %v: it waited for more than the result grace", elapsed)
	}
	if pids := claudetest.ProcessesWithEnv("ANTHROPIC_BASE_URL=" + api.URL); len(pids) > 0 {
		for _, pid := range pids {
			sendSignal(pid, syscall.SIGKILL)
		}
		t.Errorf("processes of the run left: %v", pids)
	}
	t.Logf("Run took %v", elapsed)
}

// Nothing the real CLI's tools start outlives the run: a Bash call that
// detaches a process into a session of its own (setsid, out of the
// agent's process group) does not leave it running, and the file it would
// write 3 s later never appears.
func TestE2EDetachedProcessReaped(t *testing.T) {
	const detach = `setsid sh -c 'sleep 3; echo late > late.txt' >/dev/null 2>&1 &`
	api := claudetest.NewAPI(t, func(r claudetest.Request) claudetest.Reply {
		if r.ToolResults() == 0 {
			return claudetest.Bash(detach)
		}
		return claudetest.Text("Started it.\n<task-done>t-1</task-done>")
	})
	req := e2eRequest(t, api)
	start := time.Now()
	res, c := runReal(t, t.Context(), api, req)
	elapsed := time.Since(start)
	if res.Class != loop.ClassSuccess {
		t.Fatalf("class %s: %s", res.Class, Describe(res))
	}
	var ran bool
	for _, ev := range c.events {
		ran = ran || ev.Kind == loop.EventToolUse && ev.Input == detach
	}
	if !ran {
		t.Fatalf("no Bash call of %q among %v", detach, c.kinds())
	}
	if pids := claudetest.ProcessesWithEnv("ANTHROPIC_BASE_URL=" + api.URL); len(pids) > 0 {
		for _, pid := range pids {
			sendSignal(pid, syscall.SIGKILL)
		}
		t.Errorf("processes of the run left: %v", pids)
	}
	time.Sleep(4 * time.Second)
	if _, err := os.Stat(filepath.Join(req.Dir, "late.txt")); err == nil {
		t.Error("the detached process wrote late.txt after the run")
	}
	t.Logf("Run took %v", elapsed)
}
