package loop_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

var errDisk = errors.New("disk I/O error")

// brokenStore fails one method with errDisk.
type brokenStore struct {
	*looptest.MemStore
	method string
}

func (s brokenStore) Complete(ctx context.Context, p loop.MoveParams) error {
	if s.method == "Complete" {
		return errDisk
	}
	return s.MemStore.Complete(ctx, p)
}

func (s brokenStore) Counts(ctx context.Context, scope loop.Scope) (loop.Counts, error) {
	if s.method == "Counts" {
		return loop.Counts{}, errDisk
	}
	return s.MemStore.Counts(ctx, scope)
}

func (s brokenStore) Logs(ctx context.Context, id string) ([]loop.LogEntry, error) {
	if s.method == "Logs" {
		return nil, errDisk
	}
	return s.MemStore.Logs(ctx, id)
}

func TestStoreErrorsAreInternal(t *testing.T) {
	for _, method := range []string{"Complete", "Counts", "Logs"} {
		t.Run(method, func(t *testing.T) {
			mem := newStore(t, tasks("a", "b")...)
			cfg := testConfig(t)
			runner := looptest.NewFakeRunner(nil).Always(agent(done, ""))
			rep, err := loop.Run(t.Context(), cfg, brokenStore{mem, method}, runner)
			if !errors.Is(err, errDisk) || rep.Outcome != loop.OutcomeError || rep.ExitCode() != 1 {
				t.Errorf("outcome %s, err %v; want error wrapping %v", rep.Outcome, err, errDisk)
			}
			noneInProgress(t, mem)
		})
	}
}

func TestVerifierTrouble(t *testing.T) {
	t.Run("a verifier crash is agent trouble, not the task's", func(t *testing.T) {
		store := newStore(t, tasks("a")...)
		cfg := testConfig(t)
		cfg.Verify, cfg.MaxRetries = true, 1
		runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
			if isVerifier(req) {
				return looptest.ErrorResult(loop.ClassCrashed, ""), nil
			}
			return looptest.Result(done("a")), nil
		})
		rep, err := loop.Run(t.Context(), cfg, store, runner)
		if err != nil {
			t.Fatal(err)
		}
		task, _ := store.Get(t.Context(), "a")
		if rep.Outcome != loop.OutcomeAgentFailed || task.Status != loop.StatusPending || task.RetryCount != 0 {
			t.Errorf("outcome %s, task %s retries %d; want agent_failed, pending, 0", rep.Outcome, task.Status, task.RetryCount)
		}
		if runner.Calls() != 4 {
			t.Errorf("%d sessions, want 4 (2 iterations of work + verify)", runner.Calls())
		}
	})
	t.Run("a verifier usage limit is a wait, then the iteration runs again", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := newStore(t, tasks("a")...)
			cfg := testConfig(t)
			cfg.Verify = true
			cfg.MaxIterations = 1
			runner := looptest.NewFakeRunner(t,
				looptest.Result(done("a")), looptest.UsageLimited(time.Now().Add(time.Hour)),
				looptest.Result(done("a")), looptest.Result("<verify-pass/>"))
			began := time.Now()
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outcome != loop.OutcomeComplete || rep.Iterations != 1 || time.Since(began) != time.Hour {
				t.Errorf("outcome %s after %d iterations and %v; want complete after 1 and 1h", rep.Outcome, rep.Iterations, time.Since(began))
			}
		})
	})
}

func TestCompletionSummary(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	long := strings.Repeat("é", 400) + " Implemented the login form. <task-done>a</task-done> <next-model>haiku</next-model>"
	runner := looptest.NewFakeRunner(t, looptest.Result(long))
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	logs, _ := store.Logs(t.Context(), "a")
	got := logs[len(logs)-1]
	if got.Kind != loop.LogDone || !strings.HasSuffix(got.Message, "Implemented the login form.") ||
		strings.Contains(got.Message, "<") || len(got.Message) > 505 || !utf8.ValidString(got.Message) {
		t.Errorf("summary %q (%d bytes)", got.Message, len(got.Message))
	}
}

func TestPeekModeCommit(t *testing.T) {
	store := newStore(t, loop.Task{ID: "a", Title: "Add login"})
	cfg := peekConfig(t)
	gitRepo(t, cfg.Root)
	cfg.Commit = true
	runner := looptest.NewFakeRunner(t).ThenFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		writeFile(t, cfg.Root, "login.go", "package login\n")
		return claimer(store, true)(ctx, req)
	})
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Message)
	}
	if got := strings.TrimSpace(git(t, cfg.Root, "log", "-1", "--format=%s")); got != "build: iteration 1 - Add login" {
		t.Errorf("commit %q", got)
	}
}
