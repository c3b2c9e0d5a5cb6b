package progress_test

import (
	"context"
	"fmt"
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

const shop = `# Progress: Shop

## Status
In Progress

## Tasks
### Phase 1: Backend
- [ ] Add the cart
- [ ] Add checkout

### Phase 2: Frontend
- [ ] Cart page

## Completed This Iteration

## Recent Attempts

## Iteration Log
| Iteration | Started | Duration | Tasks Completed | Notes |
|-----------|---------|----------|-----------------|-------|
`

// TestBuildLoop runs loop.Run over a progress file with a stand-in agent
// that ticks one box itself, forgets the sigil once, and finishes the rest
// by sigil; an observer logs each iteration to the file, as the CLI's
// progress mode does. The run must end complete with every box ticked and
// one log row and attempt per iteration.
func TestBuildLoop(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "progress.md")
	if err := os.WriteFile(path, []byte(shop), 0o644); err != nil {
		t.Fatal(err)
	}
	store, err := progress.Open(path, progress.Options{})
	if err != nil {
		t.Fatal(err)
	}
	forgot := false
	agent := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := env(req, "RALPH_TASK_ID")
		switch {
		case id == "add-the-cart":
			// The agent edits the file itself, as a progress-file agent may.
			b, err := os.ReadFile(path)
			if err != nil {
				return loop.RunResult{}, err
			}
			if err := os.WriteFile(path, []byte(strings.Replace(string(b), "- [ ] Add the cart", "- [x] Add the cart", 1)), 0o644); err != nil {
				return loop.RunResult{}, err
			}
		case id == "add-checkout" && !forgot:
			forgot = true
			return looptest.Result("I worked on checkout."), nil
		}
		return looptest.Result("Done. <task-done>" + id + "</task-done>"), nil
	})

	started := time.Date(2026, 1, 29, 10, 0, 0, 0, time.UTC)
	var observeErr error
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	cfg.Observer = loop.ObserverFunc(func(n loop.Note) {
		if n.Kind != loop.NoteIterationEnd || observeErr != nil {
			return
		}
		ctx := context.Background()
		done := 0
		if n.Status.Success() { // done, or already ticked by the agent
			done = 1
		}
		observeErr = store.AddAttempt(ctx, progress.Attempt{Iteration: n.Iteration, Tried: n.Task.Title, Result: string(n.Status)})
		if observeErr == nil {
			observeErr = store.AppendIteration(ctx, progress.IterationRow{Iteration: n.Iteration,
				Started: started.Add(time.Duration(n.Iteration) * time.Minute), Duration: time.Minute, TasksCompleted: done, Notes: n.Task.ID})
		}
	})
	rep, err := loop.Run(t.Context(), cfg, store, agent)
	if err != nil {
		t.Fatal(err)
	}
	if observeErr != nil {
		t.Fatal(observeErr)
	}
	if rep.Outcome != loop.OutcomeComplete {
		t.Errorf("outcome %s (%s), want complete", rep.Outcome, rep.Message)
	}
	if done, err := store.Done(t.Context()); err != nil || !done {
		t.Errorf("Done = %v, %v; want true", done, err)
	}
	d, err := store.Doc(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, r := range d.Log {
		rows = append(rows, fmt.Sprintf("%s %s %s", r.Cells[0], r.Cells[3], r.Cells[4]))
	}
	want := []string{"1 1 add-the-cart", "2 0 add-checkout", "3 1 add-checkout", "4 1 cart-page"}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("Iteration Log rows (iteration, tasks completed, task) (-want +got):\n%s", diff)
	}
	if len(d.Attempts) != 4 {
		t.Errorf("%d attempts, want 4", len(d.Attempts))
	}
	for _, it := range d.Tasks() {
		if !it.Checked {
			t.Errorf("box %s is not ticked", it.ID)
		}
	}
}

func env(req loop.RunRequest, key string) string {
	for _, kv := range req.Env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}
