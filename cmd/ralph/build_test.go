package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// build runs `ralph --dir DIR build --claude AGENT args…` in-process with
// the real clock (the agent's own `ralph task` calls run in other processes
// on the real clock too, so leases must agree).
func (h *harness) build(ctx context.Context, agent string, args ...string) result {
	h.t.Helper()
	var out, errb bytes.Buffer
	cfg := h.config(&out, &errb)
	cfg.now = time.Now
	argv := append([]string{"ralph", "--dir", h.dir, "build"}, args...)
	if agent != "" {
		argv = append(argv, "--claude", agent)
	}
	code := runApp(ctx, newAppConfig(cfg), argv, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// statuses maps each task id to its status.
func (h *harness) statuses() map[string]loop.Status {
	h.t.Helper()
	out := map[string]loop.Status{}
	for _, t := range h.dump().Tasks {
		out[t.ID] = t.Status
	}
	return out
}

// chain adds n tasks, each blocked by the one before: t-1 ← t-2 ← …
func (h *harness) chain(n int) {
	h.t.Helper()
	prev := ""
	for i := 1; i <= n; i++ {
		args := []string{"Task " + string(rune('A'+i-1))}
		if prev != "" {
			args = append(args, "--blocked-by", prev)
		}
		prev = h.add(args...)
	}
}

func taskIDs(calls []agentCall) []string {
	var ids []string
	for _, c := range calls {
		ids = append(ids, c.Env["RALPH_TASK_ID"])
	}
	return ids
}

func models(calls []agentCall) []string {
	var m []string
	for _, c := range calls {
		m = append(m, modelArg(c.Args))
	}
	return m
}

const done = "Done. <task-done>{task}</task-done>"

// outcomeCheck checks a case of TestBuildOutcomes after its build.
type outcomeCheck func(t *testing.T, h *harness, r result, calls []agentCall)

// buildOutcome is a case of TestBuildOutcomes.
type buildOutcome struct {
	name  string
	tasks int // a chain of this many tasks
	setup func(t *testing.T, h *harness)
	steps []agentStep
	args  []string
	// agent replaces the fake agent's path when set; "-" passes the
	// fake agent in $RALPH_CLAUDE, "env:PATH" passes PATH there.
	agent string
	code  int
	// out and errOut must appear in stdout and stderr.
	out, errOut string
	want        map[string]loop.Status
	check       outcomeCheck
}

// TestBuildOutcomes runs `ralph build` against the scripted agent for each
// outcome (README, "Exit codes") and checks the exit code, the message, the
// plan afterwards and what the agent was asked.
//
// The in-process tests do not run in parallel: urfave/cli v2 writes to its
// package-level HelpFlag whenever an app parses flags, so two apps running
// at once race. Only TestBinaryBuildSignal, which runs ralph as a process,
// is parallel.
func TestBuildOutcomes(t *testing.T) {
	tests := []buildOutcome{
		{
			name: "happy chain", tasks: 3, steps: []agentStep{{Text: done, Cost: 0.01}},
			code: 0, out: "complete: all 3 tasks done",
			want:  map[string]loop.Status{"t-1": "done", "t-2": "done", "t-3": "done"},
			check: checkOutcomeHappyChain,
		},
		{
			name: "no sigil is retried then failed", tasks: 1, steps: []agentStep{{Text: "I worked on it."}},
			args: []string{"--max-retries", "1"},
			code: 8, errOut: "ralph: complete: 0 done, 1 failed",
			want:  map[string]loop.Status{"t-1": "failed"},
			check: checkOutcomeNoSigilIsRetriedThenFailed,
		},
		{
			name: "the totals before the end", tasks: 1, steps: []agentStep{{Text: done, Cost: 0.01}},
			code: 0, out: "run: 1 done, 0 failed, 0 remain · $0.0100 over 1 agent session · next: ralph status\nsession log: ",
			want: map[string]loop.Status{"t-1": "done"},
		},
		{
			name: "the totals name what to look at", tasks: 1, steps: []agentStep{{Text: "I worked on it.", Cost: 0.02}},
			args: []string{"--max-retries", "0"},
			code: 8, out: "run: 0 done, 1 failed, 0 remain · $0.0200 over 1 agent session · next: ralph task list --status failed",
			errOut: "ralph: complete: 0 done, 1 failed: t-1 (ralph task show ID says why)",
			want:   map[string]loop.Status{"t-1": "failed"},
		},
		{
			name: "wrong id", tasks: 1, steps: []agentStep{{Text: "<task-done>t-99</task-done>"}},
			args: []string{"--max-retries", "0"},
			code: 8, errOut: "1 failed",
			want:  map[string]loop.Status{"t-1": "failed"},
			check: checkOutcomeWrongId,
		},
		{
			name: "task failed with dependents is blocked", tasks: 2, steps: []agentStep{{Text: "Cannot. <task-failed>{task}</task-failed>"}},
			code: 6, errOut: "ralph: blocked: 1 task remains but none is ready",
			want: map[string]loop.Status{"t-1": "failed", "t-2": "pending"},
		},
		{
			name: "FAILURE", tasks: 2, steps: []agentStep{{Text: "The spec contradicts itself. <promise>FAILURE</promise>"}},
			code: 7, errOut: "the agent declared FAILURE",
			want: map[string]loop.Status{"t-1": "pending", "t-2": "pending"},
		},
		{
			name: "agent crashes beyond retries", tasks: 1, steps: []agentStep{{Crash: true}},
			args: []string{"--max-retries", "1"},
			code: 4, want: map[string]loop.Status{"t-1": "pending"},
			check: checkOutcomeAgentCrashesBeyondRetries,
		},
		{
			name: "hang past --timeout", tasks: 1, steps: []agentStep{{Hang: true}},
			args: []string{"--timeout", "1s", "--max-retries", "0"},
			code: 4, errOut: "timeout",
			want: map[string]loop.Status{"t-1": "pending"},
		},
		{
			name: "silent past --idle-timeout", tasks: 1, steps: []agentStep{{Hang: true}},
			args: []string{"--idle-timeout", "300ms", "--max-retries", "0"},
			code: 4, errOut: "idle",
			want: map[string]loop.Status{"t-1": "pending"},
		},
		{
			// The wait is not an iteration: --once still finishes the task.
			name: "usage limit wait", tasks: 1, steps: []agentStep{{UsageLimit: 1}, {Text: done}},
			args: []string{"--once"},
			code: 0, out: "usage limit reached; waiting until ",
			want:  map[string]loop.Status{"t-1": "done"},
			check: checkOutcomeUsageLimitWait,
		},
		{
			name: "usage limit beyond --max-wait", tasks: 1, steps: []agentStep{{UsageLimit: time.Now().Add(3 * time.Hour).Unix()}},
			args: []string{"--max-wait", "1h"},
			code: 10, errOut: "ralph: usage limit reached; resets at ",
			want: map[string]loop.Status{"t-1": "pending"},
		},
		{
			name: "usage limit with --max-wait 0", tasks: 1, steps: []agentStep{{UsageLimit: 1}},
			args: []string{"--max-wait", "0"},
			code: 10, errOut: "ralph: usage limit reached; resets at ",
			want: map[string]loop.Status{"t-1": "pending"},
		},
		{
			name: "once", tasks: 2, steps: []agentStep{{Text: done}},
			args: []string{"--once"},
			code: 0, out: "iteration limit reached (1); 1 task remains",
			want: map[string]loop.Status{"t-1": "done", "t-2": "pending"},
		},
		{
			name: "verify fails then passes", tasks: 1,
			steps: []agentStep{{Text: done}, {Text: "<verify-fail>no tests for it</verify-fail>"}, {Text: done}, {Text: "<verify-pass/>"}},
			args:  []string{"--verify"},
			code:  0, out: "-- verifier: fail",
			want:  map[string]loop.Status{"t-1": "done"},
			check: checkOutcomeVerifyFailsThenPasses,
		},
		{
			name: "next-model hint", tasks: 3,
			steps: []agentStep{{Text: done + " <next-model>opus</next-model>"}, {Text: done}},
			args:  []string{"--model", "haiku"},
			code:  0,
			check: checkOutcomeNextModelHint,
		},
		{
			name: "peek mode", tasks: 2,
			steps: []agentStep{{Sh: `id=$("$RALPH_BIN" task claim) && "$RALPH_BIN" task done "$id" --summary "did $id"`, Text: "Claimed and finished a task."}},
			args:  []string{"--claim", "agent"},
			code:  0, out: "complete: all 2 tasks done",
			want:  map[string]loop.Status{"t-1": "done", "t-2": "done"},
			check: checkOutcomePeekMode,
		},
		{
			name: "peek mode fails what the session left", tasks: 1,
			steps: []agentStep{{Sh: `"$RALPH_BIN" task claim`, Text: "Claimed it, then stopped."}},
			args:  []string{"--claim", "agent"},
			code:  8,
			want:  map[string]loop.Status{"t-1": "failed"},
			check: checkOutcomePeekModeFailsWhatTheSessionLeft,
		},
		{
			// The gate passes on the starting tree and fails after the
			// agent's change.
			name: "test gate", tasks: 1, steps: []agentStep{{Sh: "echo work > {task}.txt", Text: done}},
			args: []string{"--test-cmd", "test ! -e t-1.txt", "--max-retries", "0"},
			code: 3, errOut: "test gate failed",
			want: map[string]loop.Status{"t-1": "pending"},
		},
		{
			name: "test gate failing on the starting tree", tasks: 1, steps: []agentStep{{Text: done}},
			args: []string{"--test-cmd", "echo one; echo 'FAIL: the suite'; false"},
			code: 3, errOut: "the test gate already fails on the starting tree (echo one; echo 'FAIL: the suite'; false: exit status 1), before any agent ran",
			out:   "    one\n    FAIL: the suite\n",
			want:  map[string]loop.Status{"t-1": "pending"},
			check: checkOutcomeBaseline,
		},
		{
			// t-1 done, the final check fails (one line in n.txt): its
			// task t-2 is added and done, and the check passes.
			name: "final command adds its task", tasks: 1, steps: []agentStep{{Sh: "echo x >> n.txt", Text: done}},
			args: []string{"--final-cmd", `test "$(wc -l < n.txt)" -ge 2`},
			code: 0, out: "complete: all 2 tasks done",
			want:  map[string]loop.Status{"t-1": "done", "t-2": "done"},
			check: checkOutcomeFinalTask,
		},
		{
			name: "commit outside a git repository", tasks: 1, steps: []agentStep{{Text: done}},
			args: []string{"--commit"},
			code: 5, errOut: "git",
			want:  map[string]loop.Status{"t-1": "pending"},
			check: checkOutcomeCommitOutsideAGitRepository,
		},
		{
			name: "commit in a git repository", tasks: 2, steps: []agentStep{{Sh: "echo work > {task}.txt", Text: done}},
			setup: setupOutcomeCommitInAGitRepository,
			args:  []string{"--commit"},
			code:  0,
			want:  map[string]loop.Status{"t-1": "done", "t-2": "done"},
			check: checkOutcomeCommitInAGitRepository,
		},
		{
			name: "max cost", tasks: 3, steps: []agentStep{{Text: done, Cost: 0.6}},
			args: []string{"--max-cost", "1"},
			code: 9, errOut: "cost budget exhausted",
			want: map[string]loop.Status{"t-1": "done", "t-2": "done", "t-3": "pending"},
		},
		{
			name: "agent missing", tasks: 1,
			agent: "/nonexistent/claude",
			code:  1, errOut: `--claude "/nonexistent/claude" is not an executable`,
			want: map[string]loop.Status{"t-1": "pending"},
		},
		{
			// The message names where the path came from.
			name: "agent from RALPH_CLAUDE missing", tasks: 1,
			agent: "env:/nonexistent/claude",
			code:  1, errOut: `$RALPH_CLAUDE "/nonexistent/claude" is not an executable`,
			want: map[string]loop.Status{"t-1": "pending"},
		},
		{
			name: "task scope", tasks: 3, steps: []agentStep{{Text: done}}, args: []string{"--task", "t-1"},
			code: 0, out: "complete: all 1 task done",
			want: map[string]loop.Status{"t-1": "done", "t-2": "pending", "t-3": "pending"},
		},
		{
			name: "empty plan", code: 2, errOut: "run 'ralph plan' first",
		},
		{
			// Nothing to do is said before the agent is looked for.
			name: "empty plan without an agent", agent: "/nonexistent/claude",
			code: 2, errOut: "run 'ralph plan' first",
		},
		{
			name: "finished plan without an agent", tasks: 1, agent: "/nonexistent/claude",
			setup: setupOutcomeFinishedPlanWithoutAnAgent,
			code:  0, out: "complete",
			want: map[string]loop.Status{"t-1": "done"},
		},
		{
			name: "feature scope", tasks: 1, steps: []agentStep{{Text: done}},
			setup: setupOutcomeFeatureScope,
			args:  []string{"--feature", "web"},
			code:  0, out: "complete: all 2 tasks done",
			want: map[string]loop.Status{"t-1": "pending", "t-2": "done", "t-3": "done"},
		},
		{
			name: "agent from RALPH_CLAUDE", tasks: 1, steps: []agentStep{{Text: done}},
			agent: "-", // no --claude: build must take $RALPH_CLAUDE
			code:  0,
			want:  map[string]loop.Status{"t-1": "done"},
		},
	}
	base := initHarness(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, base) })
	}
}

