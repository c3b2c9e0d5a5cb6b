package gemini

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/agentproc/agentproctest"
	"github.com/ralph-dev/ralph/agents/gemini/geminitest"
	"github.com/ralph-dev/ralph/loop"
)

// End-to-end tests against the real Gemini CLI (the pinned release),
// driven by a fake Gemini API on 127.0.0.1. No key, no network. Each run's
// wall time and the largest resident set of any child so far are logged
// (go test -v -run TestE2E ./agents/gemini/).

// e2eRequest returns a request for a hermetic run against api: throwaway
// HOME and TMPDIR, API-key auth, one attempt per request.
func e2eRequest(t testing.TB, api *geminitest.API) loop.RunRequest {
	t.Helper()
	return loop.RunRequest{
		Prompt:    "Do task T1.",
		Model:     "sonnet",
		Sandboxed: true,
		Dir:       t.TempDir(),
		LogPath:   filepath.Join(t.TempDir(), "iter-1.jsonl"),
		Timeout:   90 * time.Second,
		Env:       api.Env(t.TempDir()),
	}
}

// collector keeps a session's events.
type collector struct {
	mu     sync.Mutex
	events []loop.Event
}

func (c *collector) add(ev loop.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
}

func (c *collector) kinds(k loop.EventKind) []loop.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []loop.Event
	for _, ev := range c.events {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

// runReal runs the real CLI, logs its wall time and the children's max
// RSS, and fails the test if Run itself fails.
func runReal(t *testing.T, ctx context.Context, api *geminitest.API, req loop.RunRequest) (loop.RunResult, *collector, time.Duration) {
	t.Helper()
	c := &collector{}
	if req.OnEvent == nil {
		req.OnEvent = c.add
	}
	r := &Runner{Path: geminitest.Binary(t), Grace: 2 * time.Second}
	start := time.Now()
	res, err := r.Run(ctx, req)
	wall := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s in %v (children's max RSS so far: %d MB), %d API requests", t.Name(), res.Class, wall.Round(time.Millisecond), maxRSSMB(), len(api.Requests()))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("result: %+v", res)
			if raw, err := os.ReadFile(req.LogPath); err == nil {
				t.Logf("raw stream:\n%s", raw)
			}
		}
	})
	return res, c, wall
}

// leftovers fails the test if a process of this test's API is alive.
func leftovers(t *testing.T, api *geminitest.API) {
	t.Helper()
	if pids := geminitest.ProcessesWithEnv("GOOGLE_GEMINI_BASE_URL=" + api.URL); len(pids) > 0 {
		t.Errorf("processes left behind: %v", pids)
	}
}

func TestE2EToolCallThenDone(t *testing.T) {
	const protocol = "RALPH-PROTOCOL: end with <task-done>ID</task-done>."
	api := geminitest.NewAPI(t, func(r geminitest.Request) geminitest.Reply {
		if r.ToolResults() == 0 {
			return geminitest.Shell("echo hi > out.txt")
		}
		return geminitest.Text("Done. ", "<task-done>T1</task-done>")
	})
	req := e2eRequest(t, api)
	req.SystemPrompt = protocol
	res, c, _ := runReal(t, t.Context(), api, req)

	if res.Class != loop.ClassSuccess {
		t.Fatalf("class %s: %q\nstderr: %s", res.Class, res.Text, res.Stderr)
	}
	if res.Text != "Done. <task-done>T1</task-done>" {
		t.Errorf("text %q", res.Text)
	}
	if b, err := os.ReadFile(filepath.Join(req.Dir, "out.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("out.txt = %q, %v", b, err)
	}
	want := loop.Usage{InputTokens: 2 * (geminitest.PromptTokens - geminitest.CachedTokens),
		CacheReadTokens: 2 * geminitest.CachedTokens, OutputTokens: 2 * geminitest.OutputTokens}
	if res.Usage != want {
		t.Errorf("usage %+v, want %+v", res.Usage, want)
	}
	if res.CostSource != loop.CostEstimated || res.CostUSD <= 0 {
		t.Errorf("cost %v %s, want an estimate", res.CostUSD, res.CostSource)
	}
	if res.Agent != Name || res.Model != "gemini-2.5-flash" || res.SessionID == "" || res.Turns != 2 {
		t.Errorf("agent %q model %q session %q turns %d", res.Agent, res.Model, res.SessionID, res.Turns)
	}
	if uses := c.kinds(loop.EventToolUse); len(uses) != 1 || uses[0].Tool != "run_shell_command" || uses[0].Input != "echo hi > out.txt" {
		t.Errorf("tool uses %+v", uses)
	}
	reqs := api.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d API requests, want 2", len(reqs))
	}
	for _, r := range reqs {
		if r.Model != "gemini-2.5-flash" {
			t.Errorf("request for model %q", r.Model)
		}
	}
	// ralph's protocol reaches the model as context, and the CLI's own
	// system instruction stays whole; the prompt is not on argv.
	if !strings.Contains(reqs[0].UserText(), protocol) || strings.Contains(reqs[0].SystemText(), protocol) {
		t.Errorf("system prompt not in the context: user text %.2000q", reqs[0].UserText())
	}
	if !strings.Contains(reqs[0].SystemText(), "Core Mandates") {
		t.Errorf("the CLI's own system instruction is gone: %.300q", reqs[0].SystemText())
	}
	if !strings.Contains(reqs[0].UserText(), "Do task T1.") {
		t.Errorf("prompt missing: %.300q", reqs[0].UserText())
	}
	if m, _ := filepath.Glob(filepath.Join(os.TempDir(), "ralph-gemini-context-*")); len(m) > 0 {
		t.Errorf("context dirs left: %v", m)
	}
	if raw, err := os.ReadFile(req.LogPath); err != nil || !strings.Contains(string(raw), `"type":"result"`) {
		t.Errorf("raw log: %v\n%s", err, raw)
	}
	leftovers(t, api)
}

