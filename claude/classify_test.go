package claude

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
)

func sessionOf(t *testing.T, file string) *Session {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, sess := decodeAll(t, f)
	return sess
}

func TestClassifyFixtures(t *testing.T) {
	tests := []struct {
		file      string
		end       agentproc.Ending
		wantClass loop.ErrorClass
		wantText  string
		wantReset time.Time
	}{
		{file: "default_model", wantClass: loop.ClassSuccess, wantText: "All done: wrote out.txt.\n<task-done>t-1</task-done>\n<promise>COMPLETE</promise>"},
		{file: "err_http401", end: agentproc.Ending{ExitCode: 1}, wantClass: loop.ClassAuth, wantText: "Invalid API key · Fix external API key"},
		// No key and no login: is_error, no API status, terminal reason
		// api_error — not a transient API error, never retried.
		{file: "not_logged_in", end: agentproc.Ending{ExitCode: 1}, wantClass: loop.ClassAuth, wantText: "Not logged in · Please run /login"},
		{file: "err_http429", end: agentproc.Ending{ExitCode: 1}, wantClass: loop.ClassAPIError, wantText: "API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit"},
		{file: "err_http500", end: agentproc.Ending{ExitCode: 1}, wantClass: loop.ClassAPIError},
		{file: "err_http529", end: agentproc.Ending{ExitCode: 1}, wantClass: loop.ClassAPIError},
		{file: "err_stall_midstream_idle5s", end: agentproc.Ending{ExitCode: 1}, wantClass: loop.ClassAPIError},
		{file: "max_turns1", end: agentproc.Ending{ExitCode: 1}, wantClass: loop.ClassMaxTurns},
		// SIGINT: exit 0, error_during_execution. Whether it is a cancel
		// depends on who interrupted it.
		{file: "sigint_midstream", wantClass: loop.ClassAgentError},
		{file: "sigint_midstream", end: agentproc.Ending{Cancelled: true}, wantClass: loop.ClassCancelled},
		// A good result, but the process was killed by ralph's timeout.
		{file: "default_model", end: agentproc.Ending{ExitCode: -1, TimedOut: true}, wantClass: loop.ClassTimeout,
			wantText: "All done: wrote out.txt.\n<task-done>t-1</task-done>\n<promise>COMPLETE</promise>"},
		// A good result, then killed by ralph when the agent did not
		// exit within the result grace: the result stands.
		{file: "default_model", end: agentproc.Ending{ExitCode: -1, StoppedAfterResult: true}, wantClass: loop.ClassSuccess,
			wantText: "All done: wrote out.txt.\n<task-done>t-1</task-done>\n<promise>COMPLETE</promise>"},
		// A non-zero exit the agent chose after a good result is still
		// agent trouble.
		{file: "default_model", end: agentproc.Ending{ExitCode: 1}, wantClass: loop.ClassAgentError},
		{file: "err_http401", end: agentproc.Ending{ExitCode: -1, StoppedAfterResult: true}, wantClass: loop.ClassAuth},
		{file: "multi_step_failing_cmd", wantClass: loop.ClassSuccess, wantText: "All done: wrote out.txt.\n<task-done>t-1</task-done>\n<promise>COMPLETE</promise>"},
		// is_error with exit 0 is still an error.
		{file: "recorded_voxi_cli-2.1.200_misc_lines", wantClass: loop.ClassAgentError},
		{file: "usage_limit_oauth", end: agentproc.Ending{ExitCode: 1}, wantClass: loop.ClassUsageLimit,
			wantText: "You've hit your 5-hour limit · resets 6:30pm (UTC)", wantReset: time.Unix(1784399400, 0).UTC()},
		{file: "recorded_spindrift_issue1539_session_limit", end: agentproc.Ending{ExitCode: 1}, wantClass: loop.ClassUsageLimit,
			wantText: "You've hit your session limit · resets 6:30pm (UTC)", wantReset: time.Unix(1784399400, 0).UTC()},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			tt.end.Now = fixedNow
			res := Classify(sessionOf(t, "testdata/"+tt.file+".ndjson"), tt.end)
			if diff := cmp.Diff(tt.wantClass, res.Class); diff != "" {
				t.Errorf("Class (-want +got):\n%s", diff)
			}
			if tt.wantText != "" {
				if diff := cmp.Diff(tt.wantText, res.Text); diff != "" {
					t.Errorf("Text (-want +got):\n%s", diff)
				}
			}
			var gotReset time.Time
			if res.UsageLimit != nil {
				gotReset = res.UsageLimit.ResetsAt
			}
			if diff := cmp.Diff(tt.wantReset, gotReset); diff != "" {
				t.Errorf("ResetsAt (-want +got):\n%s", diff)
			}
			if res.Class != loop.ClassSuccess && !res.IsError {
				t.Errorf("class %s with IsError false", res.Class)
			}
		})
	}
}

