package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/runnertest"
)

// TestConformance holds shellRunner to loop.Runner's contract, the way a
// custom runner of your own is tested: its "agent" is the task's command,
// here the suite's fake agent.
func TestConformance(t *testing.T) {
	runnertest.TestRunner(t, runnertest.Harness{
		New: func(t *testing.T, path string) loop.Runner {
			return loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
				id := ""
				for _, kv := range req.Env {
					if v, ok := strings.CutPrefix(kv, "RALPH_TASK_ID="); ok {
						id = v
					}
				}
				req.Env = append(slices.Clip(req.Env), "TASK_COMMAND_"+id+"='"+strings.ReplaceAll(path, "'", `'\''`)+"'")
				return shellRunner(ctx, req)
			})
		},
		// A command prints its answer; shellRunner adds the sigil.
		Answer: func(a runnertest.Answer) string { return a.Text + "\n" },
	},
		runnertest.WithoutUsage(), runnertest.WithoutSession(), runnertest.WithoutResultLine(),
		runnertest.WithoutIdleTimeout(), runnertest.WithoutLookup())
}
