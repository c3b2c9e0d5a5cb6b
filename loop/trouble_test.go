package loop_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

var errDisk error = temporary{errors.New("disk I/O error")}

// temporary is a store error that may pass on a retry (loop.TaskStore).
type temporary struct{ error }

func (temporary) Temporary() bool { return true }
func (e temporary) Unwrap() error { return e.error }

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
	for _, method := range []string{"Counts", "Logs"} {
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

// refusals counts a store's tries at one write and says which to refuse:
// the first fails (fails < 0: all).
type refusals struct {
	mu    sync.Mutex
	fails int
	tries int
}

// refuse counts a try and reports whether to refuse it.
func (r *refusals) refuse() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tries++
	fail := r.fails != 0
	if r.fails > 0 {
		r.fails--
	}
	return fail
}

// lockedStore fails Complete with a transient error (a locked database, a
// full disk) until fails is spent; fails < 0 fails it for good.
type lockedStore struct {
	*looptest.MemStore
	refusals
}

func (s *lockedStore) Complete(ctx context.Context, p loop.MoveParams) error {
	if s.refuse() {
		return errDisk
	}
	return s.MemStore.Complete(ctx, p)
}

// Finished work is never lost (ARCHITECTURE.md §4): a completion the store
// refuses for a while is tried again, with the claim's lease renewed, until
// the store takes it; the iteration says "done" only then.
func TestOutcomeRetriedUntilRecorded(t *testing.T) {
	clock := looptest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	store := &lockedStore{MemStore: looptest.NewMemStore(clock.Now), refusals: refusals{fails: 5}}
	if err := store.Add(loop.Task{ID: "a", Title: "A", Priority: 2}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Now = clock.Now
	cfg.Sleep = func(ctx context.Context, d time.Duration) error { clock.Advance(d); return ctx.Err() }
	rec := &recorder{}
	cfg.Observer = rec
	rep, err := loop.Run(t.Context(), cfg, store, looptest.NewFakeRunner(t).Always(agent(done, "")))
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("outcome %s (%q), err %v; want complete", rep.Outcome, rep.Message, err)
	}
	if store.tries != 6 {
		t.Errorf("Complete tried %d times, want 6", store.tries)
	}
	var statuses []loop.IterationStatus
	for _, n := range rec.kind(loop.NoteIterationEnd) {
		statuses = append(statuses, n.Status)
	}
	if diff := cmp.Diff([]loop.IterationStatus{loop.IterDone}, statuses); diff != "" {
		t.Errorf("iterations (-want +got):\n%s", diff)
	}
	var said bool
	for _, n := range rec.kind(loop.NoteNotice) {
		said = said || strings.Contains(n.Message, "could not record that task a done yet")
	}
	if !said {
		t.Error("no notice said the completion waited for the store")
	}
}

// A store that stays unwritable for the whole lease stops the run (exit 1)
// naming the task and the outcome; the session log keeps the agent's final
// text and says the iteration was not recorded, never "done".
func TestOutcomeNotRecorded(t *testing.T) {
	clock := looptest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	store := &lockedStore{MemStore: looptest.NewMemStore(clock.Now), refusals: refusals{fails: -1}}
	if err := store.Add(loop.Task{ID: "a", Title: "A", Priority: 2}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.SessionLog = true
	cfg.Now = clock.Now
	cfg.Sleep = func(ctx context.Context, d time.Duration) error { clock.Advance(d); return ctx.Err() }
	text := "I wrote the parser and its tests.\n<task-done>a</task-done>"
	rep, err := loop.Run(t.Context(), cfg, store, looptest.NewFakeRunner(t).Always(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		return looptest.Result(text), nil
	}))
	if !errors.Is(err, errDisk) || rep.Outcome != loop.OutcomeError || rep.ExitCode() != 1 ||
		!strings.Contains(rep.Message, "could not record that task a is done") {
		t.Fatalf("outcome %s (%q), err %v; want exit 1 naming task a and its outcome", rep.Outcome, rep.Message, err)
	}
	if store.tries < 10 {
		t.Errorf("Complete tried %d times in the lease, want it retried", store.tries)
	}
	log, err := os.ReadFile(loop.SessionLogPath(filepath.Join(cfg.Root, ".ralph", "logs"), cfg.Session))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), text) || !strings.Contains(string(log), "status: not_recorded") || strings.Contains(string(log), "status: done") {
		t.Errorf("session log does not keep the final text, or says done:\n%s", log)
	}
	noneInProgress(t, store.MemStore)
}

// receiptStore refuses receipts: with err for the first fails tries (a
// negative fails: always).
type receiptStore struct {
	*looptest.MemStore
	err error
	refusals
}

func (s *receiptStore) RecordReceipt(ctx context.Context, r loop.Receipt) error {
	if s.refuse() {
		return s.err
	}
	return s.MemStore.RecordReceipt(ctx, r)
}

// runOnClock runs a build of task "a" (added to mem, which store wraps)
// that the agent completes at a cost of $0.01, with clock as the run's
// clock (its sleeps advance it), and returns its report, the notices it
// said and its error.
func runOnClock(t *testing.T, store loop.TaskStore, mem *looptest.MemStore, clock *looptest.Clock) (loop.Report, []string, error) {
	t.Helper()
	if err := mem.Add(loop.Task{ID: "a", Title: "A", Priority: 2}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Now = clock.Now
	cfg.Sleep = func(ctx context.Context, d time.Duration) error { clock.Advance(d); return ctx.Err() }
	rec := &recorder{}
	cfg.Observer = rec
	rep, err := loop.Run(t.Context(), cfg, store, looptest.NewFakeRunner(t).Always(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		res := looptest.Result("<task-done>a</task-done>")
		res.CostUSD = 0.01
		return res, nil
	}))
	var notices []string
	for _, n := range rec.kind(loop.NoteNotice) {
		notices = append(notices, n.Message)
	}
	return rep, notices, err
}