func TestE2EHTTP500(t *testing.T) {
	api := geminitest.NewAPI(t, func(geminitest.Request) geminitest.Reply {
		return geminitest.Status(500, "fake internal error")
	})
	res, _, wall := runReal(t, t.Context(), api, e2eRequest(t, api))
	if res.Class != loop.ClassAPIError || res.APIErrorStatus != 500 || res.ExitCode != 244 {
		t.Errorf("class %s status %d exit %d, want api_error 500 244", res.Class, res.APIErrorStatus, res.ExitCode)
	}
	if wall > 30*time.Second {
		t.Errorf("took %v with maxAttempts 1", wall)
	}
	if n := len(api.Requests()); n != 1 {
		t.Errorf("%d requests, want 1 (general.maxAttempts 1)", n)
	}
}

func TestE2EUsageLimit(t *testing.T) {
	tests := []struct {
		name  string
		reply geminitest.Reply
		typ   string
		reset func(before, after time.Time) bool
	}{
		{"daily quota", geminitest.DailyQuota(), "daily", func(b, a time.Time) bool {
			// The next midnight in Pacific time: within a day, on the hour.
			return a.Add(-time.Hour).Before(b.Add(24*time.Hour)) && b.Before(a) && a.Minute() == 0
		}},
		{"retry in an hour", geminitest.QuotaRetryAfter("3600s"), "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := geminitest.NewAPI(t, func(geminitest.Request) geminitest.Reply { return tt.reply })
			before := time.Now()
			res, _, _ := runReal(t, t.Context(), api, e2eRequest(t, api))
			if res.Class != loop.ClassUsageLimit || res.UsageLimit == nil {
				t.Fatalf("class %s, usage limit %+v: %q", res.Class, res.UsageLimit, res.Text)
			}
			at := res.UsageLimit.ResetsAt
			if tt.reset != nil && !tt.reset(before, at) {
				t.Errorf("resets at %v", at)
			}
			if tt.reset == nil && (at.Before(before.Add(time.Hour)) || at.After(time.Now().Add(time.Hour))) {
				t.Errorf("resets at %v, want an hour from the run", at)
			}
			if res.UsageLimit.Type != tt.typ {
				t.Errorf("type %q", res.UsageLimit.Type)
			}
		})
	}
}

func TestE2EReadOnlyRefusesShell(t *testing.T) {
	api := geminitest.NewAPI(t, func(r geminitest.Request) geminitest.Reply {
		if r.ToolResults() == 0 {
			return geminitest.Shell("echo hi > out.txt")
		}
		return geminitest.Text("Verified: FAIL")
	})
	req := e2eRequest(t, api)
	req.Sandboxed, req.Tools = false, loop.VerifierTools
	res, c, _ := runReal(t, t.Context(), api, req)
	if res.Class != loop.ClassSuccess {
		t.Fatalf("class %s", res.Class)
	}
	if _, err := os.Stat(filepath.Join(req.Dir, "out.txt")); err == nil {
		t.Error("the read-only session wrote out.txt")
	}
	if rs := c.kinds(loop.EventToolResult); len(rs) != 1 || !rs[0].IsError {
		t.Errorf("tool results %+v, want one error", rs)
	}
	tools := api.Requests()[0].ToolNames()
	for _, w := range []string{"run_shell_command", "write_file", "replace"} {
		if slices.Contains(tools, w) {
			t.Errorf("read-only session offered %s: %v", w, tools)
		}
	}
}

