package dag

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// BenchmarkLoopIteration is issue 4's figure on the real store: ralph's own
// work per iteration (ready query, claim with lease, context and prompt,
// completion, receipt, exit checks), with an agent that answers at once, at
// 10,000 tasks. A Run of 100 iterations is reported per iteration.
func BenchmarkLoopIteration(b *testing.B) {
	const iters = 100
	noop := loop.RunnerFunc(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		var id string
		for _, kv := range req.Env {
			if v, ok := strings.CutPrefix(kv, "RALPH_TASK_ID="); ok {
				id = v
			}
		}
		return loop.RunResult{Class: loop.ClassSuccess, Text: "<task-done>" + id + "</task-done>", Turns: 1}, nil
	})
	s := benchStore(b, 10_000)
	cfg := loop.DefaultConfig(b.TempDir())
	cfg.AgentID, cfg.Session, cfg.SessionLog, cfg.RawLogs = "agent-0000bench", "bench", false, false
	cfg.MaxIterations = iters
	used := 0
	var total time.Duration
	for b.Loop() {
		if used+iters > 2_000 { // the fixture has ready work for far more; stay well inside it
			b.StopTimer()
			s, used = benchStore(b, 10_000), 0
			b.StartTimer()
		}
		start := time.Now()
		rep, err := loop.Run(b.Context(), cfg, s, noop)
		total += time.Since(start)
		if err != nil || rep.Iterations != iters {
			b.Fatalf("%v: %d iterations (%s)", err, rep.Iterations, rep.Message)
		}
		used += iters
	}
	b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*iters), "ns/iter")
}
