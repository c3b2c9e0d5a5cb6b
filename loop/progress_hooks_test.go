package loop_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// bookkeepingStore is a MemStore that, like a progress file, can be
// declared done (RALPH_DONE) and keeps its own iteration log.
type bookkeepingStore struct {
	*looptest.MemStore
	done      bool
	doneErr   error
	records   []loop.IterationRecord
	recordErr error
}

var (
	_ loop.Finisher          = (*bookkeepingStore)(nil)
	_ loop.IterationRecorder = (*bookkeepingStore)(nil)
)

func (s *bookkeepingStore) Done(context.Context) (bool, error) { return s.done, s.doneErr }

func (s *bookkeepingStore) RecordIteration(ctx context.Context, rec loop.IterationRecord) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.records = append(s.records, rec)
	return s.recordErr
}

func TestFinisherEndsTheRun(t *testing.T) {
	tests := []struct {
		name    string
		doneAt  int // the session that says RALPH_DONE; 0: before the run
		want    loop.Outcome
		runs    int
		message string
	}{
		{name: "done before the first iteration", doneAt: 0, want: loop.OutcomeComplete, runs: 0,
			message: "complete: the plan says it is done (RALPH_DONE), 3 tasks unfinished"},
		{name: "done after the first iteration", doneAt: 1, want: loop.OutcomeComplete, runs: 1,
			message: "complete: the plan says it is done (RALPH_DONE), 2 tasks unfinished"},
		{name: "done in the last iteration the limit allows", doneAt: 2, want: loop.OutcomeComplete, runs: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := &bookkeepingStore{MemStore: newStore(t, tasks("a", "b", "c")...), done: tt.doneAt == 0}
			cfg := testConfig(t)
			cfg.MaxIterations = 2
			sessions := 0
			runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
				sessions++
				if sessions == tt.doneAt {
					store.done = true // the agent wrote RALPH_DONE
				}
				return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
			})
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outcome != tt.want || runner.Calls() != tt.runs || rep.ExitCode() != 0 {
				t.Errorf("outcome %s exit %d after %d runs, want %s after %d (%s)", rep.Outcome, rep.ExitCode(), runner.Calls(), tt.want, tt.runs, rep.Message)
			}
			if tt.message != "" && rep.Message != tt.message {
				t.Errorf("message %q, want %q", rep.Message, tt.message)
			}
			noneInProgress(t, store.MemStore)
		})
	}

	t.Run("every task done says the usual", func(t *testing.T) {
		store := &bookkeepingStore{MemStore: newStore(t, tasks("a")...)}
		runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
			store.done = true
			return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
		})
		rep, err := loop.Run(t.Context(), testConfig(t), store, runner)
		if err != nil || rep.Message != "complete: all 1 task done" {
			t.Errorf("message %q, err %v", rep.Message, err)
		}
	})
	t.Run("a Done error is a store error", func(t *testing.T) {
		store := &bookkeepingStore{MemStore: newStore(t, tasks("a")...), doneErr: errors.New("disk gone")}
		rep, err := loop.Run(t.Context(), testConfig(t), store, looptest.NewFakeRunner(t))
		if err == nil || rep.ExitCode() != 1 {
			t.Errorf("exit %d, err %v; want 1 and the error", rep.ExitCode(), err)
		}
	})
	t.Run("plan mode does not ask", func(t *testing.T) {
		store := &bookkeepingStore{MemStore: newStore(t), done: true}
		runner := looptest.NewFakeRunner(t).Always(planner(store.MemStore, "a|"+complete))
		rep, err := loop.Plan(t.Context(), planConfig(t), store, runner)
		if err != nil || rep.Outcome != loop.OutcomeComplete || runner.Calls() != 1 {
			t.Errorf("outcome %s after %d runs, err %v", rep.Outcome, runner.Calls(), err)
		}
	})
}

