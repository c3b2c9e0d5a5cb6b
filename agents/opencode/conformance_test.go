package opencode_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/agents/opencode"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/runnertest"
)

// TestConformance holds the Runner to loop.Runner's contract, against a
// fake agent that speaks `opencode run --format json`.
func TestConformance(t *testing.T) {
	step := func(session string) string {
		return line(map[string]any{"type": "step_start", "sessionID": session, "part": map[string]any{"type": "step-start"}})
	}
	runnertest.TestRunner(t, runnertest.Harness{
		New: func(t *testing.T, path string) loop.Runner {
			return &opencode.Runner{Path: path, Grace: 100 * time.Millisecond, ResultGrace: 100 * time.Millisecond}
		},
		Start: step("runnertest-session-0"),
		Answer: func(a runnertest.Answer) string {
			s := a.SessionID
			return step(s) +
				line(map[string]any{"type": "tool_use", "sessionID": s, "part": map[string]any{"type": "tool", "tool": "bash", "callID": "c1",
					"state": map[string]any{"status": "completed", "input": map[string]any{"command": "cat notes"}, "output": a.Echo}}}) +
				line(map[string]any{"type": "text", "sessionID": s, "part": map[string]any{"type": "text", "text": a.Text}}) +
				line(map[string]any{"type": "step_finish", "sessionID": s, "part": map[string]any{"type": "step-finish", "reason": "stop",
					"cost": a.CostUSD, "tokens": map[string]any{"input": a.Usage.InputTokens, "output": a.Usage.OutputTokens, "reasoning": 0,
						"cache": map[string]any{"read": a.Usage.CacheReadTokens, "write": a.Usage.CacheWriteTokens}}}})
		},
	})
}

// line is v as one line of JSON.
func line(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b) + "\n"
}
