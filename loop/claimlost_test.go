package loop_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// In loop-claim mode the agent cannot complete or fail the loop's claim
// itself (`ralph task done` would skip verification and gates): the store
// refuses with a message that tells it to answer with the sigil, and the
// loop completes the task from the sigil.
func TestAgentCannotCompleteLoopClaim(t *testing.T) {
	store := newStore(t, tasks("a")...)
	var refused error
	runner := looptest.NewFakeRunner(t).ThenFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		me := loop.Actor{Agent: envOf(req, "RALPH_AGENT_ID")}
		refused = store.Complete(ctx, loop.MoveParams{TaskID: "a", Message: "done by the agent", By: me})
		if err := store.Fail(ctx, loop.MoveParams{TaskID: "a", Message: "failed by the agent", By: me}); !errors.Is(err, loop.ErrLoopClaim) {
			t.Errorf("the agent's fail of the loop's claim: %v, want ErrLoopClaim", err)
		}
		return looptest.Result(done("a")), nil
	})
	rep, err := loop.Run(t.Context(), testConfig(t), store, runner)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(refused, loop.ErrLoopClaim) || !strings.Contains(refused.Error(), "<task-done>a</task-done>") {
		t.Errorf("the agent's done of the loop's claim: %v, want ErrLoopClaim telling it to answer <task-done>a</task-done>", refused)
	}
	if rep.Outcome != loop.OutcomeComplete || rep.Successes != 1 || rep.Iterations != 1 {
		t.Errorf("outcome %s, %d iterations, %d successes; want complete after 1", rep.Outcome, rep.Iterations, rep.Successes)
	}
	logs, _ := store.Logs(t.Context(), "a")
	if got := logs[len(logs)-1]; got.Kind != loop.LogDone || got.Actor != testAgent {
		t.Errorf("last history entry %+v, want the loop's completion as %s", got, testAgent)
	}
}

// A claim released behind the loop's back during every session (the old
// SessionEnd hook did that; now only a person with --force can) is task
// trouble: counted against the task's breaker with a reason that says who
// released it, so the task fails after 1+MaxRetries runs instead of running
// at retry_count 0 until the iteration limit.
func TestReleasedClaimIsTaskTrouble(t *testing.T) {
	store := newStore(t, tasks("a", "b")...)
	cfg := testConfig(t)
	cfg.MaxRetries = 2
	runner := looptest.NewFakeRunner(t).Always(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		if id == "a" {
			// The agent itself may not: the loop's claim is the loop's.
			me := loop.Actor{Agent: envOf(req, "RALPH_AGENT_ID")}
			if err := store.Release(ctx, loop.MoveParams{TaskID: id, Message: "mine", By: me}); !errors.Is(err, loop.ErrLoopClaim) {
				t.Errorf("the agent's release of the loop's claim: %v, want ErrLoopClaim", err)
			}
			if ids, _ := store.ReleaseAgent(ctx, me.Agent, "session ended"); len(ids) != 0 {
				t.Errorf("ReleaseAgent released the live loop's claims %v", ids)
			}
			person := loop.Actor{Person: "user-alice", Force: true}
			if err := store.Release(ctx, loop.MoveParams{TaskID: id, Message: "taking it back", By: person}); err != nil {
				return loop.RunResult{}, err
			}
		}
		return looptest.Result(done(id)), nil
	})
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	want := result{Outcome: loop.OutcomeCompleteWithFailures, Exit: 8, Iterations: 4,
		Statuses: map[string]loop.Status{"a": loop.StatusFailed, "b": loop.StatusDone}}
	if diff := cmp.Diff(want, summarize(t, rep, store)); diff != "" {
		t.Errorf("run (-want +got):\n%s", diff)
	}
	a, _ := store.Get(t.Context(), "a")
	logs, _ := store.Logs(t.Context(), "a")
	last := logs[len(logs)-1]
	if a.RetryCount != 2 || last.Kind != loop.LogFail || !strings.Contains(last.Message, "the claim was lost during the session: release by user-alice: taking it back") ||
		!strings.Contains(last.Message, "after 3 runs") {
		t.Errorf("task a: retry count %d, last entry %+v; want failed after 3 runs, saying who released it", a.RetryCount, last)
	}
}

