package loop

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ralph-dev/ralph/sigil"
)

// buildMode is build mode with the loop claiming (ClaimLoop): each
// iteration claims the next ready task, runs the agent on it, judges the
// session by its sigils, and applies the verdict durably — through the
// verifier, the gates and, with a Workspace, the integration.
type buildMode struct {
	*run
	// guard snapshots and restores the working tree around verifier
	// sessions (nil without Verify).
	guard *treeGuard
	// waitingFor names the held tasks the loop last said it waits for.
	waitingFor string
	// tests is the test gate (gated).
	tests testGate
	// final is the final command's rounds of a run of its own (workers
	// share theirs: Shared).
	final finalRounds
}

func (b *buildMode) gate() *testGate { return &b.tests }

// attempt is one iteration's work on a claimed task: its number, the task
// as claimed (its generation fences the outcome), the model and whether a
// hint chose it.
type attempt struct {
	n      int
	task   Task
	model  string
	hinted bool
	// conflicts is how many races to land the task lost before
	// (MaxConflicts), from its history.
	conflicts int
}

func (b *buildMode) prompts() []string {
	if b.cfg.Verify {
		return []string{PromptBuild, PromptVerify}
	}
	return []string{PromptBuild}
}

// prepare lists the checks agents wrote, runs the test gate's baseline
// and readies the verifier's tree guard, with Verify.
func (b *buildMode) prepare(ctx context.Context) *stop {
	if b.cfg.FinalCmd != "" {
		if _, ok := b.store.(TaskAdder); !ok {
			return internal(fmt.Errorf("%w: a final command needs a store that adds tasks", ErrConfig))
		}
	}
	b.announceAgentChecks(ctx)
	if s := b.baseline(ctx); s != nil {
		return s
	}
	if !b.cfg.Verify {
		return nil
	}
	store := filepath.Join(b.cfg.Root, ".ralph", snapshotDir)
	if b.cfg.Workspace != nil {
		name := b.cfg.Worker
		if name == "" {
			name = "workspace"
		}
		store = filepath.Join(b.cfg.Root, ".ralph", "worktrees", name+".verify.git")
	}
	g, err := b.newGuard(ctx, store)
	if err != nil {
		if ctx.Err() != nil {
			return b.checkCancel(ctx)
		}
		return internal(err)
	}
	b.guard = g
	return nil
}

// close tidies the verifier's snapshot store.
func (b *buildMode) close(ctx context.Context, clean bool) {
	if b.guard == nil {
		return
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tidyTimeout)
	defer cancel()
	b.guard.close(gctx, clean)
}

// exitChecks ends the run when the plan is resolved or the iteration
// limit is reached.
func (b *buildMode) exitChecks(ctx context.Context) *stop {
	return b.nameFailed(ctx, b.finalCheck(ctx, b.planChecks(ctx, false)))
}

// mostNamed bounds the failed tasks an end names.
const mostNamed = 5

// nameFailed adds to an end with failed tasks — complete with failures,
// blocked — the tasks that failed (at most mostNamed), when the store can
// list them: "complete: 3 done, 2 failed: a, b (ralph task show ID says
// why)", "blocked: 1 task remains but none is ready; failed: a, b (…)".
// A build of one task (Scope.TaskID) names that task when it failed; its
// failed descendants are only counted. Other stops are returned as they
// are.
func (b *buildMode) nameFailed(ctx context.Context, s *stop) *stop {
	if s == nil || s.failed == 0 {
		return s
	}
	ids, err := b.failedIDs(ctx)
	if err != nil || len(ids) == 0 {
		return s
	}
	named := strings.Join(ids, ", ")
	if more := s.failed - len(ids); more > 0 {
		named += fmt.Sprintf(", and %d more", more)
	}
	if s.outcome == OutcomeBlocked {
		s.message += "; failed: " + named
	} else {
		s.message += ": " + named // "complete: 3 done, 2 failed: a, b"
	}
	s.message += " (ralph task show ID says why)"
	return s
}

