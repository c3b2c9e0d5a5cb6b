package gemini

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/sandbox"
)

func errResult(msg string) *loop.RunResult {
	res := &loop.RunResult{IsError: true, Subtype: "error", Text: msg}
	if m := statusRE.FindStringSubmatch(msg); m != nil {
		res.APIErrorStatus = atoi(m[1])
	}
	return res
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestClassify(t *testing.T) {
	ok := &loop.RunResult{Subtype: "success"}
	const quota = "[API Error: You have exhausted your daily quota on this model.]\nPlease wait and try again later."
	tests := []struct {
		name   string
		result *loop.RunResult
		end    agentproc.Ending
		want   loop.ErrorClass
		status int
	}{
		{"success", ok, agentproc.Ending{}, loop.ClassSuccess, 0},
		{"success, then a non-zero exit", ok, agentproc.Ending{ExitCode: 1}, loop.ClassAgentError, 0},
		{"success, stopped after it", ok, agentproc.Ending{ExitCode: -1, StoppedAfterResult: true}, loop.ClassSuccess, 0},
		{"no result, exit 0 (SIGTERM)", nil, agentproc.Ending{}, loop.ClassCrashed, 0},
		{"no result, killed", nil, agentproc.Ending{ExitCode: -1}, loop.ClassCrashed, 0},
		{"cancelled beats the result", errResult("[API Error: terminated]"), agentproc.Ending{ExitCode: 1, Cancelled: true}, loop.ClassCancelled, 0},
		{"cancelled without a result", nil, agentproc.Ending{Cancelled: true}, loop.ClassCancelled, 0},
		{"timeout", nil, agentproc.Ending{ExitCode: -1, TimedOut: true}, loop.ClassTimeout, 0},
		{"idle timeout beats a quota", errResult(quota), agentproc.Ending{ExitCode: 173, IdleTimedOut: true}, loop.ClassIdleTimeout, 429},
		{"500 from the message", errResult(`[API Error: {"error":{"code":500,"message":"x","status":"INTERNAL"}}]`), agentproc.Ending{ExitCode: 244}, loop.ClassAPIError, 500},
		{"503 from the exit code", errResult("[API Error: The model is overloaded.]"), agentproc.Ending{ExitCode: 247}, loop.ClassAPIError, 503},
		{"429 rate limit", errResult("[API Error: Resource has been exhausted (e.g. check quota).]"), agentproc.Ending{ExitCode: 173}, loop.ClassAPIError, 429},
		{"429 short retry", errResult("[API Error: You exceeded your current quota.\nSuggested retry after 43s.]"), agentproc.Ending{ExitCode: 173}, loop.ClassAPIError, 429},
		{"429 daily quota", errResult(quota), agentproc.Ending{ExitCode: 173}, loop.ClassUsageLimit, 429},
		{"429 long retry", errResult("[API Error: You exceeded your current quota.\nSuggested retry after 3600s.]"), agentproc.Ending{ExitCode: 173}, loop.ClassUsageLimit, 429},
		{"429 zero limit", errResult("[API Error: Quota exceeded for metric: x, limit: 0, model: gemini-2.5-pro]"), agentproc.Ending{ExitCode: 173}, loop.ClassUsageLimit, 429},
		{"401", errResult(`[API Error: {"error":{"code":401,"message":"API key not valid."}}]`), agentproc.Ending{ExitCode: 145}, loop.ClassAuth, 401},
		{"403 from the exit code", errResult("[API Error: Permission denied.]"), agentproc.Ending{ExitCode: 147}, loop.ClassAuth, 403},
		{"auth fatal", errResult("Invalid auth method selected."), agentproc.Ending{ExitCode: 41}, loop.ClassAuth, 0},
		{"stream broke", errResult("[API Error: terminated]"), agentproc.Ending{ExitCode: 1}, loop.ClassAPIError, 0},
		{"404 unknown model", errResult(`[API Error: {"error":{"code":404,"message":"models/x is not found"}}]`), agentproc.Ending{ExitCode: 148}, loop.ClassAgentError, 404},
		{"max turns", &loop.RunResult{IsError: true, TerminalReason: "FatalTurnLimitedError",
			Text: "Reached max session turns for this session."}, agentproc.Ending{ExitCode: 53}, loop.ClassMaxTurns, 0},
		{"invalid stream", &loop.RunResult{IsError: true, Subtype: "error"}, agentproc.Ending{}, loop.ClassAgentError, 0},
		{"tool error", &loop.RunResult{IsError: true, TerminalReason: "no_space_left", Text: "Error executing tool write_file: disk full"}, agentproc.Ending{ExitCode: 54}, loop.ClassAgentError, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Session{SessionID: "s", Model: "gemini-2.5-flash", LastText: "chatter", Result: tt.result}
			tt.end.Now = fixedNow
			res := Classify(s, tt.end)
			if res.Class != tt.want || res.APIErrorStatus != tt.status {
				t.Errorf("class %s, status %d; want %s, %d", res.Class, res.APIErrorStatus, tt.want, tt.status)
			}
			if res.Agent != Name || res.SessionID != "s" {
				t.Errorf("agent %q session %q", res.Agent, res.SessionID)
			}
			if (res.Class == loop.ClassSuccess) == res.IsError {
				t.Errorf("IsError %v with class %s", res.IsError, res.Class)
			}
			if (res.Class == loop.ClassUsageLimit) != (res.UsageLimit != nil) {
				t.Errorf("UsageLimit %+v with class %s", res.UsageLimit, res.Class)
			}
			if tt.result == nil && res.CostSource != loop.CostUnknown {
				t.Errorf("cost source %q without a result, want unknown", res.CostSource)
			}
		})
	}
}

