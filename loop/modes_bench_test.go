package loop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// BenchmarkPlan measures ralph's own work for a whole plan run of one
// session — reading 20 specs of 4 KB, rendering the plan prompt, the
// session's bookkeeping, the exit checks — with a planner that answers
// COMPLETE at once over a plan of 1,000 tasks.
func BenchmarkPlan(b *testing.B) {
	root := b.TempDir()
	para := strings.Repeat("The service accepts a request and answers it. ", 90)
	for i := range 20 {
		writeFile(b, root, fmt.Sprintf("specs/%02d.md", i), fmt.Sprintf("# Spec %d\n\n%s\n", i, para))
	}
	store := looptest.NewMemStore(nil)
	for i := range 1000 {
		if err := store.Add(loop.Task{ID: fmt.Sprintf("t%04d", i), Title: "Task", Priority: 2}); err != nil {
			b.Fatal(err)
		}
	}
	planner := loop.RunnerFunc(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		return looptest.Result("<promise>COMPLETE</promise>"), nil
	})
	cfg := loop.PlanConfig(root)
	cfg.AgentID, cfg.Session, cfg.SessionLog, cfg.RawLogs = testAgent, "bench", false, false
	for b.Loop() {
		rep, err := loop.Plan(b.Context(), cfg, store, planner)
		if err != nil || rep.Outcome != loop.OutcomeComplete {
			b.Fatalf("%v %s", err, rep.Message)
		}
	}
}

// BenchmarkRunPrompt measures ralph's own work for a whole prompt run (a
// 4 KB prompt, one session, no logs) with an agent that answers at once.
func BenchmarkRunPrompt(b *testing.B) {
	cfg := loop.PromptConfig(b.TempDir())
	cfg.AgentID, cfg.Session, cfg.SessionLog, cfg.RawLogs = testAgent, "bench", false, false
	text := strings.Repeat("Fix the typos in the README and keep the tone. ", 90)
	agent := loop.RunnerFunc(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		return looptest.Result("Fixed."), nil
	})
	for b.Loop() {
		rep, err := loop.RunPrompt(b.Context(), cfg, loop.PromptParams{Text: text}, agent)
		if err != nil || rep.Outcome != loop.OutcomeComplete {
			b.Fatalf("%v %s", err, rep.Message)
		}
	}
}