// failedIDs lists the first mostNamed failed tasks in scope, when the
// store can.
func (b *buildMode) failedIDs(ctx context.Context) ([]string, error) {
	if id := b.cfg.Scope.TaskID; id != "" {
		t, err := b.store.Get(ctx, id)
		if err != nil || t.Status != StatusFailed {
			return nil, err
		}
		return []string{id}, nil
	}
	l, ok := b.store.(TaskLister)
	if !ok {
		return nil, nil
	}
	var ids []string
	err := l.ListTasks(ctx, ListQuery{Status: StatusFailed, Feature: b.cfg.Scope.Feature, Limit: mostNamed}, func(t Task) error {
		ids = append(ids, t.ID)
		return nil
	})
	return ids, err
}

// terminal is step 2: nothing could be claimed. With tasks in scope held
// by other live agents, the loop waits for them and returns nil to try
// again (waitForAgents); otherwise it says why it stops. token is the
// store's change token from before the failed claim.
//
// A task may have become ready since the failed claim (another agent's
// completion), or the claim may have passed over one another transaction
// held for a moment (a server's SKIP LOCKED claims): with one ready, the
// loop looks again. The counts come after the look, so that a task
// another agent claims meanwhile is counted in progress; but the last
// completion of another agent can land between the look and the counts,
// leaving nothing in progress and a task ready that the look did not see.
// So nothing in progress is believed only when a second look finds
// nothing ready and the counts after it are the same: no completion
// came between the two counts.
func (b *buildMode) terminal(ctx context.Context, token string) *stop {
	var last *Counts
	for {
		ready, err := b.store.Ready(ctx, b.cfg.Scope, 1)
		if err != nil {
			return b.storeErr(ctx, err)
		}
		if len(ready) > 0 {
			if err := b.cfg.Sleep(ctx, lookAgainAfter); err != nil {
				return b.checkCancel(ctx)
			}
			return nil
		}
		c, err := b.store.Counts(ctx, b.cfg.Scope)
		if err != nil {
			return b.storeErr(ctx, err)
		}
		if c.InProgress > 0 {
			return b.waitForAgents(ctx, token)
		}
		if c.Resolved() || (last != nil && *last == c) {
			return b.nameFailed(ctx, b.finalCheck(ctx, terminalStop(c)))
		}
		last = &c
	}
}

// iteration runs one loop-claimed iteration (steps 1–8). counted is false
// when a usage limit turned it into a wait.
func (b *buildMode) iteration(ctx context.Context) (counted bool, s *stop) {
	token := b.changeToken(ctx)
	task, err := b.claim(ctx, "")
	if err != nil && !errors.Is(err, ErrNoReadyTask) && transient(err) {
		return false, b.waitStore(ctx, err)
	}
	b.storeBack()
	if errors.Is(err, ErrNoReadyTask) {
		return false, b.terminal(ctx, token)
	}
	if err != nil {
		return false, b.storeErr(ctx, err)
	}
	a := attempt{n: b.budget.Number(b.report.Iterations + 1), task: task}
	logs, err := b.store.Logs(ctx, task.ID)
	if err != nil {
		return false, b.storeErr(ctx, err)
	}
	a.conflicts = conflictRounds(logs)
	if ws := b.cfg.Workspace; ws != nil {
		if landed, s := b.begin(ctx, a, ws, logs); landed || s != nil {
			return false, s
		}
	}

	data, err := buildContext(ctx, b.store, b.cfg.Root, task, b.cfg.MaxRetries, logs)
	if err != nil {
		return false, b.storeErr(ctx, err)
	}
	data.Mode, data.Iteration, data.AgentID, data.RalphBin = ModeBuild, a.n, b.cfg.AgentID, b.cfg.RalphBin
	data.Root = b.dir()
	sess, s := b.render(PromptBuild, data)
	if s != nil {
		return false, s
	}
	a.model, a.hinted = b.pickModel(ModelChoice{Iteration: a.n, Task: task, TaskLogs: logs, History: b.history})

	b.beginIteration(ctx, a.n, task, a.model)
	res, s := b.runAgent(ctx, a.n, a.model, sess, task)
	if s != nil {
		return false, s
	}
	if res.Class == ClassUsageLimit {
		b.releaseHeld(ctx, b.limitReason())
		b.endIteration(a.n, task, a.model, IterUsageLimit, "")
		return false, b.usageLimit(ctx, res)
	}
	b.consumeHint(a.hinted)

	v := b.handle(ctx, a, res)
	if v.limited != nil && v.stop == nil {
		b.endIteration(a.n, task, a.model, IterUsageLimit, v.why)
		return false, b.usageLimit(ctx, *v.limited)
	}
	b.waited = 0
	b.countIteration(a.n, task, a.model, a.hinted, v.status, v.why)
	return true, v.stop
}

