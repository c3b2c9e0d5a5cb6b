package gemini_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/agents/gemini"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/runnertest"
)

// TestConformance holds the Runner to loop.Runner's contract, against a
// fake agent that speaks the Gemini CLI's stream-json.
func TestConformance(t *testing.T) {
	const model = "gemini-2.5-flash"
	initLine := func(session string) string {
		return line(map[string]any{"type": "init", "session_id": session, "model": model})
	}
	runnertest.TestRunner(t, runnertest.Harness{
		New: func(t *testing.T, path string) loop.Runner {
			return &gemini.Runner{Path: path, Grace: 100 * time.Millisecond, ResultGrace: 100 * time.Millisecond}
		},
		Start: initLine("runnertest-session-0"),
		Answer: func(a runnertest.Answer) string {
			u := a.Usage
			in := u.InputTokens + u.CacheReadTokens
			stats := map[string]any{"total_tokens": in + u.OutputTokens, "input_tokens": in, "output_tokens": u.OutputTokens,
				"cached": u.CacheReadTokens, "input": u.InputTokens}
			return initLine(a.SessionID) +
				line(map[string]any{"type": "tool_use", "tool_name": "run_shell_command", "tool_id": "t1",
					"parameters": map[string]any{"command": "cat notes"}}) +
				line(map[string]any{"type": "tool_result", "tool_id": "t1", "status": "success", "output": a.Echo}) +
				line(map[string]any{"type": "message", "role": "assistant", "content": a.Text, "delta": true}) +
				line(map[string]any{"type": "result", "status": "success", "stats": stats})
		},
		UsageLimit: func(reset time.Time) runnertest.Exit {
			msg := fmt.Sprintf("[API Error: You exceeded your current quota, please check your plan and billing details.\nSuggested retry after %ds.]",
				int(time.Until(reset).Seconds()))
			return runnertest.Exit{Stdout: initLine("runnertest-session-0") +
				line(map[string]any{"type": "result", "status": "error", "error": map[string]any{"type": "unknown", "message": msg}}),
				// The CLI exits with the final API error's status mod 256.
				Code: 429 % 256}
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