// TestClassifyText: the final text is the last assistant message, except
// for an error result, whose text is its error message.
func TestClassifyText(t *testing.T) {
	s := &Session{LastText: "Done. <task-done>T1</task-done>", Result: &loop.RunResult{Subtype: "success"}}
	if got := Classify(s, agentproc.Ending{}).Text; got != s.LastText {
		t.Errorf("success text %q", got)
	}
	s.Result = errResult("[API Error: terminated]")
	if got := Classify(s, agentproc.Ending{ExitCode: 1}).Text; got != "[API Error: terminated]" {
		t.Errorf("error text %q", got)
	}
	s.Result = nil
	if got := Classify(s, agentproc.Ending{}).Text; got != s.LastText {
		t.Errorf("crash text %q", got)
	}
}

func TestUsageLimitResets(t *testing.T) {
	tests := []struct {
		msg  string
		want time.Time
		typ  string
	}{
		{"[API Error: You have exhausted your daily quota on this model.]", time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC), "daily"},
		{"[API Error: over quota.\nSuggested retry after 3600s.]", fixedNow.Add(time.Hour), ""},
		{"[API Error: over quota.\nSuggested retry after 400000ms.]", fixedNow.Add(400 * time.Second), ""},
		{"[API Error: limit: 0]", time.Time{}, ""},
	}
	for _, tt := range tests {
		res := Classify(&Session{Result: errResult(tt.msg)}, agentproc.Ending{ExitCode: 173, Now: fixedNow})
		if res.UsageLimit == nil {
			t.Errorf("%q: no usage limit (class %s)", tt.msg, res.Class)
			continue
		}
		if !res.UsageLimit.ResetsAt.Equal(tt.want) || res.UsageLimit.Type != tt.typ {
			t.Errorf("%q: resets %v type %q, want %v %q", tt.msg, res.UsageLimit.ResetsAt, res.UsageLimit.Type, tt.want, tt.typ)
		}
	}
}

