package loop_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// promptConfig is a prompt-mode config rooted in a fresh temp dir, with
// fixed agent id and session name and no logs.
func promptConfig(t *testing.T) loop.Config {
	t.Helper()
	cfg := loop.PromptConfig(t.TempDir())
	cfg.AgentID = testAgent
	cfg.Session = "session-test"
	cfg.SessionLog = false
	cfg.RawLogs = false
	return cfg
}

const adHoc = "# Tidy the README\n\nFix the typos in {{the}} README.\n"

func TestPromptOutcomes(t *testing.T) {
	tests := []struct {
		name    string
		results []loop.RunResult
		cancel  bool // the run is interrupted during the session
		want    loop.Outcome
		exit    int
		runs    int
		message string
	}{
		{name: "one clean run", results: []loop.RunResult{looptest.Result("Fixed.")},
			want: loop.OutcomeComplete, exit: 0, runs: 1, message: "prompt run finished"},
		{name: "other sigils are not read", results: []loop.RunResult{looptest.Result("<promise>COMPLETE</promise> <task-failed>x</task-failed> <next-model>opus</next-model>")},
			want: loop.OutcomeComplete, exit: 0, runs: 1, message: "prompt run finished"},
		{name: "FAILURE is exit 7", results: []loop.RunResult{looptest.Result("The repository is read-only. <promise>FAILURE</promise>")},
			want: loop.OutcomeFailure, exit: 7, runs: 1, message: "the agent declared FAILURE: The repository is read-only. <promise>FAILURE</promise>"},
		{name: "FAILURE in an error result is agent trouble", results: []loop.RunResult{func() loop.RunResult {
			r := looptest.ErrorResult(loop.ClassAgentError, "bad request")
			r.Text = "<promise>FAILURE</promise>"
			return r
		}()},
			want: loop.OutcomeAgentFailed, exit: 4, runs: 1},
		{name: "a crash is exit 4 at once", results: []loop.RunResult{looptest.ErrorResult(loop.ClassCrashed, "segfault")},
			want: loop.OutcomeAgentFailed, exit: 4, runs: 1, message: "agent failed: crashed: the agent printed no result line (exit code 1)"},
		{name: "is_error is exit 4", results: []loop.RunResult{looptest.ErrorResult(loop.ClassAgentError, "bad request")},
			want: loop.OutcomeAgentFailed, exit: 4, runs: 1},
		{name: "a timeout is exit 4", results: []loop.RunResult{looptest.ErrorResult(loop.ClassTimeout, "")},
			want: loop.OutcomeAgentFailed, exit: 4, runs: 1},
		{name: "interrupted", cancel: true,
			want: loop.OutcomeCancelled, exit: 130, runs: 1},
		{name: "a session that says it was cancelled when the run was not is agent trouble", results: []loop.RunResult{looptest.Cancelled()},
			want: loop.OutcomeAgentFailed, exit: 4, runs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := promptConfig(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			runner := looptest.NewFakeRunner(t, tt.results...)
			if tt.cancel {
				runner.ThenStep(looptest.Step{Func: func(context.Context, loop.RunRequest) (loop.RunResult, error) {
					cancel()
					return looptest.Cancelled(), nil
				}})
			}
			rep, err := loop.RunPrompt(ctx, cfg, loop.PromptParams{Text: adHoc}, runner)
			if err != nil {
				t.Fatal(err)
			}
			type got struct {
				Outcome loop.Outcome
				Exit    int
				Runs    int
			}
			if diff := cmp.Diff(got{tt.want, tt.exit, tt.runs}, got{rep.Outcome, rep.ExitCode(), runner.Calls()}); diff != "" {
				t.Errorf("(-want +got):\n%s\nmessage: %s", diff, rep.Message)
			}
			if tt.message != "" && rep.Message != tt.message {
				t.Errorf("message %q, want %q", rep.Message, tt.message)
			}
		})
	}
}

