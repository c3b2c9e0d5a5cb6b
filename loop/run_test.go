package loop_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

const testAgent = "agent-0000beef"

// testConfig is a build config rooted in a fresh temp dir, with fixed
// agent id and session name, no logs unless a test turns them on.
func testConfig(t *testing.T) loop.Config {
	t.Helper()
	cfg := loop.DefaultConfig(t.TempDir())
	cfg.AgentID = testAgent
	cfg.Session = "session-test"
	cfg.SessionLog = false
	cfg.RawLogs = false
	return cfg
}

// newStore returns a MemStore holding tasks (priority 2 unless given).
func newStore(t *testing.T, tasks ...loop.Task) *looptest.MemStore {
	t.Helper()
	s := looptest.NewMemStore(nil)
	for i := range tasks {
		if tasks[i].Priority == 0 {
			tasks[i].Priority = 2
		}
		if tasks[i].Title == "" {
			tasks[i].Title = "Task " + tasks[i].ID
		}
	}
	if err := s.Add(tasks...); err != nil {
		t.Fatal(err)
	}
	return s
}

func tasks(ids ...string) []loop.Task {
	var ts []loop.Task
	for _, id := range ids {
		ts = append(ts, loop.Task{ID: id})
	}
	return ts
}

// statuses maps every task id to its status.
func statuses(t *testing.T, s *looptest.MemStore) map[string]loop.Status {
	t.Helper()
	m := map[string]loop.Status{}
	for _, task := range s.Tasks() {
		m[task.ID] = task.Status
	}
	return m
}

// noneInProgress fails the test if any task is left in_progress.
func noneInProgress(t *testing.T, s *looptest.MemStore) {
	t.Helper()
	for _, task := range s.Tasks() {
		if task.Status == loop.StatusInProgress {
			t.Errorf("task %s left in_progress (held by %s)", task.ID, task.ClaimedBy)
		}
	}
}

func envOf(req loop.RunRequest, key string) string {
	for _, kv := range req.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

func isVerifier(req loop.RunRequest) bool { return len(req.Tools) > 0 }

// agent answers every working session with text built from the claimed
// task id, and every verifier session with verdict.
func agent(work func(id string) string, verdict string) func(context.Context, loop.RunRequest) (loop.RunResult, error) {
	return func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		if isVerifier(req) {
			return looptest.Result(verdict), nil
		}
		return looptest.Result(work(envOf(req, "RALPH_TASK_ID"))), nil
	}
}

func done(id string) string   { return "All good. <task-done>" + id + "</task-done>" }
func failed(id string) string { return "Cannot. <task-failed>" + id + "</task-failed>" }

// result is the part of a Report the outcome tests compare.
type result struct {
	Outcome    loop.Outcome
	Exit       int
	Iterations int
	Statuses   map[string]loop.Status
}

func summarize(t *testing.T, rep loop.Report, s *looptest.MemStore) result {
	t.Helper()
	return result{Outcome: rep.Outcome, Exit: rep.ExitCode(), Iterations: rep.Iterations, Statuses: statuses(t, s)}
}

