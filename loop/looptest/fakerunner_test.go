package looptest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

func TestFakeRunnerScript(t *testing.T) {
	ctx := t.Context()
	r := looptest.NewFakeRunner(t, looptest.Result("one"), looptest.Result("two")).
		ThenFunc(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
			return looptest.Result("echo " + req.Prompt), nil
		}).
		ThenStep(looptest.Step{Err: loop.ErrAgentNotFound})
	var texts []string
	var errs []error
	for _, p := range []string{"p1", "p2", "p3", "p4"} {
		res, err := r.Run(ctx, loop.RunRequest{Prompt: p, Model: "sonnet"})
		texts = append(texts, res.Text)
		errs = append(errs, err)
	}
	if diff := cmp.Diff([]string{"one", "two", "echo p3", ""}, texts); diff != "" {
		t.Errorf("texts (-want +got):\n%s", diff)
	}
	if errs[2] != nil || !errors.Is(errs[3], loop.ErrAgentNotFound) {
		t.Errorf("errors = %v, want nil for runs 1-3 and ErrAgentNotFound for run 4", errs)
	}
	var prompts []string
	for _, req := range r.Requests() {
		prompts = append(prompts, req.Prompt+"/"+req.Model)
	}
	if diff := cmp.Diff([]string{"p1/sonnet", "p2/sonnet", "p3/sonnet", "p4/sonnet"}, prompts); diff != "" {
		t.Errorf("recorded requests (-want +got):\n%s", diff)
	}
	if r.Calls() != 4 || r.Remaining() != 0 || r.Exhausted() != 0 {
		t.Errorf("Calls %d, Remaining %d, Exhausted %d; want 4, 0, 0", r.Calls(), r.Remaining(), r.Exhausted())
	}
}

func TestFakeRunnerEvents(t *testing.T) {
	events := []loop.Event{
		{Kind: loop.EventInit, SessionID: "s1", Model: "haiku"},
		{Kind: loop.EventToolUse, Tool: "Bash", Input: "go test ./..."},
		{Kind: loop.EventText, Text: "done"},
	}
	tests := []struct {
		name       string
		cancelAt   int // cancel the context while delivering event n (0: never)
		wantEvents []loop.Event
		wantClass  loop.ErrorClass
	}{
		{name: "all delivered", wantEvents: events, wantClass: loop.ClassSuccess},
		{name: "cancelled midway", cancelAt: 2, wantEvents: events[:2], wantClass: loop.ClassCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			r := looptest.NewFakeRunner(t).ThenStep(looptest.Step{Events: events, Result: looptest.Result("done")})
			var got []loop.Event
			res, err := r.Run(ctx, loop.RunRequest{OnEvent: func(e loop.Event) {
				got = append(got, e)
				if len(got) == tt.cancelAt {
					cancel()
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantEvents, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if res.Class != tt.wantClass {
				t.Errorf("Class = %s, want %s", res.Class, tt.wantClass)
			}
		})
	}
	t.Run("nil OnEvent", func(t *testing.T) {
		r := looptest.NewFakeRunner(t).ThenStep(looptest.Step{Events: events, Result: looptest.Result("ok")})
		if res, err := r.Run(t.Context(), loop.RunRequest{}); err != nil || res.Text != "ok" {
			t.Errorf("Run = %+v, %v", res, err)
		}
	})
}

func TestFakeRunnerCancellation(t *testing.T) {
	tests := []struct {
		name        string
		step        looptest.Step
		timeout     time.Duration // 0: cancel before Run
		wantClass   loop.ErrorClass
		wantElapsed time.Duration
		wantLeft    int // steps left after the run
	}{
		{name: "cancelled before the run consumes no step", step: looptest.Step{Result: looptest.Result("x")},
			wantClass: loop.ClassCancelled, wantLeft: 1},
		{name: "hang until the deadline", step: looptest.Step{Hang: true, Result: looptest.Result("never")},
			timeout: time.Hour, wantClass: loop.ClassCancelled, wantElapsed: time.Hour},
		{name: "delay cut short", step: looptest.Step{Delay: 10 * time.Minute, Result: looptest.Result("late")},
			timeout: time.Minute, wantClass: loop.ClassCancelled, wantElapsed: time.Minute},
		{name: "delay within the deadline", step: looptest.Step{Delay: 10 * time.Minute, Result: looptest.Result("in time")},
			timeout: time.Hour, wantClass: loop.ClassSuccess, wantElapsed: 10 * time.Minute},
		{name: "func ignoring a cancel is still cancelled", timeout: time.Minute, wantClass: loop.ClassCancelled,
			wantElapsed: time.Minute,
			step: looptest.Step{Func: func(ctx context.Context, _ loop.RunRequest) (loop.RunResult, error) {
				<-ctx.Done()
				return looptest.Result("I finished anyway"), nil
			}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := looptest.NewFakeRunner(t).ThenStep(tt.step)
				var ctx context.Context
				var cancel context.CancelFunc
				if tt.timeout == 0 {
					ctx, cancel = context.WithCancel(t.Context())
					cancel()
				} else {
					ctx, cancel = context.WithTimeout(t.Context(), tt.timeout)
					defer cancel()
				}
				start := time.Now()
				res, err := r.Run(ctx, loop.RunRequest{Prompt: "p"})
				if err != nil {
					t.Fatal(err)
				}
				if res.Class != tt.wantClass {
					t.Errorf("Class = %s (text %q), want %s", res.Class, res.Text, tt.wantClass)
				}
				if tt.wantClass == loop.ClassCancelled {
					if diff := cmp.Diff(looptest.Cancelled(), res); diff != "" {
						t.Errorf("cancelled result (-want +got):\n%s", diff)
					}
				}
				if got := time.Since(start); got != tt.wantElapsed {
					t.Errorf("session took %v, want %v", got, tt.wantElapsed)
				}
				if r.Remaining() != tt.wantLeft || r.Calls() != 1 {
					t.Errorf("Remaining %d, Calls %d; want %d, 1", r.Remaining(), r.Calls(), tt.wantLeft)
				}
			})
		})
	}
}

// recordingTB captures Errorf calls instead of failing the test.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func TestFakeRunnerExhausted(t *testing.T) {
	tb := &recordingTB{TB: t}
	r := looptest.NewFakeRunner(tb, looptest.Result("only"))
	if _, err := r.Run(t.Context(), loop.RunRequest{Prompt: "first"}); err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(t.Context(), loop.RunRequest{Prompt: "second prompt"})
	if !errors.Is(err, looptest.ErrScriptExhausted) {
		t.Fatalf("Run past the script: error = %v, want ErrScriptExhausted", err)
	}
	if diff := cmp.Diff(loop.RunResult{}, res); diff != "" {
		t.Errorf("result with the error (-want +got):\n%s", diff)
	}
	want := []string{`looptest: FakeRunner script exhausted: run 2 has no scripted step (prompt "second prompt")`}
	if diff := cmp.Diff(want, tb.errors); diff != "" {
		t.Errorf("test failures reported (-want +got):\n%s", diff)
	}
	if r.Exhausted() != 1 {
		t.Errorf("Exhausted = %d, want 1", r.Exhausted())
	}

	// Always takes over where the script ends.
	r.Always(func(context.Context, loop.RunRequest) (loop.RunResult, error) { return looptest.Result("again"), nil })
	if res, err := r.Run(t.Context(), loop.RunRequest{}); err != nil || res.Text != "again" {
		t.Errorf("Run with Always = %q, %v; want again, nil", res.Text, err)
	}
	if len(tb.errors) != 1 {
		t.Errorf("Always run reported failures: %v", tb.errors)
	}
}