func TestPromptRequest(t *testing.T) {
	cfg := promptConfig(t)
	cfg.RalphBin = "/usr/local/bin/ralph"
	cfg.Env = []string{"EXTRA=1"}
	cfg.Model = "opus"
	receipts := looptest.NewMemStore(nil)
	runner := looptest.NewFakeRunner(t, looptest.Result("Fixed."))
	rep, err := loop.RunPrompt(t.Context(), cfg, loop.PromptParams{Text: adHoc, Receipts: receipts}, runner)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("outcome %s, err %v", rep.Outcome, err)
	}
	req := runner.Requests()[0]
	// The file reaches the agent as it is: {{the}} is not a template action.
	if req.Prompt != adHoc {
		t.Errorf("prompt %q, want the file unchanged", req.Prompt)
	}
	env := map[string]string{}
	for _, k := range []string{"EXTRA", "RALPH_AGENT_ID", "RALPH_ITERATION", "RALPH_DIR", "RALPH_BIN", "RALPH_TASK_ID", "RALPH_HOLDER"} {
		env[k] = envOf(req, k)
	}
	want := map[string]string{"EXTRA": "1", "RALPH_AGENT_ID": testAgent, "RALPH_ITERATION": "1", "RALPH_DIR": cfg.Root, "RALPH_BIN": "/usr/local/bin/ralph", "RALPH_TASK_ID": "", "RALPH_HOLDER": loop.ThisProcess().String()}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
	if req.Model != "opus" || !req.Sandboxed {
		t.Errorf("model %q sandboxed %v", req.Model, req.Sandboxed)
	}
	got, err := receipts.Receipts(t.Context(), 0)
	if err != nil || len(got) != 1 || got[0].Mode != "prompt" || got[0].Iteration != 1 {
		t.Errorf("receipts %+v, %v; want one of mode prompt, iteration 1", got, err)
	}
	if rep.Iterations != 1 || rep.Successes != 1 || len(rep.Receipts) != 1 {
		t.Errorf("report: %d iterations, %d successes, %d receipts", rep.Iterations, rep.Successes, len(rep.Receipts))
	}
}

