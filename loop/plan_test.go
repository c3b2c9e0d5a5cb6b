package loop_test

import (
	"context"
	"errors"
	"fmt"
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

// planConfig is a plan config rooted in a fresh temp dir holding one spec,
// with fixed agent id and session name and no logs.
func planConfig(t *testing.T) loop.Config {
	t.Helper()
	cfg := loop.PlanConfig(t.TempDir())
	cfg.AgentID = testAgent
	cfg.Session = "session-test"
	cfg.SessionLog = false
	cfg.RawLogs = false
	writeFile(t, cfg.Root, "specs/auth.md", "# Auth\nUsers log in with a password.\n")
	return cfg
}

// planner is a stand-in planning agent: each session adds the tasks named
// in the next entry of sessions to store (as `$RALPH_BIN task add` would)
// and answers with the text after the "|" (e.g. "a,b|<promise>COMPLETE</promise>").
func planner(store *looptest.MemStore, sessions ...string) func(context.Context, loop.RunRequest) (loop.RunResult, error) {
	i := 0
	return func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		if i >= len(sessions) {
			return loop.RunResult{}, fmt.Errorf("planner: no session %d scripted", i+1)
		}
		ids, text, _ := strings.Cut(sessions[i], "|")
		i++
		for _, id := range strings.Split(ids, ",") {
			if id == "" {
				continue
			}
			if err := store.Add(loop.Task{ID: id, Title: "Task " + id, Priority: 2, Feature: envOf(req, "TEST_FEATURE")}); err != nil {
				return loop.RunResult{}, err
			}
		}
		return looptest.Result("Planned. " + text), nil
	}
}

const complete = "<promise>COMPLETE</promise>"

func TestPlanOutcomes(t *testing.T) {
	tests := []struct {
		name     string
		max      int      // 0: the default
		sessions []string // see planner
		results  []loop.RunResult
		seed     []loop.Task
		want     loop.Outcome
		exit     int
		iters    int
		message  string
		tasks    int
	}{
		{name: "tasks added then COMPLETE", sessions: []string{"a,b|" + complete},
			want: loop.OutcomeComplete, exit: 0, iters: 1, message: "planning complete: 2 tasks in the plan (2 added)", tasks: 2},
		{name: "two sessions to plan", sessions: []string{"a|more to do", "b,c|" + complete},
			want: loop.OutcomeComplete, exit: 0, iters: 2, message: "planning complete: 3 tasks in the plan (3 added)", tasks: 3},
		{name: "COMPLETE with an empty plan is nothing to do", sessions: []string{"|" + complete},
			want: loop.OutcomeNoPlan, exit: 2, iters: 1, message: "the agent said planning is complete, but the plan is empty"},
		{name: "COMPLETE over an existing plan that the agent kept", seed: tasks("old"), sessions: []string{"|" + complete},
			want: loop.OutcomeComplete, exit: 0, iters: 1, message: "planning complete: 1 task in the plan (0 added)", tasks: 1},
		{name: "limit with tasks planned", max: 2, sessions: []string{"a|", "b|"},
			want: loop.OutcomeLimitReached, exit: 0, iters: 2, message: "iteration limit reached (2) before the agent said COMPLETE; 2 tasks in the plan (2 added)", tasks: 2},
		{name: "default limit is five sessions", sessions: []string{"|", "|", "|", "|", "a|"},
			want: loop.OutcomeLimitReached, exit: 0, iters: loop.DefaultPlanIterations, tasks: 1},
		{name: "limit with the plan still empty", max: 1, sessions: []string{"|thinking"},
			want: loop.OutcomeNoPlan, exit: 2, iters: 1, message: "iteration limit reached (1) and the plan is still empty"},
		{name: "FAILURE", sessions: []string{"a|the specs contradict each other <promise>FAILURE</promise>"},
			want: loop.OutcomeFailure, exit: 7, iters: 1, tasks: 1},
		{name: "agent trouble beyond retries", results: []loop.RunResult{
			looptest.ErrorResult(loop.ClassCrashed, "boom"), looptest.ErrorResult(loop.ClassCrashed, "boom"),
			looptest.ErrorResult(loop.ClassCrashed, "boom"), looptest.ErrorResult(loop.ClassCrashed, "boom")},
			want: loop.OutcomeAgentFailed, exit: 4, iters: 4},
		{name: "agent trouble then a good session", results: []loop.RunResult{looptest.ErrorResult(loop.ClassTimeout, "")},
			sessions: []string{"a|" + complete}, want: loop.OutcomeComplete, exit: 0, iters: 2, tasks: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tt.seed...)
			cfg := planConfig(t)
			cfg.MaxIterations = tt.max
			runner := looptest.NewFakeRunner(t, tt.results...)
			if tt.sessions != nil {
				runner.Always(planner(store, tt.sessions...))
			}
			rep, err := loop.Plan(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			type got struct {
				Outcome    loop.Outcome
				Exit       int
				Iterations int
				Tasks      int
			}
			if diff := cmp.Diff(got{tt.want, tt.exit, tt.iters, tt.tasks}, got{rep.Outcome, rep.ExitCode(), rep.Iterations, len(store.Tasks())}); diff != "" {
				t.Errorf("(-want +got):\n%s\nmessage: %s", diff, rep.Message)
			}
			if tt.message != "" && rep.Message != tt.message {
				t.Errorf("message %q, want %q", rep.Message, tt.message)
			}
			if runner.Calls() != tt.iters {
				t.Errorf("%d sessions, want %d", runner.Calls(), tt.iters)
			}
		})
	}
}

