package loop_test

import (
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/loop"
)

// TestDescribe: the one-line account of a session that went wrong, which
// the loop's agent-trouble reasons and the runners' tests share.
func TestDescribe(t *testing.T) {
	long := strings.Repeat("word ", 100) + "the end"
	tests := []struct {
		name string
		res  loop.RunResult
		want string
	}{
		{"api error", loop.RunResult{Class: loop.ClassAPIError, APIErrorStatus: 529, Text: "Overloaded"},
			"api_error: API error 529 Overloaded"},
		{"crash: the last stderr line, not the text", loop.RunResult{Class: loop.ClassCrashed, ExitCode: 2, Text: "<task-done>T1</task-done>", Stderr: "a\npanic: boom\n\n"},
			"crashed: the agent printed no result line (exit code 2): panic: boom"},
		{"no text: the stderr, folded", loop.RunResult{Class: loop.ClassAgentError, Stderr: "bad\n  flag\n"},
			"agent_error: bad flag"},
		{"no class", loop.RunResult{}, "unknown"},
		{"terminal escapes are not words", loop.RunResult{Class: loop.ClassCrashed, ExitCode: 1,
			Stderr: "\x1b[91m\x1b[1mError: \x1b[0mpermission requested: bash (rm -rf x); auto-rejecting\x1b]8;;http://x\x07link\x1b]8;;\x07\r\n"},
			"crashed: the agent printed no result line (exit code 1): Error: permission requested: bash (rm -rf x); auto-rejectinglink"},
		{"refusal: the runner's account whole", loop.RunResult{Class: loop.ClassRefused, Text: "do\nthis " + long},
			"do this " + strings.TrimSpace(long)},
		{"long text: its end", loop.RunResult{Class: loop.ClassAgentError, Text: long},
			"agent_error: …" + long[len(long)-200:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := loop.Describe(tt.res); got != tt.want {
				t.Errorf("Describe =\n %q, want\n %q", got, tt.want)
			}
		})
	}
}

// TestPlain: terminal escapes and control characters go, words stay —
// multi-byte characters whole, the one-character C1 CSI as well as ESC [.
func TestPlain(t *testing.T) {
	for in, want := range map[string]string{
		"plain words, ā é 日本":                          "plain words, ā é 日本",
		"\x1b[93m\x1b[1m! \x1b[0mpermission requested": "! permission requested",
		"a\u009b31mred\u009b0m b":                      "ared b",
		"title\x1b]0;x\x07 link\x1b]8;;http://x\x1b\\": "title link",
		"bell\x07 del\x7f nl\n tab\t c1\u0085end":      "bell del nl\n tab\t c1end",
		"cut\x1b[": "cut",
		"ā\u009b":  "ā",
	} {
		if got := loop.Plain(in); got != want {
			t.Errorf("Plain(%q) = %q, want %q", in, got, want)
		}
	}
}
