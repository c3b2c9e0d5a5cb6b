package looptest_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// benchPlan is n tasks, 30% with a blocker, 10% with a parent, random
// priorities 0-4, from a fixed seed: the shape of the dag benchmarks.
func benchPlan(b *testing.B, n int) *looptest.MemStore {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	tasks := make([]loop.Task, n)
	for i := range tasks {
		t := loop.Task{ID: fmt.Sprintf("t%06d", i), Title: "task", Priority: rng.IntN(5)}
		if i > 0 {
			switch r := rng.IntN(10); {
			case r < 3:
				t.BlockedBy = []string{tasks[rng.IntN(i)].ID}
			case r < 4:
				t.ParentID = tasks[rng.IntN(i)].ID
			}
		}
		tasks[i] = t
	}
	s := looptest.NewMemStore(looptest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)).Now)
	if err := s.Add(tasks...); err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchmarkMemStore(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("Ready10/tasks=%d", n), func(b *testing.B) {
			s := benchPlan(b, n)
			ctx := b.Context()
			for b.Loop() {
				if _, err := s.Ready(ctx, loop.Scope{}, 10); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("ClaimComplete/tasks=%d", n), func(b *testing.B) {
			s := benchPlan(b, n)
			ctx := b.Context()
			for b.Loop() {
				t, err := s.Claim(ctx, loop.ClaimParams{Agent: "agent-bench"})
				if errors.Is(err, loop.ErrNoReadyTask) {
					b.StopTimer()
					s = benchPlan(b, n)
					b.StartTimer()
					continue
				}
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Complete(ctx, loop.MoveParams{TaskID: t.ID, Message: "ok"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