// A receipt is as durable as an outcome: one the store refuses for a while
// (its database locked by another process) is tried again until the store
// takes it, and the wait is said once; one it refuses for good is said,
// with the session's cost, never dropped in silence.
func TestReceiptRetriedUntilRecorded(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		fails   int
		tries   int
		kept    int
		notices []string
	}{
		{"busy for a while", errDisk, 5, 6, 1, []string{"could not record the receipt of the build session yet (disk I/O error); retrying for up to 15m0s"}},
		{"refused", errors.New("constraint failed"), -1, 1, 0, []string{"could not record the receipt of the build session (cost $0.0100): constraint failed; the plan's receipts lack it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := looptest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			store := &receiptStore{MemStore: looptest.NewMemStore(clock.Now), err: tc.err, refusals: refusals{fails: tc.fails}}
			rep, notices, err := runOnClock(t, store, store.MemStore, clock)
			if err != nil || rep.Outcome != loop.OutcomeComplete {
				t.Fatalf("outcome %s (%q), err %v; want complete", rep.Outcome, rep.Message, err)
			}
			if store.tries != tc.tries {
				t.Errorf("RecordReceipt tried %d times, want %d", store.tries, tc.tries)
			}
			kept, err := store.Receipts(t.Context(), 0)
			if err != nil || len(kept) != tc.kept {
				t.Errorf("receipts kept: %d (%v), want %d", len(kept), err, tc.kept)
			}
			if diff := cmp.Diff(tc.notices, notices); diff != "" {
				t.Errorf("notices (-want +got):\n%s", diff)
			}
		})
	}
}

// A session that succeeded in an iteration that failed its test gate is
// not shown as a success: its receipt's Result says how the iteration
// ended (loop.ResultStore), and the next iteration's says done.
func TestReceiptsKeepIterationResult(t *testing.T) {
	store := newStore(t, loop.Task{ID: "a"})
	cfg := testConfig(t)
	// Passes on the starting tree (the baseline), fails once, then passes.
	counter := filepath.Join(t.TempDir(), "runs")
	cfg.TestCmd = fmt.Sprintf(`n=$(cat %[1]s 2>/dev/null || echo 0); echo $((n+1)) > %[1]s; [ "$n" -ne 1 ]`, counter)
	rep, err := loop.Run(t.Context(), cfg, store, looptest.NewFakeRunner(t).Always(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		return looptest.Result("<task-done>a</task-done>"), nil
	}))
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("outcome %s (%q), err %v; want complete", rep.Outcome, rep.Message, err)
	}
	kept, err := store.Receipts(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range kept {
		got = append(got, fmt.Sprintf("%d %s %s", r.Iteration, r.ExitReason, r.Result))
	}
	want := []string{"2 success done", "1 success tests_failed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("receipts (-want +got):\n%s", diff)
	}
}

// claimStore fails Claim with a transient error (a full disk) until fails
// is spent; fails < 0 fails it for good.
type claimStore struct {
	*looptest.MemStore
	refusals
}

func (s *claimStore) Claim(ctx context.Context, p loop.ClaimParams) (loop.Task, error) {
	if s.refuse() {
		return loop.Task{}, errDisk
	}
	return s.MemStore.Claim(ctx, p)
}

// A claim the store cannot make for a while (the disk full) is waited
// out, as an outcome is, and said once with its end — not an exit 1 of
// this loop while the other loops on the plan wait; a store that stays
// unwritable for a lease stops the run, naming how long.
func TestClaimWaitsOutAFullDisk(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fails   int
		outcome loop.Outcome
		notices []string
	}{
		{"for a while", 5, loop.OutcomeComplete, []string{
			"could not claim a task (disk I/O error); waiting for the plan to take writes again, for up to 15m0s",
			"the plan takes writes again, after 2s",
		}},
		{"for good", -1, loop.OutcomeError, []string{
			"could not claim a task (disk I/O error); waiting for the plan to take writes again, for up to 15m0s",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := looptest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			store := &claimStore{MemStore: looptest.NewMemStore(clock.Now), refusals: refusals{fails: tc.fails}}
			rep, notices, err := runOnClock(t, store, store.MemStore, clock)
			if rep.Outcome != tc.outcome {
				t.Fatalf("outcome %s (%q), err %v; want %s", rep.Outcome, rep.Message, err, tc.outcome)
			}
			if tc.outcome == loop.OutcomeError && (!strings.Contains(rep.Message, "claims failed so for 14m59s") || !errors.Is(err, errDisk)) {
				t.Errorf("the stop says %q (%v); want the store's error and how long", rep.Message, err)
			}
			if diff := cmp.Diff(tc.notices, notices); diff != "" {
				t.Errorf("notices (-want +got):\n%s", diff)
			}
			if rep.Iterations > 1 {
				t.Errorf("%d iterations counted; the waits are not iterations", rep.Iterations)
			}
		})
	}
}
