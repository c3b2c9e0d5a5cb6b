package codex_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/agents/codex"
	"github.com/ralph-dev/ralph/agents/codex/codextest"
	"github.com/ralph-dev/ralph/loop"
)

// realRun is one run of the real Codex CLI against a fake API, in a
// throwaway HOME, CODEX_HOME and TMPDIR.
type realRun struct {
	t      *testing.T
	env    []string
	home   string
	dir    string
	mu     sync.Mutex
	events []loop.Event
}

func newRealRun(t *testing.T, env func(home string) []string) *realRun {
	home := t.TempDir()
	return &realRun{t: t, home: home, dir: t.TempDir(), env: env(home)}
}

// run runs req (Dir, Env and OnEvent filled in) and reports its wall time
// and the largest resident set of a child so far.
func (rr *realRun) run(ctx context.Context, r *codex.Runner, req loop.RunRequest, onEvent func(loop.Event)) loop.RunResult {
	rr.t.Helper()
	req.Dir, req.Env = rr.dir, rr.env
	req.OnEvent = func(ev loop.Event) {
		rr.mu.Lock()
		rr.events = append(rr.events, ev)
		rr.mu.Unlock()
		if onEvent != nil {
			onEvent(ev)
		}
	}
	start := time.Now()
	res, err := r.Run(ctx, req)
	if err != nil {
		rr.t.Fatalf("Run: %v", err)
	}
	rr.t.Logf("%s: %v wall, max RSS of a child so far %d MB; class %s: %s", rr.t.Name(), time.Since(start).Round(10*time.Millisecond),
		maxRSSMB(), res.Class, loop.Describe(res))
	return res
}

func (rr *realRun) has(kind loop.EventKind, tool, input string) bool {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for _, ev := range rr.events {
		if ev.Kind == kind && ev.Tool == tool && ev.Input == input {
			return true
		}
	}
	return false
}

// leftovers fails the test if a process of this run (its CODEX_HOME in
// the environment) is still there.
func (rr *realRun) leftovers() {
	rr.t.Helper()
	if pids := codextest.ProcessesWithEnv("CODEX_HOME=" + filepath.Join(rr.home, ".codex")); len(pids) > 0 {
		rr.t.Errorf("processes of the run left behind: %v", pids)
	}
}

func TestRealToolRun(t *testing.T) {
	bin := codextest.Binary(t)
	api := codextest.NewAPI(t, func(r codextest.Request) codextest.Reply {
		if len(r.ToolOutputs()) == 0 {
			return codextest.Shell("echo hi > out.txt")
		}
		return codextest.Text("Done. <task-done>T1</task-done>")
	})
	rr := newRealRun(t, api.Env)
	res := rr.run(t.Context(), &codex.Runner{Path: bin}, loop.RunRequest{
		Prompt: "Do task T1.", SystemPrompt: "RALPH-PROTOCOL: say <task-done>ID</task-done> when done.",
		Sandboxed: true, Model: "gpt-5.5",
	}, nil)

	if res.Class != loop.ClassSuccess || res.ExitCode != 0 {
		t.Fatalf("class %s exit %d (%s), want success; stderr:\n%s", res.Class, res.ExitCode, loop.Describe(res), res.Stderr)
	}
	if data, err := os.ReadFile(filepath.Join(rr.dir, "out.txt")); err != nil || string(data) != "hi\n" {
		t.Errorf("out.txt = %q, %v; want the tool call's output", data, err)
	}
	if res.Text != "Done. <task-done>T1</task-done>" || res.Agent != "codex" || res.SessionID == "" || res.Turns != 1 {
		t.Errorf("text %q agent %q session %q turns %d", res.Text, res.Agent, res.SessionID, res.Turns)
	}
	want := loop.Usage{InputTokens: 2 * (codextest.UsageInput - codextest.UsageCached), CacheReadTokens: 2 * codextest.UsageCached,
		OutputTokens: 2 * codextest.UsageOutput}
	if res.Usage != want {
		t.Errorf("usage %+v, want %+v (two requests)", res.Usage, want)
	}
	if res.CostSource != loop.CostEstimated || res.CostUSD <= 0 || res.Model != "gpt-5.5" {
		t.Errorf("cost %v %s for model %q, want an estimate for gpt-5.5", res.CostUSD, res.CostSource, res.Model)
	}
	if !rr.has(loop.EventToolUse, codex.ToolExec, "echo hi > out.txt") {
		t.Errorf("no tool_use event for the command in %+v", rr.events)
	}

	// The system prompt reaches the model after Codex's own, which stays.
	reqs := api.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	dev := reqs[0].Messages("developer")
	if len(dev) == 0 || !strings.HasPrefix(dev[0], "You are Codex") {
		t.Errorf("Codex's base instructions are gone: developer messages %.200q", dev)
	}
	user := strings.Join(reqs[0].Messages("user"), "\n")
	if !strings.Contains(user, "RALPH-PROTOCOL: say") || !strings.Contains(user, "Do task T1.") {
		t.Errorf("the user messages lack the system prompt or the prompt: %.500q", user)
	}
	rr.leftovers()
}

