package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const tidyPrompt = "# Tidy the README\n\nFix the typos. Keep {{ .Values }} as it is.\n"

// TestPromptRunsOnce is the "ralph prompt runs once": one session
// of the file as it is, the RALPH_* environment with RALPH_ITERATION=1,
// a session log, a raw stream and a receipt, exit 0; sigils in the answer
// other than <promise>FAILURE</promise> change nothing.
func TestPromptRunsOnce(t *testing.T) {
	h := initHarness(t)
	file := h.write("tidy.md", tidyPrompt)
	h.add("A task the prompt must not touch")
	db := h.dump()
	agent, script := fakeAgentPath(t, agentStep{Text: "Tidied. <promise>COMPLETE</promise> <task-done>t-1</task-done>", Cost: 0.25})
	r := h.runAgentCmd(t.Context(), "prompt", agent, file)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
	if got := lastLine(r.stdout); got != "prompt run finished" {
		t.Errorf("last line %q", got)
	}
	if !strings.Contains(r.stdout, "== prompt tidy.md · iteration 1 · model sonnet") {
		t.Errorf("stdout lacks the header:\n%s", r.stdout)
	}
	calls := agentCalls(t, script)
	if len(calls) != 1 {
		t.Fatalf("%d sessions, want 1", len(calls))
	}
	c := calls[0]
	if c.Prompt != tidyPrompt {
		t.Errorf("prompt %q, want the file unchanged", c.Prompt)
	}
	if !strings.Contains(c.System, "one ad-hoc prompt") || !strings.Contains(c.System, "<promise>FAILURE</promise>") {
		t.Errorf("system prompt lacks the protocol:\n%s", c.System)
	}
	if c.Env["RALPH_ITERATION"] != "1" || c.Env["RALPH_TASK_ID"] != "" || c.Env["RALPH_DIR"] != h.dir || c.Env["RALPH_BIN"] == "" || !strings.HasPrefix(c.Env["RALPH_AGENT_ID"], "agent-") {
		t.Errorf("agent environment %v", c.Env)
	}
	if diff := cmp.Diff(db.Tasks, h.dump().Tasks); diff != "" {
		t.Errorf("the prompt run changed the plan (-before +after):\n%s", diff)
	}
	log := readSessionLog(t, h)
	for _, want := range []string{"mode: prompt", "=== iteration 1 ===", "status: session_ok", "exit code: 0"} {
		if !strings.Contains(log, want) {
			t.Errorf("session log lacks %q:\n%s", want, log)
		}
	}
	raw, err := filepath.Glob(filepath.Join(h.dir, ".ralph", "logs", "session-*", "iter-1.ndjson"))
	if err != nil || len(raw) != 1 {
		t.Errorf("raw streams %q, %v; want one iter-1.ndjson", raw, err)
	}
	var st struct {
		Receipts []struct {
			Mode      string  `json:"mode"`
			Iteration int     `json:"iteration"`
			CostUSD   float64 `json:"cost_usd"`
		} `json:"receipts"`
	}
	if err := json.Unmarshal([]byte(h.ok("status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Receipts) != 1 || st.Receipts[0].Mode != "prompt" || st.Receipts[0].Iteration != 1 || st.Receipts[0].CostUSD != 0.25 {
		t.Errorf("receipts %+v; want one prompt receipt of $0.25", st.Receipts)
	}
}

// TestPromptExitCodes runs `ralph prompt` for each way it can end.
func TestPromptExitCodes(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		step    agentStep
		code    int
		message string // the last line of stdout (exit 0) or stderr
		runs    int
	}{
		{name: "clean", step: agentStep{Text: "ok"}, code: 0, message: "prompt run finished", runs: 1},
		{name: "FAILURE is exit 7", step: agentStep{Text: "Cannot. <promise>FAILURE</promise>"}, code: 7,
			message: "ralph: the agent declared FAILURE: Cannot. <promise>FAILURE</promise>", runs: 1},
		{name: "a crash is exit 4, not retried", step: agentStep{Crash: true}, code: 4,
			message: "ralph: agent failed: crashed: the agent printed no result line (exit code 3): fake agent: crashing as scripted", runs: 1},
		{name: "is_error is exit 4", step: agentStep{Text: "API Error: 400 bad request", IsError: true}, code: 4,
			message: "ralph: agent failed: agent_error: API Error: 400 bad request", runs: 1},
		{name: "a timeout is exit 4", args: []string{"--timeout", "300ms"}, step: agentStep{Hang: true}, code: 4,
			message: "ralph: agent failed: timeout", runs: 1},
		{name: "usage limit with stop is exit 10", args: []string{"--on-usage-limit", "stop"},
			step: agentStep{UsageLimit: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Unix()}, code: 10,
			message: "ralph: usage limit reached; resets at 2030-01-01T00:00:00Z", runs: 1},
		{name: "--max-wait 0 does not wait", args: []string{"--max-wait", "0"},
			step: agentStep{UsageLimit: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Unix()}, code: 10,
			message: "ralph: usage limit reached; resets at 2030-01-01T00:00:00Z", runs: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := initHarness(t)
			file := h.write("p.md", tidyPrompt)
			agent, script := fakeAgentPath(t, tc.step)
			r := h.runAgentCmd(t.Context(), "prompt", agent, append([]string{file}, tc.args...)...)
			got := lastLine(r.stdout)
			if tc.code != 0 {
				got = lastLine(r.stderr)
			}
			if r.code != tc.code || !strings.HasPrefix(got, tc.message) {
				t.Errorf("exit %d, %q; want %d, %q\nstdout:\n%s\nstderr:\n%s", r.code, got, tc.code, tc.message, r.stdout, r.stderr)
			}
			if n := len(agentCalls(t, script)); n != tc.runs {
				t.Errorf("%d sessions, want %d", n, tc.runs)
			}
		})
	}
}

