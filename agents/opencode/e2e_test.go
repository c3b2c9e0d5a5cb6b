package opencode

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/agentproc/agentproctest"
	"github.com/ralph-dev/ralph/agents/opencode/opencodetest"
	"github.com/ralph-dev/ralph/loop"
)

// End-to-end tests against the pinned OpenCode, driven by opencodetest's
// fake Chat Completions API on 127.0.0.1. No key, no network. OpenCode is
// heavy (about 650 MB of RSS, 3 to 5 s a run): the tests run one at a
// time and keep the number of runs small.

// e2eRequest returns a request for a hermetic run against api: throwaway
// HOME (TMPDIR and the XDG directories under it) and work directory.
func e2eRequest(t *testing.T, api *opencodetest.API) loop.RunRequest {
	t.Helper()
	return loop.RunRequest{
		Prompt:    "Do task T1.",
		Model:     opencodetest.Model,
		Sandboxed: true,
		Dir:       t.TempDir(),
		LogPath:   filepath.Join(t.TempDir(), "iter-1.ndjson"),
		Timeout:   90 * time.Second,
		Env:       api.Env(t.TempDir()),
	}
}

// events collects a run's events.
type events struct {
	mu  sync.Mutex
	all []loop.Event
}

func (e *events) add(ev loop.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
}

func (e *events) kinds() []loop.EventKind {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []loop.EventKind
	for _, ev := range e.all {
		if ev.Kind != loop.EventStderr {
			out = append(out, ev.Kind)
		}
	}
	return out
}

// runReal runs the pinned OpenCode with r (its Path set here) and logs the
// run's wall time and the largest RSS of this process's children so far
// (every child is an OpenCode run, so that is the largest run's).
func runReal(t *testing.T, ctx context.Context, r *Runner, api *opencodetest.API, req loop.RunRequest) (loop.RunResult, *events) {
	t.Helper()
	r.Path = opencodetest.Binary(t)
	var evs events
	req.OnEvent = evs.add
	start := time.Now()
	res, err := r.Run(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("real run: %v wall, max RSS of the runs so far %d MB, class %s", time.Since(start).Round(10*time.Millisecond), maxRSSMB(), res.Class)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("result: %+v", res)
			t.Logf("API requests: %d", len(api.Requests()))
			if raw, err := os.ReadFile(req.LogPath); err == nil {
				t.Logf("raw stream:\n%s", raw)
			}
		}
	})
	return res, &evs
}

// home is the HOME=… entry of a request's environment: every process of
// the run inherits it.
func home(req loop.RunRequest) string {
	for _, kv := range slices.Backward(req.Env) {
		if strings.HasPrefix(kv, "HOME=") {
			return kv
		}
	}
	return ""
}

