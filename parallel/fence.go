package parallel

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/ralph-dev/ralph/loop"
)

// The claim fence (ARCHITECTURE.md §7.3): the git side of "a holder that
// lost its claim never lands its work". The store's claim check right
// before the integration branch moves cannot be the whole of it: a holder
// stopped between that check and the move (a suspended laptop, a paused
// VM) wakes past its lease, after another claim took the task over, and
// would move the branch all the same. So every claim puts up a fence in
// git itself, and the move of the branch takes the fence with it:
//
//   - The fence of a task on an integration branch is the ref
//     refs/ralph/claims/<branch>/<task> (both encoded as RefName does),
//     in the repository — or, with a remote, on the remote, where every
//     machine's moves meet.
//   - When an attempt begins (Begin), before it reads the tip, the fence
//     is set to the claim's mark: a commit of no files that stands for
//     the task, the branch and the claim's generation (Git.Mark: one
//     text, one commit, in every clone). Whatever the fence named is
//     replaced: the claim is the task's newest.
//   - The landing moves the branch from the tip and the fence from the
//     claim's mark to the landed commit in one transaction (git
//     update-ref --stdin; on a remote one git push --atomic, the fence
//     by --force-with-lease). A holder whose fence another claim has
//     replaced moves nothing.
//   - A refused move whose fence is not the claim's mark asks the store
//     again: a claim that is no longer the task's gives up
//     (loop.ErrStaleClaim); the current one puts its mark back by
//     compare-and-swap (a stale holder that began late replaced it) and
//     tries again.
//
// A stale holder's move therefore lands only if no claim began after
// its own — when it is no stale holder. The cost is one ref write per
// claim (two git processes: the mark and the ref), or one push with a
// remote, counted in BenchmarkWorkspaceTask.

// maxRetakes bounds how often one landing puts its fence back: a fence
// that keeps moving is task trouble, not a race to go on losing.
const maxRetakes = 10

// ownRefs is where ralph keeps refs of its own that are not branches.
const ownRefs = "refs/ralph/"

// fenceRef is the fence of task id on the integration branch into (a
// full ref name).
func fenceRef(into, id string) string {
	return ownRefs + "claims/" + RefName(strings.TrimPrefix(into, heads)) + "/" + RefName(id)
}

// fenceText is the text of the mark that stands for task's claim on
// branch.
func fenceText(branch string, task loop.Task) string {
	return fmt.Sprintf("ralph: claim %d of task %s on %s\n\n%s: %s\n%s: %d\n",
		task.Generation, RefName(task.ID), RefName(branch), TrailerTask, RefName(task.ID), TrailerGeneration, task.Generation)
}

// raiseFence sets the fence of task to its claim's mark, which it
// returns.
func (w *workspace) raiseFence(ctx context.Context, task loop.Task) (string, error) {
	mark, err := w.git.Mark(ctx, fenceText(w.guard.branch(), task))
	if err != nil {
		return "", err
	}
	ref := fenceRef(w.into, task.ID)
	if w.remote == "" {
		err = w.git.SetRef(ctx, ref, mark)
	} else {
		err = w.git.Push(ctx, PushParams{Remote: w.remote, Ref: ref, Commit: mark, Mode: PushReplace})
	}
	if err != nil {
		return "", fmt.Errorf("task %s: the claim's fence: %w", task.ID, err)
	}
	return mark, nil
}

// landMoves are the moves that land head on the tip: the branch, and the
// fence from the claim's mark to head.
func (w *workspace) landMoves(head, tip string) (branch, fence RefMove) {
	return RefMove{Ref: w.into, New: head, Old: tip}, RefMove{Ref: fenceRef(w.into, w.task.ID), New: head, Old: w.fence}
}

// fenceAt returns what the task's fence names now ("" none): here, or on
// the remote.
func (w *workspace) fenceAt(ctx context.Context) (string, error) {
	ref := fenceRef(w.into, w.task.ID)
	if w.remote == "" {
		at, _, err := w.git.Resolve(ctx, ref)
		return at, err
	}
	refs, err := w.git.RemoteRefs(ctx, w.remote, ref)
	return refs[ref], err
}

// refence follows a refused move of the branch. fenced is false when the
// fence is still the claim's: the branch moved (a lost race). Else the
// fence was another claim's: the claim check's error (loop.ErrStaleClaim)
// when this claim is no longer the task's, and otherwise the fence is put
// back to this claim's mark (fenced true, nil).
func (w *workspace) refence(ctx context.Context, req loop.IntegrateRequest) (fenced bool, err error) {
	at, err := w.fenceAt(ctx)
	if err != nil || at == w.fence {
		return false, err
	}
	if req.Current != nil {
		if err := req.Current(ctx); err != nil {
			return true, err
		}
	}
	ref := fenceRef(w.into, w.task.ID)
	switch {
	case w.remote != "" && at == "":
		err = w.git.Push(ctx, PushParams{Remote: w.remote, Ref: ref, Commit: w.fence, Mode: PushCreate})
	case w.remote != "":
		err = w.git.Push(ctx, PushParams{Remote: w.remote, Ref: ref, Commit: w.fence, Mode: PushReplace, Old: at})
	case at == "":
		err = w.git.CreateRef(ctx, ref, w.fence)
	default:
		err = w.git.SwapRefs(ctx, RefMove{Ref: ref, New: w.fence, Old: at})
	}
	if errors.Is(err, ErrRefMoved) || errors.Is(err, ErrRefExists) {
		err = nil // moved again meanwhile: the next try finds out by whom
	}
	return true, err
}
