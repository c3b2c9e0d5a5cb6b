package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// dir is where the agent, the test gate and the verifier work: the
// worker's workspace, or the project root.
func (r *run) dir() string {
	if r.cfg.Workspace != nil {
		return r.cfg.Workspace.Dir()
	}
	return r.cfg.Root
}

// short is a commit's abbreviated name.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

// begin readies the workspace for the claimed task (ARCHITECTURE.md §5).
// landed is set when the task's work is on the integration branch already:
// begin has completed the task then, and the iteration is not counted. A
// git failure releases the claim and stops the run (exit 5).
func (b *buildMode) begin(ctx context.Context, a attempt, ws Workspace, logs []LogEntry) (landed bool, s *stop) {
	task := a.task
	recorded := 0
	for _, e := range logs {
		if e.Kind == LogDone {
			recorded++
		}
	}
	integrated, err := ws.Begin(ctx, task, recorded)
	if nw, ok := ws.(Noticer); ok {
		for _, msg := range nw.Notices() {
			b.note.notice(a.n, "%s", msg)
		}
	}
	if err != nil {
		b.releaseHeld(ctx, "the worker's tree could not be readied: "+firstLine(err.Error()))
		if ctx.Err() != nil {
			return false, b.checkCancel(ctx)
		}
		return false, stopWith(OutcomeGitFailed, "git: task %s: %v", task.ID, err)
	}
	if !integrated {
		return false, nil
	}
	msg := "its work is on the integration branch already (a landing ralph recorded, made before a stop)"
	b.note.notice(a.n, "task %s: %s; done", task.ID, msg)
	// No iteration has begun for this claim: what the store says is
	// numbered with the last one that did.
	if v, ok := b.commitMove(ctx, b.iter.n, task, "done", "", func(ctx context.Context) error {
		return b.store.Complete(ctx, MoveParams{TaskID: task.ID, Message: msg, By: b.by(task)})
	}); !ok {
		return true, v.stop
	}
	b.unhold()
	return true, nil
}

// integrate lands a done task's work on the integration branch before the
// task is done in the store ("done means merged", ARCHITECTURE.md §5). A
// zero verdict means it landed (or there was nothing to land). Work that
// cannot land is task trouble; a claim that ended meanwhile is a lost
// claim; any other failure is a git failure, which stops the run (exit 5).
func (b *buildMode) integrate(ctx context.Context, a attempt, ws Workspace, res RunResult) verdict {
	n, task := a.n, a.task
	req := IntegrateRequest{
		Task:    task,
		Summary: summary(res.Text),
		// How the agent's private checkout moved, when its runner gave it
		// one: the workspace lands the agent's own changes, never a
		// revert of landed work (ARCHITECTURE.md §7).
		Checkout: res.Checkout,
		Current: func(ctx context.Context) error {
			cur, err := b.store.Get(ctx, task.ID)
			if err != nil {
				return err
			}
			if !holds(cur, task) {
				return fmt.Errorf("%w: task %s is %s under claim %d of %q", ErrStaleClaim, task.ID, cur.Status, cur.Generation, cur.ClaimedBy)
			}
			return nil
		},
	}
	if cmd := b.tests.cmd; cmd != "" {
		dir := b.dir()
		req.Gate = func(ctx context.Context) error { return b.runTests(ctx, dir, cmd) }
	}
	got, err := ws.Integrate(ctx, req)
	var ie *IntegrationError
	switch {
	case err == nil:
		switch {
		case got.Elsewhere:
			b.note.notice(n, "task %s: its work landed already, from another claim (a holder that lost its claim moved the branch before it knew): done, this attempt's work kept but not landed", task.ID)
		case got.Commit == "" && got.Replayed:
			b.note.notice(n, "task %s: its changes are on the integration branch already (the replay onto the moved tip changed nothing): done, no commit", task.ID)
		case got.Commit == "":
			b.note.notice(n, "task %s changed nothing: done, no commit", task.ID)
		case got.Replayed:
			b.note.notice(n, "task %s landed as %s, replayed onto the moved tip", task.ID, short(got.Commit))
		default:
			b.note.notice(n, "task %s landed as %s", task.ID, short(got.Commit))
		}
		return verdict{}
	case ctx.Err() != nil:
		return b.stopped(ctx)
	case errors.As(err, &ie) && ie.Conflict && a.conflicts < b.cfg.MaxConflicts:
		b.note.notice(n, "task %s could not land: %v", task.ID, ie)
		return b.lostRace(ctx, n, task, ie)
	case errors.As(err, &ie):
		b.note.notice(n, "task %s could not land: %v", task.ID, ie)
		return b.taskTrouble(ctx, n, task, IterIntegrationFailed, "integration: "+ie.Error())
	case errors.Is(err, ErrStaleClaim):
		cur, gerr := b.store.Get(ctx, task.ID)
		if gerr != nil {
			return judged(IterCancelled, "", b.storeErr(ctx, gerr))
		}
		return b.claimLost(ctx, n, task, cur, false)
	}
	why := fmt.Sprintf("git: task %s: %v", task.ID, err)
	b.releaseHeld(ctx, "integration failed: "+firstLine(err.Error()))
	return judged(IterGitFailed, why, stopWith(OutcomeGitFailed, "%s", why))
}