func TestRunOutcomes(t *testing.T) {
	const P, D, F = loop.StatusPending, loop.StatusDone, loop.StatusFailed
	tests := []struct {
		name   string
		tasks  []loop.Task
		config func(*loop.Config)
		runner func(t *testing.T) *looptest.FakeRunner
		want   result
		msg    string // substring of Report.Message
	}{
		{
			name:   "empty plan is NoPlan",
			runner: func(t *testing.T) *looptest.FakeRunner { return looptest.NewFakeRunner(t) },
			want:   result{Outcome: loop.OutcomeNoPlan, Exit: 2, Statuses: map[string]loop.Status{}},
		},
		{
			name:  "happy chain completes in dependency order",
			tasks: []loop.Task{{ID: "a"}, {ID: "b", BlockedBy: []string{"a"}}, {ID: "c", BlockedBy: []string{"b"}}},
			runner: func(t *testing.T) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t).Always(agent(done, ""))
			},
			want: result{Outcome: loop.OutcomeComplete, Exit: 0, Iterations: 3, Statuses: map[string]loop.Status{"a": D, "b": D, "c": D}},
			msg:  "all 3 tasks done",
		},
		{
			name:  "failed task with a dependent is Blocked",
			tasks: []loop.Task{{ID: "a"}, {ID: "b", BlockedBy: []string{"a"}}},
			runner: func(t *testing.T) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t).Always(agent(failed, ""))
			},
			want: result{Outcome: loop.OutcomeBlocked, Exit: 6, Iterations: 1, Statuses: map[string]loop.Status{"a": F, "b": P}},
		},
		{
			name:  "a failed task without dependents is complete with failures",
			tasks: tasks("a", "b"),
			runner: func(t *testing.T) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t, looptest.Result(failed("a")), looptest.Result(done("b")))
			},
			want: result{Outcome: loop.OutcomeCompleteWithFailures, Exit: 8, Iterations: 2, Statuses: map[string]loop.Status{"a": F, "b": D}},
		},
		{
			name:   "iteration limit says how many tasks remain",
			tasks:  tasks("a", "b", "c"),
			config: func(c *loop.Config) { c.MaxIterations = 2 },
			runner: func(t *testing.T) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t).Always(agent(done, ""))
			},
			want: result{Outcome: loop.OutcomeLimitReached, Exit: 0, Iterations: 2, Statuses: map[string]loop.Status{"a": D, "b": D, "c": P}},
			msg:  "iteration limit reached (2); 1 task remains",
		},
		{
			name:   "once runs one iteration",
			tasks:  tasks("a", "b"),
			config: func(c *loop.Config) { c.Once = true; c.MaxIterations = 50 },
			runner: func(t *testing.T) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t).Always(agent(done, ""))
			},
			want: result{Outcome: loop.OutcomeLimitReached, Exit: 0, Iterations: 1, Statuses: map[string]loop.Status{"a": D, "b": P}},
		},
		{
			name:  "promise FAILURE stops with 7 and releases the task",
			tasks: tasks("a", "b"),
			runner: func(t *testing.T) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t, looptest.Result("The repo is broken. <promise>FAILURE</promise>"))
			},
			want: result{Outcome: loop.OutcomeFailure, Exit: 7, Iterations: 1, Statuses: map[string]loop.Status{"a": P, "b": P}},
		},
		{
			name:  "FAILURE with task-failed fails the task too",
			tasks: tasks("a"),
			runner: func(t *testing.T) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t, looptest.Result(failed("a")+"<promise>FAILURE</promise>"))
			},
			want: result{Outcome: loop.OutcomeFailure, Exit: 7, Iterations: 1, Statuses: map[string]loop.Status{"a": F}},
		},
		{
			name:   "no sigil trips the task's breaker after 1+MaxRetries runs and the loop moves on",
			tasks:  tasks("a", "b"),
			config: func(c *loop.Config) { c.MaxRetries = 2 },
			runner: func(t *testing.T) *looptest.FakeRunner {
				silent := looptest.Result("I worked on it.")
				return looptest.NewFakeRunner(t, silent, silent, silent, looptest.Result(done("b")))
			},
			want: result{Outcome: loop.OutcomeCompleteWithFailures, Exit: 8, Iterations: 4, Statuses: map[string]loop.Status{"a": F, "b": D}},
		},
		{
			name:   "wrong id is task trouble",
			tasks:  tasks("a"),
			config: func(c *loop.Config) { c.MaxRetries = 1 },
			runner: func(t *testing.T) *looptest.FakeRunner {
				wrong := looptest.Result(done("zzz"))
				return looptest.NewFakeRunner(t, wrong, wrong)
			},
			want: result{Outcome: loop.OutcomeCompleteWithFailures, Exit: 8, Iterations: 2, Statuses: map[string]loop.Status{"a": F}},
		},
		{
			name:   "agent trouble never fails a task and stops with 4",
			tasks:  tasks("a", "b"),
			config: func(c *loop.Config) { c.MaxRetries = 2 },
			runner: func(t *testing.T) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t,
					looptest.ErrorResult(loop.ClassCrashed, ""),
					looptest.ErrorResult(loop.ClassAPIError, "overloaded"),
					looptest.ErrorResult(loop.ClassTimeout, ""))
			},
			want: result{Outcome: loop.OutcomeAgentFailed, Exit: 4, Iterations: 3, Statuses: map[string]loop.Status{"a": P, "b": P}},
			msg:  "3 times in a row",
		},
		{
			name:   "a clean run resets the agent-trouble count",
			tasks:  tasks("a", "b"),
			config: func(c *loop.Config) { c.MaxRetries = 1 },
			runner: func(t *testing.T) *looptest.FakeRunner {
				crash := looptest.ErrorResult(loop.ClassCrashed, "")
				return looptest.NewFakeRunner(t, crash, looptest.Result(done("a")), crash, looptest.Result(done("b")))
			},
			want: result{Outcome: loop.OutcomeComplete, Exit: 0, Iterations: 4, Statuses: map[string]loop.Status{"a": D, "b": D}},
		},
		{
			name:  "COMPLETE is not believed while tasks remain",
			tasks: tasks("a", "b"),
			runner: func(t *testing.T) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t,
					looptest.Result(done("a")+"<promise>COMPLETE</promise>"),
					looptest.Result(done("b")+"<promise>COMPLETE</promise>"))
			},
			want: result{Outcome: loop.OutcomeComplete, Exit: 0, Iterations: 2, Statuses: map[string]loop.Status{"a": D, "b": D}},
		},
		{
			name:   "budget stops before an iteration that would start past it",
			tasks:  tasks("a", "b", "c"),
			config: func(c *loop.Config) { c.MaxCost = 1.5 },
			runner: func(t *testing.T) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
					r := looptest.Result(done(envOf(req, "RALPH_TASK_ID")))
					r.CostUSD = 1
					return r, nil
				})
			},
			want: result{Outcome: loop.OutcomeBudgetExhausted, Exit: 9, Iterations: 2, Statuses: map[string]loop.Status{"a": D, "b": D, "c": P}},
			msg:  "spent $2.0000 of $1.5000",
		},
		{
			name:   "scope to one feature",
			tasks:  []loop.Task{{ID: "a", Feature: "x"}, {ID: "b", Feature: "y"}},
			config: func(c *loop.Config) { c.Scope = loop.Scope{Feature: "x"} },
			runner: func(t *testing.T) *looptest.FakeRunner {
				return looptest.NewFakeRunner(t).Always(agent(done, ""))
			},
			want: result{Outcome: loop.OutcomeComplete, Exit: 0, Iterations: 1, Statuses: map[string]loop.Status{"a": D, "b": P}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tt.tasks...)
			cfg := testConfig(t)
			if tt.config != nil {
				tt.config(&cfg)
			}
			runner := tt.runner(t)
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if diff := cmp.Diff(tt.want, summarize(t, rep, store)); diff != "" {
				t.Errorf("run (-want +got):\n%s\nmessage: %s", diff, rep.Message)
			}
			if !strings.Contains(rep.Message, tt.msg) {
				t.Errorf("message %q does not contain %q", rep.Message, tt.msg)
			}
			if runner.Remaining() != 0 {
				t.Errorf("%d scripted sessions not run", runner.Remaining())
			}
			noneInProgress(t, store)
		})
	}
}