// run builds the case in a clone of base and checks the exit code, the
// output, the statuses, that no task is left in_progress, and tc.check.
func (tc buildOutcome) run(t *testing.T, base *harness) {
	h := base.clone(t)
	h.chain(tc.tasks)
	if tc.setup != nil {
		tc.setup(t, h)
	}
	steps := tc.steps
	if steps == nil {
		steps = []agentStep{{Text: done}}
	}
	agent, script := fakeAgentPath(t, steps...)
	switch {
	case tc.agent == "-":
		h.env["RALPH_CLAUDE"], agent = agent, ""
	case strings.HasPrefix(tc.agent, "env:"):
		h.env["RALPH_CLAUDE"], agent = strings.TrimPrefix(tc.agent, "env:"), ""
	case tc.agent != "":
		agent = tc.agent
	}
	r := h.build(t.Context(), agent, tc.args...)
	if r.code != tc.code || !strings.Contains(r.stdout, tc.out) || !strings.Contains(r.stderr, tc.errOut) {
		t.Fatalf("exit %d, want %d (stdout should have %q, stderr %q)\nstdout:\n%s\nstderr:\n%s", r.code, tc.code, tc.out, tc.errOut, r.stdout, r.stderr)
	}
	if tc.want != nil {
		if diff := cmp.Diff(tc.want, h.statuses()); diff != "" {
			t.Errorf("statuses (-want +got):\n%s", diff)
		}
	}
	for _, task := range h.dump().Tasks {
		if task.Status == loop.StatusInProgress {
			t.Errorf("task %s left in_progress", task.ID)
		}
	}
	calls := agentCalls(t, script)
	if tc.steps == nil && len(calls) > 0 {
		t.Errorf("%d agent sessions ran; want none", len(calls))
	}
	if tc.check != nil {
		tc.check(t, h, r, calls)
	}
}