// TestPromptBadInput: a missing or empty FILE is nothing to do (exit 2);
// no project, bad flags and a missing agent are errors (exit 1). One line
// on stderr, no session, nothing changed.
func TestPromptBadInput(t *testing.T) {
	tests := []struct {
		name   string
		init   bool
		args   func(h *harness) []string
		code   int
		errOut string
	}{
		{name: "missing file", init: true, args: func(*harness) []string { return []string{"nope.md"} },
			code: 2, errOut: "prompt file nope.md not found"},
		{name: "empty file", init: true, args: func(h *harness) []string { return []string{h.write("empty.md", " \n")} },
			code: 2, errOut: "is empty"},
		{name: "no file", init: true, args: func(*harness) []string { return nil },
			code: 1, errOut: "want one argument (FILE), got 0 arguments"},
		{name: "a directory", init: true, args: func(h *harness) []string { return []string{h.dir} },
			code: 1, errOut: "prompt file"},
		{name: "no project", args: func(h *harness) []string { return []string{h.write("p.md", tidyPrompt)} },
			code: 1, errOut: "run 'ralph init'"},
		{name: "bad usage-limit policy", init: true, args: func(h *harness) []string {
			return []string{h.write("p.md", tidyPrompt), "--on-usage-limit", "later"}
		}, code: 1, errOut: `on-usage-limit "later"`},
		{name: "missing agent", init: true, args: func(h *harness) []string {
			return []string{h.write("p.md", tidyPrompt), "--claude", "/no/such/claude"}
		}, code: 1, errOut: "/no/such/claude"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.init {
				h.ok("init")
			}
			args := tc.args(h)
			before := h.files()
			agent, script := fakeAgentPath(t, agentStep{Text: "ok"})
			if tc.name != "missing agent" {
				args = append(args, "--claude", agent)
			}
			r := h.runAgentCmd(t.Context(), "prompt", "", args...)
			if r.code != tc.code || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tc.errOut) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and one line with %q", r.code, r.stdout, r.stderr, tc.code, tc.errOut)
			}
			if diff := cmp.Diff(before, h.files()); diff != "" {
				t.Errorf("files changed (-before +after):\n%s", diff)
			}
			if n := len(agentCalls(t, script)); n != 0 {
				t.Errorf("%d sessions ran", n)
			}
		})
	}
}

