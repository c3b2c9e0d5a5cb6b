package parallel

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ralph-dev/ralph/loop"
)

// SettingBase is the plan setting that records the branch the plan's
// integration branch follows, its base (loop.SettingStore): Config.Base,
// or the branch HEAD was on when a build first found none recorded.
const SettingBase = "integration_follows"

// BaseTask is the task id of the landings that merge the base into the
// integration branch (loop.Landing.TaskID): no task has it, since a task
// id has no spaces.
const BaseTask = "(base merge)"

// baseTries bounds the rounds of a base merge: each is lost only to
// another build's landing at that moment.
const baseTries = 10

// A BaseConflictError is a base whose new commits conflict with the
// integration branch when a build starts: ralph resolves no conflict and
// rebases no landed work, so the build stops (OutcomeGitFailed) until a
// person merges them. The next build takes that merge as the branch's tip.
type BaseConflictError struct {
	// Branch is the integration branch and Base the branch it follows
	// (short names); Remote the remote where both live ("" the
	// repository's own).
	Branch, Base, Remote string
	// Paths are the conflicting files.
	Paths []string
}

// MergeDir is where a BaseConflictError's advice merges, relative to the
// project: a worktree of its own, so that the person's tree and the
// branch they have checked out stay as they are.
const MergeDir = "../ralph-merge"

func (e *BaseConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the integration branch %s cannot take the new commits of %s, the branch it follows: they conflict in %s. ralph merges %s into it when a build starts and never rebases landed work, so the build stops until you merge them, in a worktree of their own (yours stays as it is): ",
		e.Branch, e.Base, joinPaths(e.Paths), e.Base)
	if e.Remote == "" {
		fmt.Fprintf(&b, "git worktree add %s %s && cd %s && git merge %s; resolve the conflicts, git add and git commit; then",
			MergeDir, e.Branch, MergeDir, e.Base)
	} else {
		fmt.Fprintf(&b, "git fetch %s && git worktree add -B %s %s %s/%s && cd %s && git merge %s/%s; resolve the conflicts, git add and git commit, git push %s %s; then",
			e.Remote, e.Branch, MergeDir, e.Remote, e.Branch, MergeDir, e.Remote, e.Base, e.Remote, e.Branch)
	}
	fmt.Fprintf(&b, " cd back and git worktree remove %s. The next build takes your merge as the branch's tip", MergeDir)
	return b.String()
}

// baseBranch returns the branch (short name) the plan's integration branch
// into follows, recording it when the plan has none recorded: asked
// (Config.Base), else the branch the repository's HEAD is on. "" means
// none: HEAD detached, or on into or one of ralph's own branches.
func baseBranch(ctx context.Context, g Git, settings loop.SettingStore, asked, into, root string) (string, error) {
	recorded, ok, err := settings.PlanSetting(ctx, SettingBase)
	if err != nil {
		return "", err
	}
	intoName := strings.TrimPrefix(into, heads)
	if asked != "" {
		if err := checkBranchName(asked); err != nil || asked == intoName {
			return "", &IntoError{Reason: IntoBaseInvalid, Branch: asked, Recorded: intoName}
		}
	}
	switch {
	case ok && asked != "" && asked != recorded:
		return "", &IntoError{Reason: IntoBaseRecorded, Branch: asked, Recorded: recorded}
	case ok:
		return recorded, nil
	}
	name := asked
	if name == "" {
		ref, _, err := g.HeadOf(ctx, root)
		if err != nil {
			return "", err
		}
		name = strings.TrimPrefix(ref, heads)
		if ref == "" || ref == into || checkBranchName(name) != nil {
			return "", nil
		}
	}
	now, err := settings.RecordPlanSetting(ctx, SettingBase, name)
	if err != nil {
		return "", err
	}
	if now != name && asked != "" {
		return "", &IntoError{Reason: IntoBaseRecorded, Branch: asked, Recorded: now}
	}
	return now, nil
}

// readBase returns the tip of the base: the remote's branch, fetched now,
// when the integration branch lives on a remote; ok false when there is
// none (or no base).
func (g *tipGuard) readBase(ctx context.Context) (string, bool, error) {
	if g.base == "" {
		return "", false, nil
	}
	if g.remote == "" {
		return g.git.Resolve(ctx, heads+g.base)
	}
	return g.git.Fetch(ctx, g.remote, heads+g.base)
}

