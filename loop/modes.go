package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// DefaultPlanIterations bounds a plan run whose Config leaves
// MaxIterations 0 (`ralph plan` without N). Planning a few specs takes one
// or two sessions; five leaves room for a large spec set without letting a
// planner that never says COMPLETE run up the bill.
const DefaultPlanIterations = 5

// PlanConfig returns the defaults of `ralph plan` for a project root:
// DefaultConfig in plan mode, with DefaultPlanIterations.
func PlanConfig(root string) Config {
	c := DefaultConfig(root)
	c.Mode = ModePlan
	c.MaxIterations = DefaultPlanIterations
	return c
}

// PromptConfig returns the defaults of `ralph prompt` for a project root:
// DefaultConfig in prompt mode (one iteration).
func PromptConfig(root string) Config {
	c := DefaultConfig(root)
	c.Mode = ModePrompt
	c.MaxIterations = 1
	return c
}

// mode is what differs between the kinds of run: build (the loop claims
// each task), peek (the agent claims), plan and prompt. The engine (run)
// opens the logs, renews the lease, waits out usage limits, books
// iterations and releases what is held on the way out; a mode renders its
// prompts, runs its next attempt and judges it, and says when the run
// ends. Each mode's state is its own: no mode reads another's.
type mode interface {
	// prompts names the templates the mode renders (system prompts
	// aside), its own first.
	prompts() []string
	// prepare readies the mode before the first iteration.
	prepare(ctx context.Context) *stop
	// iteration runs one attempt and judges it; counted is false when a
	// usage limit turned it into a wait (the same iteration again).
	iteration(ctx context.Context) (counted bool, s *stop)
	// exitChecks is step 9 after a counted iteration: a stop ends the run.
	exitChecks(ctx context.Context) *stop
	// close ends the mode's work when the run ends (clean: not cancelled).
	close(ctx context.Context, clean bool)
}

// verdict is how an iteration, or a step of it, ended: the status the
// session log and receipts show, the reason, and the stop that ends the
// run (nil: the loop goes on). The zero verdict means the step passed and
// the iteration goes on.
type verdict struct {
	status IterationStatus
	why    string
	stop   *stop
	// detail is a gate failure with its output's tail: the reason the
	// claim is released with, which the next attempt's prompt shows.
	detail string
	// limited is the verifier's usage-limited result: the iteration is a
	// wait for its reset, not counted.
	limited *RunResult
}

// decided reports whether v ends the iteration.
func (v verdict) decided() bool { return v.status != "" }

// judged is the verdict of a status, its reason and the stop, if any.
func judged(status IterationStatus, why string, s *stop) verdict {
	return verdict{status: status, why: why, stop: s}
}

// modeKind is a mode before it runs: what it takes of a Config and what
// its run begins with. modeOf is the one place a Config's mode is decided.
type modeKind struct {
	// prompt is the template its sessions render.
	prompt string
	// iterations is MaxIterations when the Config leaves it 0; single
	// runs one session whatever the Config says.
	iterations int
	single     bool
	// claims: the loop claims each iteration's task (build mode), so the
	// model strategy sees the task.
	claims bool
	// check checks the Config fields the mode takes beyond those every
	// mode reads: "" or the problem.
	check func(c *Config) string
	// start makes the mode's run (nil for plan and prompt mode, whose
	// entry points make it with what they were given).
	start func(r *run) mode
}

// modeOf is c's mode: plan and prompt by c.Mode, build by the claim mode
// (ClaimAgent is peek mode).
func modeOf(c *Config) modeKind {
	switch {
	case c.Mode == ModePlan:
		return modeKind{prompt: PromptPlan, iterations: DefaultPlanIterations, check: checkTaskless}
	case c.Mode == ModePrompt:
		return modeKind{prompt: PromptAdHoc, iterations: 1, single: true, check: checkTaskless}
	case c.ClaimMode == ClaimAgent:
		return modeKind{prompt: PromptPeek, iterations: DefaultMaxIterations, check: checkPeek,
			start: func(r *run) mode { return &peekMode{run: r} }}
	}
	return modeKind{prompt: PromptBuild, iterations: DefaultMaxIterations, claims: true, check: checkBuild,
		start: func(r *run) mode { return &buildMode{run: r} }}
}

