package policy_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/examples/policy"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// TestStrategyInTheLoop runs the real loop with the policy over a scripted
// history and checks the model each agent session was asked for.
func TestStrategyInTheLoop(t *testing.T) {
	store := looptest.NewMemStore(nil)
	if err := store.Add(
		loop.Task{ID: "d", Title: "Design the schema", Status: loop.StatusPending, Priority: 1},
		loop.Task{ID: "a", Title: "Add the table", Status: loop.StatusPending, Priority: 2},
		loop.Task{ID: "b", Title: "Add the index", Status: loop.StatusPending, Priority: 3},
		loop.Task{ID: "c", Title: "Add the view", Status: loop.StatusPending, Priority: 4},
	); err != nil {
		t.Fatal(err)
	}
	runner := looptest.NewFakeRunner(t,
		looptest.Result("<task-done>d</task-done>"), // design: opus
		looptest.Result("<task-done>a</task-done>"), // one clean iteration so far: sonnet
		looptest.Result("forgot the sigil"),         // two clean: haiku; this one is task trouble
		looptest.Result("<task-done>b</task-done>"), // b was retried: opus
		looptest.Result("<task-done>c</task-done>"), // last two not both clean: sonnet
	)
	cfg := loop.DefaultConfig(t.TempDir())
	cfg.CustomStrategy = policy.Strategy
	report, err := loop.Run(context.Background(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	if report.Outcome != loop.OutcomeComplete {
		t.Fatalf("outcome %s (%s), want complete", report.Outcome, report.Message)
	}
	var got []string
	for _, req := range runner.Requests() {
		got = append(got, req.Model)
	}
	want := []string{"opus", "sonnet", "haiku", "opus", "sonnet"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
}

func TestStrategy(t *testing.T) {
	done := loop.Attempt{Result: loop.AttemptDone}
	for _, tc := range []struct {
		name string
		in   loop.ModelChoice
		want string
	}{
		{"design goes to opus", loop.ModelChoice{Task: loop.Task{Title: "Design the API"}}, "opus"},
		{"a retried task goes to opus", loop.ModelChoice{Task: loop.Task{Title: "Fix", RetryCount: 1}}, "opus"},
		{"first iteration is sonnet", loop.ModelChoice{Task: loop.Task{Title: "Fix"}}, "sonnet"},
		{"two clean iterations: haiku", loop.ModelChoice{Task: loop.Task{Title: "Fix"}, History: []loop.Attempt{done, done}}, "haiku"},
		{"a troubled one among the last two: sonnet", loop.ModelChoice{Task: loop.Task{Title: "Fix"},
			History: []loop.Attempt{done, {Result: loop.AttemptTaskTrouble}}}, "sonnet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := policy.Strategy.Model(tc.in); got != tc.want {
				t.Errorf("Model = %q, want %q", got, tc.want)
			}
		})
	}
}