// TestBuildCommitRalphIgnored: `ralph build --commit` in a repository
// whose .gitignore lists .ralph/, as users' usually does (.ralph/
// is never committed either way): every task is done with one commit per
// iteration, exit 0, .ralph/ is not committed, and nothing but ignored
// paths is left out of the commits.
func TestBuildCommitRalphIgnored(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	h := initHarness(t)
	h.chain(3)
	h.write(".gitignore", ".ralph/\n")
	gitInit(t, h.dir)
	agent, script := fakeAgentPath(t, agentStep{Sh: "echo work > {task}.txt", Text: done})
	r := h.build(t.Context(), agent, "--commit")
	if r.code != 0 || !strings.Contains(r.stdout, "complete: all 3 tasks done") {
		t.Fatalf("exit %d, stderr %q\nstdout:\n%s", r.code, r.stderr, r.stdout)
	}
	if diff := cmp.Diff(map[string]loop.Status{"t-1": "done", "t-2": "done", "t-3": "done"}, h.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if n := len(agentCalls(t, script)); n != 3 {
		t.Errorf("%d sessions, want 3", n)
	}
	log := strings.Split(strings.TrimSpace(gitOut(t, h.dir, "log", "--format=%s")), "\n")
	want := []string{"build: iteration 3 - Task C", "build: iteration 2 - Task B", "build: iteration 1 - Task A", "init"}
	if diff := cmp.Diff(want, log); diff != "" {
		t.Errorf("commits (-want +got):\n%s", diff)
	}
	for i, rev := range []string{"HEAD~2", "HEAD~1", "HEAD"} {
		got := gitOut(t, h.dir, "diff-tree", "--no-commit-id", "--name-only", "-r", rev)
		if want := fmt.Sprintf("t-%d.txt\n", i+1); got != want {
			t.Errorf("iteration %d committed %q, want %q", i+1, got, want)
		}
	}
	if got := gitOut(t, h.dir, "status", "--porcelain"); got != "" {
		t.Errorf("git status --porcelain after the run:\n%s", got)
	}
	if got := gitOut(t, h.dir, "status", "--porcelain", "--ignored"); got != "!! .ralph/\n" {
		t.Errorf("git status --porcelain --ignored after the run:\n%s", got)
	}
}

// TestBuildNothingToDo: build and its dry run exit 2 with a hint when there
// is no project, no database or no progress file, and create nothing.
func TestBuildNothingToDo(t *testing.T) {
	agent, script := fakeAgentPath(t, agentStep{Text: done})
	tests := []struct {
		name   string
		setup  func(h *harness)
		args   []string
		errOut string
	}{
		{name: "no project", errOut: "(run 'ralph init', then 'ralph plan')"},
		{name: "no project, dry run", args: []string{"--dry-run"}, errOut: "run 'ralph init'"},
		{name: "no database", setup: func(h *harness) { h.write(".ralph/prompts/.keep", "") }, errOut: "no task database"},
		{name: "progress file missing", args: []string{"--progress", "nope.md"}, errOut: "progress file nope.md not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.setup != nil {
				tc.setup(h)
			}
			before := h.files()
			r := h.build(t.Context(), agent, tc.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.errOut) || r.stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 saying %q", r.code, r.stdout, r.stderr, tc.errOut)
			}
			if diff := cmp.Diff(before, h.files()); diff != "" {
				t.Errorf("files changed (-before +after):\n%s", diff)
			}
		})
	}
	if calls := agentCalls(t, script); len(calls) != 0 {
		t.Errorf("%d agent sessions ran", len(calls))
	}
}

