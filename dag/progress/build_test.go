package progress_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag/progress"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// TestRecorderAndDocumentRunner is what `ralph build --progress` does,
// wired by a library user in two lines (progress.Recorder for the store,
// progress.DocumentRunner around the agent) without cmd/ralph: loop.Run
// over the shop file with a stand-in agent that forgets the sigil, crashes,
// answers with a truncated document (refused: the file is untouched and
// Refused hears ErrLostTasks), answers with the whole document ticking two
// boxes (written, the iteration counts both), and finishes the last box by
// sigil. The file must end byte for byte as the CLI leaves it: one
// Iteration Log row per iteration ("title (id): status", tasks completed
// as the loop counted them), an attempt block for each troubled
// iteration, with the loop's reason on one line, and the user's text kept.
func TestRecorderAndDocumentRunner(t *testing.T) {
	root := t.TempDir()
	clock := looptest.NewClock(time.Date(2026, 1, 29, 10, 0, 0, 0, time.UTC))
	path := filepath.Join(root, "progress.md")
	if err := os.WriteFile(path, []byte(shop), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := progress.Open(path, progress.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	// The agent reads the file as it is now and answers with it, edited.
	document := func(edit func(string) string) loop.RunResult {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Error(err)
		}
		return looptest.Result(edit(string(b)))
	}
	answers := []func() loop.RunResult{
		func() loop.RunResult { return looptest.Result("I worked on the cart.") },
		func() loop.RunResult {
			return loop.RunResult{Class: loop.ClassCrashed, ExitCode: 1, Text: "crashed\nbadly"}
		},
		func() loop.RunResult {
			return document(func(s string) string { return strings.Replace(s, "- [ ] Add checkout\n", "", 1) })
		},
		func() loop.RunResult {
			return document(func(s string) string {
				s = strings.Replace(s, "- [ ] Add the cart", "- [x] Add the cart", 1)
				return "\ufeff\n" + strings.Replace(s, "- [ ] Add checkout", "- [x] Add checkout", 1)
			})
		},
		func() loop.RunResult { return looptest.Result("<task-done>cart-page</task-done>") },
	}
	var calls int
	agent := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		calls++
		if calls > len(answers) {
			t.Errorf("session %d: the run should have ended", calls)
			return loop.RunResult{}, errors.New("no more answers")
		}
		clock.Advance(90 * time.Second)
		return answers[calls-1](), nil
	})
	var refused []error

	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	cfg.Now = clock.Now
	cfg.Sleep = func(ctx context.Context, d time.Duration) error { clock.Advance(d); return nil }
	runner := &progress.DocumentRunner{Runner: agent, Store: store, Refused: func(err error) { refused = append(refused, err) }}
	rep, err := loop.Run(t.Context(), cfg, progress.Recorder{Store: store}, runner)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != loop.OutcomeComplete {
		t.Errorf("outcome %s (%s), want complete", rep.Outcome, rep.Message)
	}
	if len(refused) != 1 || !errors.Is(refused[0], progress.ErrLostTasks) {
		t.Errorf("Refused got %v, want one ErrLostTasks", refused)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(recorded, string(got)); diff != "" {
		t.Errorf("progress file (-want +got):\n%s", diff)
	}
}

// recorded is the shop file after TestRecorderAndDocumentRunner's run.
const recorded = `# Progress: Shop

## Status
In Progress

## Tasks
### Phase 1: Backend
- [x] Add the cart
- [x] Add checkout

### Phase 2: Frontend
- [x] Cart page

## Completed This Iteration

## Recent Attempts
### Iteration 1
- Tried: Add the cart (add-the-cart)
- Result: no_sigil: the agent ended without a task sigil
- Next: the task is offered again

### Iteration 2
- Tried: Add the cart (add-the-cart)
- Result: agent_trouble: crashed: the agent printed no result line (exit code 1)
- Next: the task is offered again

### Iteration 3
- Tried: Add the cart (add-the-cart)
- Result: no_sigil: the agent ended without a task sigil
- Next: the task is offered again

## Iteration Log
| Iteration | Started | Duration | Tasks Completed | Notes |
|-----------|---------|----------|-----------------|-------|
| 1 | 2026-01-29T10:00:00Z | 1m30s | 0 | Add the cart (add-the-cart): no_sigil |
| 2 | 2026-01-29T10:01:30Z | 1m30s | 0 | Add the cart (add-the-cart): agent_trouble |
| 3 | 2026-01-29T10:03:00Z | 1m30s | 0 | Add the cart (add-the-cart): no_sigil |
| 4 | 2026-01-29T10:04:30Z | 1m30s | 2 | Add the cart (add-the-cart): done |
| 5 | 2026-01-29T10:06:00Z | 1m30s | 1 | Cart page (cart-page): done |
`