// checkBuild checks the fields build mode alone takes.
func checkBuild(c *Config) string {
	switch {
	case c.Workspace != nil && c.Commit:
		return "a workspace's work is committed by its integration: the commit gate is not used with one"
	case c.FinalCmd != "" && c.Scope.TaskID != "":
		return "the final command checks a complete plan or feature, not one task (final command " + c.FinalCmd + ")"
	}
	return ""
}

// checkPeek checks peek mode's Config: the agent claims, so there are no
// workers and no verifier.
func checkPeek(c *Config) string {
	switch {
	case c.Workspace != nil || c.Shared != nil || c.Budget != nil:
		return "peek mode (claim mode agent) cannot run with workers: each worker's loop claims its task"
	case c.Verify:
		return "verify needs the loop to claim (claim mode loop): in peek mode the agent claims and closes tasks itself"
	case c.FinalCmd != "":
		return "the final command needs the loop to claim (claim mode loop): in peek mode the agent adds and closes tasks itself"
	}
	return ""
}

// checkTaskless checks the fields that plan and prompt mode do not take.
func checkTaskless(c *Config) string {
	switch {
	case c.ClaimMode == ClaimAgent:
		return string(c.Mode) + " mode: the agent claims no task (claim mode agent is for build only)"
	case c.Verify:
		return string(c.Mode) + " mode: verify checks a finished task, and this mode has none"
	case c.TestCmd != "":
		return string(c.Mode) + " mode has no test gate (test command " + c.TestCmd + ")"
	case c.FinalCmd != "":
		return string(c.Mode) + " mode has no final check (final command " + c.FinalCmd + ")"
	case c.Scope.TaskID != "":
		return string(c.Mode) + " mode takes no task scope"
	case c.Mode == ModePrompt && c.Scope.Feature != "":
		return "prompt mode takes no feature scope"
	}
	return ""
}

// taskless is what plan and prompt mode share: nothing to ready before the
// first session and nothing to close.
type taskless struct{}

func (taskless) prepare(context.Context) *stop { return nil }
func (taskless) close(context.Context, bool)   {}

// modeConfig sets cfg.Mode to mode when it is empty or DefaultConfig's
// ModeBuild, so that Plan and RunPrompt accept a Config made from
// DefaultConfig; any other mode is left for normalizeFor to refuse.
func modeConfig(cfg *Config, mode Mode) {
	if cfg.Mode == "" || cfg.Mode == ModeBuild {
		cfg.Mode = mode
	}
}

// commitTitle is the first non-blank line of text, without markdown heading
// or list marks, at most 72 bytes (cut at a rune boundary, with "…"), or
// fallback when there is none.
func commitTitle(text, fallback string) string {
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#*->"))
		line = strings.Join(strings.Fields(line), " ")
		if line == "" {
			continue
		}
		const limit = 72
		if len(line) > limit {
			i := limit
			for i > 0 && !utf8.RuneStart(line[i]) {
				i--
			}
			line = strings.TrimSpace(line[:i]) + "…"
		}
		return line
	}
	return fallback
}

// commitChanges is the commit gate of plan and prompt mode: it commits
// what changed, and nothing changed is no trouble (the plan lives in
// .ralph/, which is never committed). It returns false, nil when there was
// nothing to commit.
func (r *run) commitChanges(ctx context.Context, n int, title string) (bool, error) {
	why, err := r.headMoved(ctx)
	if err != nil {
		return false, err
	}
	if why != "" {
		return false, fmt.Errorf("%w: %s", ErrHeadMoved, why)
	}
	err = commitAll(ctx, r.repo, r.cfg.Root, CommitMessage(r.cfg.Mode, n, title))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNothingChanged):
		return false, nil
	}
	return false, err
}