// TestBuildDryRun: --dry-run prints the next task, the model and the prompt
// source, starts no agent and changes neither the database nor any file.
func TestBuildDryRun(t *testing.T) {
	h := initHarness(t)
	h.chain(2)
	h.write(".ralph/prompts/build.md", "Work on {{.Task.ID}}: {{.Task.Title}}\n")
	agent, script := fakeAgentPath(t, agentStep{Text: done})
	db, files := h.dump(), h.files()
	r := h.build(t.Context(), agent, "--dry-run", "--model", "opus")
	want := "next task: t-1 Task A\nmodel: opus\nprompt: build (" + filepath.Join(h.dir, ".ralph", "prompts", "build.md") + ")\n" +
		"system prompt: system-build (embedded)\ntest command: none\n"
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	// Then the settings and their sources (TestConfigDefaults).
	head, _, _ := strings.Cut(r.stdout, "settings:\n")
	if diff := cmp.Diff(want, head); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if !strings.Contains(r.stdout, "\nsettings:\n  agent-cli = \"claude\" (default)\n  model = \"opus\" (--model)\n") {
		t.Errorf("the settings after them:\n%s", r.stdout)
	}
	if diff := cmp.Diff(db, h.dump()); diff != "" {
		t.Errorf("database changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(files, h.files()); diff != "" {
		t.Errorf("files changed (-before +after):\n%s", diff)
	}
	if calls := agentCalls(t, script); len(calls) != 0 {
		t.Errorf("%d agent sessions ran", len(calls))
	}

	r = h.build(t.Context(), agent, "--dry-run", "--final-cmd", "make check")
	if want := "test command: none\nfinal command: \"make check\" (--final-cmd; run once the plan is complete)\nsettings:\n"; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("dry run with --final-cmd: exit %d, stdout %q; want it to end %q before the settings", r.code, r.stdout, want)
	}

	r = h.build(t.Context(), agent, "--dry-run", "--claim", "agent")
	if want := "first claimable task (the agent picks): t-1 Task A\nmodel: sonnet\nprompt: peek (embedded)\nsystem prompt: system-peek (embedded)\ntest command: none\nsettings:\n"; r.code != 0 || !strings.HasPrefix(r.stdout, want) {
		t.Errorf("peek-mode dry run: exit %d, stdout %q; want %q", r.code, r.stdout, want)
	}

	empty := initHarness(t)
	if r := empty.build(t.Context(), agent, "--dry-run"); r.code != 2 || !strings.Contains(r.stderr, "the plan is empty") {
		t.Errorf("dry run of an empty plan: exit %d, stderr %q; want 2", r.code, r.stderr)
	}
}

// TestBuildInterrupt cancels the run while the agent works, as SIGINT does
// through main's context: exit 130, the agent stopped, its claim released
// with a log entry, and the session summary written.
func TestBuildInterrupt(t *testing.T) {
	h := initHarness(t)
	h.chain(2)
	agent, script := fakeAgentPath(t, agentStep{Hang: true})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		// Cancel once the agent has started (it records the call first:
		// a whole line).
		defer cancel()
		for deadline := time.Now().Add(time.Minute); ctx.Err() == nil && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if b, err := os.ReadFile(script + ".calls"); err == nil && bytes.HasSuffix(b, []byte("\n")) {
				return
			}
		}
	}()
	r := h.build(ctx, agent)
	if r.code != 130 || !strings.Contains(r.stderr, "ralph: interrupted") {
		t.Fatalf("exit %d, stderr %q; want 130", r.code, r.stderr)
	}
	if n := len(agentCalls(t, script)); n != 1 {
		t.Errorf("%d agent sessions, want the one interrupted", n)
	}
	if diff := cmp.Diff(map[string]loop.Status{"t-1": "pending", "t-2": "pending"}, h.statuses()); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	if logs := h.dump().Logs["t-1"]; len(logs) == 0 || logs[len(logs)-1].Kind != loop.LogRelease {
		t.Errorf("t-1's log %+v; want a release last", logs)
	}
	log := readSessionLog(t, h)
	for _, want := range []string{"status: cancelled", "outcome: cancelled", "exit code: 130"} {
		if !strings.Contains(log, want) {
			t.Errorf("session log lacks %q:\n%s", want, log)
		}
	}
}