// follow merges the base's new commits into the branch, whose tip is
// tip: a merge commit, parents the tip and the base's tip, recorded as a
// landing of BaseTask before the branch moves to it and confirmed after,
// as a task's is, so that the tip check explains it. It returns the tip
// after: tip when the branch holds the base already, or when there is
// no base (found false). A conflict is a *BaseConflictError; a tip that moved meanwhile
// is checked again and merged onto.
func (g *tipGuard) follow(ctx context.Context, tip string) (after string, found bool, err error) {
	for range baseTries {
		theirs, ok, err := g.readBase(ctx)
		if err != nil || !ok {
			return tip, ok, err
		}
		if in, err := g.git.IsAncestor(ctx, theirs, tip); err != nil || in {
			return tip, true, err
		}
		msg := fmt.Sprintf("Merge %s into %s\n\nralph merged the new commits of %s, the branch %s follows, when a build started.\n", g.base, g.branch(), g.base, g.branch())
		m, err := g.git.Merge(ctx, tip, theirs, msg)
		var ce *ConflictError
		if errors.As(err, &ce) {
			return tip, true, &BaseConflictError{Branch: g.branch(), Base: g.base, Remote: g.remote, Paths: ce.Paths}
		}
		if err != nil {
			return tip, true, err
		}
		if err := g.store.RecordLanding(ctx, loop.Landing{Branch: g.branch(), Commit: m, Parent: tip, TaskID: BaseTask}); err != nil {
			return tip, true, err
		}
		err = g.move(ctx, m, tip)
		if errors.Is(err, ErrRefMoved) {
			if err := g.store.VoidLanding(ctx, g.branch(), m); err != nil {
				return tip, true, err
			}
			if tip, err = g.current(ctx); err != nil {
				return tip, true, err
			}
			continue
		}
		if err != nil {
			return tip, true, err
		}
		return m, true, g.store.ConfirmLanding(ctx, g.branch(), m)
	}
	return tip, true, fmt.Errorf("the integration branch %s moved under every one of %d tries to merge %s into it", g.branch(), baseTries, g.base)
}

// move moves the branch from old to commit: a compare-and-swap, or on a
// remote a push that only fast-forwards, the local branch following.
// ErrRefMoved when it is no longer at old.
func (g *tipGuard) move(ctx context.Context, commit, old string) error {
	if g.remote == "" {
		return g.git.SwapRef(ctx, g.into, commit, old)
	}
	if err := g.git.Push(ctx, PushParams{Remote: g.remote, Ref: g.into, Commit: commit, Mode: PushFastForward, Old: old}); err != nil {
		return err
	}
	return advanceBranch(ctx, g.git, g.into, commit)
}

// adoptMerge records tip as a landing of BaseTask when it is a person's
// merge of the base into the branch — two parents, the first where ralph
// last put the branch (last) or reached from there by its landings, the
// second in the base's history and new to the first — as the stop on a
// conflict (*BaseConflictError) asks for. ok reports whether it did.
func (g *tipGuard) adoptMerge(ctx context.Context, tip, last string) (ok bool, err error) {
	if g.base == "" {
		return false, nil
	}
	ps, err := g.git.Parents(ctx, tip)
	if err != nil || len(ps) != 2 {
		return false, err
	}
	if _, ok, err := g.walk(ctx, ps[0], last); err != nil || !ok {
		return false, err
	}
	theirs, ok, err := g.readBase(ctx)
	if err != nil || !ok {
		return false, err
	}
	if in, err := g.git.IsAncestor(ctx, ps[1], theirs); err != nil || !in {
		return false, err
	}
	if old, err := g.git.IsAncestor(ctx, ps[1], ps[0]); err != nil || old {
		return false, err
	}
	err = g.store.RecordLanding(ctx, loop.Landing{Branch: g.branch(), Commit: tip, Parent: ps[0], TaskID: BaseTask})
	return err == nil, err
}

// followBase merges the base's new commits into the branch at tip
// (guard.follow), when it follows a base, and says so (say): it returns
// the merge, "" when it made none. A base that is not there merges
// nothing, and is said to be missing.
func followBase(ctx context.Context, guard *tipGuard, tip string, say func(string)) (string, error) {
	if guard.base == "" {
		return "", nil
	}
	merged, found, err := guard.follow(ctx, tip)
	if err == nil && !found {
		where := ""
		if guard.remote != "" {
			where = " on " + guard.remote
		}
		say(fmt.Sprintf("%s follows %s, which is not there%s: nothing of it was merged", guard.branch(), guard.base, where))
	}
	if err != nil || merged == tip {
		return "", err
	}
	say(fmt.Sprintf("%s: merged the new commits of %s, the branch it follows, as %s", guard.branch(), guard.base, short(merged)))
	return merged, nil
}
