package loop_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// losingWorkspace loses the race to land its first `losses` attempts.
type losingWorkspace struct {
	dir      string
	losses   int
	attempts int
}

func (w *losingWorkspace) Dir() string { return w.dir }

func (w *losingWorkspace) Begin(context.Context, loop.Task, int) (bool, error) { return false, nil }

func (w *losingWorkspace) Integrate(context.Context, loop.IntegrateRequest) (loop.IntegrateResult, error) {
	w.attempts++
	if w.attempts <= w.losses {
		return loop.IntegrateResult{}, &loop.IntegrationError{Reason: "conflict with the integration branch in shared.txt", Conflict: true}
	}
	return loop.IntegrateResult{Commit: "0123456789abcdef"}, nil
}

// A worker's task that loses the race to land goes back to pending with
// the conflicting files named, without counting a retry, up to
// MaxConflicts; the next conflict is task trouble like any other.
func TestConflictRounds(t *testing.T) {
	tests := []struct {
		name         string
		losses       int
		maxConflicts int
		wantStatus   loop.Status
		wantRetries  int
	}{
		// MaxRetries 1: six conflicts would fail the task were they retries.
		{"lost races are not retries", 6, 0, loop.StatusDone, 0},
		{"past the bound a conflict is task trouble", 3, 2, loop.StatusDone, 1},
		{"and the retries still end", 5, 2, loop.StatusFailed, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, loop.Task{ID: "a", Title: "append a line"})
			cfg := testConfig(t)
			cfg.MaxRetries, cfg.MaxConflicts = 1, tt.maxConflicts
			ws := &losingWorkspace{dir: cfg.Root, losses: tt.losses}
			cfg.Workspace = ws
			runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
				return looptest.Result("<task-done>a</task-done>"), nil
			})
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			task, _ := store.Get(t.Context(), "a")
			if task.Status != tt.wantStatus || task.RetryCount != tt.wantRetries {
				t.Errorf("task %s with %d retries (%s: %s); want %s with %d", task.Status, task.RetryCount, rep.Outcome, rep.Message, tt.wantStatus, tt.wantRetries)
			}
			// Every attempt after a lost race is told the conflict.
			for i, req := range runner.Requests()[1:] {
				if !strings.Contains(req.Prompt, "shared.txt") {
					t.Errorf("attempt %d's prompt does not name the conflicting file", i+2)
				}
			}
		})
	}
}

// elsewhereWorkspace finds the task's work landed by another claim when
// its attempt is ready to land (loop.IntegrateResult.Elsewhere).
type elsewhereWorkspace struct{ dir string }

func (w elsewhereWorkspace) Dir() string { return w.dir }

func (w elsewhereWorkspace) Begin(context.Context, loop.Task, int) (bool, error) { return false, nil }

func (w elsewhereWorkspace) Integrate(context.Context, loop.IntegrateRequest) (loop.IntegrateResult, error) {
	return loop.IntegrateResult{Elsewhere: true}, nil
}

// A task whose work another claim landed already is done at once by the
// holder that finds it: one session, no retry, no claim called lost, the
// run complete.
func TestLandedElsewhereIsDone(t *testing.T) {
	store := newStore(t, loop.Task{ID: "a", Title: "a task"})
	cfg := testConfig(t)
	cfg.Workspace = elsewhereWorkspace{dir: cfg.Root}
	var notes []string
	cfg.Observer = loop.ObserverFunc(func(n loop.Note) { notes = append(notes, n.Message) })
	runner := looptest.NewFakeRunner(t).Always(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		return looptest.Result("<task-done>a</task-done>"), nil
	})
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	task, _ := store.Get(t.Context(), "a")
	if task.Status != loop.StatusDone || task.RetryCount != 0 || len(runner.Requests()) != 1 {
		t.Errorf("task %s, %d retries, %d sessions; want done, 0, 1", task.Status, task.RetryCount, len(runner.Requests()))
	}
	if said := strings.Join(notes, "\n"); !strings.Contains(said, "landed already, from another claim") || strings.Contains(said, "claim was lost") {
		t.Errorf("the notes do not say the work landed from another claim, or call the claim lost:\n%s", said)
	}
}