func TestRunRequest(t *testing.T) {
	store := newStore(t, loop.Task{ID: "a", Title: "Fix login", Description: "The form 500s."})
	cfg := testConfig(t)
	cfg.RalphBin = "/usr/local/bin/ralph"
	cfg.RawLogs = true
	cfg.Env = []string{"EXTRA=1"}
	cfg.Strategy, cfg.Model = "", "opus"
	runner := looptest.NewFakeRunner(t, looptest.Result(done("a")))
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	req := runner.Requests()[0]
	type view struct {
		Model       string
		Sandboxed   bool
		Dir         string
		Env         []string
		LogPath     string
		Timeout     time.Duration
		IdleTimeout time.Duration
	}
	want := view{
		Model: "opus", Sandboxed: true, Dir: cfg.Root,
		Env: []string{"EXTRA=1", "RALPH_AGENT_ID=" + testAgent, "RALPH_ITERATION=1", "RALPH_DIR=" + cfg.Root,
			"RALPH_HOLDER=" + loop.ThisProcess().String(), "RALPH_BIN=/usr/local/bin/ralph", "RALPH_TASK_ID=a"},
		LogPath: cfg.Root + "/.ralph/logs/session-test/iter-1.ndjson",
		Timeout: 30 * time.Minute, IdleTimeout: 10 * time.Minute,
	}
	got := view{req.Model, req.Sandboxed, req.Dir, req.Env, req.LogPath, req.Timeout, req.IdleTimeout}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	for _, s := range []string{"a: Fix login", "The form 500s.", "<task-done>a</task-done>"} {
		if !strings.Contains(req.Prompt, s) {
			t.Errorf("prompt lacks %q:\n%s", s, req.Prompt)
		}
	}
}