func TestPromptCommit(t *testing.T) {
	edit := func(root string) func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		return func(context.Context, loop.RunRequest) (loop.RunResult, error) {
			if err := os.WriteFile(filepath.Join(root, "README"), []byte("hello, world\n"), 0o644); err != nil {
				return loop.RunResult{}, err
			}
			return looptest.Result("Fixed."), nil
		}
	}
	tests := []struct {
		name      string
		title     string
		change    bool
		gitignore string
		commits   []string
		message   string
	}{
		{name: "a change is committed under the prompt's first line", change: true,
			commits: []string{"prompt: iteration 1 - Tidy the README", "init"}, message: "prompt run finished; changes committed"},
		{name: "a given title", title: "readme  pass", change: true,
			commits: []string{"prompt: iteration 1 - readme pass", "init"}},
		{name: "nothing changed is not an error", change: false,
			commits: []string{"init"}, message: "prompt run finished; nothing changed, nothing committed"},
		{name: "a change is committed when .gitignore lists .ralph/", change: true, gitignore: ".ralph/\n",
			commits: []string{"prompt: iteration 1 - Tidy the README", "ignore", "init"}, message: "prompt run finished; changes committed"},
		{name: "nothing changed when .gitignore lists .ralph/", change: false, gitignore: ".ralph/\n",
			commits: []string{"ignore", "init"}, message: "prompt run finished; nothing changed, nothing committed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := promptConfig(t)
			gitRepo(t, cfg.Root)
			if tt.gitignore != "" {
				ignoreRalph(t, cfg.Root, tt.gitignore, "")
			}
			cfg.Commit = true
			runner := looptest.NewFakeRunner(t, looptest.Result("Nothing to do."))
			if tt.change {
				runner = looptest.NewFakeRunner(t).ThenStep(looptest.Step{Func: edit(cfg.Root)})
			}
			rep, err := loop.RunPrompt(t.Context(), cfg, loop.PromptParams{Text: adHoc, Title: tt.title}, runner)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outcome != loop.OutcomeComplete || rep.ExitCode() != 0 {
				t.Errorf("outcome %s exit %d: %s", rep.Outcome, rep.ExitCode(), rep.Message)
			}
			if tt.message != "" && rep.Message != tt.message {
				t.Errorf("message %q, want %q", rep.Message, tt.message)
			}
			log := strings.Split(strings.TrimSpace(git(t, cfg.Root, "log", "--format=%s")), "\n")
			if diff := cmp.Diff(tt.commits, log); diff != "" {
				t.Errorf("commits (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("FAILURE: exit 7 and nothing committed", func(t *testing.T) {
		cfg := promptConfig(t)
		gitRepo(t, cfg.Root)
		cfg.Commit = true
		runner := looptest.NewFakeRunner(t).ThenFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
			if _, err := edit(cfg.Root)(ctx, req); err != nil {
				return loop.RunResult{}, err
			}
			return looptest.Result("Half done, cannot finish. <promise>FAILURE</promise>"), nil
		})
		rep, err := loop.RunPrompt(t.Context(), cfg, loop.PromptParams{Text: adHoc}, runner)
		if err != nil || rep.Outcome != loop.OutcomeFailure || rep.ExitCode() != 7 {
			t.Errorf("outcome %s exit %d (%s), err %v", rep.Outcome, rep.ExitCode(), rep.Message, err)
		}
		if diff := cmp.Diff([]string{"init"}, strings.Split(strings.TrimSpace(git(t, cfg.Root, "log", "--format=%s")), "\n")); diff != "" {
			t.Errorf("commits (-want +got):\n%s", diff)
		}
		if _, err := os.Stat(filepath.Join(cfg.Root, "README")); err != nil {
			t.Errorf("the agent's change was not left in place: %v", err)
		}
	})
	t.Run("outside a git repository: exit 5 before the agent runs", func(t *testing.T) {
		cfg := promptConfig(t)
		cfg.Commit = true
		runner := looptest.NewFakeRunner(t)
		rep, err := loop.RunPrompt(t.Context(), cfg, loop.PromptParams{Text: adHoc}, runner)
		if err != nil || rep.ExitCode() != 5 || runner.Calls() != 0 {
			t.Errorf("exit %d after %d runs, err %v", rep.ExitCode(), runner.Calls(), err)
		}
	})
	t.Run("a failing commit is exit 5", func(t *testing.T) {
		cfg := promptConfig(t)
		gitRepo(t, cfg.Root)
		cfg.Commit = true
		userHook(t, "pre-commit", "echo no commits today >&2\nexit 1")
		runner := looptest.NewFakeRunner(t).ThenStep(looptest.Step{Func: edit(cfg.Root)})
		rep, err := loop.RunPrompt(t.Context(), cfg, loop.PromptParams{Text: adHoc}, runner)
		if err != nil || rep.Outcome != loop.OutcomeGitFailed || rep.ExitCode() != 5 || runner.Calls() != 1 {
			t.Errorf("outcome %s exit %d after %d runs (%s), err %v", rep.Outcome, rep.ExitCode(), runner.Calls(), rep.Message, err)
		}
	})
}

func TestPromptUsageLimit(t *testing.T) {
	tests := []struct {
		name   string
		policy loop.UsageLimitPolicy
		want   loop.Outcome
		runs   int
		waited time.Duration
	}{
		{"waits and runs the prompt again", loop.UsageLimitWait, loop.OutcomeComplete, 2, 30 * time.Minute},
		{"stop policy exits 10", loop.UsageLimitStop, loop.OutcomeUsageLimit, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := promptConfig(t)
				cfg.OnUsageLimit = tt.policy
				runner := looptest.NewFakeRunner(t, looptest.UsageLimited(time.Now().Add(30*time.Minute)), looptest.Result("Fixed."))
				if tt.runs == 1 {
					runner = looptest.NewFakeRunner(t, looptest.UsageLimited(time.Now().Add(30*time.Minute)))
				}
				began := time.Now()
				rep, err := loop.RunPrompt(t.Context(), cfg, loop.PromptParams{Text: adHoc}, runner)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Outcome != tt.want || runner.Calls() != tt.runs || time.Since(began) != tt.waited {
					t.Errorf("outcome %s after %d runs and %v, want %s after %d and %v", rep.Outcome, runner.Calls(), time.Since(began), tt.want, tt.runs, tt.waited)
				}
				if tt.want == loop.OutcomeComplete && (rep.Iterations != 1 || envOf(runner.Requests()[1], "RALPH_ITERATION") != "1") {
					t.Errorf("the run after the wait is iteration %d (env %s), want 1", rep.Iterations, envOf(runner.Requests()[1], "RALPH_ITERATION"))
				}
			})
		})
	}
}

func TestPromptConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		config func(*loop.Config)
		text   string
		want   string
	}{
		{"empty prompt", func(*loop.Config) {}, " \n", "the prompt is empty"},
		{"verify", func(c *loop.Config) { c.Verify = true }, adHoc, "verify checks a finished task"},
		{"test command", func(c *loop.Config) { c.TestCmd = "make test" }, adHoc, "prompt mode has no test gate"},
		{"feature scope", func(c *loop.Config) { c.Scope = loop.Scope{Feature: "f"} }, adHoc, "takes no feature scope"},
		{"plan mode", func(c *loop.Config) { c.Mode = loop.ModePlan }, adHoc, "runs mode prompt only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := promptConfig(t)
			tt.config(&cfg)
			runner := looptest.NewFakeRunner(t)
			rep, err := loop.RunPrompt(t.Context(), cfg, loop.PromptParams{Text: tt.text}, runner)
			if !errors.Is(err, loop.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrConfig with %q", err, tt.want)
			}
			if rep.ExitCode() != 1 || runner.Calls() != 0 {
				t.Errorf("exit %d after %d runs", rep.ExitCode(), runner.Calls())
			}
		})
	}
}

func TestPromptTemplateOverride(t *testing.T) {
	tests := []struct {
		name     string
		override string
		want     string
		err      string
	}{
		{"a house preamble", "Mode {{.Mode}}, iteration {{.Iteration}}, agent {{.AgentID}}.\n\n{{.Prompt}}",
			"Mode prompt, iteration 1, agent " + testAgent + ".\n\n" + adHoc, ""},
		{"an unknown variable is named", "{{.Prompt}} {{.Promt}}", "", "unknown variable .Promt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := promptConfig(t)
			writeFile(t, cfg.Root, ".ralph/prompts/prompt.md", tt.override)
			runner := looptest.NewFakeRunner(t, looptest.Result("ok"))
			_, err := loop.RunPrompt(t.Context(), cfg, loop.PromptParams{Text: adHoc}, runner)
			if tt.err != "" {
				if !errors.Is(err, loop.ErrPrompt) || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "prompt.md") {
					t.Errorf("err = %v, want ErrPrompt naming prompt.md and %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := runner.Requests()[0].Prompt; got != tt.want {
				t.Errorf("prompt %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPromptSessionLog(t *testing.T) {
	cfg := promptConfig(t)
	cfg.SessionLog, cfg.RawLogs = true, true
	cfg.LogDir = filepath.Join(cfg.Root, ".ralph", "logs")
	runner := looptest.NewFakeRunner(t, looptest.Result("ok"))
	rep, err := loop.RunPrompt(t.Context(), cfg, loop.PromptParams{Text: adHoc}, runner)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(loop.SessionLogPath(cfg.LogDir, rep.Session))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mode: prompt\n", "=== iteration 1 ===\nmode: prompt\ntask: (none: prompt mode)\n", "status: session_ok", "iterations: 1", "exit code: 0"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("session log lacks %q:\n%s", want, log)
		}
	}
	if got := runner.Requests()[0].LogPath; got != filepath.Join(cfg.LogDir, rep.Session, "iter-1.ndjson") {
		t.Errorf("raw log path %q", got)
	}
}
