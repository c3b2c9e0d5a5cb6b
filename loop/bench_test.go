package loop_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// benchTasks is the plan size of the per-iteration benchmark.
const benchTasks = 10_000

// benchPlan is 10,000 tasks in chains of ten (each blocked by the one
// before), with mixed priorities: 1,000 ready at the start.
func benchPlan(b *testing.B) *looptest.MemStore {
	b.Helper()
	s := looptest.NewMemStore(nil)
	ts := make([]loop.Task, 0, benchTasks)
	for i := range benchTasks {
		t := loop.Task{ID: fmt.Sprintf("t%05d", i), Title: fmt.Sprintf("Task %d", i), Priority: 1 + i%3,
			Description: "Implement the thing and test it."}
		if i%10 != 0 {
			t.BlockedBy = []string{fmt.Sprintf("t%05d", i-1)}
		}
		ts = append(ts, t)
	}
	if err := s.Add(ts...); err != nil {
		b.Fatal(err)
	}
	return s
}

// noop is an agent that finishes its task at once.
var noop = loop.RunnerFunc(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
	return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
})

// BenchmarkIteration measures ralph's own work per iteration — store,
// context, prompt, bookkeeping — with a no-op agent, at 10,000 tasks.
//
// once: a whole Run of one iteration (setup, claim, prompt, complete,
// exit checks, clean-up). loop: a Run of 100 iterations, reported per
// iteration as ns/iter.
func BenchmarkIteration(b *testing.B) {
	b.Run("once", func(b *testing.B) {
		store := benchPlan(b)
		cfg := loop.DefaultConfig(b.TempDir())
		cfg.AgentID, cfg.Session, cfg.SessionLog, cfg.RawLogs = testAgent, "bench", false, false
		cfg.Once = true
		used := 0
		for b.Loop() {
			if used == benchTasks-100 {
				b.StopTimer()
				store, used = benchPlan(b), 0
				b.StartTimer()
			}
			rep, err := loop.Run(b.Context(), cfg, store, noop)
			if err != nil || rep.Iterations != 1 {
				b.Fatalf("%v %+v", err, rep)
			}
			used++
		}
	})
	b.Run("loop", func(b *testing.B) {
		const iters = 100
		store := benchPlan(b)
		cfg := loop.DefaultConfig(b.TempDir())
		cfg.AgentID, cfg.Session, cfg.SessionLog, cfg.RawLogs = testAgent, "bench", false, false
		cfg.MaxIterations = iters
		used := 0
		var total time.Duration
		for b.Loop() {
			if used+iters > benchTasks-100 {
				b.StopTimer()
				store, used = benchPlan(b), 0
				b.StartTimer()
			}
			start := time.Now()
			rep, err := loop.Run(b.Context(), cfg, store, noop)
			total += time.Since(start)
			if err != nil || rep.Iterations != iters {
				b.Fatalf("%v %+v", err, rep)
			}
			used += iters
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*iters), "ns/iter")
	})
}