// claim claims task id (empty: the next ready task in scope) for the
// agent this loop runs, and holds it.
func (b *buildMode) claim(ctx context.Context, id string) (Task, error) {
	task, err := b.store.Claim(ctx, ClaimParams{TaskID: id, Scope: b.cfg.Scope, Agent: b.cfg.AgentID,
		Lease: b.cfg.Lease, Holder: b.cfg.Holder, Mode: ClaimLoop})
	if err == nil {
		b.lease.hold(task)
	}
	return task, err
}

// handle is steps 7–8 for a finished session of a loop-claimed task.
func (b *buildMode) handle(ctx context.Context, a attempt, res RunResult) verdict {
	if res.Class == ClassCancelled || ctx.Err() != nil {
		return judged(IterCancelled, "", b.checkCancel(ctx))
	}
	if !res.OK() {
		why := Describe(res)
		b.releaseHeld(ctx, "agent trouble: "+why)
		return judged(IterAgentTrouble, why, b.agentTrouble(res, why))
	}

	sig := sigil.Parse(res.Text)
	if sig.NextModel != "" {
		b.hint = sig.NextModel
	}
	v := b.handleTask(ctx, a, res, sig)
	if v.stop != nil {
		return v
	}
	if sig.Failure {
		v.status, v.stop = IterFailure, stopWith(OutcomeFailure, "the agent declared FAILURE: %s", excerpt(res.Text, 200))
		return v
	}
	if sig.Complete {
		c, err := b.store.Counts(ctx, b.cfg.Scope)
		if err == nil && !c.Resolved() {
			b.note.notice(a.n, "agent said COMPLETE but %s; going on", Remain(c.Open()+c.InProgress))
		}
	}
	return v
}

// handleTask applies the task sigil (or its absence) to the claimed task.
func (b *buildMode) handleTask(ctx context.Context, a attempt, res RunResult, sig sigil.Result) verdict {
	task := a.task
	// The claim may have ended during the session: released or recovered
	// behind the loop's back, taken over, or moved by a person.
	cur, err := b.store.Get(ctx, task.ID)
	if err != nil {
		return judged(IterCancelled, "", b.storeErr(ctx, err))
	}
	if !holds(cur, task) {
		return b.claimLost(ctx, a.n, task, cur, false)
	}

	switch {
	case sig.TaskDone(task.ID) || b.markedDone(ctx, task.ID):
		return b.taskDone(ctx, a, res)
	case sig.TaskFailed(task.ID):
		why := "agent reported the task failed: " + excerpt(res.Text, 300)
		if v, ok := b.commitMove(ctx, a.n, task, "failed", res.Text, func(ctx context.Context) error {
			return b.store.Fail(ctx, MoveParams{TaskID: task.ID, Message: why, By: b.by(task)})
		}); !ok {
			return v
		}
		b.unhold()
		return judged(IterTaskFailed, why, nil)
	case sig.Failure:
		// FAILURE without a verdict on the task: the task is not at fault.
		b.releaseHeld(ctx, "the agent declared FAILURE")
		return judged(IterFailure, "", nil)
	case len(sig.Done)+len(sig.Failed) > 0:
		why := fmt.Sprintf("wrong task id: expected %s, got %s", task.ID, strings.Join(append(append([]string{}, sig.Done...), sig.Failed...), ", "))
		return b.taskTrouble(ctx, a.n, task, IterWrongID, why)
	default:
		return b.taskTrouble(ctx, a.n, task, IterNoSigil, "the agent ended without a task sigil")
	}
}