// TestE2ETaskDone: a tool call writes a file, then the final text carries
// the sigil; ralph's system prompt is appended to OpenCode's own, and the
// fake model's prices in the config give a reported cost. The loop asks
// for a tier (sonnet), so OpenCode runs the model of its config, and the
// result names that model, the one the API was asked for.
func TestE2ETaskDone(t *testing.T) {
	api := opencodetest.NewAPI(t, func(r opencodetest.Request) opencodetest.Reply {
		if r.ToolResults() == 0 {
			return opencodetest.Shell("echo hi > out.txt")
		}
		return opencodetest.Text("Done. <task-done>T1</task-done>")
	})
	api.Cost = &opencodetest.Cost{Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}
	req := e2eRequest(t, api)
	req.Model = "sonnet"
	req.SystemPrompt = "RALPH-PROTOCOL: end your answer with <task-done>ID</task-done>.\n" + strings.Repeat("x", 256<<10)
	res, evs := runReal(t, t.Context(), &Runner{}, api, req)

	if res.Class != loop.ClassSuccess {
		t.Fatalf("class %s: %s", res.Class, loop.Describe(res))
	}
	if b, err := os.ReadFile(filepath.Join(req.Dir, "out.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("out.txt: %q, %v", b, err)
	}
	want := loop.RunResult{Text: "Done. <task-done>T1</task-done>", Agent: Name, Model: opencodetest.Model, Turns: 2, Subtype: "stop",
		Usage:      loop.Usage{InputTokens: 1600, OutputTokens: 100, CacheReadTokens: 400},
		CostSource: loop.CostReported}
	got := loop.RunResult{Text: res.Text, Agent: res.Agent, Model: res.Model, Turns: res.Turns, Subtype: res.Subtype,
		Usage: res.Usage, CostSource: res.CostSource}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	// 1600 input at $3, 100 output at $15, 400 cache reads at $0.30 per
	// million, as OpenCode counts it.
	if res.CostUSD < 0.006 || res.CostUSD > 0.007 || res.SessionID == "" || res.ExitCode != 0 {
		t.Errorf("cost %v, session %q, exit %d", res.CostUSD, res.SessionID, res.ExitCode)
	}
	if diff := cmp.Diff([]loop.EventKind{loop.EventInit, loop.EventToolUse, loop.EventToolResult, loop.EventText, loop.EventResult}, evs.kinds()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	reqs := api.Requests()
	for _, r := range reqs {
		if "fake/"+r.Model != opencodetest.Model {
			t.Errorf("the API was asked for model %q; the result names %q", r.Model, res.Model)
		}
	}
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2 (no title request with --title)", len(reqs))
	}
	sys := reqs[0].SystemText()
	if !strings.Contains(sys, "RALPH-PROTOCOL") || !strings.Contains(sys, strings.Repeat("x", 256<<10)) {
		t.Errorf("ralph's system prompt is not in the system message")
	}
	if !strings.Contains(sys, "opencode") || strings.Index(sys, "RALPH-PROTOCOL") < 1000 {
		t.Errorf("OpenCode's own system prompt is not kept before ralph's: %.300q", sys)
	}
	if !strings.Contains(reqs[0].UserText(), "Do task T1.") {
		t.Errorf("the prompt did not reach the model: %q", reqs[0].UserText())
	}
	if raw, err := os.ReadFile(req.LogPath); err != nil || !strings.Contains(string(raw), `"reason":"stop"`) {
		t.Errorf("raw log: %v\n%s", err, raw)
	}
}

// TestE2EVerifierReadOnly: a request that is not sandboxed gets bash,
// edit and webfetch denied — not even offered — while the user's provider
// config still applies; the tokens are priced from Prices.
func TestE2EVerifierReadOnly(t *testing.T) {
	api := opencodetest.NewAPI(t, func(r opencodetest.Request) opencodetest.Reply {
		if r.ToolResults() == 0 {
			return opencodetest.Shell("echo x > written.txt")
		}
		return opencodetest.Text("<verify-fail>could not run it: " + r.LastToolResult() + "</verify-fail>")
	})
	req := e2eRequest(t, api)
	req.Sandboxed, req.Tools = false, loop.VerifierTools
	Prices[opencodetest.Model] = loop.Price{Input: 1, Output: 10}
	t.Cleanup(func() { delete(Prices, opencodetest.Model) })
	res, _ := runReal(t, t.Context(), &Runner{}, api, req)

	if res.Class != loop.ClassSuccess || !strings.Contains(res.Text, "<verify-fail>") {
		t.Fatalf("class %s, text %q", res.Class, res.Text)
	}
	if _, err := os.Stat(filepath.Join(req.Dir, "written.txt")); err == nil {
		t.Errorf("the read-only verifier wrote a file")
	}
	offered := api.Requests()[0].ToolNames()
	for _, denied := range []string{"bash", "edit", "write", "webfetch"} {
		if slices.Contains(offered, denied) {
			t.Errorf("tool %s offered to the verifier: %v", denied, offered)
		}
	}
	if !slices.Contains(offered, "read") {
		t.Errorf("read not offered: %v", offered)
	}
	if want := (loop.Price{Input: 1, Output: 10}).Cost(res.Usage); res.CostSource != loop.CostEstimated || res.CostUSD != want {
		t.Errorf("cost %v (%s), want %v estimated", res.CostUSD, res.CostSource, want)
	}
}

// TestE2EVerifierRunsTestsReadOnly: a verifier given a sandbox
// (VerifierSandbox) is offered bash, not edit or write, and runs the
// project's test command, whose output reaches the model; its write into
// the tree is refused by the read-only tree.
func TestE2EVerifierRunsTestsReadOnly(t *testing.T) {
	api := opencodetest.NewAPI(t, func(r opencodetest.Request) opencodetest.Reply {
		switch r.ToolResults() {
		case 0:
			return opencodetest.Shell("sh test.sh")
		case 1:
			return opencodetest.Shell("echo x > written.txt; echo exit=$?")
		}
		return opencodetest.Text("<verify-pass>")
	})
	req := e2eRequest(t, api)
	req.Sandboxed, req.Tools = false, loop.VerifierTools
	agentproctest.WriteTestCommand(t, req.Dir)
	res, _ := runReal(t, t.Context(), &Runner{VerifierSandbox: agentproctest.VerifierBoundary(t, req.Dir)}, api, req)

	if res.Class != loop.ClassSuccess || res.Text != "<verify-pass>" {
		t.Fatalf("class %s, text %q", res.Class, res.Text)
	}
	reqs := api.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d API requests, want 3", len(reqs))
	}
	offered := reqs[0].ToolNames()
	if !slices.Contains(offered, "bash") {
		t.Errorf("bash not offered to the verifier: %v", offered)
	}
	for _, denied := range []string{"edit", "write", "webfetch"} {
		if slices.Contains(offered, denied) {
			t.Errorf("tool %s offered to the verifier: %v", denied, offered)
		}
	}
	if got := reqs[1].LastToolResult(); !strings.Contains(got, "tests: 3 passed") {
		t.Errorf("the test command's output did not reach the model: %q", got)
	}
	if got := reqs[2].LastToolResult(); !strings.Contains(got, "Read-only file system") || !strings.Contains(got, "exit=1") {
		t.Errorf("the write was not refused: %q", got)
	}
	if _, err := os.Stat(filepath.Join(req.Dir, "written.txt")); err == nil {
		t.Error("the verifier wrote into the tree")
	}
}

