package claude_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/claude"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/runnertest"
)

// TestConformance holds the Runner to loop.Runner's contract, against a
// fake agent that speaks Claude Code's stream-json.
func TestConformance(t *testing.T) {
	runnertest.TestRunner(t, runnertest.Harness{
		New: func(t *testing.T, path string) loop.Runner {
			return &claude.Runner{Path: path, Grace: 100 * time.Millisecond, ResultGrace: 100 * time.Millisecond}
		},
		Start: claudeInit("runnertest-session-0"),
		Answer: func(a runnertest.Answer) string {
			return claudeInit(a.SessionID) +
				line(map[string]any{"type": "assistant", "message": map[string]any{"content": []any{
					map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{"command": "cat notes"}}}}}) +
				line(map[string]any{"type": "user", "message": map[string]any{"content": []any{
					map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": a.Echo}}}}) +
				line(map[string]any{"type": "assistant", "message": map[string]any{"content": []any{
					map[string]any{"type": "text", "text": a.Text}}}}) +
				line(map[string]any{"type": "result", "subtype": "success", "is_error": false, "num_turns": 2,
					"session_id": a.SessionID, "result": a.Text, "total_cost_usd": a.CostUSD,
					"usage": map[string]any{"input_tokens": a.Usage.InputTokens, "output_tokens": a.Usage.OutputTokens,
						"cache_read_input_tokens": a.Usage.CacheReadTokens, "cache_creation_input_tokens": a.Usage.CacheWriteTokens}})
		},
		UsageLimit: func(reset time.Time) runnertest.Exit {
			text := fmt.Sprintf("You've hit your limit · resets %s", reset.Format("3pm"))
			return runnertest.Exit{Stdout: claudeInit("runnertest-session-0") +
				line(map[string]any{"type": "rate_limit_event", "rate_limit_info": map[string]any{
					"status": "rejected", "resetsAt": reset.Unix(), "rateLimitType": "five_hour"}}) +
				line(map[string]any{"type": "result", "subtype": "success", "is_error": true, "num_turns": 1, "result": text}),
				Code: 1}
		},
		Secrets: []string{claude.EnvAPIKey, claude.EnvAuthToken},
	}, runnertest.WithSlashCommands()) // Claude Code expands .claude/commands itself
}

func claudeInit(session string) string {
	return line(map[string]any{"type": "system", "subtype": "init", "session_id": session, "model": "claude-runnertest"})
}

// line is v as one line of JSON.
func line(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b) + "\n"
}