// markedDone reports whether the agent marked task id done in the store's
// own way (DoneMarker): a ticked progress-file box.
func (b *buildMode) markedDone(ctx context.Context, id string) bool {
	m, ok := b.store.(DoneMarker)
	if !ok {
		return false
	}
	done, err := m.MarkedDone(ctx, id)
	return err == nil && done
}

// claimLost handles a session after which the loop's claim on task no
// longer stands (cur is the task now). A claim lost silently is how a loop
// spins: back to pending — released, or recovered, behind the
// loop's back — is task trouble, counted against the task's breaker like a
// missing sigil, with a reason that says who released it (the loop claims
// the task again to count it, when it is still ready); held by another
// claim, or done or failed by someone else, is noted, and the loop moves
// on. recount is set when the claim lost was the one taken to count an
// earlier loss: that is not counted again, so that this never goes round.
func (b *buildMode) claimLost(ctx context.Context, n int, task, cur Task, recount bool) verdict {
	b.unhold()
	who := lastMove(ctx, b.store, task.ID)
	switch cur.Status {
	case StatusPending:
		why := "the claim was lost during the session: " + who
		if recount {
			b.note.notice(n, "task %s: %s", task.ID, why)
			return judged(IterClaimLost, why, nil)
		}
		again, err := b.claim(ctx, task.ID)
		if err != nil {
			if ctx.Err() != nil {
				return judged(IterCancelled, "", b.checkCancel(ctx))
			}
			b.note.notice(n, "task %s: %s; it could not be claimed again to count it: %v", task.ID, why, err)
			return judged(IterClaimLost, why, nil)
		}
		b.note.notice(n, "task %s: %s", task.ID, why)
		return b.recount(ctx, n, again, why)
	case StatusDone:
		b.note.notice(n, "task %s was done by someone else during the session (%s); leaving it as it is", task.ID, who)
		return judged(IterAlreadyClosed, "done by someone else: "+who, nil)
	case StatusFailed:
		b.note.notice(n, "task %s was failed by someone else during the session (%s); leaving it as it is", task.ID, who)
		return judged(IterTaskFailed, "failed by someone else: "+who, nil)
	}
	why := fmt.Sprintf("task %s is %s now", task.ID, cur.Status)
	if cur.Status == StatusInProgress {
		why = fmt.Sprintf("task %s is held by %s now (claim %d)", task.ID, cur.ClaimedBy, cur.Generation)
	}
	b.note.notice(n, "the claim was lost during the session: %s (%s); leaving it", why, who)
	return judged(IterClaimLost, why, nil)
}

// taskTrouble releases the task and counts a retry, or fails it when it
// has run 1+MaxRetries times.
func (b *buildMode) taskTrouble(ctx context.Context, n int, task Task, status IterationStatus, why string) verdict {
	return b.trouble(ctx, n, task, status, why, false)
}

// recount is taskTrouble under the claim taken to count a lost one: if
// that claim is lost too, it is not counted again.
func (b *buildMode) recount(ctx context.Context, n int, task Task, why string) verdict {
	return b.trouble(ctx, n, task, IterClaimLost, why, true)
}

// trouble is taskTrouble; recount is claimLost's.
func (b *buildMode) trouble(ctx context.Context, n int, task Task, status IterationStatus, why string, recount bool) verdict {
	what, move, msg := "back to pending for a retry", b.store.Retry, why
	if task.RetryCount >= b.cfg.MaxRetries {
		status, why = IterTaskFailed, fmt.Sprintf("%s (after %d %s)", why, task.RetryCount+1, plural(task.RetryCount+1, "run", "runs"))
		what, move, msg = "failed", b.store.Fail, why
	}
	if v, ok := b.commit(ctx, n, task, what, "", recount, func(ctx context.Context) error {
		return move(ctx, MoveParams{TaskID: task.ID, Message: msg, By: b.by(task)})
	}); !ok {
		return v
	}
	b.unhold()
	return judged(status, why, nil)
}

