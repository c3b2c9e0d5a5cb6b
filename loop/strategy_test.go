package loop_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
)

func history(results ...loop.AttemptResult) []loop.Attempt {
	var h []loop.Attempt
	for i, r := range results {
		h = append(h, loop.Attempt{Iteration: i + 1, Model: "sonnet", Result: r})
	}
	return h
}

func TestStrategies(t *testing.T) {
	const (
		done    = loop.AttemptDone
		trouble = loop.AttemptTaskTrouble
		crash   = loop.AttemptAgentTrouble
	)
	tests := []struct {
		name     string
		strategy string
		model    string
		choice   loop.ModelChoice
		want     string
	}{
		{"no strategy and no model is cost-optimized: sonnet", "", "", loop.ModelChoice{Iteration: 1}, "sonnet"},
		{"a model alone is fixed", "", "haiku", loop.ModelChoice{Iteration: 5, History: history(trouble, trouble)}, "haiku"},
		{"fixed without a model is sonnet", "fixed", "", loop.ModelChoice{Iteration: 1}, "sonnet"},
		{"cost-optimized: haiku after 3 clean completions", "cost-optimized", "",
			loop.ModelChoice{Iteration: 4, History: history(done, done, done)}, "haiku"},
		{"cost-optimized: 2 clean completions are not enough", "cost-optimized", "",
			loop.ModelChoice{Iteration: 4, History: history(done, trouble, done, done)}, "sonnet"},
		{"cost-optimized: opus on error signals in the task log", "cost-optimized", "",
			loop.ModelChoice{Iteration: 4, History: history(done, done, done),
				TaskLogs: []loop.LogEntry{{Kind: loop.LogClaim}, {Kind: loop.LogRelease, Message: "agent trouble"}}}, "opus"},
		{"cost-optimized: a stopped run is no error signal", "cost-optimized", "",
			loop.ModelChoice{Iteration: 1, TaskLogs: []loop.LogEntry{{Kind: loop.LogClaim}, {Kind: loop.LogRelease, Message: loop.ReasonLoopStopped}}}, "sonnet"},
		{"cost-optimized: opus on a retried task", "cost-optimized", "",
			loop.ModelChoice{Iteration: 2, Task: loop.Task{RetryCount: 1}}, "opus"},
		{"cost-optimized: old signals outside the window are ignored", "cost-optimized", "",
			loop.ModelChoice{Iteration: 2, TaskLogs: []loop.LogEntry{{Kind: loop.LogFail}, {Kind: "note"}, {Kind: "note"}, {Kind: "note"}, {Kind: "note"}, {Kind: loop.LogClaim}}}, "sonnet"},
		{"escalate starts at haiku", "escalate", "", loop.ModelChoice{Iteration: 1}, "haiku"},
		{"escalate: one distress is sonnet", "escalate", "", loop.ModelChoice{Iteration: 2, History: history(trouble)}, "sonnet"},
		{"escalate: never down after success", "escalate", "", loop.ModelChoice{Iteration: 4, History: history(trouble, done, done)}, "sonnet"},
		{"escalate: tops out at opus", "escalate", "", loop.ModelChoice{Iteration: 5, History: history(trouble, crash, trouble, trouble)}, "opus"},
		{"escalate: a hint down resets the rung", "escalate", "", loop.ModelChoice{Iteration: 4, History: []loop.Attempt{
			{Result: trouble}, {Result: trouble}, {Model: "haiku", Hinted: true, Result: done}}}, "haiku"},
		{"plan-then-execute: opus first", "plan-then-execute", "", loop.ModelChoice{Iteration: 1}, "opus"},
		{"plan-then-execute: sonnet after", "plan-then-execute", "", loop.ModelChoice{Iteration: 2}, "sonnet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := loop.ParseStrategy(tt.strategy, tt.model)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Model(tt.choice); got != tt.want {
				t.Errorf("model %q, want %q", got, tt.want)
			}
		})
	}
}

// The strategy sees the run's real history: cost-optimized drops to haiku
// after three clean completions.
func TestStrategyInRun(t *testing.T) {
	store := newStore(t, tasks("a", "b", "c", "d")...)
	cfg := testConfig(t)
	runner := looptestRunner(t)
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	var models []string
	for _, r := range runner.Requests() {
		models = append(models, r.Model)
	}
	if diff := cmp.Diff([]string{"sonnet", "sonnet", "sonnet", "haiku"}, models); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
}