// TestE2EAPIError: a 500 on every request is an api_error once OpenCode
// has retried 5 times. The fake's retry-after-ms header (which OpenCode
// honours) shortens its backoff from 2, 4, … 32 s (about 77 s) to 0.2 s.
func TestE2EAPIError(t *testing.T) {
	api := opencodetest.NewAPI(t, func(r opencodetest.Request) opencodetest.Reply {
		rep := opencodetest.Status(500, `{"error":{"message":"server exploded","type":"server_error"}}`)
		rep.Header = map[string]string{"retry-after-ms": "200"}
		return rep
	})
	res, _ := runReal(t, t.Context(), &Runner{}, api, e2eRequest(t, api))
	if res.Class != loop.ClassAPIError || res.APIErrorStatus != 500 || res.Text != "server exploded (HTTP 500)" {
		t.Errorf("class %s, status %d, text %q", res.Class, res.APIErrorStatus, res.Text)
	}
	if n := len(api.Requests()); n != 6 {
		t.Errorf("%d requests, want 6 (5 retries)", n)
	}
	if !strings.Contains(res.Stderr, `message="stream error"`) {
		t.Errorf("stderr does not show the failed attempts: %q", res.Stderr)
	}
}

// TestE2ERetryLimit: a 429 whose retry-after says an hour would keep
// OpenCode asleep, silent, for an hour; ralph stops it after RetryLimit.
func TestE2ERetryLimit(t *testing.T) {
	api := opencodetest.NewAPI(t, func(r opencodetest.Request) opencodetest.Reply {
		rep := opencodetest.Status(429, `{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}`)
		rep.Header = map[string]string{"retry-after": "3600"}
		return rep
	})
	req := e2eRequest(t, api)
	start := time.Now()
	res, _ := runReal(t, t.Context(), &Runner{RetryLimit: 3 * time.Second}, api, req)
	took := time.Since(start)
	if res.Class != loop.ClassAPIError || !strings.Contains(res.Stderr, "kept retrying") {
		t.Errorf("class %s, stderr %q", res.Class, res.Stderr)
	}
	// OpenCode alone would sleep an hour; the bound leaves room for its
	// start-up on a loaded machine (4 to 8 s seen in CI).
	if took > time.Minute {
		t.Errorf("took %v, want the retry limit (3 s) + start-up, far from retry-after's hour", took)
	}
	if n := len(api.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	if left := opencodetest.ProcessesWithEnv(home(req)); len(left) > 0 {
		t.Errorf("processes left: %v", left)
	}
}

// TestE2ECancel: cancelling during a tool call, or while the API stalls,
// stops OpenCode and its tool command within the grace, and Run returns
// when nothing of the run is left.
func TestE2ECancel(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reply opencodetest.Reply
	}{
		{"during a tool call", opencodetest.Shell("sleep 30")},
		{"while the API stalls", opencodetest.Stall()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			started := make(chan struct{})
			var once sync.Once
			api := opencodetest.NewAPI(t, func(r opencodetest.Request) opencodetest.Reply {
				if r.ToolResults() == 0 {
					once.Do(func() { close(started) })
					return tt.reply
				}
				return opencodetest.Text("Done. <task-done>T1</task-done>")
			})
			req := e2eRequest(t, api)
			ctx, cancel := context.WithCancel(t.Context())
			var cancelled time.Time
			go func() {
				<-started
				time.Sleep(1500 * time.Millisecond) // the tool runs, or the stream stalls
				cancelled = time.Now()
				cancel()
			}()
			res, _ := runReal(t, ctx, &Runner{}, api, req)
			took := time.Since(cancelled)
			if res.Class != loop.ClassCancelled {
				t.Errorf("class %s: %s", res.Class, loop.Describe(res))
			}
			if took > DefaultGrace+15*time.Second {
				t.Errorf("Run returned %v after the cancel, want within the grace (%v) and some seconds of a loaded machine", took, DefaultGrace)
			}
			t.Logf("returned %v after the cancel; exit code %d", took.Round(10*time.Millisecond), res.ExitCode)
			if left := opencodetest.ProcessesWithEnv(home(req)); len(left) > 0 {
				t.Errorf("processes left: %v", left)
			}
		})
	}
}

// TestE2EDetached: a tool command that left OpenCode's session (setsid,
// in the background) does not outlive the run.
func TestE2EDetached(t *testing.T) {
	api := opencodetest.NewAPI(t, func(r opencodetest.Request) opencodetest.Reply {
		if r.ToolResults() == 0 {
			return opencodetest.Shell("setsid sh -c 'i=0; while [ ! -f go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; echo late > late.txt' >/dev/null 2>&1 &")
		}
		return opencodetest.Text("Done. <task-done>T1</task-done>")
	})
	req := e2eRequest(t, api)
	res, _ := runReal(t, t.Context(), &Runner{}, api, req)
	if res.Class != loop.ClassSuccess {
		t.Fatalf("class %s: %s", res.Class, loop.Describe(res))
	}
	if left := opencodetest.ProcessesWithEnv(home(req)); len(left) > 0 {
		t.Errorf("processes left after Run: %v", left)
	}
	// The detached command writes late.txt once told to, if it lives.
	if err := os.WriteFile(filepath.Join(req.Dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if _, err := os.Stat(filepath.Join(req.Dir, "late.txt")); err == nil {
		t.Errorf("late.txt written: the detached command outlived the run")
	}
}