// taskDone runs a done task's steps, cheap first (ARCHITECTURE.md §3.5):
// the tree and HEAD checks, the task's check, the test gate, the verifier
// (with Verify), the
// commit gate (with Commit) or the integration (with a Workspace), and
// completes the task. Each step's verdict, when decided, ends the
// iteration.
func (b *buildMode) taskDone(ctx context.Context, a attempt, res RunResult) verdict {
	task := a.task
	// Nothing runs in a tree the agent replaced (a link to the user's
	// checkout): not the verifier, not the gates.
	if v := b.checkTree(ctx, a.n, task); v.decided() {
		return v
	}
	// Nothing is committed over a HEAD the agent moved away from where
	// the session began.
	if v := b.checkHead(ctx, a.n, task); v.decided() {
		return v
	}
	// The task's own check, then the whole suite, then the verifier:
	// cheap first.
	if v := b.checked(ctx, a.n, task); v.decided() {
		return v
	}
	if cmd := b.tests.cmd; cmd != "" {
		if v := b.gated(ctx, a, func() verdict { return b.testGate(ctx, a.n, cmd) }); v.decided() {
			return v
		}
	}
	if b.cfg.Verify {
		if v := b.verified(ctx, a, res.Text); v.decided() {
			return v
		}
	}
	// The commit records work the verifier passed: a verifier's fail or
	// usage limit leaves nothing committed for the retry to find.
	if b.cfg.Commit {
		if v := b.gated(ctx, a, func() verdict { return b.commitGate(ctx, a.n, task.Title) }); v.decided() {
			return v
		}
	}
	b.gateStreak = 0
	if ws := b.cfg.Workspace; ws != nil {
		end := b.note.phase(a.n, PhaseIntegrate, task)
		v := b.integrate(ctx, a, ws, res)
		end(v.status, v.why)
		if v.decided() {
			return v
		}
	}
	if v, ok := b.commitMove(ctx, a.n, task, "done", res.Text, func(ctx context.Context) error {
		return b.store.Complete(ctx, MoveParams{TaskID: task.ID, Message: summary(res.Text), By: b.by(task)})
	}); !ok {
		return v
	}
	b.unhold()
	return judged(IterDone, "", nil)
}

// gated runs a gate on a done task (step: the test gate or the commit
// gate) as a phase, and its verdict on the iteration: zero when it
// passed; gate trouble has released the claim.
func (b *buildMode) gated(ctx context.Context, a attempt, step func() verdict) verdict {
	end := b.note.phase(a.n, PhaseGate, a.task)
	v := step()
	end(v.status, v.why)
	if v.decided() {
		reason := v.detail
		if v.status == IterCancelled {
			reason = ReasonLoopStopped
		}
		b.releaseHeld(ctx, reason)
	}
	return v
}

// checkHead is the commit gate's check before anything runs on a done
// task: a HEAD the agent moved off where the session began is task
// trouble; git failing to tell stops the run.
func (b *buildMode) checkHead(ctx context.Context, n int, task Task) verdict {
	why, err := b.headMoved(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		return b.stopped(ctx)
	case err != nil:
		why = fmt.Sprintf("git: task %s: %v", task.ID, err)
		b.releaseHeld(ctx, "HEAD could not be checked: "+firstLine(err.Error()))
		return judged(IterGitFailed, why, stopWith(OutcomeGitFailed, "%s", why))
	case why != "":
		b.note.notice(n, "task %s: %s", task.ID, why)
		return b.taskTrouble(ctx, n, task, IterHeadMoved, why)
	}
	return verdict{}
}

// checked runs the task's own check (Task.Check, DESIGN §14) where the
// test gate runs: sh -c in the task's tree (the worker's, with workers),
// through Config.Commands. A failing check is task trouble whose reason
// keeps the end of the check's output, for the next attempt's prompt.
// Zero when the task has no check or it passed.
func (b *buildMode) checked(ctx context.Context, n int, task Task) verdict {
	if task.Check == "" {
		return verdict{}
	}
	out, err := b.commands().RunCommand(ctx, CommandRequest{Command: task.Check, Dir: b.dir(), UseAPIKey: b.cfg.UseAPIKey})
	switch {
	case err == nil:
		return verdict{}
	case ctx.Err() != nil:
		return b.stopped(ctx)
	}
	// The check itself is in the task, and in the prompt: the reason
	// keeps its room for the output.
	why := fmt.Sprintf("the task's check failed (%v)", err)
	if o := tail(out); o != "" {
		why += ":\n" + o
	}
	// Said as the test gate's failure is: its output in its lines.
	b.note.failed(n, fmt.Errorf("task %s: check %s: %s", task.ID, task.Check, why))
	return b.taskTrouble(ctx, n, task, IterCheckFailed, why)
}

