package codex_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/agents/codex"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/runnertest"
)

// TestConformance holds the Runner to loop.Runner's contract, against a
// fake agent that speaks `codex exec --json`.
func TestConformance(t *testing.T) {
	start := line(map[string]any{"type": "thread.started", "thread_id": "runnertest-session-0"}) +
		line(map[string]any{"type": "turn.started"})
	runnertest.TestRunner(t, runnertest.Harness{
		New: func(t *testing.T, path string) loop.Runner {
			return &codex.Runner{Path: path, Grace: 100 * time.Millisecond, ResultGrace: 100 * time.Millisecond}
		},
		Start: start,
		Answer: func(a runnertest.Answer) string {
			return line(map[string]any{"type": "thread.started", "thread_id": a.SessionID}) +
				line(map[string]any{"type": "turn.started"}) +
				line(map[string]any{"type": "item.completed", "item": map[string]any{"id": "item_0", "type": "command_execution",
					"command": "cat notes", "aggregated_output": a.Echo, "exit_code": 0, "status": "completed"}}) +
				line(map[string]any{"type": "item.completed", "item": map[string]any{"id": "item_1", "type": "agent_message", "text": a.Text}}) +
				line(map[string]any{"type": "turn.completed", "usage": map[string]any{
					"input_tokens": a.Usage.InputTokens + a.Usage.CacheReadTokens, "cached_input_tokens": a.Usage.CacheReadTokens,
					"output_tokens": a.Usage.OutputTokens}})
		},
		UsageLimit: func(reset time.Time) runnertest.Exit {
			r := reset.Local()
			msg := fmt.Sprintf("You've hit your usage limit. Try again at %s %d%s, %s.",
				r.Format("Jan"), r.Day(), ordinal(r.Day()), r.Format("2006 3:04 PM"))
			return runnertest.Exit{Stdout: start + line(map[string]any{"type": "error", "message": msg}) +
				line(map[string]any{"type": "turn.failed", "error": map[string]any{"message": msg}}), Code: 1}
		},
		Secrets: []string{codex.EnvAPIKey, codex.EnvCodexKey},
	})
}

// ordinal is the suffix Codex writes after a day of the month.
func ordinal(day int) string {
	switch {
	case day/10 == 1:
		return "th"
	case day%10 == 1:
		return "st"
	case day%10 == 2:
		return "nd"
	case day%10 == 3:
		return "rd"
	}
	return "th"
}

// line is v as one line of JSON.
func line(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b) + "\n"
}
