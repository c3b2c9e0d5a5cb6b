package looptest_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

func ExampleMemStore() {
	ctx := context.Background()
	clock := looptest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := looptest.NewMemStore(clock.Now)
	err := s.Add(
		loop.Task{ID: "api", Title: "Build the API", Priority: 2},
		loop.Task{ID: "ui", Title: "Build the UI", Priority: 1, BlockedBy: []string{"api"}},
		loop.Task{ID: "docs", Title: "Write the docs", Priority: 3},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	ready, _ := s.Ready(ctx, loop.Scope{}, 0)
	for _, t := range ready {
		fmt.Println("ready:", t.ID)
	}

	t, _ := s.Claim(ctx, loop.ClaimParams{Agent: "agent-1a2b3c4d"})
	fmt.Println("claimed:", t.ID, "until", t.LeaseExpiresAt.Format(time.TimeOnly))
	_ = s.Complete(ctx, loop.MoveParams{TaskID: t.ID, Message: "endpoints in place"})

	ready, _ = s.Ready(ctx, loop.Scope{}, 1)
	fmt.Println("next:", ready[0].ID)
	counts, _ := s.Counts(ctx, loop.Scope{})
	fmt.Println(counts)
	// Output:
	// ready: api
	// ready: docs
	// claimed: api until 03:19:05
	// next: ui
	// open=2 active=0 done=1 failed=0 blocked=0 total=3
}

func ExampleMemStore_leaseExpiry() {
	ctx := context.Background()
	clock := looptest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := looptest.NewMemStore(clock.Now)
	_ = s.Add(loop.Task{ID: "t1", Title: "Fix login"})
	_, _ = s.Claim(ctx, loop.ClaimParams{Agent: "agent-dead", Lease: time.Minute})

	clock.Advance(2 * time.Minute) // the agent crashed; nobody renewed
	t, _ := s.Claim(ctx, loop.ClaimParams{Agent: "agent-new"})
	fmt.Println(t.ID, "now held by", t.ClaimedBy)
	logs, _ := s.Logs(ctx, "t1")
	for _, e := range logs {
		fmt.Printf("%s %s: %s\n", e.At.Format(time.TimeOnly), e.Kind, e.Message)
	}
	// Output:
	// t1 now held by agent-new
	// 03:04:05 claim: claimed by agent-dead (claim 1)
	// 03:06:05 lease-expired: lease of agent-dead expired at 2026-01-02T03:05:05Z; returned to pending
	// 03:06:05 claim: claimed by agent-new (claim 2)
}

func ExampleFakeRunner() {
	ctx := context.Background()
	r := looptest.NewFakeRunner(nil,
		looptest.Result("Fixed it. <task-done>t1</task-done>"),
		looptest.ErrorResult(loop.ClassAPIError, "API Error: 529 overloaded"),
	).ThenStep(looptest.Step{
		Events: []loop.Event{{Kind: loop.EventToolUse, Tool: "Bash", Input: "go test ./..."}},
		Result: looptest.Result("<task-done>t2</task-done>"),
	})

	for _, task := range []string{"t1", "t2", "t2"} {
		res, err := r.Run(ctx, loop.RunRequest{
			Prompt:  "work on " + task,
			OnEvent: func(e loop.Event) { fmt.Println("  event:", e.Kind, e.Input) },
		})
		fmt.Printf("%s: %s %q %v\n", task, res.Class, res.Text, err)
	}
	_, err := r.Run(ctx, loop.RunRequest{Prompt: "one too many"})
	fmt.Println(err)
	fmt.Println("prompts seen:", len(r.Requests()))
	// Output:
	// t1: success "Fixed it. <task-done>t1</task-done>" <nil>
	// t2: api_error "API Error: 529 overloaded" <nil>
	//   event: tool_use go test ./...
	// t2: success "<task-done>t2</task-done>" <nil>
	// looptest: FakeRunner script exhausted: run 4 has no scripted step (prompt "one too many")
	// prompts seen: 4
}