// stopped is the verdict of a step the run's stop cut short (ctx done):
// the claim released, the iteration cancelled.
func (b *buildMode) stopped(ctx context.Context) verdict {
	b.releaseHeld(ctx, ReasonLoopStopped)
	return judged(IterCancelled, "", b.checkCancel(ctx))
}

// checkTree asks the workspace whether its tree is still its own after
// the agent's session, when it can tell (TreeChecker). A zero verdict
// means it is; a tree that was not is task trouble; a failure to look
// stops the run (exit 5).
func (b *buildMode) checkTree(ctx context.Context, n int, task Task) verdict {
	tc, ok := b.cfg.Workspace.(TreeChecker)
	if !ok {
		return verdict{}
	}
	err := tc.CheckTree(ctx)
	var ie *IntegrationError
	switch {
	case err == nil:
		return verdict{}
	case ctx.Err() != nil:
		return b.stopped(ctx)
	case errors.As(err, &ie):
		b.note.notice(n, "task %s: %v", task.ID, ie)
		return b.taskTrouble(ctx, n, task, IterIntegrationFailed, "the worktree: "+ie.Error())
	}
	why := fmt.Sprintf("git: task %s: %v", task.ID, err)
	b.releaseHeld(ctx, "the worktree could not be checked: "+firstLine(err.Error()))
	return judged(IterGitFailed, why, stopWith(OutcomeGitFailed, "%s", why))
}

// conflictPrefix starts the release reason of a task that lost a race to
// land (lostRace), by which its history counts those rounds.
const conflictPrefix = "integration conflict: "

// lostRace sends a task whose work conflicts with what other workers
// landed meanwhile back to pending without counting a retry: it lost a
// race, its work is not at fault. The release reason names the
// conflicting files; the next attempt starts from the new tip and is shown
// it. Past Config.MaxConflicts rounds a conflict is task trouble.
func (b *buildMode) lostRace(ctx context.Context, n int, task Task, ie *IntegrationError) verdict {
	why := conflictPrefix + ie.Error()
	if v, ok := b.commitMove(ctx, n, task, "back to pending after a conflict", "", func(ctx context.Context) error {
		return b.store.Release(ctx, MoveParams{TaskID: task.ID, Message: why, By: b.by(task), Raced: true})
	}); !ok {
		return v
	}
	b.unhold()
	return judged(IterIntegrationFailed, why, nil)
}

// conflictRounds counts the races to land a task lost, in its history.
func conflictRounds(logs []LogEntry) int {
	n := 0
	for _, e := range logs {
		if e.Kind == LogRelease && strings.HasPrefix(e.Message, conflictPrefix) {
			n++
		}
	}
	return n
}
