package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrBaselineFailed: the test gate's command already fails on the tree
// the build starts from (ARCHITECTURE.md §3.5), so that every task's gate
// would fail whatever its agent did. The run stops before its first
// session (OutcomeTestGateFailed); Report.Cause wraps this error and
// Report.Message starts with its text.
var ErrBaselineFailed = errors.New("loop: the test gate already fails on the starting tree")

// BaselineHint is what Report.Message suggests after ErrBaselineFailed's
// text, in the library's words (a program words it with its own options).
const BaselineHint = "before any agent ran, so every task's gate would fail: give each task a check of its own, or check the whole suite once the plan is complete (a final command)"

// MaxFinalRounds is how often a run's final command may fail and add its
// task (Config.FinalCmd); the next failure stops the run.
const MaxFinalRounds = 3

// FinalTaskTitle is the title of the task a failing final command adds.
const FinalTaskTitle = "Make the final check pass"

// errToTip is a tree that could not be put at the integration tip.
var errToTip = errors.New("readying the tree at the integration tip")

// toTip puts the run's tree at the integration tip before a command that
// needs no task runs there (a TipTree workspace); without one nothing
// moves.
func (r *run) toTip(ctx context.Context) error {
	t, ok := r.cfg.Workspace.(TipTree)
	if !ok {
		return nil
	}
	err := t.ToTip(ctx)
	if nw, ok := t.(Noticer); ok {
		for _, msg := range nw.Notices() {
			r.note.notice(r.report.Iterations, "%s", msg)
		}
	}
	return err
}

// baseline runs the test gate's command once before the first agent
// session (once for all workers, in the first one's tree at the
// integration tip): a gate that already fails stops the run before
// anything is spent.
func (b *buildMode) baseline(ctx context.Context) *stop {
	cmd := b.tests.cmd
	if cmd == "" {
		return nil
	}
	err := b.cfg.Shared.baseline(func() error {
		err := b.runAtTip(ctx, cmd)
		// The worker that ran it shows the output, once for the build.
		if head, out := testsFailure(err); ctx.Err() == nil && out != "" {
			b.note.failed(0, fmt.Errorf("the test gate's output on the starting tree (%s):\n%s", head, out))
		}
		return err
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return b.checkCancel(ctx)
	case errors.Is(err, errToTip):
		return stopWith(OutcomeGitFailed, "git: the test gate's baseline: %v", err)
	case !errors.Is(err, ErrTestsFailed):
		return internal(err)
	}
	head, out := testsFailure(err)
	msg := fmt.Sprintf("%s (%s), %s", strings.TrimPrefix(ErrBaselineFailed.Error(), "loop: "), head, BaselineHint)
	if out != "" {
		msg += "\n" + out
	}
	return &stop{outcome: OutcomeTestGateFailed, message: msg, cause: fmt.Errorf("%w: %w", ErrBaselineFailed, err)}
}

// testsFailure is a TestsFailedError's command and how it ended, and
// its output; both "" for any other error.
func testsFailure(err error) (head, out string) {
	var te *TestsFailedError
	if !errors.As(err, &te) {
		return "", ""
	}
	return te.Head(), te.Output
}

// runAtTip runs the test command cmd in the worker's tree, put at the
// integration tip first (toTip; without workers, the project as it is):
// an error wrapping errToTip when the tree could not be put there, else
// runTests'.
func (b *buildMode) runAtTip(ctx context.Context, cmd string) error {
	if err := b.toTip(ctx); err != nil {
		return fmt.Errorf("%w: %w", errToTip, err)
	}
	return b.runTests(ctx, b.dir(), cmd)
}

// finalCheck is the final command's turn when the plan in scope is
// complete (s is the stop that says so): it passes and the run ends with
// s; it fails and a task to make it pass is added, the run going on (nil);
// it fails once more than MaxFinalRounds allow and the run stops
// (OutcomeTestGateFailed). With workers one worker at a time runs it, the
// rounds counted for the build.
func (b *buildMode) finalCheck(ctx context.Context, s *stop) *stop {
	cmd := b.cfg.FinalCmd
	if cmd == "" || s == nil || s.outcome != OutcomeComplete {
		return s
	}
	f := &b.final
	if sh := b.cfg.Shared; sh != nil {
		f = &sh.final
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.passed {
		return s
	}
	// Another worker's final task may have been added meanwhile.
	c, err := b.store.Counts(ctx, b.cfg.Scope)
	if err != nil {
		return b.storeErr(ctx, err)
	}
	if !c.Resolved() {
		return nil
	}
	n := b.report.Iterations
	err = b.runAtTip(ctx, cmd)
	switch {
	case err == nil:
		f.passed = true
		b.note.notice(n, "the final check passed: %s", cmd)
		return s
	case ctx.Err() != nil:
		return b.checkCancel(ctx)
	case !errors.Is(err, ErrTestsFailed):
		return stopWith(OutcomeGitFailed, "git: the final check: %v", err)
	}
	head, out := testsFailure(err)
	why := "the final check failed: " + head
	b.note.failed(n, fmt.Errorf("%s\n%s", why, out))
	if f.rounds >= MaxFinalRounds {
		return &stop{outcome: OutcomeTestGateFailed, cause: err,
			message: fmt.Sprintf("%s, after %d %s added to make it pass", why, f.rounds, plural(f.rounds, "task", "tasks"))}
	}
	adder, ok := b.store.(TaskAdder)
	if !ok {
		return internal(fmt.Errorf("%w: a final command needs a store that adds tasks", ErrConfig))
	}
	// out is the end of the output already (runTests quotes its tail).
	desc := fmt.Sprintf("The final check `%s` fails on the complete plan. Make it pass. The end of its output:\n\n%s", cmd, out)
	t, err := adder.AddTask(ctx, NewTask{Title: FinalTaskTitle, Description: desc, Priority: 2, Feature: b.cfg.Scope.Feature, Check: cmd})
	if err != nil {
		return b.storeErr(ctx, err)
	}
	f.rounds++
	b.note.notice(n, "added task %s %q (final check round %d of %d); going on", t.ID, FinalTaskTitle, f.rounds, MaxFinalRounds)
	return nil
}
