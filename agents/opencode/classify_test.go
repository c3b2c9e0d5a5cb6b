package opencode

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
)

func TestClassify(t *testing.T) {
	done := Session{SessionID: "s", Steps: 2, Reason: "stop", Stopped: true, FinalText: "<task-done>T1</task-done>",
		Usage: loop.Usage{InputTokens: 1_000_000, OutputTokens: 100_000}}
	midway := Session{SessionID: "s", Steps: 1, Reason: "tool-calls", LastText: "Running it.",
		Usage: loop.Usage{InputTokens: 1000}}
	withErr := func(s Session, e Error) *Session { s.Errors = []Error{e}; return &s }
	rejected := func(s Session, call string) *Session { s.Rejected = call; return &s }
	ptr := func(s Session) *Session { return &s }

	tests := []struct {
		name   string
		sess   *Session
		end    agentproc.Ending
		class  loop.ErrorClass
		status int
		text   string
		limit  *loop.UsageLimit
	}{
		{"success", ptr(done), agentproc.Ending{}, loop.ClassSuccess, 0, "<task-done>T1</task-done>", nil},
		{"stopped after the last step", ptr(done), agentproc.Ending{ExitCode: -1, StoppedAfterResult: true}, loop.ClassSuccess, 0, "<task-done>T1</task-done>", nil},
		{"non-zero exit after the last step", ptr(done), agentproc.Ending{ExitCode: 1}, loop.ClassAgentError, 0, "<task-done>T1</task-done>", nil},
		{"no final step", ptr(midway), agentproc.Ending{}, loop.ClassCrashed, 0, "Running it.", nil},
		{"killed midway", ptr(midway), agentproc.Ending{ExitCode: -1}, loop.ClassCrashed, 0, "Running it.", nil},
		{"a permission rejected", rejected(midway, "bash (make test)"), agentproc.Ending{}, loop.ClassRefused, 0, refusal("bash (make test)"), nil},
		{"cancel wins over an error", withErr(midway, Error{Name: "APIError", StatusCode: 500}), agentproc.Ending{Cancelled: true}, loop.ClassCancelled, 0, "Running it.", nil},
		{"timeout", ptr(midway), agentproc.Ending{TimedOut: true, ExitCode: -1}, loop.ClassTimeout, 0, "Running it.", nil},
		{"idle timeout", ptr(midway), agentproc.Ending{IdleTimedOut: true, ExitCode: -1}, loop.ClassIdleTimeout, 0, "Running it.", nil},
		{"stopped while retrying", ptr(midway), agentproc.Ending{GaveUp: true, ExitCode: -1}, loop.ClassAPIError, 0, "Running it.", nil},
		{"500", withErr(midway, Error{Name: "APIError", Message: "boom", StatusCode: 500, IsRetryable: true}), agentproc.Ending{ExitCode: 1}, loop.ClassAPIError, 500, "boom (HTTP 500)", nil},
		{"408", withErr(midway, Error{Name: "APIError", Message: "slow", StatusCode: 408}), agentproc.Ending{ExitCode: 1}, loop.ClassAPIError, 408, "slow (HTTP 408)", nil},
		{"no connection", withErr(midway, Error{Name: "APIError", Message: "Cannot connect to API: refused", IsRetryable: true}), agentproc.Ending{ExitCode: 1}, loop.ClassAPIError, 0, "Cannot connect to API: refused", nil},
		{"provider timeout", withErr(midway, Error{Name: "UnknownError", Message: "The operation timed out."}), agentproc.Ending{ExitCode: 1}, loop.ClassAPIError, 0, "The operation timed out.", nil},
		{"401", withErr(midway, Error{Name: "APIError", Message: "bad key", StatusCode: 401}), agentproc.Ending{ExitCode: 1}, loop.ClassAuth, 401, "bad key (HTTP 401)", nil},
		{"403", withErr(midway, Error{Name: "APIError", Message: "forbidden", StatusCode: 403}), agentproc.Ending{ExitCode: 1}, loop.ClassAuth, 403, "forbidden (HTTP 403)", nil},
		{"no key", withErr(midway, Error{Name: "ProviderAuthError", Message: "missing key"}), agentproc.Ending{ExitCode: 1}, loop.ClassAuth, 0, "missing key", nil},
		{"429 rate limit", withErr(midway, Error{Name: "APIError", Message: "Too many requests", StatusCode: 429}), agentproc.Ending{ExitCode: 1}, loop.ClassAPIError, 429, "Too many requests (HTTP 429)", nil},
		{"429 quota (billing, no reset)", withErr(midway, Error{Name: "APIError", Message: "You exceeded your current quota", StatusCode: 429}), agentproc.Ending{ExitCode: 1}, loop.ClassAPIError, 429, "You exceeded your current quota (HTTP 429)", nil},
		{"429 usage limit", withErr(midway, Error{Name: "APIError", Message: "You've hit your usage limit", StatusCode: 429, RetryAfter: "3600"}),
			agentproc.Ending{ExitCode: 1, Now: fixedNow}, loop.ClassUsageLimit, 429, "You've hit your usage limit (HTTP 429)",
			&loop.UsageLimit{Message: "You've hit your usage limit", ResetsAt: fixedNow.Add(time.Hour)}},
		{"429 free tier, reset as a date", withErr(midway, Error{Name: "APIError", Message: "limited", ResponseBody: `{"type":"FreeUsageLimitError"}`, StatusCode: 429, RetryAfter: "Sun, 22 Nov 2026 13:00:00 GMT"}),
			agentproc.Ending{ExitCode: 1, Now: fixedNow}, loop.ClassUsageLimit, 429, "limited (HTTP 429)",
			&loop.UsageLimit{Message: "limited", ResetsAt: fixedNow.Add(time.Hour)}},
		{"unknown model", withErr(midway, Error{Name: "UnknownError", Message: "Model not found: x/y."}), agentproc.Ending{ExitCode: 1}, loop.ClassAgentError, 0, "Model not found: x/y.", nil},
		{"another 4xx", withErr(midway, Error{Name: "APIError", Message: "bad request", StatusCode: 400}), agentproc.Ending{ExitCode: 1}, loop.ClassAgentError, 400, "bad request (HTTP 400)", nil},
		{"an error after the last step", withErr(done, Error{Name: "ContextOverflowError", Message: "too long"}), agentproc.Ending{}, loop.ClassAgentError, 0, "too long", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Classify(tt.sess, tt.end)
			got := struct {
				Class   loop.ErrorClass
				Status  int
				Text    string
				IsError bool
				Limit   *loop.UsageLimit
				Agent   string
			}{res.Class, res.APIErrorStatus, res.Text, res.IsError, res.UsageLimit, res.Agent}
			want := got
			want.Class, want.Status, want.Text, want.IsError, want.Limit, want.Agent = tt.class, tt.status, tt.text, tt.class != loop.ClassSuccess, tt.limit, Name
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestCost(t *testing.T) {
	tokens := loop.Usage{InputTokens: 1_000_000, OutputTokens: 100_000, CacheReadTokens: 1_000_000, CacheWriteTokens: 10_000}
	tests := []struct {
		name   string
		sess   Session
		model  string
		cost   float64
		source loop.CostSource
	}{
		{"reported by OpenCode", Session{Steps: 1, Usage: tokens, Cost: 0.42}, "anthropic/claude-sonnet-4-5", 0.42, loop.CostReported},
		{"estimated from the table", Session{Steps: 1, Usage: tokens}, "anthropic/claude-sonnet-4-5", 3 + 1.5 + 0.3 + 0.0375, loop.CostEstimated},
		{"model chosen by OpenCode's config", Session{Steps: 1, Usage: tokens}, "", 0, loop.CostUnknown},
		{"model not in the table", Session{Steps: 1, Usage: tokens}, "fake/fake-model", 0, loop.CostUnknown},
		{"steps without tokens", Session{Steps: 1}, "", 0, loop.CostReported},
		{"no step at all", Session{}, "anthropic/claude-sonnet-4-5", 0, loop.CostUnknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Classify(&tt.sess, agentproc.Ending{Model: tt.model})
			if diff := cmp.Diff([]any{tt.cost, tt.source}, []any{res.CostUSD, res.CostSource},
				cmp.Comparer(func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