// announceAgentChecks lists, when a build starts, the checks agents wrote
// (Task.CheckBy) on the tasks it may run: commands no person typed, which
// the build will run in the project's tree (DESIGN §14). A build with
// workers says it once. A store that cannot list its tasks
// (TaskLister) is not asked.
func (b *buildMode) announceAgentChecks(ctx context.Context) {
	l, ok := b.store.(TaskLister)
	if !ok || !b.cfg.Shared.first("agent-checks") {
		return
	}
	scope := b.cfg.Scope
	var lines []string
	const most = 20
	more := 0
	_ = l.ListTasks(ctx, ListQuery{Feature: scope.Feature}, func(t Task) error {
		if t.CheckBy == "" || t.Status == StatusDone || t.Status == StatusFailed || scope.TaskID != "" && t.ID != scope.TaskID {
			return nil
		}
		if len(lines) == most {
			more++
			return nil
		}
		lines = append(lines, fmt.Sprintf("%s: %s  (written by agent %s)", t.ID, fold(t.Check), t.CheckBy))
		return nil
	})
	if len(lines) == 0 {
		return
	}
	if more > 0 {
		lines = append(lines, fmt.Sprintf("and %d more (ralph task list --json shows them)", more))
	}
	b.note.list(0, "this build runs checks that agents wrote, in the task's tree, once the agent reports the task done:", lines)
}

// verified is the verification of a done task, as a verdict on the
// iteration: zero when the verifier passed it.
func (b *buildMode) verified(ctx context.Context, a attempt, agentText string) verdict {
	end := b.note.phase(a.n, PhaseVerify, a.task)
	j := b.verify(ctx, a, agentText)
	end(j.status(ctx), j.why)
	// The verifier may have replaced the tree (the guard restores
	// nothing through a replaced one): asked again while the claim
	// is still held, before the work is committed or lands.
	if j.stop == nil && (j.result == judgedPass || j.result == judgedFail) {
		if v := b.checkTree(ctx, a.n, a.task); v.decided() {
			return v
		}
	}
	switch {
	case j.stop != nil:
		return judged(IterAgentTrouble, j.why, j.stop)
	case j.result == judgedUsageLimit:
		return verdict{status: IterUsageLimit, why: j.why, limited: j.limited}
	case j.result == judgedTrouble:
		return judged(IterAgentTrouble, j.why, nil)
	case j.result == judgedFail:
		return b.taskTrouble(ctx, a.n, a.task, IterVerifyFailed, "verification failed: "+j.why)
	}
	return verdict{}
}

// judgement is what a verifier session concluded.
type judgement struct {
	result judgedAs
	why    string
	stop   *stop
	// limited is the session's result when it met a usage limit.
	limited *RunResult
}

// judgedAs is a verifier's conclusion.
type judgedAs int

const (
	judgedPass       judgedAs = iota
	judgedFail                // verify-fail, or no verdict at all
	judgedTrouble             // the verifier session itself failed: agent trouble
	judgedUsageLimit          // the verifier hit a usage limit: a wait
)

// status is the status a verification ends with, for its NotePhaseEnd:
// empty when it passed.
func (j judgement) status(ctx context.Context) IterationStatus {
	switch {
	case ctx.Err() != nil:
		return IterCancelled
	case j.stop != nil, j.result == judgedTrouble:
		return IterAgentTrouble
	case j.result == judgedUsageLimit:
		return IterUsageLimit
	case j.result == judgedFail:
		return IterVerifyFailed
	}
	return ""
}

