package telemetry_test

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
	"github.com/ralph-dev/ralph/telemetry"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// gitRepo makes root a git repository with one commit: the verifier's tree
// guard needs one.
func gitRepo(t *testing.T, root string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed: the verifier's tree guard needs it")
	}
	for _, args := range [][]string{
		{"init", "-q"},
		{"config", "user.email", "ralph@example.com"},
		{"config", "user.name", "ralph test"},
		{"commit", "-q", "--allow-empty", "-m", "init"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

func envOf(req loop.RunRequest, key string) string {
	for _, kv := range req.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// scriptedRun is a build of two tasks, b blocked by a, with a verifier and
// a test gate, on a fake clock: a's first session hits a usage limit, b's
// first verification fails.
type scriptedRun struct {
	cfg   loop.Config
	store *looptest.MemStore
	clock *looptest.Clock
}

func newScriptedRun(t *testing.T, obs loop.Observer) scriptedRun {
	t.Helper()
	clock := looptest.NewClock(t0)
	store := looptest.NewMemStore(clock.Now)
	if err := store.Add(loop.Task{ID: "a", Title: "Write the parser", Priority: 2}, loop.Task{ID: "b", Title: "Use the parser", Priority: 2}); err != nil {
		t.Fatal(err)
	}
	if err := store.AddDependency(context.Background(), "b", "a"); err != nil {
		t.Fatal(err)
	}
	cfg := loop.DefaultConfig(t.TempDir())
	gitRepo(t, cfg.Root)
	cfg.AgentID = "agent-0000beef"
	cfg.Session = "session-test"
	cfg.SessionLog, cfg.RawLogs = false, false
	cfg.Verify = true
	cfg.TestCmd = "true"
	cfg.Now = clock.Now
	cfg.Sleep = func(ctx context.Context, d time.Duration) error { clock.Advance(d); return nil }
	cfg.Observer = obs
	return scriptedRun{cfg: cfg, store: store, clock: clock}
}

// runner is the scripted agent: each session takes 2 s of the fake clock
// and makes one tool call per turn.
func (s scriptedRun) runner(t *testing.T) *looptest.FakeRunner {
	session := func(text string, turns int, cost float64) func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		return func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
			for range turns {
				req.OnEvent(loop.Event{Kind: loop.EventToolUse, Tool: "Bash", Input: "go test ./..."})
			}
			s.clock.Advance(2 * time.Second)
			res := looptest.Result(text)
			res.Turns, res.CostUSD, res.Duration, res.Model, res.Agent = turns, cost, 2*time.Second, "claude-sonnet-4-5", "claude"
			res.Usage = loop.Usage{InputTokens: 1000 * int64(turns), OutputTokens: 100 * int64(turns), CacheReadTokens: 10, CacheWriteTokens: 20}
			return res, nil
		}
	}
	return looptest.NewFakeRunner(t, looptest.UsageLimited(t0.Add(time.Hour))).
		ThenFunc(session("<task-done>a</task-done>", 3, 0.25)).
		ThenFunc(session("<verify-pass/>", 1, 0.01)).
		ThenFunc(session("<task-done>b</task-done>", 2, 0.125)).
		ThenFunc(session("<verify-fail>no tests for the parser's users</verify-fail>", 1, 0.01)).
		ThenFunc(session("<task-done>b</task-done>", 2, 0.125)).
		ThenFunc(session("<verify-pass/>", 1, 0.01))
}

// node is the part of a span the tree tests compare.
type node struct {
	Name   string
	Parent string // the parent's label; "" for the root
	Attrs  map[string]any
	Status string
	Events []string
}

// label names a span in a tree: its name, its iteration and its task.
func label(s sdktrace.ReadOnlySpan) string {
	l := s.Name()
	for _, kv := range s.Attributes() {
		switch kv.Key {
		case telemetry.AttrWorker:
			l += " " + kv.Value.AsString()
		case telemetry.AttrIteration:
			l += fmt.Sprintf(" #%d", kv.Value.AsInt64())
		}
	}
	return l
}

// tree summarises spans in the order they ended, keeping only the
// attributes named in keep.
func tree(spans []sdktrace.ReadOnlySpan, keep ...attribute.Key) []node {
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID().String()] = s
	}
	var out []node
	for _, s := range spans {
		n := node{Name: s.Name(), Attrs: map[string]any{}}
		if p, ok := byID[s.Parent().SpanID().String()]; ok && s.Parent().IsValid() {
			n.Parent = label(p)
		}
		for _, kv := range s.Attributes() {
			for _, k := range keep {
				if kv.Key == k {
					n.Attrs[string(k)] = kv.Value.AsInterface()
				}
			}
		}
		if s.Status().Code != 0 {
			n.Status = s.Status().Code.String() + ": " + s.Status().Description
		}
		for _, e := range s.Events() {
			n.Events = append(n.Events, e.Name)
		}
		out = append(out, n)
	}
	return out
}