// readSessionLog returns the only session log of the project.
func readSessionLog(t *testing.T, h *harness) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(h.dir, ".ralph", "logs", "session-*.log"))
	if err != nil || len(logs) != 1 {
		t.Fatalf("session logs %q, %v; want one", logs, err)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBuildSessionLog checks the session log: a header and a
// footer per iteration and the session summary.
func TestBuildSessionLog(t *testing.T) {
	h := initHarness(t)
	h.chain(2)
	agent, _ := fakeAgentPath(t, agentStep{Text: "Forgot the sigil."}, agentStep{Text: done, Cost: 0.25})
	r := h.build(t.Context(), agent, "--model", "haiku")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	log := readSessionLog(t, h)
	if !strings.Contains(r.stdout, "session log: .ralph/logs/session-") {
		t.Errorf("stdout does not name the session log:\n%s", r.stdout)
	}
	// Times and durations vary: check the fields in order.
	want := []string{
		"# ralph session session-", "started: ", "mode: build",
		"=== iteration 1 ===", "mode: build", "task: t-1 Task A", "start: ",
		"--- iteration 1 end ---", "end: ", "duration: ", "model: haiku", "cost: $0.0000", "turns: 2", "status: no_sigil",
		"=== iteration 2 ===", "task: t-1 Task A",
		"--- iteration 2 end ---", "cost: $0.2500", "status: done",
		"=== iteration 3 ===", "task: t-2 Task B", "status: done",
		"=== session summary ===", "iterations: 3", "successes: 2", "failures: 1", "duration: ", "cost: $0.5000",
		"outcome: complete", "exit reason: complete: all 2 tasks done", "exit code: 0",
	}
	rest := log
	for _, w := range want {
		i := strings.Index(rest, w)
		if i < 0 {
			t.Fatalf("session log lacks %q after the fields before it:\n%s", w, log)
		}
		rest = rest[i+len(w):]
	}
}

// TestBuildUsageLimitStop: a rejected usage limit with --on-usage-limit stop
// ends the run with exit 10 and the reset time; the claim is released and no
// retry is counted.
func TestBuildUsageLimitStop(t *testing.T) {
	h := initHarness(t)
	h.chain(1)
	resets := time.Now().Add(3 * time.Hour).Truncate(time.Second)
	agent, _ := fakeAgentPath(t, agentStep{UsageLimit: resets.Unix()})
	r := h.build(t.Context(), agent, "--on-usage-limit", "stop")
	const prefix = "ralph: usage limit reached; resets at "
	if r.code != 10 || !strings.HasPrefix(r.stderr, prefix) {
		t.Fatalf("exit %d, stderr %q; want 10 and %q", r.code, r.stderr, prefix)
	}
	got, err := time.Parse(time.RFC3339, strings.TrimSpace(strings.TrimPrefix(r.stderr, prefix)))
	if err != nil || !got.Equal(resets) {
		t.Errorf("reset time %v (%v), want %v", got, err, resets)
	}
	task := h.dump().Tasks[0]
	if task.Status != loop.StatusPending || task.RetryCount != 0 {
		t.Errorf("task %+v; want pending without a retry", task)
	}
}

// TestBuildAPIKeyNotice: the notice about ANTHROPIC_API_KEY is printed once
// per run, on stderr, whether the key is kept or removed.
func TestBuildAPIKeyNotice(t *testing.T) {
	base := initHarness(t)
	base.chain(2)
	base.env["ANTHROPIC_API_KEY"] = "sk-test"
	agent, _ := fakeAgentPath(t, agentStep{Text: done})
	for _, args := range [][]string{nil, {"--use-api-key"}} {
		h := base.clone(t)
		r := h.build(t.Context(), agent, args...)
		if r.code != 0 {
			t.Fatalf("%q: exit %d, stderr %q", args, r.code, r.stderr)
		}
		if n := strings.Count(r.stderr, "ANTHROPIC_API_KEY"); n != 1 || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%q: stderr %q; want one notice line", args, r.stderr)
		}
	}
}

const progressDoc = `# Progress: Shop

## Status
In Progress

## Tasks
### Phase 1: Backend
- [ ] Add the cart
- [ ] Add checkout

## Recent Attempts

## Iteration Log
| Iteration | Started | Duration | Tasks Completed | Notes |
|-----------|---------|----------|-----------------|-------|
`

// TestBuildProgressFile runs build over a markdown progress file, without
// a ralph project: the first box is finished by sigil (after one session
// that forgot it), the second by the agent answering with the whole updated
// document. Every box ends ticked, each iteration has its Iteration Log row,
// and the forgotten sigil is in Recent Attempts.
func TestBuildProgressFile(t *testing.T) {
	h := newHarness(t)
	path := h.write("progress.md", progressDoc)
	agent, script := fakeAgentPath(t,
		agentStep{Text: "Worked on the cart."},
		agentStep{Text: done},
		// The agent reads the file and answers with it, its box ticked.
		agentStep{Sh: `sed 's/- \[ \] Add checkout/- [x] Add checkout/' progress.md`, Text: "{sh}"},
	)
	r := h.build(t.Context(), agent, "--progress", path)
	if r.code != 0 || !strings.Contains(r.stdout, "complete: all 2 tasks done") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if diff := cmp.Diff([]string{"add-the-cart", "add-the-cart", "add-checkout"}, taskIDs(agentCalls(t, script))); diff != "" {
		t.Errorf("tasks run (-want +got):\n%s", diff)
	}
	got := h.read("progress.md")
	for _, want := range []string{
		"- [x] Add the cart\n- [x] Add checkout\n",
		"### Iteration 1\n- Tried: Add the cart (add-the-cart)\n- Result: no_sigil: the agent ended without a task sigil\n",
		"\n| 1 |", "\n| 2 |", "\n| 3 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("progress file lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "### Iteration"); n != 1 {
		t.Errorf("%d Recent Attempts blocks, want 1:\n%s", n, got)
	}
}

// TestBuildProgressFileRefusesLostTasks: an agent's updated document that
// drops a box is not written; the run goes on from the file as it was.
func TestBuildProgressFileRefusesLostTasks(t *testing.T) {
	h := newHarness(t)
	path := h.write("progress.md", progressDoc)
	truncated := strings.Replace(progressDoc, "- [ ] Add checkout\n", "", 1)
	agent, _ := fakeAgentPath(t, agentStep{Text: truncated})
	r := h.build(t.Context(), agent, "--progress", path, "--once")
	if r.code != 0 || !strings.Contains(r.stdout, "note: the agent's updated progress file was not written") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if got := h.read("progress.md"); !strings.Contains(got, "- [ ] Add the cart\n- [ ] Add checkout\n") {
		t.Errorf("boxes changed:\n%s", got)
	}
}

// TestBinaryBuildSignal sends SIGINT or SIGTERM to a real ralph process
// while its agent works: main's signal-aware context must stop the agent,
// release the claim and exit 130.
func TestBinaryBuildSignal(t *testing.T) {
	t.Parallel()
	bin := buildRalph(t)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ralph := func(args ...string) *exec.Cmd {
				cmd := exec.CommandContext(t.Context(), bin, append([]string{"--dir", dir}, args...)...)
				cmd.Env = withoutEnv(os.Environ(), "RALPH_CLAUDE")
				return cmd
			}
			for _, args := range [][]string{{"init"}, {"task", "add", "Slow task"}} {
				if out, err := ralph(args...).CombinedOutput(); err != nil {
					t.Fatalf("ralph %q: %v\n%s", args, err, out)
				}
			}
			agent, script := fakeAgentPath(t, agentStep{Hang: true})
			cmd := ralph("build", "--claude", agent)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Signal once the agent has started (it records the call first).
			waitFor(t, "the agent to start", func() bool { return len(agentCalls(t, script)) > 0 })
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.Contains(errb.String(), "ralph: interrupted") {
				t.Fatalf("exit %v, stderr %q; want 130", err, errb.String())
			}
			list, err := ralph("task", "list", "--json").Output()
			if err != nil {
				t.Fatal(err)
			}
			var tasks []taskJSON
			if err := json.Unmarshal(list, &tasks); err != nil {
				t.Fatal(err)
			}
			if len(tasks) != 1 || tasks[0].Status != "pending" || tasks[0].ClaimedBy != "" {
				t.Errorf("tasks after the signal: %+v", tasks)
			}
		})
	}
}