func TestFakeRunnerConcurrent(t *testing.T) {
	const workers, perWorker = 8, 25
	r := looptest.NewFakeRunner(t)
	for i := range workers * perWorker {
		r.Then(looptest.Result(fmt.Sprint(i)))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range perWorker {
				res, err := r.Run(t.Context(), loop.RunRequest{})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[res.Text]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for i := range workers * perWorker {
		if n := seen[fmt.Sprint(i)]; n != 1 {
			t.Errorf("result %d returned %d times, want once", i, n)
		}
	}
	if r.Calls() != workers*perWorker || r.Remaining() != 0 {
		t.Errorf("Calls %d, Remaining %d", r.Calls(), r.Remaining())
	}
}

func TestResultConstructors(t *testing.T) {
	reset := time.Date(2026, 7, 18, 18, 30, 0, 0, time.UTC)
	tests := []struct {
		name   string
		got    loop.RunResult
		want   loop.RunResult
		wantOK bool
	}{
		{"Result", looptest.Result("<task-done>t1</task-done>"),
			loop.RunResult{Text: "<task-done>t1</task-done>", Class: loop.ClassSuccess, Subtype: "success", Turns: 1}, true},
		{"crash", looptest.ErrorResult(loop.ClassCrashed, "segfault"),
			loop.RunResult{Text: "segfault", Class: loop.ClassCrashed, IsError: true, ExitCode: 1}, false},
		{"agent error", looptest.ErrorResult(loop.ClassAgentError, "API Error: 500"),
			loop.RunResult{Text: "API Error: 500", Class: loop.ClassAgentError, IsError: true}, false},
		{"max turns", looptest.ErrorResult(loop.ClassMaxTurns, ""),
			loop.RunResult{Class: loop.ClassMaxTurns, IsError: true, Subtype: "error_max_turns"}, false},
		{"usage limit", looptest.UsageLimited(reset),
			loop.RunResult{Text: "Claude AI usage limit reached", Class: loop.ClassUsageLimit, IsError: true,
				UsageLimit: &loop.UsageLimit{ResetsAt: reset, Message: "Claude AI usage limit reached"}}, false},
		{"cancelled", looptest.Cancelled(),
			loop.RunResult{Class: loop.ClassCancelled, IsError: true, ExitCode: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tt.got.OK() != tt.wantOK {
				t.Errorf("OK() = %v, want %v", tt.got.OK(), tt.wantOK)
			}
		})
	}
}