func TestRetryReasonReachesNextPrompt(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	runner := looptest.NewFakeRunner(t, looptest.Result(done("other")), looptest.Result(done("a")))
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	second := runner.Requests()[1].Prompt
	for _, s := range []string{"retry 1 of at most 3", "wrong task id: expected a, got other"} {
		if !strings.Contains(second, s) {
			t.Errorf("second prompt lacks %q:\n%s", s, second)
		}
	}
}

func TestPromptContext(t *testing.T) {
	store := newStore(t,
		loop.Task{ID: "p", Title: "Parent epic"},
		loop.Task{ID: "b1", Title: "Schema", Status: loop.StatusDone},
		loop.Task{ID: "t", Title: "Child", ParentID: "p", Feature: "auth", BlockedBy: []string{"b1"}},
	)
	if err := store.AddLog(t.Context(), "b1", loop.LogDone, "added users table"); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	writeFile(t, cfg.Root, ".ralph/features/auth/spec.md", "SPEC: login with email")
	writeFile(t, cfg.Root, ".ralph/features/auth/plan.md", "PLAN: step one")
	writeFile(t, cfg.Root, ".ralph/skills/db/SKILL.md", "---\nname: db\ndescription: How to migrate the database\n---\nbody")
	if err := store.AddFeature(loop.Feature{Name: "auth", SpecPath: ".ralph/features/auth/spec.md", PlanPath: ".ralph/features/auth/plan.md"}); err != nil {
		t.Fatal(err)
	}
	runner := looptest.NewFakeRunner(t).Always(agent(done, ""))
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	prompt := runner.Requests()[0].Prompt
	for _, s := range []string{"Part of p: Parent epic", "b1: Schema — added users table", "SPEC: login with email",
		"PLAN: step one", "db (.ralph/skills/db/SKILL.md): How to migrate the database"} {
		if !strings.Contains(prompt, s) {
			t.Errorf("prompt lacks %q:\n%s", s, prompt)
		}
	}
}

func TestHintOverridesStrategyForOneIteration(t *testing.T) {
	store := newStore(t, tasks("a", "b", "c")...)
	cfg := testConfig(t)
	cfg.Model = "sonnet" // fixed
	runner := looptest.NewFakeRunner(t,
		looptest.Result(done("a")+"<next-model>opus</next-model>"),
		looptest.Result(done("b")+"<next-model>gpt-5</next-model>"),
		looptest.Result(done("c")))
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	var models []string
	for _, r := range runner.Requests() {
		models = append(models, r.Model)
	}
	if diff := cmp.Diff([]string{"sonnet", "opus", "sonnet"}, models); diff != "" {
		t.Errorf("models (-want +got):\n%s", diff)
	}
}