// waitFor polls cond until it holds, for at most a minute. It is for
// waiting on another process, which offers nothing better to wait on.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestBuildBadInput: a bad command line or a scope naming nothing is a
// one-line error, exit 1, and changes nothing: no claim, no log, no file.
func TestBuildBadInput(t *testing.T) {
	base := initHarness(t)
	base.chain(2)
	agent, script := fakeAgentPath(t, agentStep{Text: done})
	tests := []struct {
		name   string
		args   []string
		errOut string
	}{
		{"unknown task", []string{"--task", "t-9"}, `no such task: "t-9"`},
		{"unknown feature", []string{"--feature", "nope"}, `no such feature: "nope"`},
		{"feature and task", []string{"--feature", "x", "--task", "t-1"}, "--feature and --task cannot be used together"},
		{"progress and feature", []string{"--progress", "p.md", "--feature", "x"}, "a progress file has no features"},
		{"progress and peek mode", []string{"--progress", "p.md", "--claim", "agent"}, "--claim agent needs the task database"},
		{"negative iterations", []string{"--max-iterations", "-1"}, "max iterations -1 is negative (see 'ralph build --help')"},
		{"bad claim mode", []string{"--claim", "both"}, `claim mode "both"`},
		{"bad usage-limit policy", []string{"--on-usage-limit", "retry"}, `on-usage-limit "retry"`},
		{"bad strategy", []string{"--strategy", "cheapest"}, "cheapest"},
		{"model with a strategy", []string{"--strategy", "escalate", "--model", "opus"}, "see 'ralph build --help'"},
		{"verify in peek mode", []string{"--claim", "agent", "--verify"}, "verify"},
		{"not a duration", []string{"--timeout", "soon"}, "soon"},
		{"positional argument", []string{"t-1"}, "want no arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := base.clone(t)
			db, files := h.dump(), h.files()
			r := h.build(t.Context(), agent, tc.args...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.errOut) || strings.Count(r.stderr, "\n") != 1 || r.stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and one line saying %q", r.code, r.stdout, r.stderr, tc.errOut)
			}
			if diff := cmp.Diff(db, h.dump()); diff != "" {
				t.Errorf("database changed (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(files, h.files()); diff != "" {
				t.Errorf("files changed (-before +after):\n%s", diff)
			}
		})
	}
	if calls := agentCalls(t, script); len(calls) != 0 {
		t.Errorf("%d agent sessions ran", len(calls))
	}
}

// TestBuildProgressFileRalphDone: RALPH_DONE in the Status section ends the
// run as complete (exit 0), whether the agent writes it during the run or it
// is there from the start, with boxes left unticked.
func TestBuildProgressFileRalphDone(t *testing.T) {
	tests := []struct {
		name     string
		doc      string
		steps    []agentStep
		sessions int
	}{
		{
			name: "written by the agent", doc: progressDoc, sessions: 1,
			steps: []agentStep{{Sh: `sed -i 's/^In Progress$/RALPH_DONE/' progress.md`, Text: done}},
		},
		{
			name: "there from the start", doc: strings.Replace(progressDoc, "In Progress", "RALPH_DONE", 1), sessions: 0,
			steps: []agentStep{{Text: done}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			path := h.write("progress.md", tc.doc)
			agent, script := fakeAgentPath(t, tc.steps...)
			r := h.build(t.Context(), agent, "--progress", path)
			if r.code != 0 || !strings.Contains(r.stdout, "RALPH_DONE") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if n := len(agentCalls(t, script)); n != tc.sessions {
				t.Errorf("%d sessions, want %d", n, tc.sessions)
			}
			if got := h.read("progress.md"); !strings.Contains(got, "- [ ] Add checkout") {
				t.Errorf("progress file:\n%s", got)
			}
		})
	}
}

// BenchmarkBuildOnce measures one `ralph build --once` at 10,000 tasks, in
// process, against a no-op agent (a shell script that answers the task-done
// sigil at once): flag parsing, opening the database, the loop's iteration,
// the agent process, the session and raw logs, the receipt. The agent's
// process start is not subtracted: ns/op is what a user waits for beyond
// the agent's own work.
func BenchmarkBuildOnce(b *testing.B) {
	dir := b.TempDir()
	ctx := b.Context()
	if code := run(ctx, []string{"ralph", "--dir", dir, "init"}, io.Discard, io.Discard); code != 0 {
		b.Fatalf("init: exit %d", code)
	}
	st, err := dag.Open(ctx, filepath.Join(dir, ".ralph", "progress.db"), dag.Options{})
	if err != nil {
		b.Fatal(err)
	}
	tasks := make([]dag.ImportTask, 10_000)
	for i := range tasks {
		tasks[i] = dag.ImportTask{ID: fmt.Sprintf("t-%d", i+1), Title: fmt.Sprintf("Task %d", i+1), Priority: 2}
		if i > 0 && i%10 != 0 {
			tasks[i].BlockedBy = []string{tasks[i-1].ID}
		}
	}
	if _, err := st.Import(ctx, tasks); err != nil {
		b.Fatal(err)
	}
	st.Close()
	agent := filepath.Join(b.TempDir(), "agent")
	script := "#!/bin/sh\ncat >/dev/null\nprintf '{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"<task-done>%s</task-done>\",\"num_turns\":1,\"total_cost_usd\":0}\\n' \"$RALPH_TASK_ID\"\n"
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		b.Fatal(err)
	}
	args := []string{"ralph", "--dir", dir, "build", "--once", "--claude", agent}
	var errb bytes.Buffer
	for b.Loop() {
		if code := run(ctx, args, io.Discard, &errb); code != 0 {
			b.Fatalf("build: exit %d: %s", code, errb.String())
		}
	}
}