func TestPlanWithoutSpecs(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		features []string // see addFeatures
		msg      []string // more the message must say
	}{
		{name: "no specs directory"},
		{name: "empty specs directory", files: map[string]string{"specs/.keep": ""}},
		{name: "only blank specs", files: map[string]string{"specs/a.md": " \n\n"}},
		{name: "specs that are not markdown", files: map[string]string{"specs/a.txt": "a spec"}},
		{name: "a markdown file outside specs", files: map[string]string{"spec.md": "a spec", "docs/specs/a.md": "a spec"}},
		{name: "a feature with the stub spec", features: []string{"billing"},
			files: map[string]string{".ralph/features/billing/spec.md": loop.FeatureSpecStub("billing")},
			msg:   []string{"feature billing has no spec yet (.ralph/features/billing/spec.md)"}},
		{name: "features with a stub, a blank spec and none", features: []string{"billing", "shop", "web"},
			files: map[string]string{".ralph/features/billing/spec.md": loop.FeatureSpecStub("billing"), ".ralph/features/shop/spec.md": "\n"},
			msg:   []string{"features billing, shop, web have no spec yet (.ralph/features/billing/spec.md, .ralph/features/shop/spec.md, .ralph/features/web/spec.md)"}},
		{name: "many features without a spec", features: []string{"f1", "f2", "f3", "f4", "f5", "f6", "f7"},
			msg: []string{"features f1, f2, f3, f4, f5, 2 more have no spec yet (.ralph/features/f1/spec.md, .ralph/features/f2/spec.md, .ralph/features/f3/spec.md, .ralph/features/f4/spec.md, .ralph/features/f5/spec.md, …)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t)
			cfg := loop.PlanConfig(t.TempDir())
			for name, content := range tt.files {
				writeFile(t, cfg.Root, name, content)
			}
			addFeatures(t, store, tt.features...)
			before := filesUnder(t, cfg.Root)
			runner := looptest.NewFakeRunner(t)
			rep, err := loop.Plan(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outcome != loop.OutcomeNoPlan || rep.ExitCode() != 2 {
				t.Errorf("outcome %s exit %d, want no_plan 2", rep.Outcome, rep.ExitCode())
			}
			for _, want := range append([]string{"specs/*.md", loop.NoSpecsHint}, tt.msg...) {
				if !strings.Contains(rep.Message, want) {
					t.Errorf("message %q does not say %q", rep.Message, want)
				}
			}
			if runner.Calls() != 0 {
				t.Errorf("%d sessions ran without specs", runner.Calls())
			}
			if diff := cmp.Diff(before, filesUnder(t, cfg.Root)); diff != "" {
				t.Errorf("a plan run without specs changed files (-before +after):\n%s", diff)
			}
		})
	}
}