// verify runs the verifier session. On trouble or a usage limit it has
// released the claim already.
func (b *buildMode) verify(ctx context.Context, a attempt, agentText string) judgement {
	task := a.task
	trouble := func(why string, s *stop) judgement { return judgement{result: judgedTrouble, why: why, stop: s} }
	data := PromptData{Mode: ModeVerify, Task: task, Iteration: a.n, AgentID: b.cfg.AgentID, Root: b.dir(), RalphBin: b.cfg.RalphBin, AgentText: agentText}
	if task.ParentID != "" {
		if p, err := b.store.Get(ctx, task.ParentID); err == nil {
			data.Parent = &p
		}
	}
	sess, s := b.render(PromptVerify, data)
	if s != nil {
		return trouble("", s)
	}
	res, changed, s := b.runVerifier(ctx, a, sess)
	if s != nil {
		return trouble("", s)
	}
	switch {
	case res.Class == ClassCancelled || ctx.Err() != nil:
		return trouble("", b.checkCancel(ctx))
	case res.Class == ClassUsageLimit:
		b.releaseHeld(ctx, b.limitReason())
		return judgement{result: judgedUsageLimit, why: "verifier hit the usage limit", limited: &res}
	case !res.OK():
		// The verifier could not judge: agent trouble, not the task's fault.
		why := "verifier: " + Describe(res)
		b.releaseHeld(ctx, "agent trouble: "+why)
		return trouble(why, b.agentTrouble(res, why))
	}
	sig := sigil.Parse(res.Text)
	j, word := judgement{result: judgedFail}, "fail"
	switch {
	case len(changed) > 0:
		// Whatever it said: a verifier that wrote to the tree judged a
		// tree that is not the one ralph keeps.
		j.why = "the verifier changed files (restored): " + changeList(changed)
	case sig.VerifyPass:
		j.result, word = judgedPass, "pass"
	case sig.VerifyFail:
		j.why = sig.VerifyReason
		if j.why == "" {
			j.why = "no reason given"
		}
	default:
		j.why = "the verifier gave no verdict"
	}
	if err := b.store.SetVerification(ctx, task.ID, word); err != nil {
		return trouble(j.why, b.storeErr(ctx, err))
	}
	return j
}

// runVerifier runs the verifier session under the tree guard: the working
// tree is snapshotted before it and compared after it, whatever the
// session's end (crash, timeout, usage limit and cancellation included);
// what the verifier changed is restored, logged on the task and returned.
// Its receipt's verdict is "fail" when it changed anything. A tree that
// could not be snapshotted (the verifier is then not run) or restored is
// an internal error.
func (b *buildMode) runVerifier(ctx context.Context, a attempt, sess session) (RunResult, []treeChange, *stop) {
	n, model, task := a.n, a.model, a.task
	before, err := b.guard.record(ctx)
	if err != nil && ctx.Err() == nil {
		// The snapshot store is a cache: a damaged one is rebuilt, once.
		b.note.notice(n, "rebuilding the verifier's snapshot store: %v", err)
		if err = b.guard.rebuild(ctx); err == nil {
			before, err = b.guard.record(ctx)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return RunResult{}, nil, b.checkCancel(ctx)
		}
		return RunResult{}, nil, internal(fmt.Errorf("%w: %v", ErrVerifySnapshot, err))
	}
	started := b.cfg.Now()
	res, runErr := b.session(ctx, n, model, sess, task, true)
	ran := !errors.Is(runErr, ErrPoolOut)
	if !ran {
		runErr = nil // no session: no receipt; its result is a usage limit
	}
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
	defer cancel()
	changed, gerr := b.guard.checkAll(gctx, before)
	if len(changed) > 0 {
		msg := "the verifier changed files (restored): " + changeList(changed)
		if gerr != nil {
			msg = "the verifier changed files: " + changeList(changed)
		}
		b.note.notice(n, "%s; its verdict does not count", msg)
		if err := b.store.AddLog(gctx, task.ID, LogVerify, msg); err != nil && gerr == nil {
			gerr = fmt.Errorf("loop: task %s: log: %w", task.ID, err)
		}
	}
	if runErr == nil && ran {
		rc := b.receipt(n, model, task, true, res, started)
		if len(changed) > 0 && rc.Verdict != "" {
			rc.Verdict = "fail"
		}
		b.record(ctx, rc, &res)
	}
	switch {
	case gerr != nil:
		return res, changed, internal(gerr)
	case runErr != nil:
		return res, changed, b.runnerErr(ctx, runErr)
	}
	return res, changed, nil
}
