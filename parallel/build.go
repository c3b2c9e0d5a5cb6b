package parallel

import (
	"context"
	"fmt"

	"github.com/ralph-dev/ralph/loop"
)

// Workers is how many workers a build of the plan in store runs with,
// asked being the number asked for (Config.Workers; 0: not asked): asked,
// when it is not 0; else 1 when the plan records an integration branch —
// once a plan integrates into a branch, every build of it is built in
// worktrees, whoever builds it (ARCHITECTURE.md §5); else 0, one loop in
// the checkout. A store that cannot say (not a loop.SettingStore, or an
// error reading the setting) records no branch.
func Workers(ctx context.Context, store loop.TaskStore, asked int) int {
	if asked != 0 {
		return asked
	}
	if ss, ok := store.(loop.SettingStore); ok {
		if _, ok, err := ss.PlanSetting(ctx, SettingInto); err == nil && ok {
			return 1
		}
	}
	return 0
}

// CheckLoop says whether lc can be the loop configuration of workers:
// ErrPeekWithWorkers in peek mode (lc.ClaimMode loop.ClaimAgent), else
// ErrCommitWithWorkers with lc.Commit, else nil. Run checks it before
// anything else of its configuration's loop; a caller that has decided
// on workers (Workers) may check it sooner.
func CheckLoop(lc loop.Config) error {
	switch {
	case lc.ClaimMode == loop.ClaimAgent:
		return ErrPeekWithWorkers
	case lc.Commit:
		return ErrCommitWithWorkers
	}
	return nil
}

// ErrNoWorktrees: Build would run one loop in the checkout (no workers
// asked, no integration branch recorded), and Config names what only a
// build in worktrees has (Into, Setup, Remote, AcceptTip). It wraps
// loop.ErrConfig.
var ErrNoWorktrees = fmt.Errorf("%w: Config.Into, Setup, Remote and AcceptTip go with workers (or a plan that has an integration branch)", loop.ErrConfig)

// Build runs the plan in store as ralph build does, deciding where: with
// Workers(ctx, store, cfg.Workers) workers in worktrees (Run) — so a plan
// that has an integration branch is built in worktrees even when
// cfg.Workers is 0 — or, when that is 0, as one loop.Run of cfg.Loop in
// its Root, whose Report has no Into (ErrNoWorktrees if cfg names an
// integration branch, a setup, a remote or AcceptTip).
func Build(ctx context.Context, cfg Config, store loop.TaskStore, runner loop.Runner) (Report, error) {
	if cfg.Workers = Workers(ctx, store, cfg.Workers); cfg.Workers != 0 {
		return Run(ctx, cfg, store, runner)
	}
	if cfg.Into != "" || cfg.Setup != "" || cfg.Remote != "" || cfg.AcceptTip {
		return Report{Report: loop.Report{Outcome: loop.OutcomeError, Message: ErrNoWorktrees.Error(), Remaining: -1}}, ErrNoWorktrees
	}
	rep, err := loop.Run(ctx, cfg.Loop, store, runner)
	return Report{Report: rep}, err
}
