package auditstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/examples/custom-store"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// TestConformance holds the custom store to the TaskStore contract.
func TestConformance(t *testing.T) {
	looptest.TestTaskStore(t, func(t *testing.T, seeds []looptest.Seed, now func() time.Time) loop.TaskStore {
		inner := looptest.NewMemStore(now)
		for _, sd := range seeds {
			if sd.Feature != "" {
				// Features may repeat across seeds; a second AddFeature fails harmlessly.
				_ = inner.AddFeature(loop.Feature{Name: sd.Feature})
			}
		}
		tasks := make([]loop.Task, len(seeds))
		for i, sd := range seeds {
			tasks[i] = sd.Task()
		}
		if err := inner.Add(tasks...); err != nil {
			t.Fatal(err)
		}
		return auditstore.New(inner)
	})
}

// TestTrail runs the real loop over the audit store with a scripted agent.
func TestTrail(t *testing.T) {
	inner := looptest.NewMemStore(nil)
	if err := inner.Add(
		loop.Task{ID: "a", Title: "A", Status: loop.StatusPending, Priority: 1},
		loop.Task{ID: "b", Title: "B", Status: loop.StatusPending, Priority: 2, BlockedBy: []string{"a"}},
	); err != nil {
		t.Fatal(err)
	}
	store := auditstore.New(inner)
	runner := looptest.NewFakeRunner(t,
		looptest.Result("no sigil: the loop releases the claim and counts a retry"),
		looptest.Result("<task-done>a</task-done>"),
		looptest.Result("<task-done>b</task-done>"),
	)
	cfg := loop.DefaultConfig(t.TempDir())
	cfg.AgentID = "agent-00000001"
	report, err := loop.Run(context.Background(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	if report.Outcome != loop.OutcomeComplete {
		t.Fatalf("outcome %s (%s), want complete", report.Outcome, report.Message)
	}
	got := store.Trail()
	for i, line := range got {
		got[i], _, _ = strings.Cut(line, ":") // reasons are the loop's wording
	}
	want := []string{
		"agent-00000001 claimed a", "a retried by agent-00000001",
		"agent-00000001 claimed a", "a done by agent-00000001",
		"agent-00000001 claimed b", "b done by agent-00000001",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trail (-want +got):\n%s", diff)
	}
}

func Example() {
	inner := looptest.NewMemStore(nil)
	_ = inner.Add(loop.Task{ID: "t-1", Title: "Write docs", Status: loop.StatusPending, Priority: 2})
	store := auditstore.New(inner)
	ctx := context.Background()
	task, _ := store.Claim(ctx, loop.ClaimParams{Agent: "agent-0000abcd"})
	_ = store.Complete(ctx, loop.MoveParams{TaskID: task.ID, Message: "written"})
	fmt.Println(strings.Join(store.Trail(), "\n"))
	// Output:
	// agent-0000abcd claimed t-1
	// t-1 done by user
}
