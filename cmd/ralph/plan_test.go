package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
)

// runAgentCmd runs `ralph --dir DIR CMD args… --claude AGENT` in-process
// with the real clock, as h.build does for build.
func (h *harness) runAgentCmd(ctx context.Context, cmd, agent string, args ...string) result {
	h.t.Helper()
	var out, errb bytes.Buffer
	cfg := h.config(&out, &errb)
	cfg.now = time.Now
	argv := append([]string{"ralph", "--dir", h.dir, cmd}, args...)
	if agent != "" {
		argv = append(argv, "--claude", agent)
	}
	code := runApp(ctx, newAppConfig(cfg), argv, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// lastLine is the last line of s.
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

// taskTitles lists the project's tasks as "id title [feature]" lines.
func (h *harness) taskTitles() []string {
	h.t.Helper()
	var out []string
	for _, t := range h.dump().Tasks {
		line := t.ID + " " + t.Title
		if t.Feature != "" {
			line += " [" + t.Feature + "]"
		}
		if len(t.BlockedBy) > 0 {
			line += " after " + strings.Join(t.BlockedBy, ",")
		}
		out = append(out, line)
	}
	return out
}

const authSpec = "# Auth\n\nUsers sign up and log in with a password.\n"

// planTwoTasks is a planning session that adds two tasks and a dependency
// through $RALPH_BIN, as a real planner would.
const planTwoTasks = `"$RALPH_BIN" task add "Users table" -d "id, email, password hash" --priority 1 && ` +
	`"$RALPH_BIN" task add "Login form" -d "POST /login" --blocked-by t-1`

// TestPlanTurnsSpecIntoTasks is the issue's "ralph plan turns a spec into
// tasks": a stand-in planner reads the prompt, adds tasks with
// $RALPH_BIN task add and says COMPLETE.
func TestPlanTurnsSpecIntoTasks(t *testing.T) {
	h := initHarness(t)
	h.write("specs/auth.md", authSpec)
	agent, script := fakeAgentPath(t, agentStep{Sh: planTwoTasks, Text: "Planned two tasks.\n<promise>COMPLETE</promise>", Cost: 0.5})
	r := h.runAgentCmd(t.Context(), "plan", agent)
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
	if got := lastLine(r.stdout); got != "planning complete: 2 tasks in the plan (2 added)" {
		t.Errorf("last line %q", got)
	}
	if !strings.Contains(r.stdout, "== plan · iteration 1 · model sonnet") || !strings.Contains(r.stdout, "session log: .ralph/logs/session-") {
		t.Errorf("stdout lacks the iteration header or the session log:\n%s", r.stdout)
	}
	if diff := cmp.Diff([]string{"t-1 Users table", "t-2 Login form after t-1"}, h.taskTitles()); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	calls := agentCalls(t, script)
	if len(calls) != 1 {
		t.Fatalf("%d sessions, want 1", len(calls))
	}
	c := calls[0]
	if !strings.Contains(c.Prompt, "## specs/auth.md\n\n"+authSpec) || !strings.Contains(c.Prompt, `"$RALPH_BIN" task add`) {
		t.Errorf("the planner's prompt lacks the spec or the how-to:\n%s", c.Prompt)
	}
	if !strings.Contains(c.System, "planner of ralph") || !strings.Contains(c.System, "<promise>COMPLETE</promise>") || strings.Contains(c.System, "Users sign up") {
		t.Errorf("the planner's system prompt lacks the protocol, or has the spec:\n%s", c.System)
	}
	if c.Env["RALPH_ITERATION"] != "1" || c.Env["RALPH_TASK_ID"] != "" || c.Env["RALPH_DIR"] != h.dir || c.Env["RALPH_BIN"] == "" || !strings.HasPrefix(c.Env["RALPH_AGENT_ID"], "agent-") {
		t.Errorf("agent environment %v", c.Env)
	}
	// The receipt is in the database, for `ralph status`.
	var st struct {
		Receipts []struct {
			Mode    string  `json:"mode"`
			CostUSD float64 `json:"cost_usd"`
		} `json:"receipts"`
	}
	if err := json.Unmarshal([]byte(h.ok("status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Receipts) != 1 || st.Receipts[0].Mode != "plan" || st.Receipts[0].CostUSD != 0.5 {
		t.Errorf("receipts %+v; want one plan receipt of $0.5", st.Receipts)
	}
	if log := readSessionLog(t, h); !strings.Contains(log, "mode: plan") || !strings.Contains(log, "exit code: 0") {
		t.Errorf("session log:\n%s", log)
	}
}

// TestPlanOutcomes runs `ralph plan` for each way it can end.
func TestPlanOutcomes(t *testing.T) {
	addOne := `"$RALPH_BIN" task add "Task $RALPH_ITERATION"`
	tests := []struct {
		name    string
		spec    string // specs/auth.md; authSpec when empty
		args    []string
		steps   []agentStep
		code    int
		message string // the last line of stdout (exit 0) or stderr
		tasks   int
		runs    int
	}{
		{name: "a spec that is only a heading", spec: "# Spec: make a thing", steps: []agentStep{{Sh: addOne, Text: "<promise>COMPLETE</promise>"}},
			code: 0, message: "planning complete: 1 task in the plan (1 added)", tasks: 1, runs: 1},
		{name: "two sessions then COMPLETE", steps: []agentStep{{Sh: addOne, Text: "more to do"}, {Sh: addOne, Text: "<promise>COMPLETE</promise>"}},
			code: 0, message: "planning complete: 2 tasks in the plan (2 added)", tasks: 2, runs: 2},
		{name: "N bounds the sessions", args: []string{"2"}, steps: []agentStep{{Sh: addOne, Text: "more to do"}},
			code: 0, message: "iteration limit reached (2) before the agent said COMPLETE; 2 tasks in the plan (2 added)", tasks: 2, runs: 2},
		{name: "COMPLETE with no task is nothing to do", steps: []agentStep{{Text: "<promise>COMPLETE</promise>"}},
			code: 2, message: "ralph: the agent said planning is complete, but the plan is empty", runs: 1},
		{name: "the limit with no task is nothing to do", args: []string{"1"}, steps: []agentStep{{Text: "hmm"}},
			code: 2, message: "ralph: iteration limit reached (1) and the plan is still empty", runs: 1},
		{name: "FAILURE", steps: []agentStep{{Text: "The spec contradicts itself. <promise>FAILURE</promise>"}},
			code: 7, message: "ralph: the agent declared FAILURE: The spec contradicts itself. <promise>FAILURE</promise>", runs: 1},
		{name: "a crashing agent", args: []string{"--max-retries", "1"}, steps: []agentStep{{Crash: true}},
			code: 4, message: "ralph: agent failed 2 times in a row: crashed: the agent printed no result line (exit code 3): fake agent: crashing as scripted", runs: 2},
		{name: "usage limit with stop", args: []string{"--on-usage-limit", "stop"}, steps: []agentStep{{UsageLimit: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Unix()}},
			code: 10, message: "ralph: usage limit reached; resets at 2030-01-01T00:00:00Z", runs: 1},
		{name: "a budget", args: []string{"--max-cost", "0.5"}, steps: []agentStep{{Sh: addOne, Text: "more", Cost: 0.6}},
			code: 9, message: "ralph: cost budget exhausted: spent $0.6000 of $0.5000", tasks: 1, runs: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := initHarness(t)
			spec := tc.spec
			if spec == "" {
				spec = authSpec
			}
			h.write("specs/auth.md", spec)
			agent, script := fakeAgentPath(t, tc.steps...)
			r := h.runAgentCmd(t.Context(), "plan", agent, tc.args...)
			got := lastLine(r.stdout)
			if tc.code != 0 {
				got = lastLine(r.stderr)
			}
			if r.code != tc.code || got != tc.message {
				t.Errorf("exit %d, %q; want %d, %q\nstdout:\n%s\nstderr:\n%s", r.code, got, tc.code, tc.message, r.stdout, r.stderr)
			}
			if n := len(h.dump().Tasks); n != tc.tasks {
				t.Errorf("%d tasks, want %d", n, tc.tasks)
			}
			if n := len(agentCalls(t, script)); n != tc.runs {
				t.Errorf("%d sessions, want %d", n, tc.runs)
			}
		})
	}
}

// TestPlanNothingToDo: no project, no specs, or a feature without a spec
// exit 2 with a message saying where specs go; no agent runs (not even
// a missing one is looked for) and nothing changes.
func TestPlanNothingToDo(t *testing.T) {
	tests := []struct {
		name   string
		init   bool
		setup  func(h *harness)
		args   []string
		errOut []string
	}{
		{name: "no project", errOut: []string{"no ralph project in", "run 'ralph init', then write specs in specs/*.md"}},
		{name: "no specs", init: true, errOut: []string{"nothing to plan: no specs in " + "", "specs/*.md", "ralph feature add NAME --spec FILE"}},
		{name: "blank specs", init: true, setup: func(h *harness) { h.write("specs/a.md", "\n\n") }, errOut: []string{"nothing to plan"}},
		{name: "a feature without a spec", init: true, setup: func(h *harness) { h.ok("feature", "add", "billing") },
			args: []string{"--feature", "billing"}, errOut: []string{"nothing to plan: feature billing has no spec", "--spec FILE"}},
		{name: "no specs and only a feature without a spec", init: true, setup: func(h *harness) { h.ok("feature", "add", "billing") },
			errOut: []string{"nothing to plan: no specs in ", "feature billing has no spec yet (.ralph/features/billing/spec.md)", "specs/*.md", "--spec FILE"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.init {
				h.ok("init")
			}
			if tc.setup != nil {
				tc.setup(h)
			}
			before := h.files()
			r := h.runAgentCmd(t.Context(), "plan", filepath.Join(h.dir, "no-such-agent"), tc.args...)
			if r.code != 2 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 2 and one line", r.code, r.stdout, r.stderr)
			}
			for _, want := range tc.errOut {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr %q lacks %q", r.stderr, want)
				}
			}
			if diff := cmp.Diff(before, h.files()); diff != "" {
				t.Errorf("files changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestPlanBadInput: bad arguments are one-line errors, exit 1, nothing
// changed.
func TestPlanBadInput(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		errOut string
	}{
		{"N not a number", []string{"many"}, `N must be a positive number of sessions, not "many"`},
		{"N zero", []string{"0"}, "N must be a positive number"},
		{"two arguments", []string{"1", "2"}, "want at most one argument (N), got 2 arguments"},
		{"unknown feature", []string{"--feature", "nope"}, "nope"},
		{"unknown strategy", []string{"--strategy", "random"}, `unknown strategy "random"`},
		{"bad usage-limit policy", []string{"--on-usage-limit", "panic"}, `on-usage-limit "panic"`},
		{"missing agent", []string{"--claude", "/no/such/claude"}, "/no/such/claude"},
	}
	h := initHarness(t)
	h.write("specs/auth.md", authSpec)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := h.clone(t)
			before, db := h.files(), h.dump()
			agent, script := fakeAgentPath(t, agentStep{Text: "<promise>COMPLETE</promise>"})
			args := tc.args
			if !strings.HasPrefix(tc.name, "missing agent") {
				args = append(args, "--claude", agent)
			}
			r := h.runAgentCmd(t.Context(), "plan", "", args...)
			if r.code != 1 || r.stdout != "" || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, tc.errOut) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1 and one line with %q", r.code, r.stdout, r.stderr, tc.errOut)
			}
			if diff := cmp.Diff(before, h.files()); diff != "" {
				t.Errorf("files changed (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(db, h.dump()); diff != "" {
				t.Errorf("database changed (-before +after):\n%s", diff)
			}
			if n := len(agentCalls(t, script)); n != 0 {
				t.Errorf("%d sessions ran", n)
			}
		})
	}
}

// TestPlanFeature plans a feature from its spec: the prompt holds that
// spec only, and the planner's tasks carry the feature.
func TestPlanFeature(t *testing.T) {
	h := initHarness(t)
	h.write("specs/auth.md", authSpec)
	h.write("billing.md", "# Billing\n\nInvoices every month.\n")
	h.ok("feature", "add", "billing", "--spec", filepath.Join(h.dir, "billing.md"))
	h.add("Unrelated")
	agent, script := fakeAgentPath(t, agentStep{Sh: `"$RALPH_BIN" task add "Invoice model" --feature billing`, Text: "<promise>COMPLETE</promise>"})
	r := h.runAgentCmd(t.Context(), "plan", agent, "--feature", "billing")
	if r.code != 0 || lastLine(r.stdout) != "planning complete: 1 task in the plan (1 added)" {
		t.Fatalf("exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if diff := cmp.Diff([]string{"t-1 Unrelated", "t-2 Invoice model [billing]"}, h.taskTitles()); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
	prompt := agentCalls(t, script)[0].Prompt
	if !strings.Contains(prompt, "Invoices every month.") || !strings.Contains(prompt, "--feature billing") || strings.Contains(prompt, "Users sign up") {
		t.Errorf("feature plan prompt:\n%s", prompt)
	}
}

// TestPlanFeatureSpecsWithoutFeatureFlag: without --feature, `ralph plan`
// plans the features' specs too: a project whose only
// spec is a feature's is planned, not refused, and the planner is told to
// add that feature's tasks with --feature NAME.
func TestPlanFeatureSpecsWithoutFeatureFlag(t *testing.T) {
	tests := []struct {
		name  string
		setup func(h *harness)
	}{
		{name: "no specs directory"},
		{name: "an empty specs directory", setup: func(h *harness) { h.write("specs/.keep", "") }},
		{name: "a blank spec in specs/", setup: func(h *harness) { h.write("specs/todo.md", "\n") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := initHarness(t)
			if tc.setup != nil {
				tc.setup(h)
			}
			spec := h.write("auth.md", authSpec)
			h.ok("feature", "add", "auth", "--spec", spec)
			h.ok("feature", "add", "billing") // the stub spec: nothing to plan there
			agent, script := fakeAgentPath(t, agentStep{Sh: `"$RALPH_BIN" task add "Users table" --feature auth`, Text: "Planned.\n<promise>COMPLETE</promise>"})
			r := h.runAgentCmd(t.Context(), "plan", agent)
			if r.code != 0 || r.stderr != "" || lastLine(r.stdout) != "planning complete: 1 task in the plan (1 added)" {
				t.Fatalf("exit %d, stderr %q\nstdout:\n%s", r.code, r.stderr, r.stdout)
			}
			if diff := cmp.Diff([]string{"t-1 Users table [auth]"}, h.taskTitles()); diff != "" {
				t.Errorf("tasks (-want +got):\n%s", diff)
			}
			calls := agentCalls(t, script)
			if len(calls) != 1 {
				t.Fatalf("%d sessions, want 1", len(calls))
			}
			prompt := calls[0].Prompt
			for _, want := range []string{"## .ralph/features/auth/spec.md (feature auth)", "`--feature auth`", authSpec} {
				if !strings.Contains(prompt, want) {
					t.Errorf("the planner's prompt lacks %q:\n%s", want, prompt)
				}
			}
			if strings.Contains(prompt, "billing") {
				t.Errorf("the planner's prompt shows the feature without a spec:\n%s", prompt)
			}
		})
	}
}

// TestPlanCommit: with --commit, what a planning session changed outside
// .ralph/ is committed as "plan: iteration <n> - …"; a session that only
// added tasks commits nothing and is no error.
func TestPlanCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	h := initHarness(t)
	h.write("specs/auth.md", authSpec)
	gitInit(t, h.dir)
	agent, _ := fakeAgentPath(t,
		agentStep{Sh: `"$RALPH_BIN" task add "Users table"`, Text: "more to do"},
		agentStep{Sh: `"$RALPH_BIN" task add "Login form" && echo "two tasks" > PLAN-NOTES.md`, Text: "<promise>COMPLETE</promise>"})
	r := h.runAgentCmd(t.Context(), "plan", agent, "--commit")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	log := strings.Split(strings.TrimSpace(gitOut(t, h.dir, "log", "--format=%s")), "\n")
	if diff := cmp.Diff([]string{"plan: iteration 2 - plan from specs/auth.md", "init"}, log); diff != "" {
		t.Errorf("commits (-want +got):\n%s", diff)
	}
	if files := gitOut(t, h.dir, "ls-files"); strings.Contains(files, ".ralph") {
		t.Errorf(".ralph was committed:\n%s", files)
	}
}

// gitInit makes dir a git repository with an identity and one commit of
// everything but .ralph/. (Not `git add -A -- . ':!.ralph'`: that fails
// when .gitignore lists .ralph/.)
func gitInit(t *testing.T, dir string) {
	t.Helper()
	gitOut(t, dir, "init", "-q")
	gitOut(t, dir, "config", "user.email", "ralph@example.com")
	gitOut(t, dir, "config", "user.name", "ralph test")
	gitOut(t, dir, "add", "-A")
	gitOut(t, dir, "rm", "-r", "-q", "--cached", "--ignore-unmatch", ".ralph")
	gitOut(t, dir, "commit", "-q", "--allow-empty", "-m", "init")
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestPlanPromptOverride: .ralph/prompts/plan.md replaces the plan prompt;
// an unknown variable in it is a one-line error naming it, before any
// agent runs.
func TestPlanPromptOverride(t *testing.T) {
	h := initHarness(t)
	h.write("specs/auth.md", authSpec)
	g := h.clone(t)
	h.write(".ralph/prompts/plan.md", "Plan {{range .Specs}}{{.Path}} {{end}}as {{.Mode}} #{{.Iteration}}")
	agent, script := fakeAgentPath(t, agentStep{Sh: `"$RALPH_BIN" task add one`, Text: "<promise>COMPLETE</promise>"})
	if r := h.runAgentCmd(t.Context(), "plan", agent); r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if got := agentCalls(t, script)[0].Prompt; got != "Plan specs/auth.md as plan #1" {
		t.Errorf("prompt %q", got)
	}

	g.write(".ralph/prompts/plan.md", "Plan {{.Spec}}")
	agent, script = fakeAgentPath(t, agentStep{Text: "<promise>COMPLETE</promise>"})
	r := g.runAgentCmd(t.Context(), "plan", agent)
	if r.code != 1 || !strings.Contains(r.stderr, "unknown variable .Spec") || !strings.Contains(r.stderr, "plan.md") {
		t.Errorf("exit %d, stderr %q; want 1 naming plan.md and .Spec", r.code, r.stderr)
	}
	if n := len(agentCalls(t, script)); n != 0 {
		t.Errorf("%d sessions ran with a broken override", n)
	}
}

// TestBinaryPlanThenBuild drives the built binary as a new user would:
// init, a spec, `ralph plan` (the planner adds tasks through the real
// $RALPH_BIN), then `ralph build` works through what was planned, and
// `ralph prompt` runs once.
func TestBinaryPlanThenBuild(t *testing.T) {
	t.Parallel()
	bin := buildRalph(t)
	dir := t.TempDir()
	ralph := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), bin, append([]string{"--dir", dir}, args...)...)
		cmd.Env = withoutEnv(os.Environ(), "RALPH_CLAUDE")
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := ralph("init"); code != 0 {
		t.Fatalf("init: %d\n%s", code, out)
	}
	if out, code := ralph("plan"); code != 2 || !strings.Contains(out, "specs/*.md") {
		t.Fatalf("plan without specs: exit %d\n%s", code, out)
	}
	if err := os.MkdirAll(filepath.Join(dir, "specs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "specs", "auth.md"), []byte(authSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	planner, _ := fakeAgentPath(t, agentStep{Sh: planTwoTasks, Text: "<promise>COMPLETE</promise>"})
	if out, code := ralph("plan", "--claude", planner); code != 0 || !strings.Contains(out, "planning complete: 2 tasks in the plan (2 added)") {
		t.Fatalf("plan: exit %d\n%s", code, out)
	}
	if out, _ := ralph("task", "plan-status"); out != "open=2 active=0 done=0 failed=0 blocked=0 total=2\n" {
		t.Errorf("plan-status after planning: %q", out)
	}
	builder, script := fakeAgentPath(t, agentStep{Text: done})
	if out, code := ralph("build", "--claude", builder); code != 0 || !strings.Contains(out, "complete: all 2 tasks done") {
		t.Fatalf("build: exit %d\n%s", code, out)
	}
	if diff := cmp.Diff([]string{"t-1", "t-2"}, taskIDs(agentCalls(t, script))); diff != "" {
		t.Errorf("tasks built (-want +got):\n%s", diff)
	}
	prompt := filepath.Join(t.TempDir(), "p.md")
	if err := os.WriteFile(prompt, []byte(tidyPrompt), 0o644); err != nil {
		t.Fatal(err)
	}
	once, script := fakeAgentPath(t, agentStep{Text: "ok"})
	if out, code := ralph("prompt", prompt, "--claude", once); code != 0 || !strings.Contains(out, "prompt run finished") {
		t.Fatalf("prompt: exit %d\n%s", code, out)
	}
	if calls := agentCalls(t, script); len(calls) != 1 || calls[0].Prompt != tidyPrompt || calls[0].Env["RALPH_BIN"] != bin {
		t.Errorf("prompt sessions %+v", calls)
	}
}

// TestNextCommand: the totals line sends a person on with the command
// that ran (a plan that stopped goes on with ralph plan, not build), and
// to ralph build once a plan is written.
func TestNextCommand(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		rep  loop.Report
		want string
	}{
		{"plan", loop.Report{Outcome: loop.OutcomeLimitReached}, "ralph plan (it goes on where this run stopped)"},
		{"plan", loop.Report{Outcome: loop.OutcomeComplete}, "ralph build (the plan is written)"},
		{"plan", loop.Report{Outcome: loop.OutcomeAgentFailed, Counts: loop.Counts{Failed: 1}}, "fix what the run's last line says, then ralph plan"},
		{"build", loop.Report{Outcome: loop.OutcomeUsageLimit}, "ralph build once the usage limit resets"},
		{"build", loop.Report{Outcome: loop.OutcomeCompleteWithFailures, Counts: loop.Counts{Failed: 2}}, "ralph task list --status failed (then ralph task show ID; ralph task reset ID to try again)"},
		{"build", loop.Report{Outcome: loop.OutcomeComplete}, "ralph status"},
	} {
		if got := nextCommand(tc.cmd, tc.rep); got != tc.want {
			t.Errorf("nextCommand(%s, %s) = %q, want %q", tc.cmd, tc.rep.Outcome, got, tc.want)
		}
	}
}