func TestRealReadOnly(t *testing.T) {
	bin := codextest.Binary(t)
	api := codextest.NewAPI(t, func(r codextest.Request) codextest.Reply {
		if len(r.ToolOutputs()) == 0 {
			return codextest.Shell("echo hi > out.txt")
		}
		return codextest.Text("Checked: " + r.ToolOutputs()[0])
	})
	rr := newRealRun(t, api.Env)
	res := rr.run(t.Context(), &codex.Runner{Path: bin}, loop.RunRequest{Prompt: "Verify.", Tools: loop.VerifierTools, Model: "gpt-5.5"}, nil)
	if res.Class != loop.ClassSuccess {
		t.Fatalf("class %s (%s), want success", res.Class, loop.Describe(res))
	}
	if _, err := os.Stat(filepath.Join(rr.dir, "out.txt")); !os.IsNotExist(err) {
		t.Errorf("the read-only session wrote out.txt (%v)", err)
	}
	if !strings.Contains(res.Text, "Read-only file system") {
		t.Errorf("the model was not told the write failed: %q", res.Text)
	}
}

func TestRealHTTP500(t *testing.T) {
	bin := codextest.Binary(t)
	api := codextest.NewAPI(t, func(codextest.Request) codextest.Reply {
		return codextest.Status(500, `{"error":{"message":"boom","type":"server_error"}}`)
	})
	rr := newRealRun(t, api.Env)
	start := time.Now()
	res := rr.run(t.Context(), &codex.Runner{Path: bin}, loop.RunRequest{Prompt: "Do it.", Sandboxed: true}, nil)
	if res.Class != loop.ClassAPIError {
		t.Errorf("class %s (%s), want api_error", res.Class, loop.Describe(res))
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v with retries off, want a few seconds", d)
	}
	if res.Model != codextest.Model {
		t.Errorf("model %q, want the config's %q", res.Model, codextest.Model)
	}
}

// TestRealHTTP500DefaultRetries measures what Codex's own retries cost
// when the API fails every time.
func TestRealHTTP500DefaultRetries(t *testing.T) {
	if testing.Short() {
		t.Skip("about 25 s")
	}
	bin := codextest.Binary(t)
	api := codextest.NewAPI(t, func(codextest.Request) codextest.Reply {
		return codextest.Status(500, `{"error":{"message":"boom","type":"server_error"}}`)
	})
	rr := newRealRun(t, func(home string) []string { return codextest.EnvRetries(t, home, api.URL, -1) })
	res := rr.run(t.Context(), &codex.Runner{Path: bin}, loop.RunRequest{Prompt: "Do it.", Sandboxed: true}, nil)
	if res.Class != loop.ClassAPIError {
		t.Errorf("class %s (%s), want api_error", res.Class, loop.Describe(res))
	}
	t.Logf("default retries: %d requests in %v", len(api.Requests()), res.Duration.Round(100*time.Millisecond))
}