func TestEstimateCost(t *testing.T) {
	in := int64(600)
	s := &Stats{TotalTokens: 1150, InputTokens: 1000, OutputTokens: 100, Cached: 400, Input: &in,
		Models: map[string]ModelStats{"gemini-2.5-pro": {TotalTokens: 1150, InputTokens: 1000, OutputTokens: 100, Cached: 400, Input: &in}}}
	// 50 thinking tokens count as output: 600×1.25 + 400×0.125 + 150×10.
	want := (600*1.25 + 400*0.125 + 150*10.0) / 1e6
	if got, src := EstimateCost(s, ""); src != loop.CostEstimated || !near(got, want) {
		t.Errorf("cost %v %s, want %v estimated", got, src, want)
	}
	if diff := cmp.Diff(loop.Usage{InputTokens: 600, CacheReadTokens: 400, OutputTokens: 150}, s.Usage()); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	s.Models["gemini-9-ultra"] = ModelStats{TotalTokens: 10, InputTokens: 10}
	if got, src := EstimateCost(s, ""); src != loop.CostUnknown || got != 0 {
		t.Errorf("with an unpriced model: %v %s, want 0 unknown", got, src)
	}
	s.Models = nil
	if _, src := EstimateCost(s, "gemini-2.5-flash"); src != loop.CostEstimated {
		t.Errorf("without models, a priced model: %s", src)
	}
	if _, src := EstimateCost(s, "fake-model"); src != loop.CostUnknown {
		t.Errorf("without models, an unpriced model: %s", src)
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

func TestArgs(t *testing.T) {
	tests := []struct {
		name string
		req  loop.RunRequest
		ctx  string
		want []string
	}{
		{"work session", loop.RunRequest{Model: "opus", Sandboxed: true, SystemPrompt: "p"}, "/tmp/c",
			[]string{"--output-format", "stream-json", "-m", "gemini-2.5-pro", "--include-directories", "/tmp/c", "--yolo"}},
		{"verifier", loop.RunRequest{Model: "haiku", Tools: loop.VerifierTools}, "",
			[]string{"--output-format", "stream-json", "-m", "gemini-2.5-flash-lite"}},
		{"no model", loop.RunRequest{}, "/tmp/c",
			[]string{"--output-format", "stream-json", "-m", DefaultModel}},
		{"a model id", loop.RunRequest{Model: "gemini-3-pro-preview", Sandboxed: true}, "",
			[]string{"--output-format", "stream-json", "-m", "gemini-3-pro-preview", "--yolo"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, Args(tt.req, tt.ctx, tt.req.Sandboxed)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestEnv(t *testing.T) {
	got := Env([]string{"HOME=/h", "GEMINI_API_KEY=k", "GEMINI_CLI_NO_RELAUNCH=false", "X=1"},
		loop.RunRequest{Env: []string{"X=2", "RALPH_TASK=t"}})
	want := []string{"HOME=/h", "GEMINI_API_KEY=k", "GEMINI_CLI_NO_RELAUNCH=true", "X=2", "RALPH_TASK=t", "GEMINI_CLI_TRUST_WORKSPACE=true"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestStateDirsAndContextFileName(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home, "GEMINI_CLI_SYSTEM_SETTINGS_PATH=" + filepath.Join(home, "none.json")}
	dirs := func(sts []sandbox.State) []string {
		var out []string
		for _, st := range sts {
			out = append(out, st.Dir)
		}
		return out
	}
	if diff := cmp.Diff([]string{filepath.Join(home, ".gemini")}, dirs(StateDirs(env))); diff != "" {
		t.Errorf("StateDirs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/g/.gemini"}, dirs(StateDirs(append(env, "GEMINI_CLI_HOME=/g")))); diff != "" {
		t.Errorf("StateDirs with GEMINI_CLI_HOME (-want +got):\n%s", diff)
	}
	if keep := StateDirs(env)[0].Keep; !slices.Contains(keep, "oauth_creds.json") {
		t.Errorf("the login is not kept: %v", keep)
	}
	if got := ContextFileName(env, dir); got != DefaultContextFileName {
		t.Errorf("no settings: %q", got)
	}
	write := func(path, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, ".gemini", "settings.json"), "// mine\n{\"context\":{\"fileName\":[\"AGENTS.md\",\"GEMINI.md\"]}}")
	if got := ContextFileName(env, dir); got != "AGENTS.md" {
		t.Errorf("user settings: %q", got)
	}
	write(filepath.Join(dir, ".gemini", "settings.json"), `{"context":{"fileName":"CONTEXT.md"}}`)
	if got := ContextFileName(env, dir); got != "CONTEXT.md" {
		t.Errorf("project settings: %q", got)
	}
}

// TestContextFileNameHostile: the project's .gemini/settings.json is the
// agent's to write. A FIFO there (or in the user's settings, which an
// unsandboxed agent writes too) must not hang ralph, a link there must
// not be followed to a file elsewhere, and a huge file is not read.
func TestContextFileNameHostile(t *testing.T) {
	home, dir, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home, "GEMINI_CLI_SYSTEM_SETTINGS_PATH=" + filepath.Join(home, "none.json")}
	project := filepath.Join(dir, ".gemini", "settings.json")
	user := filepath.Join(home, ".gemini", "settings.json")
	for _, d := range []string{filepath.Dir(project), filepath.Dir(user)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(elsewhere, "settings.json")
	if err := os.WriteFile(outside, []byte(`{"context":{"fileName":"FOLLOWED.md"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// ContextFileName in a goroutine: a FIFO opened for reading blocks
	// until a writer comes, which none does.
	name := func() string {
		t.Helper()
		got := make(chan string, 1)
		go func() { got <- ContextFileName(env, dir) }()
		select {
		case s := <-got:
			return s
		case <-time.After(5 * time.Second):
			// Unblock the reader so the test can end.
			for _, f := range []string{project, user} {
				if w, err := os.OpenFile(f, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
			}
			t.Fatal("ContextFileName blocked")
			return ""
		}
	}

	if err := mkfifo(project); err != nil {
		t.Fatal(err)
	}
	if got := name(); got != DefaultContextFileName {
		t.Errorf("a FIFO as the project's settings: %q", got)
	}
	if err := os.Remove(project); err != nil {
		t.Fatal(err)
	}
	if err := mkfifo(user); err != nil {
		t.Fatal(err)
	}
	if got := name(); got != DefaultContextFileName {
		t.Errorf("a FIFO as the user's settings: %q", got)
	}
	if err := os.Remove(user); err != nil {
		t.Fatal(err)
	}

	if err := os.Symlink(outside, project); err != nil {
		t.Fatal(err)
	}
	if got := name(); got != DefaultContextFileName {
		t.Errorf("a link as the project's settings: %q, want it not followed", got)
	}
	os.Remove(project)
	os.Remove(filepath.Dir(project))
	if err := os.Symlink(elsewhere, filepath.Dir(project)); err != nil {
		t.Fatal(err)
	}
	if got := name(); got != DefaultContextFileName {
		t.Errorf("a link as the project's .gemini: %q, want it not followed", got)
	}
	os.Remove(filepath.Dir(project))

	if err := os.MkdirAll(filepath.Dir(project), 0o755); err != nil {
		t.Fatal(err)
	}
	big := `{"context":{"fileName":"BIG.md"}}` + strings.Repeat(" ", 1<<20)
	if err := os.WriteFile(project, []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := name(); got != DefaultContextFileName {
		t.Errorf("settings over 1 MiB: %q, want them not read", got)
	}
	// The user's own settings may be a link (dotfiles): followed.
	if err := os.Symlink(outside, user); err != nil {
		t.Fatal(err)
	}
	if got := name(); got != "FOLLOWED.md" {
		t.Errorf("the user's settings as a link: %q, want FOLLOWED.md", got)
	}
}