// What counts as a spec: any specs/*.md with non-blank content, a lone
// heading included; a feature's spec unless it is blank or exactly the
// stub `ralph feature add` writes. Without a feature scope, the specs of
// every feature count too, after specs/*.md, in the order the features
// were added.
func TestPlanSpecs(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		features []string // see addFeatures
		scope    string   // the feature planned
		want     []string // "path", or "path [feature]" for a feature's spec
	}{
		{name: "a heading alone is a spec", files: map[string]string{"specs/a.md": "# Spec: make a thing"}, want: []string{"specs/a.md"}},
		{name: "headings only", files: map[string]string{"specs/a.md": "# Spec: a\n\n## Later\n"}, want: []string{"specs/a.md"}},
		{name: "blank files are left out", files: map[string]string{"specs/a.md": " \n\t\n", "specs/b.md": "# B\n"}, want: []string{"specs/b.md"}},
		{name: "a stub in specs/ is a spec", files: map[string]string{"specs/billing.md": loop.FeatureSpecStub("billing")}, want: []string{"specs/billing.md"}},
		{name: "feature stub is no spec", features: []string{"billing"}, scope: "billing", files: map[string]string{".ralph/features/billing/spec.md": loop.FeatureSpecStub("billing")}},
		{name: "blank feature spec is no spec", features: []string{"billing"}, scope: "billing", files: map[string]string{".ralph/features/billing/spec.md": "\n"}},
		{name: "feature spec that is another heading", features: []string{"billing"}, scope: "billing", files: map[string]string{".ralph/features/billing/spec.md": "# Billing\n"},
			want: []string{".ralph/features/billing/spec.md [billing]"}},
		{name: "feature stub with more", features: []string{"billing"}, scope: "billing", files: map[string]string{".ralph/features/billing/spec.md": loop.FeatureSpecStub("billing") + "Invoices monthly.\n"},
			want: []string{".ralph/features/billing/spec.md [billing]"}},
		{name: "another feature's stub", features: []string{"billing"}, scope: "billing", files: map[string]string{".ralph/features/billing/spec.md": loop.FeatureSpecStub("shop")},
			want: []string{".ralph/features/billing/spec.md [billing]"}},
		{name: "a feature scope leaves the other specs out", features: []string{"billing", "shop"}, scope: "billing",
			files: map[string]string{"specs/a.md": "# A\n", ".ralph/features/billing/spec.md": "# Billing\n", ".ralph/features/shop/spec.md": "# Shop\n"},
			want:  []string{".ralph/features/billing/spec.md [billing]"}},

		{name: "the whole plan: a feature's spec without specs/", features: []string{"auth"},
			files: map[string]string{".ralph/features/auth/spec.md": "# Auth\n"},
			want:  []string{".ralph/features/auth/spec.md [auth]"}},
		{name: "the whole plan: specs/ first, then features as added", features: []string{"zeta", "alpha"},
			files: map[string]string{"specs/b.md": "# B\n", ".ralph/features/zeta/spec.md": "# Zeta\n", ".ralph/features/alpha/spec.md": "# Alpha\n"},
			want:  []string{"specs/b.md", ".ralph/features/zeta/spec.md [zeta]", ".ralph/features/alpha/spec.md [alpha]"}},
		{name: "the whole plan: stubs, blanks and missing files are left out", features: []string{"billing", "shop", "web", "auth"},
			files: map[string]string{".ralph/features/billing/spec.md": loop.FeatureSpecStub("billing"), ".ralph/features/shop/spec.md": " \n", ".ralph/features/auth/spec.md": "# Auth\n"},
			want:  []string{".ralph/features/auth/spec.md [auth]"}},
		{name: "the whole plan: only stubs is nothing to plan", features: []string{"billing", "shop"},
			files: map[string]string{".ralph/features/billing/spec.md": loop.FeatureSpecStub("billing"), ".ralph/features/shop/spec.md": "", "specs/blank.md": "\n"}},
		{name: "the whole plan: a feature's spec in specs/ is listed once", features: []string{"auth=specs/auth.md"},
			files: map[string]string{"specs/a.md": "# A\n", "specs/auth.md": "# Auth\n"},
			want:  []string{"specs/a.md", "specs/auth.md [auth]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			store := newStore(t)
			for name, content := range tt.files {
				writeFile(t, root, name, content)
			}
			addFeatures(t, store, tt.features...)
			specs, _, err := loop.PlanSpecs(t.Context(), root, tt.scope, store)
			if tt.want == nil {
				var ns *loop.NoSpecsError
				if !errors.Is(err, loop.ErrNoSpecs) || !errors.As(err, &ns) || ns.Missing == "" {
					t.Fatalf("specs %v, err %v; want a *NoSpecsError saying what is missing", specs, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, sp := range specs {
				label := sp.Path
				if sp.Feature != "" {
					label += " [" + sp.Feature + "]"
				}
				got = append(got, label)
				if sp.Content != tt.files[sp.Path] {
					t.Errorf("%s: content %q, want %q", sp.Path, sp.Content, tt.files[sp.Path])
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("specs (-want +got):\n%s", diff)
			}
		})
	}
}

// addFeatures adds features to store: "NAME" with the spec and plan files
// .ralph/features/NAME/spec.md and plan.md, as `ralph feature add` makes
// them, or "NAME=PATH" with spec PATH.
func addFeatures(t *testing.T, store *looptest.MemStore, features ...string) {
	t.Helper()
	for _, f := range features {
		name, spec, custom := strings.Cut(f, "=")
		plan := ".ralph/features/" + name + "/plan.md"
		if !custom {
			spec = ".ralph/features/" + name + "/spec.md"
		}
		if err := store.AddFeature(loop.Feature{Name: name, SpecPath: spec, PlanPath: plan}); err != nil {
			t.Fatal(err)
		}
	}
}

// filesUnder maps every file under root to its content.
func filesUnder(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Without a feature scope, plan mode plans the features' specs too:
// each is labelled with its feature, whose tasks the planner
// adds with --feature NAME, and a project whose only spec is a feature's
// is planned to OutcomeComplete.
func TestPlanFeaturesWithoutScope(t *testing.T) {
	tests := []struct {
		name     string
		specs    bool // specs/auth.md is there too
		want     []string
		wantNot  []string
		message  string
		commit   string
		sessions string
		feature  string // the feature the planner's tasks get
	}{
		{name: "only a feature's spec", sessions: "bill|" + complete, feature: "billing",
			want: []string{
				"## .ralph/features/billing/spec.md (feature billing)",
				"the spec of feature billing: give every task you add for it `--feature billing`",
				"# Billing\nInvoices every month.",
				"Notes from the plan file of feature billing:\nStart with the schema.",
				"A task for a feature's spec gets `--feature NAME`",
			},
			wantNot: []string{"specs/auth.md", "feature nospec", ".ralph/features/nospec", "# Plan: billing"},
			message: "planning complete: 1 task in the plan (1 added)", commit: "plan: iteration 1 - plan from feature billing"},
		{name: "specs/ and a feature's spec", specs: true, sessions: "login,bill|" + complete,
			want: []string{
				"## specs/auth.md\n\n# Auth\nUsers log in with a password.",
				"## .ralph/features/billing/spec.md (feature billing)",
				"A task for a feature's spec gets `--feature NAME`",
			},
			wantNot: []string{"feature nospec", "You are planning feature"},
			message: "planning complete: 2 tasks in the plan (2 added)", commit: "plan: iteration 1 - plan from specs/auth.md, feature billing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t)
			cfg := planConfig(t)
			if !tt.specs {
				if err := os.RemoveAll(filepath.Join(cfg.Root, "specs")); err != nil {
					t.Fatal(err)
				}
			}
			gitRepo(t, cfg.Root)
			cfg.Commit = true
			cfg.Env = []string{"TEST_FEATURE=" + tt.feature}
			writeFile(t, cfg.Root, ".ralph/features/billing/spec.md", "# Billing\nInvoices every month.\n")
			writeFile(t, cfg.Root, ".ralph/features/billing/plan.md", "Start with the schema.\n")
			writeFile(t, cfg.Root, ".ralph/features/nospec/spec.md", loop.FeatureSpecStub("nospec"))
			writeFile(t, cfg.Root, ".ralph/features/nospec/plan.md", loop.FeaturePlanStub("nospec"))
			addFeatures(t, store, "billing", "nospec")
			planner := planner(store, tt.sessions)
			runner := looptest.NewFakeRunner(t).Always(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
				writeFile(t, cfg.Root, "PLAN-NOTES.md", "notes\n")
				return planner(ctx, req)
			})
			rep, err := loop.Plan(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outcome != loop.OutcomeComplete || rep.Message != tt.message {
				t.Errorf("outcome %s, message %q; want complete, %q", rep.Outcome, rep.Message, tt.message)
			}
			if runner.Calls() != 1 {
				t.Fatalf("%d sessions, want 1", runner.Calls())
			}
			prompt := runner.Requests()[0].Prompt
			for _, want := range tt.want {
				if !strings.Contains(prompt, want) {
					t.Errorf("prompt lacks %q:\n%s", want, prompt)
				}
			}
			for _, not := range tt.wantNot {
				if strings.Contains(prompt, not) {
					t.Errorf("prompt has %q:\n%s", not, prompt)
				}
			}
			if got := strings.TrimSpace(git(t, cfg.Root, "log", "-1", "--format=%s")); got != tt.commit {
				t.Errorf("commit %q, want %q", got, tt.commit)
			}
		})
	}
}

func TestPlanPromptAndRequest(t *testing.T) {
	store := newStore(t)
	cfg := planConfig(t)
	writeFile(t, cfg.Root, "specs/api.md", "# API\nGET /users lists users.\n")
	cfg.RalphBin = "/usr/local/bin/ralph"
	runner := looptest.NewFakeRunner(t).Always(planner(store, "a|"+complete))
	rep, err := loop.Plan(t.Context(), cfg, store, runner)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("outcome %s (%s), err %v", rep.Outcome, rep.Message, err)
	}
	req := runner.Requests()[0]
	for _, want := range []string{
		"## specs/api.md\n\n# API\nGET /users lists users.",
		"## specs/auth.md\n\n# Auth\nUsers log in with a password.",
		`"$RALPH_BIN" task add`,
		`--check "CMD"`, // plan mode asks for a check on each task (DESIGN §14)
		`"$RALPH_BIN" task dep add BLOCKED BLOCKER`,
		"<promise>COMPLETE</promise>",
		"planning session 1",
	} {
		if !strings.Contains(req.Prompt, want) {
			t.Errorf("plan prompt lacks %q:\n%s", want, req.Prompt)
		}
	}
	if strings.Index(req.Prompt, "specs/api.md") > strings.Index(req.Prompt, "specs/auth.md") {
		t.Error("specs are not in name order")
	}
	env := map[string]string{}
	for _, k := range []string{"RALPH_AGENT_ID", "RALPH_ITERATION", "RALPH_DIR", "RALPH_BIN", "RALPH_TASK_ID", "RALPH_HOLDER"} {
		env[k] = envOf(req, k)
	}
	wantEnv := map[string]string{"RALPH_AGENT_ID": testAgent, "RALPH_ITERATION": "1", "RALPH_DIR": cfg.Root, "RALPH_BIN": "/usr/local/bin/ralph", "RALPH_TASK_ID": "", "RALPH_HOLDER": loop.ThisProcess().String()}
	if diff := cmp.Diff(wantEnv, env); diff != "" {
		t.Errorf("agent environment (-want +got):\n%s", diff)
	}
	if !req.Sandboxed || req.Dir != cfg.Root {
		t.Errorf("request sandboxed %v dir %q", req.Sandboxed, req.Dir)
	}
	receipts, err := store.Receipts(t.Context(), 0)
	if err != nil || len(receipts) != 1 || receipts[0].Mode != "plan" || receipts[0].TaskID != "" {
		t.Errorf("receipts %+v, %v; want one of mode plan without a task", receipts, err)
	}
}

func TestPlanFeature(t *testing.T) {
	store := newStore(t, loop.Task{ID: "other", Title: "Not this feature"})
	cfg := planConfig(t)
	writeFile(t, cfg.Root, ".ralph/features/billing/spec.md", "# Billing\nInvoices every month.\n")
	writeFile(t, cfg.Root, ".ralph/features/billing/plan.md", "Start with the schema.\n")
	if err := store.AddFeature(loop.Feature{Name: "billing", SpecPath: ".ralph/features/billing/spec.md", PlanPath: ".ralph/features/billing/plan.md"}); err != nil {
		t.Fatal(err)
	}
	if err := store.AddFeature(loop.Feature{Name: "nospec", SpecPath: ".ralph/features/nospec/spec.md"}); err != nil {
		t.Fatal(err)
	}
	cfg.Scope = loop.Scope{Feature: "billing"}
	cfg.Env = []string{"TEST_FEATURE=billing"}
	runner := looptest.NewFakeRunner(t).Always(planner(store, "inv|"+complete))
	rep, err := loop.Plan(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	// The plan is the feature's: the task outside it does not count.
	if rep.Outcome != loop.OutcomeComplete || rep.Message != "planning complete: 1 task in the plan (1 added)" {
		t.Errorf("outcome %s: %s", rep.Outcome, rep.Message)
	}
	prompt := runner.Requests()[0].Prompt
	for _, want := range []string{"## .ralph/features/billing/spec.md", "Invoices every month.", "Start with the schema.", "--feature billing"} {
		if !strings.Contains(prompt, want) {
			t.Errorf("prompt lacks %q:\n%s", want, prompt)
		}
	}
	if strings.Contains(prompt, "specs/auth.md") {
		t.Error("a feature's plan prompt shows the project's specs too")
	}

	t.Run("a feature without a spec is nothing to plan", func(t *testing.T) {
		cfg.Scope = loop.Scope{Feature: "nospec"}
		runner := looptest.NewFakeRunner(t)
		rep, err := loop.Plan(t.Context(), cfg, store, runner)
		if err != nil || rep.Outcome != loop.OutcomeNoPlan || !strings.Contains(rep.Message, "feature nospec has no spec yet (.ralph/features/nospec/spec.md)") {
			t.Errorf("outcome %s (%s), err %v", rep.Outcome, rep.Message, err)
		}
	})
	t.Run("an unknown feature is an error", func(t *testing.T) {
		cfg.Scope = loop.Scope{Feature: "nope"}
		rep, err := loop.Plan(t.Context(), cfg, store, looptest.NewFakeRunner(t))
		if !errors.Is(err, loop.ErrFeatureNotFound) || rep.ExitCode() != 1 {
			t.Errorf("err %v exit %d, want ErrFeatureNotFound, 1", err, rep.ExitCode())
		}
	})
}

func TestPlanConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		config func(*loop.Config)
		want   string
	}{
		{"verify", func(c *loop.Config) { c.Verify = true }, "verify checks a finished task"},
		{"peek mode", func(c *loop.Config) { c.ClaimMode = loop.ClaimAgent }, "claim mode agent is for build only"},
		{"test command", func(c *loop.Config) { c.TestCmd = "go test ./..." }, "no test gate"},
		{"task scope", func(c *loop.Config) { c.Scope = loop.Scope{TaskID: "a"} }, "takes no task scope"},
		{"another mode", func(c *loop.Config) { c.Mode = loop.ModePrompt }, "runs mode plan only"},
		{"negative limit", func(c *loop.Config) { c.MaxIterations = -1 }, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t)
			cfg := planConfig(t)
			tt.config(&cfg)
			runner := looptest.NewFakeRunner(t)
			rep, err := loop.Plan(t.Context(), cfg, store, runner)
			if !errors.Is(err, loop.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrConfig with %q", err, tt.want)
			}
			if rep.ExitCode() != 1 || runner.Calls() != 0 {
				t.Errorf("exit %d after %d sessions, want 1 after 0", rep.ExitCode(), runner.Calls())
			}
		})
	}
	t.Run("a build config is taken as plan mode", func(t *testing.T) {
		store := newStore(t)
		cfg := planConfig(t)
		cfg.Mode = loop.ModeBuild
		rep, err := loop.Plan(t.Context(), cfg, store, looptest.NewFakeRunner(t).Always(planner(store, "a|"+complete)))
		if err != nil || rep.Outcome != loop.OutcomeComplete {
			t.Errorf("outcome %s, err %v", rep.Outcome, err)
		}
	})
	t.Run("Run refuses plan mode", func(t *testing.T) {
		cfg := planConfig(t)
		cfg.Mode = loop.ModePlan
		_, err := loop.Run(t.Context(), cfg, newStore(t), looptest.NewFakeRunner(t))
		if !errors.Is(err, loop.ErrConfig) || !strings.Contains(err.Error(), "plan mode is Plan") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("nil seams", func(t *testing.T) {
		if _, err := loop.Plan(t.Context(), planConfig(t), nil, looptest.NewFakeRunner(t)); !errors.Is(err, loop.ErrConfig) {
			t.Errorf("nil store: %v", err)
		}
	})
}

func TestPlanCommit(t *testing.T) {
	tests := []struct {
		name      string
		gitignore string
	}{
		{"git does not ignore .ralph/", ""},
		{".gitignore lists .ralph/", ".ralph/\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t)
			cfg := planConfig(t)
			gitRepo(t, cfg.Root)
			if tt.gitignore != "" {
				writeFile(t, cfg.Root, ".gitignore", tt.gitignore)
				git(t, cfg.Root, "add", ".gitignore")
			}
			git(t, cfg.Root, "add", "specs")
			git(t, cfg.Root, "commit", "-q", "-m", "specs")
			cfg.Commit = true
			cfg.MaxIterations = 3
			sessions := 0
			runner := looptest.NewFakeRunner(t).Always(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
				sessions++
				// Tasks land in the database (.ralph/, never committed); the
				// second session also writes a planning note.
				writeFile(t, cfg.Root, ".ralph/progress.db", fmt.Sprint(sessions))
				if err := store.Add(loop.Task{ID: fmt.Sprint("t", sessions), Title: "t", Priority: 2}); err != nil {
					return loop.RunResult{}, err
				}
				if sessions == 2 {
					writeFile(t, cfg.Root, "docs/plan-notes.md", "notes\n")
					return looptest.Result(complete), nil
				}
				return looptest.Result("more"), nil
			})
			rep, err := loop.Plan(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outcome != loop.OutcomeComplete || rep.Iterations != 2 {
				t.Errorf("outcome %s after %d: %s", rep.Outcome, rep.Iterations, rep.Message)
			}
			log := strings.Split(strings.TrimSpace(git(t, cfg.Root, "log", "--format=%s")), "\n")
			if diff := cmp.Diff([]string{"plan: iteration 2 - plan from specs/auth.md", "specs", "init"}, log); diff != "" {
				t.Errorf("commits (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"docs/plan-notes.md"}, committed(t, cfg.Root, "HEAD")); diff != "" {
				t.Errorf("files committed (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("outside a git repository", func(t *testing.T) {
		cfg := planConfig(t)
		cfg.Commit = true
		runner := looptest.NewFakeRunner(t)
		rep, err := loop.Plan(t.Context(), cfg, newStore(t), runner)
		if err != nil || rep.Outcome != loop.OutcomeGitFailed || rep.ExitCode() != 5 || runner.Calls() != 0 {
			t.Errorf("outcome %s exit %d after %d sessions, err %v", rep.Outcome, rep.ExitCode(), runner.Calls(), err)
		}
	})
}

func TestPlanPromptOverride(t *testing.T) {
	tests := []struct {
		name     string
		override string
		want     string // the prompt, or the error's text
		err      bool
	}{
		{"variables of the plan prompt", "{{.Mode}} {{.Iteration}}:{{range .Specs}} {{.Path}}{{end}}", "plan 1: specs/auth.md", false},
		{"an unknown variable is named", "{{range .Specs}}{{.Body}}{{end}}", "unknown variable .Body", true},
		{"a task variable is known, if empty", "[{{.Task.ID}}]", "[]", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t)
			cfg := planConfig(t)
			writeFile(t, cfg.Root, ".ralph/prompts/plan.md", tt.override)
			runner := looptest.NewFakeRunner(t).Always(planner(store, "a|"+complete))
			_, err := loop.Plan(t.Context(), cfg, store, runner)
			if tt.err {
				if !errors.Is(err, loop.ErrPrompt) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "plan.md") {
					t.Errorf("err = %v, want ErrPrompt naming plan.md and %q", err, tt.want)
				}
				if runner.Calls() != 0 {
					t.Error("an agent ran with a broken override")
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

func TestPlanUsageLimitIsAWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newStore(t)
		cfg := planConfig(t)
		cfg.MaxIterations = 1
		runner := looptest.NewFakeRunner(t, looptest.UsageLimited(time.Now().Add(time.Hour))).Always(planner(store, "a|"+complete))
		began := time.Now()
		rep, err := loop.Plan(t.Context(), cfg, store, runner)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != loop.OutcomeComplete || rep.Iterations != 1 || runner.Calls() != 2 {
			t.Errorf("outcome %s, %d iterations, %d sessions; want complete, 1, 2", rep.Outcome, rep.Iterations, runner.Calls())
		}
		if waited := time.Since(began); waited != time.Hour {
			t.Errorf("waited %v, want 1h", waited)
		}
	})
}

func TestPlanSessionLog(t *testing.T) {
	store := newStore(t)
	cfg := planConfig(t)
	cfg.SessionLog, cfg.RawLogs = true, true
	cfg.LogDir = filepath.Join(cfg.Root, ".ralph", "logs")
	runner := looptest.NewFakeRunner(t).Always(planner(store, "a|"+complete))
	rep, err := loop.Plan(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(loop.SessionLogPath(cfg.LogDir, rep.Session))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mode: plan\n", "=== iteration 1 ===\nmode: plan\ntask: (none: plan mode)\n", "status: session_ok", "outcome: complete", "exit code: 0"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("session log lacks %q:\n%s", want, log)
		}
	}
	if got := runner.Requests()[0].LogPath; got != filepath.Join(cfg.LogDir, rep.Session, "iter-1.ndjson") {
		t.Errorf("raw log path %q", got)
	}
}

// TestPlanFeatureForgotten: a planner that adds a feature's tasks without
// --feature leaves the feature empty; the message says so.
func TestPlanFeatureForgotten(t *testing.T) {
	tests := []struct {
		name     string
		max      int
		sessions []string
		want     string
	}{
		{"COMPLETE", 0, []string{"stray|" + complete},
			"the agent said planning is complete, but feature billing has no task (1 task was added outside feature billing)"},
		{"the limit", 2, []string{"s1|", "s2|"},
			"iteration limit reached (2) and feature billing has no task (2 tasks were added outside feature billing)"},
		{"nothing added at all", 1, []string{"|"},
			"iteration limit reached (1) and feature billing has no task"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, loop.Task{ID: "old", Title: "Before the run"})
			cfg := planConfig(t)
			cfg.MaxIterations = tt.max
			writeFile(t, cfg.Root, "billing.md", "# Billing\nInvoices.\n")
			if err := store.AddFeature(loop.Feature{Name: "billing", SpecPath: "billing.md"}); err != nil {
				t.Fatal(err)
			}
			cfg.Scope = loop.Scope{Feature: "billing"}
			runner := looptest.NewFakeRunner(t).Always(planner(store, tt.sessions...))
			rep, err := loop.Plan(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outcome != loop.OutcomeNoPlan || rep.Message != tt.want {
				t.Errorf("outcome %s, message %q; want no_plan, %q", rep.Outcome, rep.Message, tt.want)
			}
			var fe *loop.EmptyFeatureError
			if !errors.As(rep.Cause, &fe) || fe.Feature != "billing" || !strings.HasSuffix(rep.Message, fe.Error()) {
				t.Errorf("cause %#v; want the *EmptyFeatureError the message ends with", rep.Cause)
			}
		})
	}
}