func recorder() (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	rec := tracetest.NewSpanRecorder()
	return rec, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
}

func TestObserverSpanTree(t *testing.T) {
	rec, tp := recorder()
	obs := telemetry.NewObserver(tp, 0)
	s := newScriptedRun(t, obs)
	rep, err := loop.Run(context.Background(), s.cfg, s.store, s.runner(t))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("outcome %s (%s), want complete", rep.Outcome, rep.Message)
	}
	keep := []attribute.Key{"ralph.task.id", "ralph.status", "ralph.mode", "ralph.verdict", "gen_ai.usage.input_tokens",
		"ralph.tool_calls", "ralph.cost_usd", "ralph.outcome", "ralph.exit_code", "ralph.exit_reason"}
	got := tree(rec.Ended(), keep...)
	const run = "ralph.run"
	want := []node{
		{Name: "ralph.agent", Parent: "ralph.iteration #1", Status: "Error: the agent's session ended with usage_limit",
			Attrs: map[string]any{"ralph.task.id": "a", "ralph.mode": "build", "gen_ai.usage.input_tokens": int64(0), "ralph.tool_calls": int64(0), "ralph.cost_usd": 0.0, "ralph.exit_reason": "usage_limit"}},
		{Name: "ralph.iteration", Parent: run, Attrs: map[string]any{"ralph.task.id": "a", "ralph.status": "usage_limit"}},
		{Name: "ralph.agent", Parent: "ralph.iteration #1", Attrs: map[string]any{"ralph.task.id": "a", "ralph.mode": "build", "gen_ai.usage.input_tokens": int64(3000), "ralph.tool_calls": int64(3), "ralph.cost_usd": 0.25, "ralph.exit_reason": "success"}},
		{Name: "ralph.gate", Parent: "ralph.iteration #1", Attrs: map[string]any{"ralph.task.id": "a"}},
		{Name: "ralph.verify", Parent: "ralph.iteration #1", Attrs: map[string]any{"ralph.task.id": "a", "ralph.mode": "verify", "ralph.verdict": "pass", "gen_ai.usage.input_tokens": int64(1000), "ralph.tool_calls": int64(1), "ralph.cost_usd": 0.01, "ralph.exit_reason": "success"}},
		{Name: "ralph.iteration", Parent: run, Attrs: map[string]any{"ralph.task.id": "a", "ralph.status": "done"}},
		{Name: "ralph.agent", Parent: "ralph.iteration #2", Attrs: map[string]any{"ralph.task.id": "b", "ralph.mode": "build", "gen_ai.usage.input_tokens": int64(2000), "ralph.tool_calls": int64(2), "ralph.cost_usd": 0.125, "ralph.exit_reason": "success"}},
		{Name: "ralph.gate", Parent: "ralph.iteration #2", Attrs: map[string]any{"ralph.task.id": "b"}},
		{Name: "ralph.verify", Parent: "ralph.iteration #2", Status: "Error: verify_failed: no tests for the parser's users",
			Attrs: map[string]any{"ralph.task.id": "b", "ralph.mode": "verify", "ralph.verdict": "fail", "ralph.status": "verify_failed", "gen_ai.usage.input_tokens": int64(1000), "ralph.tool_calls": int64(1), "ralph.cost_usd": 0.01, "ralph.exit_reason": "success"}},
		{Name: "ralph.iteration", Parent: run, Status: "Error: verify_failed: verification failed: no tests for the parser's users",
			Attrs: map[string]any{"ralph.task.id": "b", "ralph.status": "verify_failed"}},
		{Name: "ralph.agent", Parent: "ralph.iteration #3", Attrs: map[string]any{"ralph.task.id": "b", "ralph.mode": "build", "gen_ai.usage.input_tokens": int64(2000), "ralph.tool_calls": int64(2), "ralph.cost_usd": 0.125, "ralph.exit_reason": "success"}},
		{Name: "ralph.gate", Parent: "ralph.iteration #3", Attrs: map[string]any{"ralph.task.id": "b"}},
		{Name: "ralph.verify", Parent: "ralph.iteration #3", Attrs: map[string]any{"ralph.task.id": "b", "ralph.mode": "verify", "ralph.verdict": "pass", "gen_ai.usage.input_tokens": int64(1000), "ralph.tool_calls": int64(1), "ralph.cost_usd": 0.01, "ralph.exit_reason": "success"}},
		{Name: "ralph.iteration", Parent: run, Attrs: map[string]any{"ralph.task.id": "b", "ralph.status": "done"}},
		{Name: "ralph.run", Attrs: map[string]any{"ralph.mode": "build", "ralph.outcome": "complete", "ralph.exit_code": int64(0), "ralph.cost_usd": 0.53},
			Events: []string{"ralph.usage_limit_wait"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
}

// TestObserverTimes checks the spans are timed by the notes, not by the
// clock the observer runs on: the agent span by its receipt.
func TestObserverTimes(t *testing.T) {
	rec, tp := recorder()
	s := newScriptedRun(t, telemetry.NewObserver(tp, 0))
	if _, err := loop.Run(context.Background(), s.cfg, s.store, s.runner(t)); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	var agents []time.Duration
	for _, sp := range spans {
		if sp.Name() == telemetry.SpanAgent {
			agents = append(agents, sp.EndTime().Sub(sp.StartTime()))
		}
	}
	if diff := cmp.Diff([]time.Duration{0, 2 * time.Second, 2 * time.Second, 2 * time.Second}, agents); diff != "" {
		t.Errorf("agent span durations (-want +got):\n%s", diff)
	}
	root := spans[len(spans)-1]
	if !root.StartTime().Equal(t0) {
		t.Errorf("run span starts at %v, want the first note's time %v", root.StartTime(), t0)
	}
	// One usage-limit wait of an hour, on the run span, with its figures.
	var waits []map[string]any
	for _, e := range root.Events() {
		if e.Name == telemetry.EventUsageLimitWait {
			m := map[string]any{}
			for _, kv := range e.Attributes {
				m[string(kv.Key)] = kv.Value.AsInterface()
			}
			waits = append(waits, m)
		}
	}
	want := []map[string]any{{"ralph.wait.until": "2026-01-02T04:04:05Z", "ralph.wait.ms": int64(time.Hour / time.Millisecond),
		"ralph.message": "usage limit reached; resets at 2026-01-02T04:04:05Z"}}
	if diff := cmp.Diff(want, waits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

// TestObserverWorkers runs two loops as workers sharing one observer: every
// iteration is a child of the one run span, which the caller ends with the
// run's own session_end.
func TestObserverWorkers(t *testing.T) {
	rec, tp := recorder()
	obs := telemetry.NewObserver(tp, 2)
	store := looptest.NewMemStore(nil)
	var tasks []loop.Task
	for i := range 6 {
		tasks = append(tasks, loop.Task{ID: fmt.Sprintf("t%d", i), Priority: 2})
	}
	if err := store.Add(tasks...); err != nil {
		t.Fatal(err)
	}
	shared := loop.NewShared(nil)
	runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		return looptest.Result("<task-done>" + envOf(req, "RALPH_TASK_ID") + "</task-done>"), nil
	})
	var wg sync.WaitGroup
	reps := make([]loop.Report, 2)
	for k := range 2 {
		cfg := loop.DefaultConfig(t.TempDir())
		cfg.Worker = fmt.Sprintf("w%d", k+1)
		cfg.AgentID = "agent-" + cfg.Worker
		cfg.Session = "session-workers"
		cfg.SessionLog, cfg.RawLogs = false, false
		cfg.Shared = shared
		cfg.Observer = obs
		wg.Go(func() {
			var err error
			if reps[k], err = loop.Run(context.Background(), cfg, store, runner); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	total := loop.Report{Outcome: loop.OutcomeComplete, Iterations: reps[0].Iterations + reps[1].Iterations}
	obs.Observe(loop.Note{Kind: loop.NoteSessionEnd, At: time.Now(), Session: "session-workers", Mode: loop.ModeBuild, Report: &total})

	spans := rec.Ended()
	root := spans[len(spans)-1]
	if root.Name() != telemetry.SpanRun {
		t.Fatalf("last span ended is %s, want the run", root.Name())
	}
	perWorker := map[string][]string{}
	for _, s := range spans {
		if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("span %s is in trace %s, want the run's %s", label(s), s.SpanContext().TraceID(), root.SpanContext().TraceID())
		}
		if s.Name() != telemetry.SpanIteration {
			continue
		}
		if s.Parent().SpanID() != root.SpanContext().SpanID() {
			t.Errorf("iteration %s is not a child of the run span", label(s))
		}
		for _, kv := range s.Attributes() {
			if kv.Key == telemetry.AttrWorker {
				perWorker[kv.Value.AsString()] = append(perWorker[kv.Value.AsString()], label(s))
			}
		}
	}
	// Which worker took which task is a race; that the six iterations are
	// the workers' is not.
	n := 0
	for w, its := range perWorker {
		if w != "w1" && w != "w2" {
			t.Errorf("iterations %v of worker %q, want w1 or w2", its, w)
		}
		n += len(its)
	}
	if n != 6 {
		t.Errorf("iterations per worker %v, want 6 in all", perWorker)
	}
	var ends []string
	for _, e := range root.Events() {
		if e.Name == telemetry.EventWorkerEnd {
			for _, kv := range e.Attributes {
				if kv.Key == telemetry.AttrWorker {
					ends = append(ends, kv.Value.AsString())
				}
			}
		}
	}
	sort.Strings(ends)
	if diff := cmp.Diff([]string{"w1", "w2"}, ends); diff != "" {
		t.Errorf("worker ends on the run span (-want +got):\n%s", diff)
	}
	attrs := map[string]any{}
	for _, kv := range root.Attributes() {
		attrs[string(kv.Key)] = kv.Value.AsInterface()
	}
	if attrs["ralph.workers"] != int64(2) || attrs["ralph.iterations"] != int64(6) || attrs["ralph.outcome"] != "complete" {
		t.Errorf("run span attributes %v, want 2 workers, 6 iterations, complete", attrs)
	}
}

// TestObserverEnd: a run that never sent its session_end has its spans
// ended by End, marked as errors, and later notes are ignored.
func TestObserverEnd(t *testing.T) {
	rec, tp := recorder()
	obs := telemetry.NewObserver(tp, 0)
	obs.Observe(loop.Note{Kind: loop.NoteIterationStart, At: t0, Session: "s", Mode: loop.ModeBuild, Iteration: 1, Task: loop.Task{ID: "a"}})
	obs.Observe(loop.Note{Kind: loop.NotePhaseStart, At: t0.Add(time.Second), Iteration: 1, Phase: loop.PhaseGate, Task: loop.Task{ID: "a"}})
	obs.End()
	obs.Observe(loop.Note{Kind: loop.NoteIterationStart, At: t0.Add(2 * time.Second), Iteration: 2, Task: loop.Task{ID: "b"}})
	got := tree(rec.Ended(), "ralph.status")
	want := []node{
		{Name: "ralph.gate", Parent: "ralph.iteration #1", Status: "Error: cancelled: the iteration ended first", Attrs: map[string]any{"ralph.status": "cancelled"}},
		{Name: "ralph.iteration", Parent: "ralph.run", Status: "Error: cancelled: the run ended first", Attrs: map[string]any{"ralph.status": "cancelled"}},
		{Name: "ralph.run", Status: "Error: the run ended without its report", Attrs: map[string]any{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
}