// A claim that someone else took over, finished or failed during the
// session is noted, and the loop moves on without touching the task.
func TestClaimTakenDuringSession(t *testing.T) {
	person := loop.Actor{Person: "user-alice", Force: true}
	tests := []struct {
		name       string
		meanwhile  func(ctx context.Context, s *looptest.MemStore) error
		wantStatus loop.IterationStatus
		wantTask   loop.Status
		wantHolder string
	}{
		{
			name: "a person completed it",
			meanwhile: func(ctx context.Context, s *looptest.MemStore) error {
				return s.Complete(ctx, loop.MoveParams{TaskID: "a", Message: "did it by hand", By: person})
			},
			wantStatus: loop.IterAlreadyClosed, wantTask: loop.StatusDone,
		},
		{
			name: "a person failed it",
			meanwhile: func(ctx context.Context, s *looptest.MemStore) error {
				return s.Fail(ctx, loop.MoveParams{TaskID: "a", Message: "not needed", By: person})
			},
			wantStatus: loop.IterTaskFailed, wantTask: loop.StatusFailed,
		},
		{
			name: "released, then claimed by another agent",
			meanwhile: func(ctx context.Context, s *looptest.MemStore) error {
				if err := s.Release(ctx, loop.MoveParams{TaskID: "a", Message: "taking it", By: person}); err != nil {
					return err
				}
				_, err := s.Claim(ctx, loop.ClaimParams{TaskID: "a", Agent: "agent-other"})
				return err
			},
			wantStatus: loop.IterClaimLost, wantTask: loop.StatusInProgress, wantHolder: "agent-other",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tasks("a")...)
			cfg := testConfig(t)
			cfg.Once = true
			obs := &recorder{}
			cfg.Observer = obs
			runner := looptest.NewFakeRunner(t).ThenFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
				if err := tt.meanwhile(ctx, store); err != nil {
					return loop.RunResult{}, err
				}
				return looptest.Result(done("a")), nil
			})
			if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
				t.Fatal(err)
			}
			var got loop.IterationStatus
			for _, n := range obs.kind(loop.NoteIterationEnd) {
				got = n.Status
			}
			a, _ := store.Get(t.Context(), "a")
			if got != tt.wantStatus || a.Status != tt.wantTask || a.ClaimedBy != tt.wantHolder {
				t.Errorf("iteration %s, task %s held by %q; want %s, %s held by %q", got, a.Status, a.ClaimedBy, tt.wantStatus, tt.wantTask, tt.wantHolder)
			}
		})
	}
}

// An outcome from a claim that ended meanwhile is refused by its
// generation (and logged), never applied to the claim that replaced it:
// here the claim is taken over while the verifier runs, after the loop
// last looked.
func TestStaleOutcomeRefused(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	cfg.Verify, cfg.Once = true, true
	runner := looptest.NewFakeRunner(t).Then(looptest.Result(done("a"))).ThenFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		person := loop.Actor{Person: "user-alice", Force: true}
		if err := store.Release(ctx, loop.MoveParams{TaskID: "a", Message: "taking it", By: person}); err != nil {
			return loop.RunResult{}, err
		}
		if _, err := store.Claim(ctx, loop.ClaimParams{TaskID: "a", Agent: "agent-other"}); err != nil {
			return loop.RunResult{}, err
		}
		return looptest.Result("<verify-pass/>"), nil
	})
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatalf("run: %v (a lost claim is not an error of the run)", err)
	}
	a, _ := store.Get(t.Context(), "a")
	if a.Status != loop.StatusInProgress || a.ClaimedBy != "agent-other" || a.Generation != 2 {
		t.Errorf("task a: %s held by %q (claim %d); want still agent-other's claim 2", a.Status, a.ClaimedBy, a.Generation)
	}
	logs, _ := store.Logs(t.Context(), "a")
	var refused bool
	for _, l := range logs {
		refused = refused || (l.Kind == loop.LogOutcomeRefused && l.Actor == testAgent && strings.Contains(l.Message, "generation 1"))
	}
	if !refused {
		t.Errorf("no outcome-refused entry by %s for claim 1 in %+v", testAgent, logs)
	}
	if rep.Failures != 1 {
		t.Errorf("report: %d failures, want the iteration counted as one", rep.Failures)
	}
}