// TestPromptCommit: --commit commits what the session changed as "prompt:
// iteration 1 - <first line>"; nothing changed is exit 0 without a
// commit; outside a git repository it is exit 5 before the agent runs, and
// a failing commit is exit 5.
func TestPromptCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	tests := []struct {
		name    string
		git     bool
		hook    bool // a pre-commit hook that refuses
		args    []string
		step    agentStep
		code    int
		message string
		commits []string
		runs    int
	}{
		{name: "a change is committed", git: true, step: agentStep{Sh: "echo fixed > README.md", Text: "done"},
			code: 0, message: "prompt run finished; changes committed", commits: []string{"prompt: iteration 1 - Tidy the README", "init"}, runs: 1},
		{name: "--title names the commit", git: true, args: []string{"--title", "readme pass"}, step: agentStep{Sh: "echo fixed > README.md", Text: "done"},
			code: 0, commits: []string{"prompt: iteration 1 - readme pass", "init"}, runs: 1},
		{name: "nothing changed", git: true, step: agentStep{Sh: "true", Text: "nothing to fix"},
			code: 0, message: "prompt run finished; nothing changed, nothing committed", commits: []string{"init"}, runs: 1},
		{name: "changes in .ralph only are nothing", git: true, step: agentStep{Sh: "echo x > .ralph/scratch", Text: "done"},
			code: 0, message: "prompt run finished; nothing changed, nothing committed", commits: []string{"init"}, runs: 1},
		{name: "FAILURE is exit 7, nothing committed", git: true, step: agentStep{Sh: "echo half > README.md", Text: "Cannot finish. <promise>FAILURE</promise>"},
			code: 7, message: "ralph: the agent declared FAILURE: Cannot finish. <promise>FAILURE</promise>", commits: []string{"init"}, runs: 1},
		{name: "a refused commit is exit 5", git: true, hook: true, step: agentStep{Sh: "echo fixed > README.md", Text: "done"},
			code: 5, message: "ralph: git gate failed: git commit: exit status 1", commits: []string{"init"}, runs: 1},
		{name: "not a git repository", step: agentStep{Text: "done"},
			code: 5, message: "ralph: --commit needs a git repository", runs: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := initHarness(t)
			file := filepath.Join(t.TempDir(), "tidy.md") // outside the repository
			if err := os.WriteFile(file, []byte(tidyPrompt), 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.git {
				h.write("README.md", "teh readme\n")
				gitInit(t, h.dir)
			}
			if tc.hook {
				// The user's own hook (a global core.hooksPath): ralph's
				// git never runs the repository's hooks.
				hooks := t.TempDir()
				if err := os.WriteFile(filepath.Join(hooks, "pre-commit"), []byte("#!/bin/sh\necho not today >&2\nexit 1\n"), 0o755); err != nil {
					t.Fatal(err)
				}
				global := filepath.Join(t.TempDir(), "gitconfig")
				if err := os.WriteFile(global, []byte("[core]\n\thooksPath = "+hooks+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				t.Setenv("GIT_CONFIG_GLOBAL", global)
			}
			agent, script := fakeAgentPath(t, tc.step)
			r := h.runAgentCmd(t.Context(), "prompt", agent, append([]string{file, "--commit"}, tc.args...)...)
			got := lastLine(r.stdout)
			if tc.code != 0 {
				got = lastLine(r.stderr)
			}
			if r.code != tc.code || (tc.message != "" && !strings.HasPrefix(got, tc.message)) {
				t.Errorf("exit %d, %q; want %d, %q\nstdout:\n%s\nstderr:\n%s", r.code, got, tc.code, tc.message, r.stdout, r.stderr)
			}
			if tc.git {
				log := strings.Split(strings.TrimSpace(gitOut(t, h.dir, "log", "--format=%s")), "\n")
				if diff := cmp.Diff(tc.commits, log); diff != "" {
					t.Errorf("commits (-want +got):\n%s", diff)
				}
			}
			if n := len(agentCalls(t, script)); n != tc.runs {
				t.Errorf("%d sessions, want %d", n, tc.runs)
			}
		})
	}
}

// TestPromptInterrupt cancels the run while the agent works, as SIGINT
// does: exit 130 and the session summary written.
func TestPromptInterrupt(t *testing.T) {
	h := initHarness(t)
	file := h.write("p.md", tidyPrompt)
	agent, script := fakeAgentPath(t, agentStep{Hang: true})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		defer cancel()
		for deadline := time.Now().Add(time.Minute); ctx.Err() == nil && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(script + ".calls"); err == nil {
				return
			}
		}
	}()
	r := h.runAgentCmd(ctx, "prompt", agent, file)
	if r.code != 130 || !strings.Contains(r.stderr, "ralph: interrupted") {
		t.Fatalf("exit %d, stderr %q; want 130", r.code, r.stderr)
	}
	log := readSessionLog(t, h)
	for _, want := range []string{"mode: prompt", "outcome: cancelled", "exit code: 130"} {
		if !strings.Contains(log, want) {
			t.Errorf("session log lacks %q:\n%s", want, log)
		}
	}
}

// TestPromptTemplateOverride: .ralph/prompts/prompt.md wraps the file.
func TestPromptTemplateOverride(t *testing.T) {
	h := initHarness(t)
	file := h.write("p.md", tidyPrompt)
	h.write(".ralph/prompts/prompt.md", "House rules for {{.Root}} ({{.Mode}} {{.Iteration}}).\n\n{{.Prompt}}")
	agent, script := fakeAgentPath(t, agentStep{Text: "ok"})
	if r := h.runAgentCmd(t.Context(), "prompt", agent, file); r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	want := "House rules for " + h.dir + " (prompt 1).\n\n" + tidyPrompt
	if got := agentCalls(t, script)[0].Prompt; got != want {
		t.Errorf("prompt %q, want %q", got, want)
	}
}
