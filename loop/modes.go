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

// checkOtherMode checks the fields that plan and prompt mode do not take.
// It returns the problem, or "".
func (c *Config) checkOtherMode() string {
	switch {
	case c.ClaimMode == ClaimAgent:
		return string(c.Mode) + " mode: the agent claims no task (claim mode agent is for build only)"
	case c.Verify:
		return string(c.Mode) + " mode: verify checks a finished task, and this mode has none"
	case c.TestCmd != "":
		return string(c.Mode) + " mode has no test gate (test command " + c.TestCmd + ")"
	case c.Scope.TaskID != "":
		return string(c.Mode) + " mode takes no task scope"
	case c.Mode == ModePrompt && c.Scope.Feature != "":
		return "prompt mode takes no feature scope"
	}
	return ""
}

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