// TestE2EVerifierRunsTestsReadOnly: a verifier given a sandbox
// (VerifierSandbox) gets the shell and runs the project's test command,
// whose output reaches the model; its shell's write into the tree and
// the CLI's own write_file are both refused by the read-only tree.
func TestE2EVerifierRunsTestsReadOnly(t *testing.T) {
	api := geminitest.NewAPI(t, func(r geminitest.Request) geminitest.Reply {
		switch r.ToolResults() {
		case 0:
			return geminitest.Shell("sh test.sh")
		case 1:
			return geminitest.Shell("echo x > written.txt; echo exit=$?")
		case 2:
			return geminitest.Call1("write_file", map[string]any{"file_path": "tool.txt", "content": "x"})
		}
		return geminitest.Text("<verify-pass>")
	})
	req := e2eRequest(t, api)
	req.Sandboxed, req.Tools = false, loop.VerifierTools
	agentproctest.WriteTestCommand(t, req.Dir)
	c := &collector{}
	req.OnEvent = c.add
	r := &Runner{Path: geminitest.Binary(t), Grace: 2 * time.Second, VerifierSandbox: agentproctest.VerifierBoundary(t, req.Dir)}
	res, err := r.Run(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Class != loop.ClassSuccess || res.Text != "<verify-pass>" {
		t.Fatalf("class %s text %q\nstderr: %s", res.Class, res.Text, res.Stderr)
	}
	reqs := api.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d API requests, want 4", len(reqs))
	}
	if !slices.Contains(reqs[0].ToolNames(), "run_shell_command") {
		t.Errorf("the verifier was offered no shell: %v", reqs[0].ToolNames())
	}
	if got := reqs[1].LastToolResult(); !strings.Contains(got, "tests: 3 passed") {
		t.Errorf("the test command's output did not reach the model: %s", got)
	}
	if got := reqs[2].LastToolResult(); !strings.Contains(got, "Read-only file system") || !strings.Contains(got, "exit=1") {
		t.Errorf("the shell's write was not refused: %s", got)
	}
	for _, name := range []string{"written.txt", "tool.txt"} {
		if _, err := os.Stat(filepath.Join(req.Dir, name)); err == nil {
			t.Errorf("the verifier wrote %s into the tree", name)
		}
	}
	if rs := c.kinds(loop.EventToolResult); len(rs) != 3 || !rs[2].IsError || !strings.Contains(rs[2].Text, "EROFS") {
		t.Errorf("tool results %+v, want three, write_file's refused (EROFS)", rs)
	}
	leftovers(t, api)
}

func TestE2ECancelMidTool(t *testing.T) {
	api := geminitest.NewAPI(t, func(r geminitest.Request) geminitest.Reply {
		if r.ToolResults() == 0 {
			return geminitest.Shell("sleep 30")
		}
		return geminitest.Text("Done.")
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req := e2eRequest(t, api)
	var once sync.Once
	c := &collector{}
	var cancelledAt time.Time
	req.OnEvent = func(ev loop.Event) {
		c.add(ev)
		if ev.Kind == loop.EventToolUse {
			once.Do(func() {
				time.AfterFunc(time.Second, func() { cancelledAt = time.Now(); cancel() })
			})
		}
	}
	res, _, _ := runReal(t, ctx, api, req)
	if res.Class != loop.ClassCancelled {
		t.Errorf("class %s, want cancelled", res.Class)
	}
	if cancelledAt.IsZero() {
		t.Fatal("the tool call never came")
	}
	took := time.Since(cancelledAt)
	t.Logf("Run returned %v after the cancel", took.Round(time.Millisecond))
	if took > 2*time.Second+15*time.Second {
		t.Errorf("Run returned %v after the cancel (grace 2 s)", took)
	}
	leftovers(t, api)
}

func TestE2EDetachedToolCommandReaped(t *testing.T) {
	api := geminitest.NewAPI(t, func(r geminitest.Request) geminitest.Reply {
		if r.ToolResults() == 0 {
			return geminitest.Shell("setsid sh -c 'i=0; while [ ! -f go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo late > late.txt' > /dev/null 2>&1 &")
		}
		return geminitest.Text("Done. <task-done>T1</task-done>")
	})
	req := e2eRequest(t, api)
	res, _, _ := runReal(t, t.Context(), api, req)
	if res.Class != loop.ClassSuccess {
		t.Errorf("class %s", res.Class)
	}
	// The detached command writes late.txt once told to, if it lives
	// (not after a time: under load the agent may outlast any sleep).
	if err := os.WriteFile(filepath.Join(req.Dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if _, err := os.Stat(filepath.Join(req.Dir, "late.txt")); err == nil {
		t.Errorf("a detached tool command outlived the run and wrote late.txt")
	}
	leftovers(t, api)
}