// TestRecorderRecordIteration holds the Iteration Log policy record by
// record: every record gets a row; only an iteration on a task that
// neither succeeded nor failed gets an attempt block, its reason on one
// line without ralph's package prefixes; a failed task gets none here (Fail
// writes it), and an iteration without a task (peek, plan or prompt mode) notes its status
// alone.
func TestRecorderRecordIteration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress.md")
	if err := os.WriteFile(path, []byte(shop), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := progress.Open(path, progress.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := progress.Recorder{Store: store}
	at := time.Date(2026, 1, 29, 10, 0, 0, 0, time.UTC)
	cart := loop.Task{ID: "add-the-cart", Title: "Add the cart"}
	for i, r := range []loop.IterationRecord{
		{Task: cart, Status: loop.IterGitFailed, Reason: "  loop: commit: dag: locked\r\nretry later\n"},
		{Task: cart, Status: loop.IterTaskFailed, Reason: "the agent gave up"},
		{Task: cart, Status: loop.IterDone, TasksCompleted: 1},
		{Mode: loop.ModePrompt, Status: loop.IterSessionOK},
	} {
		r.Iteration, r.Started, r.Duration = i+1, at.Add(time.Duration(i)*time.Minute), time.Minute
		if err := rec.RecordIteration(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, tail, _ := strings.Cut(string(got), "## Recent Attempts\n")
	want := `### Iteration 1
- Tried: Add the cart (add-the-cart)
- Result: git_failed: commit: locked; retry later
- Next: the task is offered again

## Iteration Log
| Iteration | Started | Duration | Tasks Completed | Notes |
|-----------|---------|----------|-----------------|-------|
| 1 | 2026-01-29T10:00:00Z | 1m0s | 0 | Add the cart (add-the-cart): git_failed |
| 2 | 2026-01-29T10:01:00Z | 1m0s | 0 | Add the cart (add-the-cart): task_failed |
| 3 | 2026-01-29T10:02:00Z | 1m0s | 1 | Add the cart (add-the-cart): done |
| 4 | 2026-01-29T10:03:00Z | 1m0s | 0 | session_ok |
`
	if diff := cmp.Diff(want, tail); diff != "" {
		t.Errorf("Recent Attempts and Iteration Log (-want +got):\n%s", diff)
	}
}

// TestDocumentRunnerVerifier: a read-only verifier session's answer is
// never written, even when it is a whole document that parses (a
// verifier that "fixes" the plan, or an agent prompted to).
func TestDocumentRunnerVerifier(t *testing.T) {
	path := filepath.Join(t.TempDir(), "progress.md")
	if err := os.WriteFile(path, []byte(shop), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := progress.Open(path, progress.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ticked := strings.ReplaceAll(shop, "- [ ]", "- [x]")
	agent := loop.RunnerFunc(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		return looptest.Result(ticked), nil
	})
	runner := &progress.DocumentRunner{Runner: agent, Store: store, Refused: func(err error) { t.Errorf("refused: %v", err) }}
	if _, err := runner.Run(t.Context(), loop.RunRequest{Tools: loop.VerifierTools}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != shop {
		t.Errorf("the verifier's document was written:\n%s", got)
	}
	if _, err := runner.Run(t.Context(), loop.RunRequest{Sandboxed: true}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !strings.Contains(string(got), "- [x] Cart page") {
		t.Errorf("a work session's document was not written:\n%s", got)
	}
}