func TestIterationRecorder(t *testing.T) {
	clock := looptest.NewClock(time.Date(2026, 1, 29, 10, 0, 0, 0, time.UTC))
	store := &bookkeepingStore{MemStore: newStore(t, tasks("a", "b", "c", "d")...)}
	cfg := testConfig(t)
	cfg.Now = clock.Now
	cfg.Sleep = func(_ context.Context, d time.Duration) error { clock.Advance(d); return nil }
	cfg.MaxRetries = 1
	runner := looptest.NewFakeRunner(t).ThenStep(
		// 1: a is done, and the agent closes c too (two boxes ticked in one session).
		looptest.Step{Func: func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
			clock.Advance(3 * time.Minute)
			if _, err := store.Claim(ctx, loop.ClaimParams{TaskID: "c", Agent: "other"}); err != nil {
				return loop.RunResult{}, err
			}
			if err := store.Complete(ctx, loop.MoveParams{TaskID: "c", Message: "by the way"}); err != nil {
				return loop.RunResult{}, err
			}
			r := looptest.Result(done("a"))
			r.CostUSD = 0.25
			return r, nil
		}},
		// 2: a usage limit: a wait, not an iteration, not recorded.
		looptest.Step{Result: looptest.UsageLimited(clock.Now().Add(time.Hour))},
		// 2: b, no sigil: task trouble.
		looptest.Step{Func: func(context.Context, loop.RunRequest) (loop.RunResult, error) {
			clock.Advance(time.Minute)
			return looptest.Result("I tried."), nil
		}},
		// 3: b again, done.
		looptest.Step{Result: looptest.Result(done("b"))},
		// 4: d, the agent crashes.
		looptest.Step{Result: looptest.ErrorResult(loop.ClassCrashed, "boom")},
		// 5: d, done.
		looptest.Step{Result: looptest.Result(done("d"))},
	)
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != loop.OutcomeComplete || rep.Iterations != 5 {
		t.Fatalf("outcome %s after %d iterations: %s", rep.Outcome, rep.Iterations, rep.Message)
	}
	type row struct {
		Iteration int
		Task      string
		Status    loop.IterationStatus
		Completed int
		Reason    string
	}
	var got []row
	for _, r := range store.records {
		got = append(got, row{r.Iteration, r.Task.ID, r.Status, r.TasksCompleted, r.Reason})
		if r.Mode != loop.ModeBuild || r.Model == "" {
			t.Errorf("record %d: mode %q model %q", r.Iteration, r.Mode, r.Model)
		}
	}
	want := []row{
		{1, "a", loop.IterDone, 2, ""},
		{2, "b", loop.IterNoSigil, 0, "the agent ended without a task sigil"},
		{3, "b", loop.IterDone, 1, ""},
		{4, "d", loop.IterAgentTrouble, 0, "crashed: the agent printed no result line (exit code 1)"},
		{5, "d", loop.IterDone, 1, ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	first := store.records[0]
	if diff := cmp.Diff(loop.IterationRecord{Started: time.Date(2026, 1, 29, 10, 0, 0, 0, time.UTC), Duration: 3 * time.Minute, CostUSD: 0.25},
		loop.IterationRecord{Started: first.Started, Duration: first.Duration, CostUSD: first.CostUSD}, cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("first record's times and cost (-want +got):\n%s", diff)
	}
	// The iteration after the wait (until 11:00) started after it.
	if second := store.records[1]; !second.Started.Equal(first.Started.Add(time.Hour)) {
		t.Errorf("second record started %v", second.Started)
	}
}

func TestIterationRecorderErrorIsANotice(t *testing.T) {
	store := &bookkeepingStore{MemStore: newStore(t, tasks("a")...), recordErr: errors.New("read-only file")}
	cfg := testConfig(t)
	rec := &recorder{}
	cfg.Observer = rec
	rep, err := loop.Run(t.Context(), cfg, store, looptestRunner(t))
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("outcome %s, err %v", rep.Outcome, err)
	}
	var notices []string
	for _, n := range rec.kind(loop.NoteNotice) {
		notices = append(notices, n.Message)
	}
	if diff := cmp.Diff([]string{"could not record iteration 1 in the store: read-only file"}, notices); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
}

func TestIterationRecorderInPlanMode(t *testing.T) {
	store := &bookkeepingStore{MemStore: newStore(t)}
	runner := looptest.NewFakeRunner(t).Always(planner(store.MemStore, "a,b|"+complete))
	if _, err := loop.Plan(t.Context(), planConfig(t), store, runner); err != nil {
		t.Fatal(err)
	}
	if len(store.records) != 1 || store.records[0].Mode != loop.ModePlan || store.records[0].Status != loop.IterSessionOK || store.records[0].TasksCompleted != 0 {
		t.Errorf("plan records %+v", store.records)
	}
}

func TestDryRunAsksFinisher(t *testing.T) {
	store := &bookkeepingStore{MemStore: newStore(t, tasks("a", "b")...), done: true}
	plan, err := loop.DryRun(t.Context(), testConfig(t), store)
	if err != nil {
		t.Fatal(err)
	}
	want := loop.DryRunPlan{Outcome: loop.OutcomeComplete, Message: "complete: the plan says it is done (RALPH_DONE), 2 tasks unfinished",
		PromptName: loop.PromptBuild, PromptSource: loop.SourceEmbedded, SystemPromptSource: loop.SourceEmbedded}
	if diff := cmp.Diff(want, plan); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	store.done = false
	if plan, err := loop.DryRun(t.Context(), testConfig(t), store); err != nil || plan.TaskID != "a" {
		t.Errorf("dry run of an unfinished plan: %+v, %v", plan, err)
	}
}