func TestVerification(t *testing.T) {
	const P, D, F = loop.StatusPending, loop.StatusDone, loop.StatusFailed
	tests := []struct {
		name       string
		maxRetries int
		verdicts   []string
		want       result
		retries    int
		prompt2    string // substring of the second working prompt
	}{
		{name: "pass completes", maxRetries: 3, verdicts: []string{"<verify-pass/>"},
			want: result{Outcome: loop.OutcomeComplete, Iterations: 1, Statuses: map[string]loop.Status{"a": D}}},
		{name: "fail then pass retries with the reason", maxRetries: 3,
			verdicts: []string{"<verify-fail>tests do not cover logout</verify-fail>", "<verify-pass/>"},
			want:     result{Outcome: loop.OutcomeComplete, Iterations: 2, Statuses: map[string]loop.Status{"a": D}},
			retries:  1, prompt2: "tests do not cover logout"},
		{name: "no verdict counts as a fail", maxRetries: 3, verdicts: []string{"Looks fine to me.", "<verify-pass/>"},
			want:    result{Outcome: loop.OutcomeComplete, Iterations: 2, Statuses: map[string]loop.Status{"a": D}},
			retries: 1, prompt2: "the verifier gave no verdict"},
		{name: "fail with no retry left fails the task", maxRetries: 0, verdicts: []string{"<verify-fail>broken</verify-fail>"},
			want: result{Outcome: loop.OutcomeCompleteWithFailures, Exit: 8, Iterations: 1, Statuses: map[string]loop.Status{"a": F}}},
	}
	_ = P
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tasks("a")...)
			cfg := testConfig(t)
			cfg.Verify = true
			cfg.MaxRetries = tt.maxRetries
			var mu sync.Mutex
			verdicts := tt.verdicts
			runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
				if !isVerifier(req) {
					r := looptest.Result(done(envOf(req, "RALPH_TASK_ID")))
					r.CostUSD = 0.5
					return r, nil
				}
				mu.Lock()
				defer mu.Unlock()
				v := verdicts[0]
				verdicts = verdicts[1:]
				r := looptest.Result(v)
				r.CostUSD = 0.25
				return r, nil
			})
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			tt.want.Exit = tt.want.Outcome.ExitCode()
			if diff := cmp.Diff(tt.want, summarize(t, rep, store)); diff != "" {
				t.Errorf("run (-want +got):\n%s", diff)
			}
			task, _ := store.Get(t.Context(), "a")
			if task.RetryCount != tt.retries {
				t.Errorf("retry count = %d, want %d", task.RetryCount, tt.retries)
			}
			reqs := runner.Requests()
			if len(reqs) != 2*len(tt.verdicts) {
				t.Fatalf("%d sessions, want %d", len(reqs), 2*len(tt.verdicts))
			}
			v := reqs[1]
			if diff := cmp.Diff(loop.VerifierTools, v.Tools); diff != "" || v.Sandboxed {
				t.Errorf("verifier tools (-want +got):\n%s sandboxed=%v", diff, v.Sandboxed)
			}
			if envOf(v, "RALPH_ITERATION") != "1" {
				t.Errorf("verifier runs under iteration %s, want 1", envOf(v, "RALPH_ITERATION"))
			}
			if tt.prompt2 != "" && !strings.Contains(reqs[2].Prompt, tt.prompt2) {
				t.Errorf("second prompt lacks %q:\n%s", tt.prompt2, reqs[2].Prompt)
			}
			var modes []string
			for _, r := range rep.Receipts {
				modes = append(modes, fmt.Sprintf("%d:%s", r.Iteration, r.Mode))
			}
			wantModes := []string{"1:build", "1:verify", "2:build", "2:verify"}[:2*len(tt.verdicts)]
			if diff := cmp.Diff(wantModes, modes); diff != "" {
				t.Errorf("receipts (-want +got):\n%s", diff)
			}
			if want := 0.75 * float64(len(tt.verdicts)); rep.CostUSD != want {
				t.Errorf("cost = %v, want %v (verifier included)", rep.CostUSD, want)
			}
			stored, _ := store.Receipts(t.Context(), 0)
			if len(stored) != len(rep.Receipts) {
				t.Errorf("store kept %d receipts, report has %d", len(stored), len(rep.Receipts))
			}
		})
	}
}

