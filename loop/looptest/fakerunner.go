package looptest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

var _ loop.Runner = (*FakeRunner)(nil)

// ErrScriptExhausted is returned (wrapped) by FakeRunner.Run when a run
// finds no scripted step left and no Always func.
var ErrScriptExhausted = errors.New("looptest: FakeRunner script exhausted")

// Step is one scripted agent session of a FakeRunner.
type Step struct {
	// Events are passed to req.OnEvent, in order, when the session starts.
	Events []loop.Event
	// Delay is how long the session lasts after its events (a timer, so
	// under testing/synctest it costs no real time). A cancelled context
	// ends it early.
	Delay time.Duration
	// Hang makes the session last until its context is cancelled, like an
	// agent that never answers; it then ends as Cancelled().
	Hang bool
	// Func, if not nil, computes the session's result after the events and
	// the delay; Result and Err are then ignored.
	Func func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error)
	// Result and Err are what Run returns. A non-nil Err means the agent
	// could not be run at all (see loop.Runner).
	Result loop.RunResult
	Err    error
}

// FakeRunner is a scripted loop.Runner. Each Run takes the next Step of the
// script, records the request, sends the step's events to req.OnEvent and
// returns the step's result. When the script runs out, Run uses the Always
// func if one is set; otherwise it fails the test given to NewFakeRunner
// (if any) with a message naming the run and its prompt, and returns an
// error wrapping ErrScriptExhausted.
//
// Cancellation: a Run whose context is already done records the request,
// consumes no step (the agent never started) and returns Cancelled(); a
// session whose context is done by the time it ends (during its events,
// delay or hang, or when its Func returns) returns Cancelled() too.
//
// FakeRunner is safe for concurrent use: concurrent runs take steps in the
// order they call Run.
type FakeRunner struct {
	t testing.TB

	mu     sync.Mutex
	steps  []Step
	always func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error)
	reqs   []loop.RunRequest
	missed int
}

// NewFakeRunner returns a runner whose script is one step per result, in
// order. t, if not nil, is failed (Errorf, safe from any goroutine) when a
// run finds the script exhausted.
func NewFakeRunner(t testing.TB, results ...loop.RunResult) *FakeRunner {
	r := &FakeRunner{t: t}
	return r.Then(results...)
}

// Then appends one step per result to the script and returns r.
func (r *FakeRunner) Then(results ...loop.RunResult) *FakeRunner {
	steps := make([]Step, len(results))
	for i, res := range results {
		steps[i] = Step{Result: res}
	}
	return r.ThenStep(steps...)
}

// ThenStep appends steps to the script and returns r.
func (r *FakeRunner) ThenStep(steps ...Step) *FakeRunner {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, steps...)
	return r
}

// ThenFunc appends one step whose result f computes, and returns r.
func (r *FakeRunner) ThenFunc(f func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error)) *FakeRunner {
	return r.ThenStep(Step{Func: f})
}

// Always makes f compute the result of every run after the script ends
// (f nil: exhaustion is an error again), and returns r.
func (r *FakeRunner) Always(f func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error)) *FakeRunner {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.always = f
	return r
}

// Run implements loop.Runner.
func (r *FakeRunner) Run(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	n := len(r.reqs)
	if ctx.Err() != nil {
		r.mu.Unlock()
		return Cancelled(), nil
	}
	var step Step
	switch {
	case len(r.steps) > 0:
		step = r.steps[0]
		r.steps = r.steps[1:]
	case r.always != nil:
		step = Step{Func: r.always}
	default:
		r.missed++
		r.mu.Unlock()
		err := fmt.Errorf("%w: run %d has no scripted step (prompt %.60q)", ErrScriptExhausted, n, req.Prompt)
		if r.t != nil {
			r.t.Errorf("%v", err)
		}
		return loop.RunResult{}, err
	}
	r.mu.Unlock()
	return step.run(ctx, req)
}

func (s Step) run(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
	for _, e := range s.Events {
		if ctx.Err() != nil {
			return Cancelled(), nil
		}
		if req.OnEvent != nil {
			req.OnEvent(e)
		}
	}
	switch {
	case s.Hang:
		<-ctx.Done()
	case s.Delay > 0:
		timer := time.NewTimer(s.Delay)
		select {
		case <-ctx.Done():
		case <-timer.C:
		}
		timer.Stop()
	}
	if ctx.Err() != nil {
		return Cancelled(), nil
	}
	res, err := s.Result, s.Err
	if s.Func != nil {
		res, err = s.Func(ctx, req)
	}
	if ctx.Err() != nil {
		return Cancelled(), nil
	}
	return res, err
}

// Requests returns a copy of every request Run got, in call order.
func (r *FakeRunner) Requests() []loop.RunRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// Calls is the number of times Run was called.
func (r *FakeRunner) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// Remaining is the number of scripted steps not yet used.
func (r *FakeRunner) Remaining() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.steps)
}

// Exhausted is the number of runs that found the script exhausted.
func (r *FakeRunner) Exhausted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.missed
}

// Result is a successful session whose final text is text.
func Result(text string) loop.RunResult {
	return loop.RunResult{Text: text, Class: loop.ClassSuccess, Subtype: "success", Turns: 1}
}

// ErrorResult is a session that ended in trouble of the given class, with
// text as its final text (an agent's error message, say). Crashes get exit
// code 1; the other classes exit 0 with IsError set, as Claude Code does.
func ErrorResult(class loop.ErrorClass, text string) loop.RunResult {
	r := loop.RunResult{Text: text, Class: class, IsError: true}
	switch class {
	case loop.ClassCrashed:
		r.ExitCode = 1
	case loop.ClassMaxTurns:
		r.Subtype = "error_max_turns"
	case loop.ClassCancelled:
		r.ExitCode = -1
	}
	return r
}

// UsageLimited is a session rejected by a usage limit that resets at
// resetsAt (zero: the agent did not say).
func UsageLimited(resetsAt time.Time) loop.RunResult {
	const msg = "Claude AI usage limit reached"
	return loop.RunResult{
		Text:       msg,
		Class:      loop.ClassUsageLimit,
		IsError:    true,
		UsageLimit: &loop.UsageLimit{ResetsAt: resetsAt, Message: msg},
	}
}

// Cancelled is the result of a session stopped by its context, as
// claude.Runner reports it.
func Cancelled() loop.RunResult {
	return loop.RunResult{Class: loop.ClassCancelled, IsError: true, ExitCode: -1}
}
