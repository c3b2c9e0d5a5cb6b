package loop

import (
	"bytes"
	"context"
	"strings"

	"github.com/ralph-dev/ralph/sigil"
)

// peekMode is build mode with the agent claiming (ClaimAgent): each
// iteration shows the agent what it may claim (the peek), and it claims
// and closes tasks inside its session through `$RALPH_BIN task`; the loop
// renews the leases of what it holds meanwhile, and fails what it left
// in progress.
type peekMode struct {
	*run
	tests testGate
}

func (p *peekMode) gate() *testGate { return &p.tests }

func (p *peekMode) prompts() []string                    { return []string{PromptPeek} }
func (p *peekMode) prepare(context.Context) *stop        { return nil }
func (p *peekMode) close(context.Context, bool)          {}
func (p *peekMode) exitChecks(ctx context.Context) *stop { return p.planChecks(ctx, true) }

// iteration is one iteration of peek mode: the agent gets the peek and
// claims inside its session through `$RALPH_BIN task claim`.
func (p *peekMode) iteration(ctx context.Context) (counted bool, s *stop) {
	r := p.run
	n := r.report.Iterations + 1
	claimable, err := r.store.Ready(ctx, r.cfg.Scope, PeekLimit)
	var active []Task
	if err == nil {
		active, err = r.store.Active(ctx, r.cfg.Scope)
	}
	var peek bytes.Buffer
	if err == nil {
		err = FormatPeek(&peek, claimable, active, r.cfg.Now())
	}
	if err != nil {
		if ctx.Err() != nil {
			return false, r.checkCancel(ctx)
		}
		// A peek error is transient: the iteration is spent, the loop goes on.
		why := "peek failed: " + firstLine(err.Error())
		r.beginIteration(ctx, n, Task{}, "")
		r.report.Iterations = n
		r.report.Failures++
		r.endIteration(n, Task{}, "", IterPeekError, why)
		return true, nil
	}
	if peek.Len() == 0 {
		return false, stopWith(OutcomeComplete, "nothing claimable")
	}

	data, err := r.sessionData(ModeBuild, n)
	if err != nil {
		return false, internal(err)
	}
	data.Peek = peek.String()
	sess, s := r.render(PromptPeek, data)
	if s != nil {
		return false, s
	}
	model, hinted := r.pickModel(ModelChoice{Iteration: n, History: r.history})
	r.beginIteration(ctx, n, Task{}, model)
	// The claims the agent makes in the session are renewed meanwhile.
	stopRenew := r.renewAgentClaims(ctx, n)
	res, s := r.runAgent(ctx, n, model, sess, Task{})
	stopRenew()
	if s != nil {
		return false, s
	}
	if res.Class == ClassCancelled || ctx.Err() != nil {
		return false, r.checkCancel(ctx)
	}
	if res.Class == ClassUsageLimit {
		r.releaseAgent(ctx, r.limitReason())
		r.endIteration(n, Task{}, model, IterUsageLimit, "")
		return false, r.usageLimit(ctx, res)
	}
	r.waited = 0
	r.consumeHint(hinted)

	v := p.handle(ctx, n, res, claimable)
	r.countIteration(n, Task{}, model, hinted, v.status, v.why)
	return true, v.stop
}

// handle judges a finished peek session: agent trouble, tasks the agent
// left in progress, FAILURE, the gates.
func (p *peekMode) handle(ctx context.Context, n int, res RunResult, claimable []Task) verdict {
	r := p.run
	if !res.OK() {
		// Agent trouble never fails a task: what the agent holds goes back.
		why := Describe(res)
		r.releaseAgent(ctx, "agent trouble: "+why)
		return judged(IterAgentTrouble, why, r.agentTrouble(res, why))
	}
	status, why := IterSessionOK, ""
	if left := r.agentTasks(ctx); len(left) > 0 {
		for _, id := range left {
			if err := r.store.Fail(ctx, MoveParams{TaskID: id, Message: ReasonSessionExited, By: Actor{Agent: r.cfg.AgentID, Loop: true}}); err != nil {
				return judged(IterSessionLeft, why, r.storeErr(ctx, err))
			}
		}
		status, why = IterSessionLeft, ReasonSessionExited+": "+strings.Join(left, ", ")
	}
	sig := sigil.Parse(res.Text)
	if sig.NextModel != "" {
		r.hint = sig.NextModel
	}
	if sig.Failure {
		return judged(IterFailure, why, stopWith(OutcomeFailure, "the agent declared FAILURE: %s", excerpt(res.Text, 200)))
	}
	if p.tests.cmd != "" || r.cfg.Commit {
		if v := r.gates(ctx, n, p.doneTitles(ctx, claimable), p.tests.cmd); v.decided() {
			return v
		}
	}
	return judged(status, why, nil)
}

// doneTitles names, for the commit message, the shown tasks that are done
// now ("peek session" when none is).
func (p *peekMode) doneTitles(ctx context.Context, shown []Task) string {
	var titles []string
	for _, t := range shown {
		if cur, err := p.store.Get(ctx, t.ID); err == nil && cur.Status == StatusDone {
			titles = append(titles, cur.Title)
		}
	}
	if len(titles) == 0 {
		return "peek session"
	}
	return strings.Join(titles, "; ")
}

// releaseAgent returns every claim this agent holds to pending.
func (r *run) releaseAgent(ctx context.Context, reason string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if _, err := r.store.ReleaseAgent(rctx, r.cfg.AgentID, reason); err != nil {
		r.note.notice(r.report.Iterations, "could not release the claims of %s: %v", r.cfg.AgentID, err)
	}
}