func TestRealUnreachable(t *testing.T) {
	bin := codextest.Binary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/v1"
	ln.Close() // nothing listens there now
	rr := newRealRun(t, func(home string) []string { return codextest.Env(t, home, url) })
	start := time.Now()
	res := rr.run(t.Context(), &codex.Runner{Path: bin, Grace: 2 * time.Second}, loop.RunRequest{Prompt: "Do it.", Sandboxed: true}, nil)
	if res.Class != loop.ClassAPIError || !strings.Contains(res.Text, "waiting for network") {
		t.Errorf("class %s text %q, want api_error with Codex's words", res.Class, res.Text)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v, want Codex stopped after %d reconnects (about 5 s)", d, codex.UnreachableRetries)
	}
	rr.leftovers()
}

func TestRealCancelDuringTool(t *testing.T) {
	bin := codextest.Binary(t)
	api := codextest.NewAPI(t, func(r codextest.Request) codextest.Reply {
		if len(r.ToolOutputs()) == 0 {
			return codextest.Shell("sleep 30")
		}
		return codextest.Text("Done.")
	})
	rr := newRealRun(t, api.Env)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	grace := 2 * time.Second
	var cancelled time.Time
	res := rr.run(ctx, &codex.Runner{Path: bin, Grace: grace}, loop.RunRequest{Prompt: "Wait.", Sandboxed: true}, func(ev loop.Event) {
		if ev.Kind == loop.EventToolUse && cancelled.IsZero() {
			cancelled = time.Now()
			time.AfterFunc(300*time.Millisecond, cancel)
		}
	})
	if res.Class != loop.ClassCancelled {
		t.Errorf("class %s (%s), want cancelled", res.Class, loop.Describe(res))
	}
	if cancelled.IsZero() {
		t.Fatal("the tool never started")
	}
	if d := time.Since(cancelled); d > grace+15*time.Second {
		t.Errorf("returned %v after the tool started, want within the grace period (%v) and a few seconds", d, grace)
	}
	rr.leftovers()
}

func TestRealDetachedToolIsReaped(t *testing.T) {
	bin := codextest.Binary(t)
	api := codextest.NewAPI(t, func(r codextest.Request) codextest.Reply {
		if len(r.ToolOutputs()) == 0 {
			return codextest.Shell("setsid sh -c 'i=0; while [ ! -f go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo late > late.txt' > /dev/null 2>&1 &")
		}
		return codextest.Text("Done. <task-done>T1</task-done>")
	})
	rr := newRealRun(t, api.Env)
	res := rr.run(t.Context(), &codex.Runner{Path: bin}, loop.RunRequest{Prompt: "Start it.", Sandboxed: true}, nil)
	if res.Class != loop.ClassSuccess {
		t.Fatalf("class %s (%s), want success", res.Class, loop.Describe(res))
	}
	rr.leftovers()
	// The detached command writes late.txt once told to, if it lives.
	if err := os.WriteFile(filepath.Join(rr.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if _, err := os.Stat(filepath.Join(rr.dir, "late.txt")); !os.IsNotExist(err) {
		t.Errorf("a detached tool command outlived the run and wrote late.txt (%v)", err)
	}
}

func TestRealUsageLimit(t *testing.T) {
	bin := codextest.Binary(t)
	reset := time.Now().Add(3 * time.Hour)
	api := codextest.NewAPI(t, func(codextest.Request) codextest.Reply { return codextest.UsageLimit(reset) })
	rr := newRealRun(t, api.Env)
	res := rr.run(t.Context(), &codex.Runner{Path: bin}, loop.RunRequest{Prompt: "Do it.", Sandboxed: true}, nil)
	if res.Class != loop.ClassUsageLimit || res.UsageLimit == nil {
		t.Fatalf("class %s (%s), want usage_limit", res.Class, loop.Describe(res))
	}
	// Codex prints the reset time to the minute, in its local time.
	if got, want := res.UsageLimit.ResetsAt, reset.Truncate(time.Minute); got.Sub(want).Abs() > time.Minute {
		t.Errorf("resets at %v, want about %v (message %q)", got, want, res.UsageLimit.Message)
	}
}
