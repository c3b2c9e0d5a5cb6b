package loop_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// claimer plays an agent in peek mode: it claims the next ready task as
// `$RALPH_BIN task claim` would, then finishes it (or not).
func claimer(store loop.TaskStore, finish bool) func(context.Context, loop.RunRequest) (loop.RunResult, error) {
	return func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		agent := envOf(req, "RALPH_AGENT_ID")
		task, err := store.Claim(ctx, loop.ClaimParams{Agent: agent})
		if err != nil {
			return loop.RunResult{}, err
		}
		if finish {
			if err := store.Complete(ctx, loop.MoveParams{TaskID: task.ID, Message: "done in session"}); err != nil {
				return loop.RunResult{}, err
			}
		}
		return looptest.Result("worked on " + task.ID), nil
	}
}

func peekConfig(t *testing.T) loop.Config {
	t.Helper()
	cfg := testConfig(t)
	cfg.ClaimMode = loop.ClaimAgent
	return cfg
}

func TestPeekMode(t *testing.T) {
	const P, D, F = loop.StatusPending, loop.StatusDone, loop.StatusFailed
	tests := []struct {
		name    string
		tasks   []loop.Task
		runner  func(t *testing.T, s loop.TaskStore) *looptest.FakeRunner
		want    result
		wantLog string // last log message of task a
	}{
		{
			name:  "agent claims and finishes until nothing is claimable",
			tasks: []loop.Task{{ID: "a"}, {ID: "b", BlockedBy: []string{"a"}}},
			runner: func(t *testing.T, s loop.TaskStore) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t).Always(claimer(s, true))
			},
			want: result{Outcome: loop.OutcomeComplete, Iterations: 2, Statuses: map[string]loop.Status{"a": D, "b": D}},
		},
		{
			name:  "a task left in_progress is failed",
			tasks: tasks("a"),
			runner: func(t *testing.T, s loop.TaskStore) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t).ThenFunc(claimer(s, false))
			},
			want:    result{Outcome: loop.OutcomeCompleteWithFailures, Exit: 8, Iterations: 1, Statuses: map[string]loop.Status{"a": F}},
			wantLog: loop.ReasonSessionExited,
		},
		{
			name:  "agent trouble releases what the agent holds",
			tasks: tasks("a"),
			runner: func(t *testing.T, s loop.TaskStore) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t).ThenFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
					if _, err := claimer(s, false)(ctx, req); err != nil {
						return loop.RunResult{}, err
					}
					return looptest.ErrorResult(loop.ClassCrashed, "segfault"), nil
				})
			},
			want: result{Outcome: loop.OutcomeAgentFailed, Exit: 4, Iterations: 1, Statuses: map[string]loop.Status{"a": P}},
		},
		{
			name:  "nothing claimable at the start is complete",
			tasks: []loop.Task{{ID: "a", Status: loop.StatusDone}},
			runner: func(t *testing.T, s loop.TaskStore) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t)
			},
			want: result{Outcome: loop.OutcomeComplete, Statuses: map[string]loop.Status{"a": D}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tt.tasks...)
			cfg := peekConfig(t)
			cfg.MaxRetries = 0
			runner := tt.runner(t, store)
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Exit = tt.want.Outcome.ExitCode()
			if diff := cmp.Diff(tt.want, summarize(t, rep, store)); diff != "" {
				t.Errorf("run (-want +got):\n%s\n%s", diff, rep.Message)
			}
			noneInProgress(t, store)
			if tt.wantLog != "" {
				logs, _ := store.Logs(t.Context(), "a")
				if got := logs[len(logs)-1].Message; got != tt.wantLog {
					t.Errorf("last log %q, want %q", got, tt.wantLog)
				}
			}
			for _, req := range runner.Requests() {
				if !strings.HasPrefix(req.Prompt, "/ralph-build # Claimable tasks") {
					t.Errorf("peek prompt %q", req.Prompt)
				}
				if envOf(req, "RALPH_TASK_ID") != "" {
					t.Errorf("peek mode set RALPH_TASK_ID")
				}
			}
		})
	}
}

// flakyStore fails Ready a number of times, then works.
type flakyStore struct {
	*looptest.MemStore
	fails atomic.Int32
}

func (s *flakyStore) Ready(ctx context.Context, scope loop.Scope, limit int) ([]loop.Task, error) {
	if s.fails.Add(-1) >= 0 {
		return nil, errors.New("database is locked")
	}
	return s.MemStore.Ready(ctx, scope, limit)
}

func TestPeekErrorIsTransient(t *testing.T) {
	mem := newStore(t, tasks("a")...)
	store := &flakyStore{MemStore: mem}
	store.fails.Store(1)
	cfg := peekConfig(t)
	runner := looptest.NewFakeRunner(t).Always(claimer(mem, true))
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	want := result{Outcome: loop.OutcomeComplete, Iterations: 2, Statuses: map[string]loop.Status{"a": loop.StatusDone}}
	if diff := cmp.Diff(want, summarize(t, rep, mem)); diff != "" {
		t.Errorf("run (-want +got):\n%s", diff)
	}
	if rep.Failures != 1 || rep.Successes != 1 {
		t.Errorf("failures %d successes %d, want 1 and 1", rep.Failures, rep.Successes)
	}
}