func TestClassifyUsageLimitTexts(t *testing.T) {
	now := time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		res       *loop.RunResult
		rejected  *loop.UsageLimit
		wantClass loop.ErrorClass
		wantReset time.Time
	}{
		{
			name:      "429 session limit text, reset later today",
			res:       &loop.RunResult{IsError: true, APIErrorStatus: 429, Text: "You've hit your session limit · resets 9:30pm (UTC)"},
			wantClass: loop.ClassUsageLimit, wantReset: time.Date(2026, 11, 22, 21, 30, 0, 0, time.UTC),
		},
		{
			name:      "429 session limit text, reset time already past today means tomorrow",
			res:       &loop.RunResult{IsError: true, APIErrorStatus: 429, Text: "You've hit your session limit · resets 6:30pm (UTC)"},
			wantClass: loop.ClassUsageLimit, wantReset: time.Date(2026, 11, 23, 18, 30, 0, 0, time.UTC),
		},
		{
			name:      "429 weekly limit, hour only, another zone",
			res:       &loop.RunResult{IsError: true, APIErrorStatus: 429, Text: "You've hit your weekly limit · resets 5am (Europe/Paris)"},
			wantClass: loop.ClassUsageLimit, wantReset: time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC),
		},
		{
			name:      "429 limit with a date",
			res:       &loop.RunResult{IsError: true, APIErrorStatus: 429, Text: "You've hit your Opus limit · resets Nov 24, 3pm (UTC)"},
			wantClass: loop.ClassUsageLimit, wantReset: time.Date(2026, 11, 24, 15, 0, 0, 0, time.UTC),
		},
		{
			name:      "429 limit, unknown reset: zero, the loop's default applies",
			res:       &loop.RunResult{IsError: true, APIErrorStatus: 429, Text: "You've hit your session limit"},
			wantClass: loop.ClassUsageLimit,
		},
		{
			name:      "429 limit, unknown zone: zero",
			res:       &loop.RunResult{IsError: true, APIErrorStatus: 429, Text: "You've hit your session limit · resets 6pm (Mars/Olympus)"},
			wantClass: loop.ClassUsageLimit,
		},
		{
			name:      "legacy epoch",
			res:       &loop.RunResult{IsError: true, Text: "Claude AI usage limit reached|1784399400"},
			wantClass: loop.ClassUsageLimit, wantReset: time.Unix(1784399400, 0).UTC(),
		},
		{
			name:      "plain rate limit 429 is an API error",
			res:       &loop.RunResult{IsError: true, APIErrorStatus: 429, Text: "API Error: Request rejected (429) · Number of request tokens has exceeded your per-minute rate limit"},
			wantClass: loop.ClassAPIError,
		},
		{
			name:      "limit words in a successful result are not a limit",
			res:       &loop.RunResult{Text: "I fixed the 'You've hit your session limit · resets 6pm (UTC)' message"},
			wantClass: loop.ClassSuccess,
		},
		{
			name:      "rejected event wins its reset over the text",
			res:       &loop.RunResult{IsError: true, APIErrorStatus: 429, Text: "You've hit your session limit · resets 9:30pm (UTC)"},
			rejected:  &loop.UsageLimit{ResetsAt: time.Unix(1784399400, 0).UTC(), Type: "five_hour"},
			wantClass: loop.ClassUsageLimit, wantReset: time.Unix(1784399400, 0).UTC(),
		},
		{
			name:      "rejected event without a result line",
			rejected:  &loop.UsageLimit{Type: "five_hour"},
			wantClass: loop.ClassUsageLimit,
		},
		{name: "no result, exit 0", wantClass: loop.ClassCrashed},
		{name: "403", res: &loop.RunResult{IsError: true, APIErrorStatus: 403}, wantClass: loop.ClassAuth},
		{name: "400 is an agent error", res: &loop.RunResult{IsError: true, APIErrorStatus: 400}, wantClass: loop.ClassAgentError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Classify(&Session{Result: tt.res, Rejected: tt.rejected}, agentproc.Ending{Now: now})
			if diff := cmp.Diff(tt.wantClass, res.Class); diff != "" {
				t.Errorf("Class (-want +got):\n%s", diff)
			}
			var gotReset time.Time
			if res.UsageLimit != nil {
				gotReset = res.UsageLimit.ResetsAt
			}
			if diff := cmp.Diff(tt.wantReset, gotReset); diff != "" {
				t.Errorf("ResetsAt (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		name string
		res  loop.RunResult
		want string
	}{
		{"usage limit", loop.RunResult{Class: loop.ClassUsageLimit, UsageLimit: &loop.UsageLimit{ResetsAt: time.Date(2026, 7, 18, 18, 30, 0, 0, time.UTC)}},
			"usage limit reached; resets at 2026-07-18T18:30:00Z"},
		{"api error", loop.RunResult{Class: loop.ClassAPIError, APIErrorStatus: 529, Text: "API Error: 529 Overloaded.\nmore"},
			"api_error (HTTP 529): API Error: 529 Overloaded."},
		{"crash uses stderr", loop.RunResult{Class: loop.ClassCrashed, ExitCode: 2, Stderr: "warming up\npanic: boom", Text: "partial"},
			"crashed (exit code 2, no result line): panic: boom"},
		{"idle timeout", loop.RunResult{Class: loop.ClassIdleTimeout, Text: "partial"}, "idle_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Describe(tt.res)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestClassifyRootRefusal: Claude Code's refusal to skip permissions as
// root (2.1.330: the line below on stderr, exit 1, nothing on stdout) is
// ClassRefused with words that say what to do; the same words anywhere
// else — in a stream, after a session started, with another exit code —
// are not.
func TestClassifyRootRefusal(t *testing.T) {
	const refusal = "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons\n"
	started := &Session{SessionID: "s-1", Model: "claude-sonnet"}
	tests := []struct {
		name string
		sess *Session
		end  agentproc.Ending
		want loop.ErrorClass
	}{
		{"the refusal", &Session{}, agentproc.Ending{ExitCode: 1, Stderr: refusal}, loop.ClassRefused},
		{"after other stderr lines", &Session{}, agentproc.Ending{ExitCode: 1, Stderr: "warning: Node 20 is old\n" + refusal}, loop.ClassRefused},
		{"another exit code", &Session{}, agentproc.Ending{ExitCode: 3, Stderr: refusal}, loop.ClassCrashed},
		{"a session that started", started, agentproc.Ending{ExitCode: 1, Stderr: refusal}, loop.ClassCrashed},
		{"the words inside another line", &Session{}, agentproc.Ending{ExitCode: 1, Stderr: "echo " + refusal}, loop.ClassCrashed},
		{"a plain crash", &Session{}, agentproc.Ending{ExitCode: 1, Stderr: "Error: something broke\n"}, loop.ClassCrashed},
		{"a cancel wins", &Session{}, agentproc.Ending{ExitCode: 1, Stderr: refusal, Cancelled: true}, loop.ClassCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := Classify(tt.sess, tt.end)
			if res.Class != tt.want {
				t.Fatalf("class %s, want %s", res.Class, tt.want)
			}
			if !res.IsError {
				t.Error("IsError false")
			}
			if tt.want == loop.ClassRefused {
				if diff := cmp.Diff(RootRefusal, res.Text); diff != "" {
					t.Errorf("Text (-want +got):\n%s", diff)
				}
				for _, what := range []string{"--sandbox", "other than root", "IS_SANDBOX=1"} {
					if !strings.Contains(Describe(res), what) {
						t.Errorf("Describe does not say %q: %s", what, Describe(res))
					}
				}
			}
		})
	}
}