func TestConfigErrorsChangeNothing(t *testing.T) {
	tests := []struct {
		name   string
		config func(*loop.Config)
		want   string
	}{
		{"no root", func(c *loop.Config) { c.Root = "" }, "root directory is required"},
		{"negative retries", func(c *loop.Config) { c.MaxRetries = -1 }, "max retries -1 is negative"},
		{"bad claim mode", func(c *loop.Config) { c.ClaimMode = "both" }, `claim mode "both"`},
		{"bad usage policy", func(c *loop.Config) { c.OnUsageLimit = "panic" }, `on-usage-limit "panic"`},
		{"unknown strategy", func(c *loop.Config) { c.Strategy = "random" }, `unknown strategy "random"`},
		{"model with a non-fixed strategy", func(c *loop.Config) { c.Strategy, c.Model = "escalate", "opus" }, "only fixed takes a model"},
		{"feature and task", func(c *loop.Config) { c.Scope = loop.Scope{Feature: "f", TaskID: "t"} }, "not both"},
		{"plan mode", func(c *loop.Config) { c.Mode = loop.ModePlan }, "mode build only"},
		{"verify in peek mode", func(c *loop.Config) { c.ClaimMode, c.Verify = loop.ClaimAgent, true }, "verify needs the loop to claim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tasks("a")...)
			cfg := testConfig(t)
			tt.config(&cfg)
			runner := looptest.NewFakeRunner(nil)
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if !errors.Is(err, loop.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrConfig with %q", err, tt.want)
			}
			if rep.Outcome != loop.OutcomeError || rep.ExitCode() != 1 {
				t.Errorf("outcome %s exit %d, want error 1", rep.Outcome, rep.ExitCode())
			}
			if runner.Calls() != 0 || statuses(t, store)["a"] != loop.StatusPending {
				t.Errorf("a bad config changed something: %d runs, status %s", runner.Calls(), statuses(t, store)["a"])
			}
		})
	}
}

func TestNilSeams(t *testing.T) {
	cfg := testConfig(t)
	if _, err := loop.Run(t.Context(), cfg, nil, looptest.NewFakeRunner(nil)); !errors.Is(err, loop.ErrConfig) {
		t.Errorf("nil store: %v", err)
	}
	if _, err := loop.Run(t.Context(), cfg, newStore(t), nil); !errors.Is(err, loop.ErrConfig) {
		t.Errorf("nil runner: %v", err)
	}
	if _, err := loop.DryRun(t.Context(), cfg, nil); !errors.Is(err, loop.ErrConfig) {
		t.Errorf("dry run, nil store: %v", err)
	}
}

func TestExitCodes(t *testing.T) {
	want := map[loop.Outcome]int{
		loop.OutcomeComplete: 0, loop.OutcomeLimitReached: 0, loop.OutcomeError: 1, loop.OutcomeNoPlan: 2,
		loop.OutcomeTestGateFailed: 3, loop.OutcomeAgentFailed: 4, loop.OutcomeGitFailed: 5, loop.OutcomeBlocked: 6,
		loop.OutcomeFailure: 7, loop.OutcomeCompleteWithFailures: 8, loop.OutcomeBudgetExhausted: 9,
		loop.OutcomeUsageLimit: 10, loop.OutcomeCancelled: 130,
	}
	got := map[loop.Outcome]int{}
	for _, o := range loop.Outcomes() {
		got[o] = o.ExitCode()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exit codes (-want +got):\n%s", diff)
	}
}
