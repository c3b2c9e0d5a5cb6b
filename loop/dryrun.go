package loop

import (
	"context"
	"fmt"
)

// DryRunPlan is what a run would do next, without doing it.
type DryRunPlan struct {
	// Outcome is set when no task would run: OutcomeNoPlan, OutcomeComplete
	// (also when the store is a Finisher that says it is done),
	// OutcomeCompleteWithFailures or OutcomeBlocked. Empty otherwise.
	Outcome Outcome
	Message string
	// TaskID and Title name the next task (peek mode: the first claimable
	// one, which the agent may or may not pick).
	TaskID string
	Title  string
	Model  string
	// PromptName is the template the run would use; PromptSource is
	// SourceEmbedded or the override file's path. SystemPromptSource is
	// the same for its system prompt (SystemPromptName(PromptName)).
	PromptName         string
	PromptSource       string
	SystemPromptSource string
	// Waiting, when nothing is ready but other agents hold tasks in scope,
	// are those tasks: a run would wait for them (Message says so).
	Waiting []Task
	// TestCmd is the test gate's command a run would use ("" for none):
	// Config.TestCmd, else the one AGENTS.md names, read as a run would
	// read it (from HEAD's commit in a git repository). AgentsTest says
	// where it came from when it came from AGENTS.md, and names an
	// uncommitted command that would not be run (nil when AGENTS.md
	// names nothing).
	TestCmd    string
	AgentsTest *AgentsTest
}

// ExitCode is the exit code of `ralph build --dry-run`: 2 with no plan, 0
// otherwise.
func (p DryRunPlan) ExitCode() int {
	if p.Outcome == OutcomeNoPlan {
		return 2
	}
	return 0
}

// DryRun reports the next task, the model and the prompt source of a run
// with cfg. It starts no agent and changes nothing: it claims nothing,
// writes no log, and only reads the store and the prompt files. A bad
// Config or a prompt override that does not load is an error, as in Run.
func DryRun(ctx context.Context, cfg Config, store TaskStore) (DryRunPlan, error) {
	if store == nil {
		return DryRunPlan{}, fmt.Errorf("%w: DryRun needs a store", ErrConfig)
	}
	kind, strat, err := cfg.normalize()
	if err != nil {
		return DryRunPlan{}, err
	}
	name := kind.prompt
	p, err := LoadPrompt(cfg.Root, name)
	if err != nil {
		return DryRunPlan{}, err
	}
	sp, err := LoadPrompt(cfg.Root, SystemPromptName(name))
	if err != nil {
		return DryRunPlan{}, err
	}
	if cfg.Verify {
		for _, n := range []string{PromptVerify, SystemPromptName(PromptVerify)} {
			if _, err := LoadPrompt(cfg.Root, n); err != nil {
				return DryRunPlan{}, err
			}
		}
	}
	plan := DryRunPlan{PromptName: name, PromptSource: p.Source, SystemPromptSource: sp.Source, TestCmd: cfg.TestCmd}
	if cfg.TestCmd == "" {
		at, err := ReadAgentsTest(ctx, cfg.Root)
		if err != nil {
			return DryRunPlan{}, err
		}
		if at != (AgentsTest{}) {
			plan.TestCmd, plan.AgentsTest = at.Command, &at
		}
	}
	// A plan its store declares finished (RALPH_DONE) runs nothing.
	if s, err := finished(ctx, store, cfg.Scope); err != nil || s != nil {
		if s != nil {
			plan.Outcome, plan.Message = s.outcome, s.message
		}
		return plan, err
	}
	ready, err := store.Ready(ctx, cfg.Scope, 1)
	if err != nil {
		return plan, err
	}
	if len(ready) == 0 {
		c, err := store.Counts(ctx, cfg.Scope)
		if err != nil {
			return plan, err
		}
		if c.InProgress > 0 {
			if plan.Waiting, err = store.Active(ctx, cfg.Scope); err != nil {
				return plan, err
			}
			plan.Message = "nothing is ready yet; a run would wait for " + describeHeld(plan.Waiting)
			return plan, nil
		}
		s := terminalStop(c)
		plan.Outcome, plan.Message = s.outcome, s.message
		return plan, nil
	}
	t := ready[0]
	plan.TaskID, plan.Title = t.ID, t.Title
	choice := ModelChoice{Iteration: 1}
	if kind.claims {
		logs, err := store.Logs(ctx, t.ID)
		if err != nil {
			return plan, err
		}
		choice.Task, choice.TaskLogs = t, logs
	}
	plan.Model = strat.Model(choice)
	return plan, nil
}