// TestBuildProgressFileAgentTicks: an agent that finishes its box by
// ticking it in the file (no sigil) has done its task: the gates run as for
// the sigil (here the test gate), and the Iteration Log says done — not
// "already_closed", as when the tick was taken for someone else's.
func TestBuildProgressFileAgentTicks(t *testing.T) {
	h := newHarness(t)
	path := h.write("progress.md", progressDoc)
	agent, _ := fakeAgentPath(t,
		agentStep{Sh: `sed -i 's/- \[ \] Add the cart/- [x] Add the cart/' progress.md`, Text: "Added the cart and ticked its box."},
		agentStep{Sh: `sed -i 's/- \[ \] Add checkout/- [x] Add checkout/' progress.md`, Text: "Added checkout and ticked its box."},
	)
	r := h.build(t.Context(), agent, "--progress", path, "--test-cmd", "echo ran >> gate.txt")
	if r.code != 0 || !strings.Contains(r.stdout, "complete: all 2 tasks done") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if got := h.read("gate.txt"); got != "ran\nran\nran\n" {
		t.Errorf("the test gate ran %q, want once before the first session (the baseline) and once per ticked box", got)
	}
	got := h.read("progress.md")
	for _, want := range []string{"Add the cart (add-the-cart): done |", "Add checkout (add-checkout): done |"} {
		if !strings.Contains(got, want) {
			t.Errorf("Iteration Log lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "already_closed") {
		t.Errorf("Iteration Log says already_closed:\n%s", got)
	}
}

// checkOutcomeHappyChain is the check of TestBuildOutcomes's case "happy chain".
func checkOutcomeHappyChain(t *testing.T, h *harness, r result, calls []agentCall) {
	if diff := cmp.Diff([]string{"t-1", "t-2", "t-3"}, taskIDs(calls)); diff != "" {
		t.Errorf("tasks run (-want +got):\n%s", diff)
	}
	self, _ := os.Executable()
	agentID := calls[0].Env["RALPH_AGENT_ID"]
	if !regexp.MustCompile(`^agent-[0-9a-f]{8}$`).MatchString(agentID) {
		t.Errorf("RALPH_AGENT_ID = %q", agentID)
	}
	for i, c := range calls {
		want := map[string]string{"RALPH_AGENT_ID": agentID, "RALPH_BIN": self, "RALPH_DIR": h.dir,
			"RALPH_ITERATION": string(rune('1' + i)), "RALPH_TASK_ID": taskIDs(calls)[i],
			"RALPH_HOLDER": loop.ThisProcess().String()}
		if h.db != "" {
			// The agent's own ralph calls reach the plan on the server.
			want["RALPH_DB"], want["RALPH_PLAN"] = h.db, h.plan
		}
		// Each session's processes carry a marker of their own
		// (agentproc's RALPH_RUN), by which all of them are reaped.
		if run := c.Env["RALPH_RUN"]; run != "" && (i == 0 || run != calls[i-1].Env["RALPH_RUN"]) {
			want["RALPH_RUN"] = run
		}
		if diff := cmp.Diff(want, c.Env); diff != "" {
			t.Errorf("session %d environment (-want +got):\n%s", i+1, diff)
		}
		if !slices.Contains(c.Args, "--dangerously-skip-permissions") || modelArg(c.Args) != "sonnet" || !slices.Contains(c.Args, "--append-system-prompt-file") {
			t.Errorf("session %d args %q", i+1, c.Args)
		}
		// ralph's protocol comes as the system prompt; the task in the user prompt.
		for _, want := range []string{"<task-done>ID</task-done>", `"$RALPH_BIN" task`, "One task per session"} {
			if !strings.Contains(c.System, want) {
				t.Errorf("session %d system prompt lacks %q:\n%s", i+1, want, c.System)
			}
		}
		if want := taskIDs(calls)[i] + ": Task "; !strings.Contains(c.Prompt, want) {
			t.Errorf("session %d user prompt lacks %q:\n%s", i+1, want, c.Prompt)
		}
	}
	if !strings.Contains(r.stdout, "== iteration 2 · t-2 Task B · model sonnet") {
		t.Errorf("no iteration header in the view:\n%s", r.stdout)
	}
	// The raw stream of every iteration is kept.
	logs, _ := filepath.Glob(filepath.Join(h.dir, ".ralph", "logs", "session-*", "iter-*.ndjson"))
	if len(logs) != 3 {
		t.Errorf("raw logs %q, want 3", logs)
	}
}

// checkOutcomeNoSigilIsRetriedThenFailed is the check of TestBuildOutcomes's case "no sigil is retried then failed".
func checkOutcomeNoSigilIsRetriedThenFailed(t *testing.T, h *harness, r result, calls []agentCall) {
	if len(calls) != 2 {
		t.Errorf("%d sessions, want 2 (1 + --max-retries)", len(calls))
	}
	if !strings.Contains(calls[1].Prompt, "without a task sigil") {
		t.Errorf("the retry's prompt does not say why:\n%s", calls[1].Prompt)
	}
}

// checkOutcomeWrongId is the check of TestBuildOutcomes's case "wrong id".
func checkOutcomeWrongId(t *testing.T, h *harness, r result, calls []agentCall) {
	logs := h.dump().Logs["t-1"]
	if last := logs[len(logs)-1]; !strings.Contains(last.Message, "wrong task id: expected t-1, got t-99") {
		t.Errorf("last log %+v", last)
	}
}

// checkOutcomeAgentCrashesBeyondRetries is the check of TestBuildOutcomes's case "agent crashes beyond retries".
func checkOutcomeAgentCrashesBeyondRetries(t *testing.T, h *harness, r result, calls []agentCall) {
	if len(calls) != 2 {
		t.Errorf("%d sessions, want 2", len(calls))
	}
	if got := h.dump().Tasks[0].RetryCount; got != 0 {
		t.Errorf("agent trouble counted %d retries on the task", got)
	}
	// The footer has the session's own account, not only its class.
	if want := "crashed (exit code 3, no result line): fake agent: crashing as scripted"; !strings.Contains(r.stdout, want) {
		t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
	}
}

// checkOutcomeUsageLimitWait is the check of TestBuildOutcomes's case "usage limit wait".
func checkOutcomeUsageLimitWait(t *testing.T, h *harness, r result, calls []agentCall) {
	if len(calls) != 2 || h.dump().Tasks[0].RetryCount != 0 {
		t.Errorf("%d sessions, task %+v; want 2 sessions and no retry", len(calls), h.dump().Tasks[0])
	}
	if !strings.Contains(r.stdout, "complete: all 1 task done") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
}

// checkOutcomeVerifyFailsThenPasses is the check of TestBuildOutcomes's case "verify fails then passes".
func checkOutcomeVerifyFailsThenPasses(t *testing.T, h *harness, r result, calls []agentCall) {
	if len(calls) != 4 {
		t.Fatalf("%d sessions, want 4", len(calls))
	}
	for _, i := range []int{1, 3} {
		if !slices.Contains(calls[i].Args, "--allowedTools=Bash,Read,Glob,Grep") {
			t.Errorf("verifier %d args %q", i, calls[i].Args)
		}
	}
	if !strings.Contains(calls[2].Prompt, "no tests for it") {
		t.Errorf("the retry's prompt lacks the verifier's reason:\n%s", calls[2].Prompt)
	}
	if got := h.dump().Tasks[0]; got.RetryCount != 1 || got.VerificationStatus != "pass" {
		t.Errorf("task %+v", got)
	}
}

// checkOutcomeNextModelHint is the check of TestBuildOutcomes's case "next-model hint".
func checkOutcomeNextModelHint(t *testing.T, h *harness, r result, calls []agentCall) {
	if diff := cmp.Diff([]string{"haiku", "opus", "haiku"}, models(calls)); diff != "" {
		t.Errorf("--model per session (-want +got):\n%s", diff)
	}
}

// checkOutcomePeekMode is the check of TestBuildOutcomes's case "peek mode".
func checkOutcomePeekMode(t *testing.T, h *harness, r result, calls []agentCall) {
	if len(calls) != 2 {
		t.Fatalf("%d sessions, want 2", len(calls))
	}
	if !strings.HasPrefix(calls[0].Prompt, "/ralph-build") || !strings.Contains(calls[0].Prompt, "t-1") {
		t.Errorf("peek prompt:\n%s", calls[0].Prompt)
	}
	if id := calls[0].Env["RALPH_TASK_ID"]; id != "" {
		t.Errorf("RALPH_TASK_ID = %q in peek mode", id)
	}
	if logs := h.dump().Logs["t-2"]; logs[len(logs)-1].Message != "did t-2" {
		t.Errorf("t-2 log %+v", logs)
	}
}

// checkOutcomePeekModeFailsWhatTheSessionLeft is the check of TestBuildOutcomes's case "peek mode fails what the session left".
func checkOutcomePeekModeFailsWhatTheSessionLeft(t *testing.T, h *harness, r result, calls []agentCall) {
	logs := h.dump().Logs["t-1"]
	if last := logs[len(logs)-1]; last.Message != loop.ReasonSessionExited {
		t.Errorf("last log %+v", last)
	}
}

// checkOutcomeCommitOutsideAGitRepository is the check of TestBuildOutcomes's case "commit outside a git repository".
func checkOutcomeCommitOutsideAGitRepository(t *testing.T, h *harness, r result, calls []agentCall) {
	if len(calls) != 0 {
		t.Errorf("%d sessions ran; want none", len(calls))
	}
}

// checkOutcomeBaseline is the check of TestBuildOutcomes's case "test
// gate failing on the starting tree": no session ran, and the message says
// what to do in the CLI's words.
func checkOutcomeBaseline(t *testing.T, h *harness, r result, calls []agentCall) {
	if len(calls) != 0 {
		t.Errorf("%d sessions ran; want none", len(calls))
	}
	for _, s := range []string{"ralph task add --check", "--final-cmd"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
}

// checkOutcomeFinalTask is the check of TestBuildOutcomes's case "final
// command adds its task".
func checkOutcomeFinalTask(t *testing.T, h *harness, r result, calls []agentCall) {
	if len(calls) != 2 {
		t.Errorf("%d sessions ran; want 2 (t-1, then the final check's task)", len(calls))
	}
	if !strings.Contains(r.stdout, `"Make the final check pass"`) || !strings.Contains(r.stdout, "the final check passed") {
		t.Errorf("stdout lacks the final task's notice or the pass:\n%s", r.stdout)
	}
}

// checkOutcomeCommitInAGitRepository is the check of TestBuildOutcomes's case "commit in a git repository".
func checkOutcomeCommitInAGitRepository(t *testing.T, h *harness, r result, calls []agentCall) {
	cmd := exec.CommandContext(t.Context(), "git", "log", "--format=%s")
	cmd.Dir = h.dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "build: iteration 2 - Task B\nbuild: iteration 1 - Task A\n"
	if diff := cmp.Diff(want, string(out)); diff != "" {
		t.Errorf("git log (-want +got):\n%s", diff)
	}
	cmd = exec.CommandContext(t.Context(), "git", "ls-files", ".ralph")
	cmd.Dir = h.dir
	if out, _ := cmd.Output(); len(out) != 0 {
		t.Errorf(".ralph was committed: %s", out)
	}
}

// setupOutcomeCommitInAGitRepository is the setup of TestBuildOutcomes's case "commit in a git repository".
func setupOutcomeCommitInAGitRepository(t *testing.T, h *harness) {
	for _, args := range [][]string{{"init", "-q"}, {"config", "user.email", "t@example.com"}, {"config", "user.name", "T"}} {
		cmd := exec.CommandContext(t.Context(), "git", args...)
		cmd.Dir = h.dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", args, err, out)
		}
	}
}

// setupOutcomeFinishedPlanWithoutAnAgent is the setup of TestBuildOutcomes's case "finished plan without an agent".
func setupOutcomeFinishedPlanWithoutAnAgent(t *testing.T, h *harness) {
	h.ok("task", "claim", "t-1", "--agent", "someone")
	h.ok("task", "done", "t-1")
}

// setupOutcomeFeatureScope is the setup of TestBuildOutcomes's case "feature scope".
func setupOutcomeFeatureScope(t *testing.T, h *harness) {
	h.ok("feature", "add", "web")
	h.add("Web page", "--feature", "web")
	h.add("Web style", "--feature", "web")
}
