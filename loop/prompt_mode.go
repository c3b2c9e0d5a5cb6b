package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/sigil"
)

// PromptParams is what RunPrompt runs.
type PromptParams struct {
	// Text is the ad-hoc prompt. It reaches the agent through the prompt
	// template ({{.Prompt}}; the embedded template is exactly that, so the
	// agent gets Text unchanged). Text itself is not a template: ad-hoc
	// prompts often quote other tools' {{ }} syntax.
	Text string
	// Title names the run in the commit message ("prompt: iteration 1 -
	// <Title>"); empty means Text's first non-blank line.
	Title string
	// Receipts, if not nil, records the session's receipt, so that
	// `ralph status` counts its cost.
	Receipts ReceiptStore
}

// promptMode is prompt mode: one session of an ad-hoc prompt.
type promptMode struct {
	*run
	taskless
	text, title string
	// end is the outcome the single session led to.
	end *stop
}

// RunPrompt runs one agent session of an ad-hoc prompt (`ralph prompt
// FILE`): the same environment (RALPH_* with RALPH_ITERATION=1
// and no RALPH_TASK_ID), session log, raw stream and receipt as a build
// iteration, but no task, no iteration loop, no completion check (sigils in
// the answer are not read, except <promise>FAILURE</promise>), no test
// gate and no retry. Start cfg from
// PromptConfig (a DefaultConfig, whose Mode is build, is taken as prompt mode
// too); MaxIterations is ignored.
//
// Outcomes: OutcomeComplete (exit 0) when the session ended cleanly and,
// with cfg.Commit, its changes were committed as "prompt: iteration 1 -
// <title>" (nothing changed is no error here: a notice says so);
// OutcomeFailure (7) when the final text says <promise>FAILURE</promise>
// (nothing is committed then, with or without cfg.Commit; what the agent
// changed is left in the working tree for a person to judge);
// OutcomeAgentFailed (4) on agent trouble — a crash, is_error, a timeout —
// at once, since re-running a prompt that may have half-applied its
// changes could apply them twice; OutcomeGitFailed (5) when the commit
// fails, or Commit is set outside a git repository (before the agent
// runs); OutcomeCancelled (130); OutcomeBudgetExhausted never (one session
// cannot start past a budget). A usage limit is a wait and the prompt is
// run again after the reset, as in Run; with UsageLimitStop, or a reset
// past MaxWait, the run ends OutcomeUsageLimit (10).
//
// Errors are Run's: non-nil exactly when the outcome is OutcomeError (an
// empty prompt and options prompt mode does not take — Verify, ClaimAgent,
// TestCmd, a Scope — are configuration errors).
func RunPrompt(ctx context.Context, cfg Config, p PromptParams, runner Runner) (Report, error) {
	fail := func(err error) (Report, error) {
		return Report{Outcome: OutcomeError, Message: err.Error(), Remaining: -1}, err
	}
	if runner == nil {
		return fail(fmt.Errorf("%w: RunPrompt needs a runner", ErrConfig))
	}
	if strings.TrimSpace(p.Text) == "" {
		return fail(fmt.Errorf("%w: the prompt is empty", ErrConfig))
	}
	modeConfig(&cfg, ModePrompt)
	auto := cfg.Session == ""
	_, strat, err := cfg.normalizeFor(ModePrompt)
	if err != nil {
		return fail(err)
	}
	title := strings.Join(strings.Fields(p.Title), " ")
	if title == "" {
		title = commitTitle(p.Text, "ad-hoc prompt")
	}
	r := newRun(cfg, noTasks{}, runner, strat, auto)
	r.receipts = p.Receipts
	r.mode = &promptMode{run: r, text: p.Text, title: title}
	return r.exec(ctx)
}

func (p *promptMode) prompts() []string { return []string{PromptAdHoc} }

// iteration is the single session of prompt mode. counted is false when a
// usage limit turned it into a wait (the prompt then runs again).
func (p *promptMode) iteration(ctx context.Context) (counted bool, s *stop) {
	r := p.run
	n := r.report.Iterations + 1
	data, err := r.sessionData(ModePrompt, n)
	if err != nil {
		return false, internal(err)
	}
	data.Prompt = p.text
	sess, s := r.render(PromptAdHoc, data)
	if s != nil {
		return false, s
	}
	got, model, hinted, s := r.runTaskless(ctx, n, sess)
	if got == nil {
		return false, s
	}
	res := *got

	status, why := IterSessionOK, ""
	switch {
	case !res.OK():
		status, why = IterAgentTrouble, Describe(res)
		p.end = stopWith(OutcomeAgentFailed, "agent failed: %s", why)
	case sigil.Parse(res.Text).Failure:
		// The agent gave up: nothing it left is committed.
		status, why = IterFailure, "the agent declared FAILURE"
		p.end = stopWith(OutcomeFailure, "the agent declared FAILURE: %s", excerpt(res.Text, 200))
	case r.cfg.Commit:
		committed, err := r.commitChanges(ctx, n, p.title)
		switch {
		case err != nil && ctx.Err() != nil:
			status, p.end = IterCancelled, r.checkCancel(ctx)
		case err != nil:
			status, why = IterGitFailed, firstLine(err.Error())
			r.note.notice(n, "%v", err)
			p.end = stopWith(OutcomeGitFailed, "%s", why)
		case committed:
			p.end = stopWith(OutcomeComplete, "prompt run finished; changes committed")
		default:
			r.note.notice(n, "the prompt run changed nothing; nothing to commit")
			p.end = stopWith(OutcomeComplete, "prompt run finished; nothing changed, nothing committed")
		}
	default:
		p.end = stopWith(OutcomeComplete, "prompt run finished")
	}
	r.countIteration(n, Task{}, model, hinted, status, why)
	return true, nil
}

// exitChecks ends prompt mode after its one session.
func (p *promptMode) exitChecks(context.Context) *stop {
	if p.end == nil {
		return internal(errors.New("loop: prompt mode ended without an outcome"))
	}
	return p.end
}

// noTasks is the TaskStore of prompt mode: there is no plan. Reads find
// nothing and writes find no task.
type noTasks struct{}

var _ TaskStore = noTasks{}

func (noTasks) Get(context.Context, string) (Task, error) { return Task{}, ErrNotFound }
func (noTasks) Ready(context.Context, Scope, int) ([]Task, error) {
	return nil, nil
}
func (noTasks) Active(context.Context, Scope) ([]Task, error)    { return nil, nil }
func (noTasks) Counts(context.Context, Scope) (Counts, error)    { return Counts{}, nil }
func (noTasks) Claim(context.Context, ClaimParams) (Task, error) { return Task{}, ErrNoReadyTask }
func (noTasks) RenewLease(context.Context, string, string, time.Duration) error {
	return ErrNotHolder
}
func (noTasks) Complete(context.Context, MoveParams) error { return ErrNotFound }
func (noTasks) Fail(context.Context, MoveParams) error     { return ErrNotFound }
func (noTasks) Release(context.Context, MoveParams) error  { return ErrNotFound }
func (noTasks) ReleaseAgent(context.Context, string, string) ([]string, error) {
	return nil, nil
}
func (noTasks) Retry(context.Context, MoveParams) error               { return ErrNotFound }
func (noTasks) SetVerification(context.Context, string, string) error { return ErrNotFound }
func (noTasks) AddLog(context.Context, string, string, string) error  { return ErrNotFound }
func (noTasks) Logs(context.Context, string) ([]LogEntry, error)      { return nil, ErrNotFound }