// The loop renews its claim from the claim until the outcome is recorded,
// not only while the agent works: a test gate that outlasts the lease does
// not lose the claim (ARCHITECTURE.md §2.2). Real time: the lease is 300 ms,
// the gate takes a second.
func TestLeaseRenewedThroughGates(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	cfg.Lease = 300 * time.Millisecond
	cfg.TestCmd = "sleep 1"
	cfg.MaxRetries = 0
	rep, err := loop.Run(t.Context(), cfg, store, looptest.NewFakeRunner(t).Always(agent(done, "")))
	if err != nil || rep.Outcome != loop.OutcomeComplete || rep.Iterations != 1 {
		t.Fatalf("outcome %s (%q) after %d iterations, err %v; want complete after 1", rep.Outcome, rep.Message, rep.Iterations, err)
	}
	logs, _ := store.Logs(t.Context(), "a")
	for _, l := range logs {
		if l.Kind == loop.LogLeaseExpired || l.Kind == loop.LogOutcomeRefused {
			t.Errorf("history has %s: %q", l.Kind, l.Message)
		}
	}
}

// passOver is a store whose first claim passes over a ready task, as a
// server's SKIP LOCKED claim does while another transaction holds the
// task's row for a moment.
type passOver struct {
	*looptest.MemStore
	passed bool
}

func (s *passOver) Claim(ctx context.Context, p loop.ClaimParams) (loop.Task, error) {
	if !s.passed {
		s.passed = true
		return loop.Task{}, loop.ErrNoReadyTask
	}
	return s.MemStore.Claim(ctx, p)
}

// A claim that found nothing while a task is ready and nobody holds one
// (a completion landed between the two reads, or a claim passed over a
// row held for a moment) is tried again: the plan is not blocked.
func TestClaimMissedReadyTaskLooksAgain(t *testing.T) {
	store := &passOver{MemStore: newStore(t, tasks("a")...)}
	runner := looptest.NewFakeRunner(t).Always(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
	})
	rep, err := loop.Run(t.Context(), testConfig(t), store, runner)
	if err != nil {
		t.Fatal(err)
	}
	want := result{Outcome: loop.OutcomeComplete, Exit: 0, Iterations: 1, Statuses: map[string]loop.Status{"a": loop.StatusDone}}
	if diff := cmp.Diff(want, summarize(t, rep, store.MemStore)); diff != "" {
		t.Errorf("run (-want +got):\n%s", diff)
	}
}

// claimedBehind is a store whose first claim finds nothing and whose
// first look for a ready task is overtaken: right before it looked,
// another agent claimed task a and finished it.
type claimedBehind struct {
	*looptest.MemStore
	t              *testing.T
	missed, looked bool
}

func (s *claimedBehind) Claim(ctx context.Context, p loop.ClaimParams) (loop.Task, error) {
	if !s.missed {
		s.missed = true
		return loop.Task{}, loop.ErrNoReadyTask
	}
	return s.MemStore.Claim(ctx, p)
}

func (s *claimedBehind) Ready(ctx context.Context, scope loop.Scope, limit int) ([]loop.Task, error) {
	if !s.looked {
		s.looked = true
		other := loop.Actor{Agent: "other"}
		if _, err := s.MemStore.Claim(ctx, loop.ClaimParams{TaskID: "a", Agent: "other"}); err != nil {
			s.t.Fatal(err)
		}
		if err := s.MemStore.Complete(ctx, loop.MoveParams{TaskID: "a", Message: "done elsewhere", By: other}); err != nil {
			s.t.Fatal(err)
		}
	}
	return s.MemStore.Ready(ctx, scope, limit)
}

