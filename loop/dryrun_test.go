package loop_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
)

func TestDryRun(t *testing.T) {
	tests := []struct {
		name     string
		tasks    []loop.Task
		config   func(*loop.Config)
		override bool
		want     loop.DryRunPlan
		exit     int
	}{
		{
			name:  "next task, model and embedded prompt",
			tasks: []loop.Task{{ID: "b", Title: "Second", Priority: 3}, {ID: "a", Title: "First", Priority: 1}},
			want:  loop.DryRunPlan{TaskID: "a", Title: "First", Model: "sonnet", PromptName: "build", PromptSource: "embedded", SystemPromptSource: "embedded"},
		},
		{
			name:     "override path and strategy",
			tasks:    []loop.Task{{ID: "a", Title: "First"}},
			config:   func(c *loop.Config) { c.Strategy = loop.StrategyPlanThenExecute },
			override: true,
			want:     loop.DryRunPlan{TaskID: "a", Title: "First", Model: "opus", PromptName: "build", PromptSource: "OVERRIDE", SystemPromptSource: "embedded"},
		},
		{
			name:   "peek mode",
			tasks:  []loop.Task{{ID: "a", Title: "First"}},
			config: func(c *loop.Config) { c.ClaimMode = loop.ClaimAgent; c.Model = "haiku" },
			want:   loop.DryRunPlan{TaskID: "a", Title: "First", Model: "haiku", PromptName: "peek", PromptSource: "embedded", SystemPromptSource: "embedded"},
		},
		{
			name: "no plan exits 2",
			want: loop.DryRunPlan{Outcome: loop.OutcomeNoPlan, Message: "nothing to do: the plan is empty", PromptName: "build", PromptSource: "embedded", SystemPromptSource: "embedded"},
			exit: 2,
		},
		{
			name:  "blocked exits 0",
			tasks: []loop.Task{{ID: "a", Status: loop.StatusBlocked}},
			want:  loop.DryRunPlan{Outcome: loop.OutcomeBlocked, Message: "blocked: 1 task remains but none is ready", PromptName: "build", PromptSource: "embedded", SystemPromptSource: "embedded"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tt.tasks...)
			cfg := testConfig(t)
			cfg.SessionLog, cfg.RawLogs = true, true // a dry run still writes nothing
			if tt.config != nil {
				tt.config(&cfg)
			}
			if tt.override {
				writeFile(t, cfg.Root, ".ralph/prompts/build.md", "{{.Task.Title}}")
				tt.want.PromptSource = filepath.Join(cfg.Root, ".ralph/prompts/build.md")
			}
			before := store.Tasks()
			plan, err := loop.DryRun(t.Context(), cfg, store)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, plan); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			if plan.ExitCode() != tt.exit {
				t.Errorf("exit %d, want %d", plan.ExitCode(), tt.exit)
			}
			if diff := cmp.Diff(before, store.Tasks()); diff != "" {
				t.Errorf("dry run changed the store:\n%s", diff)
			}
			if _, err := os.Stat(filepath.Join(cfg.Root, ".ralph", "logs")); !os.IsNotExist(err) {
				t.Errorf("dry run wrote logs: %v", err)
			}
		})
	}
}

func TestFindSkills(t *testing.T) {
	root := t.TempDir()
	writeFile(t, root, ".ralph/skills/db/SKILL.md", "---\nname: database\ndescription: \"Migrations: how and when\"\n---\n# body")
	writeFile(t, root, ".ralph/skills/api/SKILL.md", "---\ndescription: >\n  Calling the API,\n  with retries.\n---\n")
	writeFile(t, root, ".ralph/skills/bare/SKILL.md", "no frontmatter at all")
	writeFile(t, root, ".ralph/skills/nodesc/SKILL.md", "---\nname: x\n---\n")
	got, err := loop.FindSkills(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []loop.Skill{
		{Name: "api", Description: "Calling the API, with retries.", Path: ".ralph/skills/api/SKILL.md"},
		{Name: "database", Description: "Migrations: how and when", Path: ".ralph/skills/db/SKILL.md"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("skills (-want +got):\n%s", diff)
	}
}
