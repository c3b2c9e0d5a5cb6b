package loop

import (
	"context"
	"errors"
	"fmt"
)

// dir is where the agent, the test gate and the verifier work: the
// worker's workspace, or the project root.
func (r *run) dir() string {
	if r.cfg.Workspace != nil {
		return r.cfg.Workspace.Dir()
	}
	return r.cfg.Root
}

// begin readies the workspace for the claimed task (ARCHITECTURE.md §5).
// landed is set when the task's work is on the integration branch already:
// begin has completed the task then, and the iteration is not counted. A
// git failure releases the claim and stops the run (exit 5).
func (r *run) begin(ctx context.Context, n int, ws Workspace, task Task, logs []LogEntry) (landed bool, s *stop) {
	recorded := 0
	for _, e := range logs {
		if e.Kind == LogDone {
			recorded++
		}
	}
	integrated, err := ws.Begin(ctx, task, recorded)
	if nw, ok := ws.(Noticer); ok {
		for _, msg := range nw.Notices() {
			r.note.notice(n, "%s", msg)
		}
	}
	if err != nil {
		r.releaseHeld(ctx, "the worker's tree could not be readied: "+firstLine(err.Error()))
		if ctx.Err() != nil {
			return false, r.checkCancel(ctx)
		}
		return false, stopWith(OutcomeGitFailed, "git: task %s: %v", task.ID, err)
	}
	if !integrated {
		return false, nil
	}
	msg := "its work is on the integration branch already (a landing ralph recorded, made before a stop)"
	r.note.notice(n, "task %s: %s; done", task.ID, msg)
	if _, _, s, ok := r.commitMove(ctx, task, "done", "", func(ctx context.Context) error {
		return r.store.Complete(ctx, MoveParams{TaskID: task.ID, Message: msg, By: r.by(task)})
	}); !ok {
		return true, s
	}
	r.unhold()
	return true, nil
}

// integrate lands a done task's work on the integration branch before the
// task is done in the store ("done means merged", ARCHITECTURE.md §5). A zero
// status means it landed (or there was nothing to land). Work that cannot
// land is task trouble; a claim that ended meanwhile is a lost claim; any
// other failure is a git failure, which stops the run (exit 5).
func (r *run) integrate(ctx context.Context, n int, ws Workspace, task Task, res RunResult) (IterationStatus, string, *stop) {
	req := IntegrateRequest{
		Task:    task,
		Summary: summary(res.Text),
		// How the agent's private checkout moved, when its runner gave it
		// one: the workspace lands the agent's own changes, never a
		// revert of landed work (ARCHITECTURE.md §7).
		Checkout: res.Checkout,
		Current: func(ctx context.Context) error {
			cur, err := r.store.Get(ctx, task.ID)
			if err != nil {
				return err
			}
			if !holds(cur, task) {
				return fmt.Errorf("%w: task %s is %s under claim %d of %q", ErrStaleClaim, task.ID, cur.Status, cur.Generation, cur.ClaimedBy)
			}
			return nil
		},
	}
	if r.testCmd != "" {
		dir := r.dir()
		req.Gate = func(ctx context.Context) error { return r.runTests(ctx, dir, r.testCmd) }
	}
	got, err := ws.Integrate(ctx, req)
	var ie *IntegrationError
	switch {
	case err == nil:
		switch {
		case got.Commit == "" && got.Replayed:
			r.note.notice(n, "task %s: its changes are on the integration branch already (the replay onto the moved tip changed nothing): done, no commit", task.ID)
		case got.Commit == "":
			r.note.notice(n, "task %s changed nothing: done, no commit", task.ID)
		case got.Replayed:
			r.note.notice(n, "task %s landed as %s, replayed onto the moved tip", task.ID, short(got.Commit))
		default:
			r.note.notice(n, "task %s landed as %s", task.ID, short(got.Commit))
		}
		return "", "", nil
	case ctx.Err() != nil:
		r.releaseHeld(ctx, ReasonLoopStopped)
		return IterCancelled, "", r.checkCancel(ctx)
	case errors.As(err, &ie):
		r.note.notice(n, "task %s could not land: %v", task.ID, ie)
		return r.taskTrouble(ctx, task, IterIntegrationFailed, "integration: "+ie.Error())
	case errors.Is(err, ErrStaleClaim):
		cur, gerr := r.store.Get(ctx, task.ID)
		if gerr != nil {
			return IterCancelled, "", r.storeErr(ctx, gerr)
		}
		return r.claimLost(ctx, n, task, cur)
	}
	why := fmt.Sprintf("git: task %s: %v", task.ID, err)
	r.releaseHeld(ctx, "integration failed: "+firstLine(err.Error()))
	return IterGitFailed, why, stopWith(OutcomeGitFailed, "%s", why)
}

// checkTree asks the workspace whether its tree is still its own after
// the agent's session (TreeChecker). A zero status means it is; a tree
// that was not is task trouble; a failure to look stops the run (exit 5).
func (r *run) checkTree(ctx context.Context, n int, task Task, tc TreeChecker) (IterationStatus, string, *stop) {
	err := tc.CheckTree(ctx)
	var ie *IntegrationError
	switch {
	case err == nil:
		return "", "", nil
	case ctx.Err() != nil:
		r.releaseHeld(ctx, ReasonLoopStopped)
		return IterCancelled, "", r.checkCancel(ctx)
	case errors.As(err, &ie):
		r.note.notice(n, "task %s: %v", task.ID, ie)
		return r.taskTrouble(ctx, task, IterIntegrationFailed, "the worktree: "+ie.Error())
	}
	why := fmt.Sprintf("git: task %s: %v", task.ID, err)
	r.releaseHeld(ctx, "the worktree could not be checked: "+firstLine(err.Error()))
	return IterGitFailed, why, stopWith(OutcomeGitFailed, "%s", why)
}

// short is a commit's abbreviated name.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