// A task another agent claimed and finished while the loop looked does
// not end the run "blocked": the counts are taken after the look for a
// ready task, and find the plan complete.
func TestStaleCountsAreNotBlocked(t *testing.T) {
	store := &claimedBehind{MemStore: newStore(t, tasks("a")...), t: t}
	runner := looptest.NewFakeRunner(t).Always(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		return looptest.Result(done("a")), nil
	})
	rep, err := loop.Run(t.Context(), testConfig(t), store, runner)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %s (%q), %v; want complete", rep.Outcome, rep.Message, err)
	}
	if n := len(runner.Requests()); n != 0 {
		t.Errorf("%d sessions; want none (another agent did the task)", n)
	}
}

// An end with failed tasks names them: blocked behind a failed task, and
// complete with failures.
func TestEndNamesFailedTasks(t *testing.T) {
	for _, tt := range []struct {
		name  string
		tasks []loop.Task
		fail  string // the tasks that fail, by their id's first letter
		scope loop.Scope
		want  string
	}{
		{"blocked", []loop.Task{{ID: "a", Title: "A"}, {ID: "b", Title: "B", BlockedBy: []string{"a"}}}, "a", loop.Scope{},
			"blocked: 1 task remains but none is ready; failed: a (ralph task show ID says why)"},
		{"complete", []loop.Task{{ID: "a", Title: "A"}, {ID: "b", Title: "B"}}, "a", loop.Scope{},
			"complete: 1 done, 1 failed: a (ralph task show ID says why)"},
		{"many: the first five", tasks("a1", "a2", "a3", "a4", "a5", "a6", "a7", "b"), "a", loop.Scope{},
			"complete: 1 done, 7 failed: a1, a2, a3, a4, a5, and 2 more (ralph task show ID says why)"},
		{"one task's build names it", tasks("a", "b"), "ab", loop.Scope{TaskID: "b"},
			"complete: 0 done, 1 failed: b (ralph task show ID says why)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tt.tasks...)
			if tt.scope.TaskID != "" {
				// A task out of scope that failed before is not named.
				if _, err := store.Claim(t.Context(), loop.ClaimParams{TaskID: "a", Agent: "other"}); err != nil {
					t.Fatal(err)
				}
				if err := store.Fail(t.Context(), loop.MoveParams{TaskID: "a", Message: "earlier"}); err != nil {
					t.Fatal(err)
				}
			}
			runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
				id := envOf(req, "RALPH_TASK_ID")
				if strings.ContainsRune(tt.fail, rune(id[0])) {
					return looptest.Result(failed(id)), nil
				}
				return looptest.Result(done(id)), nil
			})
			cfg := testConfig(t)
			cfg.Scope = tt.scope
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if err != nil || rep.Message != tt.want {
				t.Errorf("Run ended %q, %v; want %q", rep.Message, err, tt.want)
			}
		})
	}
}

// An agent that is not logged in (ClassAuth) ends the run at once: one
// session, no retry, exit 4, ErrNotLoggedIn as the cause and the login
// hint in the message.
func TestNotLoggedInStopsAtOnce(t *testing.T) {
	store := newStore(t, tasks("a")...)
	runner := looptest.NewFakeRunner(t).Always(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		return loop.RunResult{Class: loop.ClassAuth, IsError: true, Text: "Not logged in · Please run /login"}, nil
	})
	rep, err := loop.Run(t.Context(), testConfig(t), store, runner)
	if err != nil || rep.Outcome != loop.OutcomeAgentFailed || !errors.Is(rep.Cause, loop.ErrNotLoggedIn) {
		t.Fatalf("Run = %s (%q), cause %v, %v; want agent_failed caused by ErrNotLoggedIn", rep.Outcome, rep.Message, rep.Cause, err)
	}
	if n := len(runner.Requests()); n != 1 {
		t.Errorf("%d sessions; want 1", n)
	}
	if !strings.Contains(rep.Message, "Please run /login") || !strings.Contains(rep.Message, loop.LoginHint) {
		t.Errorf("the message %q does not carry the agent's words and the hint", rep.Message)
	}
	if task, _ := store.Get(t.Context(), "a"); task.Status != loop.StatusPending || task.RetryCount != 0 {
		t.Errorf("task %s with %d retries; want pending, none", task.Status, task.RetryCount)
	}
}
