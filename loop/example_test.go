package loop_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// A loop over an in-memory plan with a stand-in agent that finishes every
// task it is given.
func ExampleRun() {
	store := looptest.NewMemStore(nil)
	store.Add(
		loop.Task{ID: "schema", Title: "Add the users table", Priority: 1},
		loop.Task{ID: "login", Title: "Add login", Priority: 2, BlockedBy: []string{"schema"}},
	)
	agent := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		var id string
		for _, kv := range req.Env {
			if v, ok := strings.CutPrefix(kv, "RALPH_TASK_ID="); ok {
				id = v
			}
		}
		return loop.RunResult{Class: loop.ClassSuccess, Text: "Done. <task-done>" + id + "</task-done>", CostUSD: 0.01}, nil
	})

	root, _ := os.MkdirTemp("", "ralph-example")
	defer os.RemoveAll(root)
	cfg := loop.DefaultConfig(root)
	cfg.Observer = loop.ObserverFunc(func(n loop.Note) {
		if n.Kind == loop.NoteIterationEnd {
			fmt.Printf("iteration %d: %s %s (%s)\n", n.Iteration, n.Task.ID, n.Status, n.Model)
		}
	})
	rep, err := loop.Run(context.Background(), cfg, store, agent)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s, exit %d: %s; cost $%.2f\n", rep.Outcome, rep.ExitCode(), rep.Message, rep.CostUSD)
	// Output:
	// iteration 1: schema done (sonnet)
	// iteration 2: login done (sonnet)
	// complete, exit 0: complete: all 2 tasks done; cost $0.02
}

func ExampleOutcome_ExitCode() {
	for _, o := range []loop.Outcome{loop.OutcomeComplete, loop.OutcomeBlocked, loop.OutcomeUsageLimit} {
		fmt.Println(o, o.ExitCode())
	}
	// Output:
	// complete 0
	// blocked 6
	// usage_limit 10
}

func ExampleParseStrategy() {
	s, _ := loop.ParseStrategy("plan-then-execute", "")
	fmt.Println(s.Model(loop.ModelChoice{Iteration: 1}), s.Model(loop.ModelChoice{Iteration: 2}))
	// Output: opus sonnet
}
