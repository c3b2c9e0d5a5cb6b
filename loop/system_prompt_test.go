package loop_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// Every agent session gets ralph's protocol for its mode as the system
// prompt, while the task context stays in the user prompt (stdin).
func TestSystemPromptPerMode(t *testing.T) {
	type session struct {
		// system must appear in the system prompt, user in the user prompt;
		// notInSystem must not be in the system prompt.
		system, user, notInSystem []string
	}
	tests := []struct {
		name string
		run  func(t *testing.T, runner *looptest.FakeRunner) (loop.Report, error)
		// answer is the agent's final text per session kind.
		answer func(req loop.RunRequest) string
		want   []session
	}{
		{
			name: "build and verify",
			run: func(t *testing.T, runner *looptest.FakeRunner) (loop.Report, error) {
				cfg := testConfig(t)
				cfg.Verify = true
				return loop.Run(t.Context(), cfg, newStore(t, loop.Task{ID: "a", Title: "Fix login", Description: "The form 500s."}), runner)
			},
			answer: func(req loop.RunRequest) string {
				if isVerifier(req) {
					return "<verify-pass/>"
				}
				return done("a")
			},
			want: []session{
				{
					system: []string{"ralph", "One task per session", "final message", "<task-done>ID</task-done>", "<task-failed>ID</task-failed>",
						"<next-model>haiku|sonnet|opus</next-model>", "<promise>FAILURE</promise>", `"$RALPH_BIN" task`},
					user:        []string{"a: Fix login", "The form 500s."},
					notInSystem: []string{"Fix login", "The form 500s."},
				},
				{
					system:      []string{"verifier of ralph", "<verify-pass/>", "<verify-fail>", "Read only", "puts back whatever you changed", "final message"},
					user:        []string{"Task a: Fix login", "All good."},
					notInSystem: []string{"Fix login", "<task-done>ID</task-done>"},
				},
			},
		},
		{
			name: "peek",
			run: func(t *testing.T, runner *looptest.FakeRunner) (loop.Report, error) {
				cfg := peekConfig(t)
				cfg.MaxIterations = 1 // the stand-in agent claims nothing
				return loop.Run(t.Context(), cfg, newStore(t, loop.Task{ID: "a", Title: "Fix login"}), runner)
			},
			answer: func(loop.RunRequest) string { return "Nothing claimed." },
			want: []session{{
				system:      []string{"One task per session", `"$RALPH_BIN" task claim ID`, `"$RALPH_BIN" task done ID`, "session exited without completing task", "<task-done>ID</task-done>", "<promise>FAILURE</promise>"},
				user:        []string{"/ralph-build", "a: Fix login"},
				notInSystem: []string{"Fix login"},
			}},
		},
		{
			name: "plan",
			run: func(t *testing.T, runner *looptest.FakeRunner) (loop.Report, error) {
				return loop.Plan(t.Context(), planConfig(t), newStore(t, loop.Task{ID: "x", Title: "Planned"}), runner)
			},
			answer: func(loop.RunRequest) string { return complete },
			want: []session{{
				system:      []string{"planner of ralph", `"$RALPH_BIN" task add`, `"$RALPH_BIN" task dep add BLOCKED BLOCKER`, "<promise>COMPLETE</promise>", "<promise>FAILURE</promise>", "final message"},
				user:        []string{"## specs/auth.md", "Users log in with a password."},
				notInSystem: []string{"Users log in with a password."},
			}},
		},
		{
			name: "prompt",
			run: func(t *testing.T, runner *looptest.FakeRunner) (loop.Report, error) {
				return loop.RunPrompt(t.Context(), promptConfig(t), loop.PromptParams{Text: adHoc}, runner)
			},
			answer: func(loop.RunRequest) string { return "Fixed." },
			want: []session{{
				system:      []string{"ralph", "one ad-hoc prompt", "<promise>FAILURE</promise>", `"$RALPH_BIN"`},
				user:        []string{adHoc},
				notInSystem: []string{"Tidy the README", "<task-done>"},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
				return looptest.Result(tt.answer(req)), nil
			})
			rep, err := tt.run(t, runner)
			if err != nil {
				t.Fatal(err)
			}
			if rep.ExitCode() != 0 {
				t.Fatalf("exit %d: %s", rep.ExitCode(), rep.Message)
			}
			reqs := runner.Requests()
			if len(reqs) != len(tt.want) {
				t.Fatalf("%d sessions, want %d", len(reqs), len(tt.want))
			}
			for i, w := range tt.want {
				req := reqs[i]
				for _, s := range w.system {
					if !strings.Contains(req.SystemPrompt, s) {
						t.Errorf("session %d: system prompt lacks %q:\n%s", i+1, s, req.SystemPrompt)
					}
				}
				for _, s := range w.notInSystem {
					if strings.Contains(req.SystemPrompt, s) {
						t.Errorf("session %d: system prompt has %q, which belongs in the user prompt", i+1, s)
					}
				}
				for _, s := range w.user {
					if !strings.Contains(req.Prompt, s) {
						t.Errorf("session %d: user prompt lacks %q:\n%s", i+1, s, req.Prompt)
					}
				}
				if req.ReplaceSystemPrompt {
					t.Errorf("session %d replaces the agent's system prompt; ralph's should be appended", i+1)
				}
			}
		})
	}
}

// A system prompt override in .ralph/prompts/ is used, and checked like
// the other templates when the run starts.
func TestSystemPromptOverride(t *testing.T) {
	tests := []struct {
		name, file, text string
		wantErr          string
		want             string
	}{
		{name: "override is used", file: "system-build.md", text: "House rules for {{.Task.ID}} ({{.Mode}}).", want: "House rules for a (build)."},
		{name: "unknown variable", file: "system-build.md", text: "{{.Taks.ID}}", wantErr: "unknown variable .Taks"},
		{name: "parse error names the file", file: "system-build.md", text: "{{.Mode", wantErr: "system-build.md"},
		{name: "an unused mode's override is not loaded", file: "system-plan.md", text: "{{.Nope}}", want: "EMBEDDED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tasks("a")...)
			cfg := testConfig(t)
			writeFile(t, cfg.Root, ".ralph/prompts/"+tt.file, tt.text)
			runner := looptest.NewFakeRunner(nil).Always(agent(done, ""))
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if tt.wantErr != "" {
				if !errors.Is(err, loop.ErrPrompt) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrPrompt naming %q", err, tt.wantErr)
				}
				if rep.ExitCode() != 1 || runner.Calls() != 0 || statuses(t, store)["a"] != loop.StatusPending {
					t.Errorf("a bad override changed something: exit %d, %d runs", rep.ExitCode(), runner.Calls())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want == "EMBEDDED" {
				p, err := loop.LoadPrompt(t.TempDir(), loop.SystemPromptName(loop.PromptBuild))
				if err != nil {
					t.Fatal(err)
				}
				if want, err = p.Render(loop.PromptData{}); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(want, runner.Requests()[0].SystemPrompt); diff != "" {
				t.Errorf("system prompt (-want +got):\n%s", diff)
			}
		})
	}
}
