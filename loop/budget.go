package loop

import (
	"context"
	"fmt"
	"time"
)

// Budget is where a run takes its iterations and its cost from: its own
// (Config.Budget nil: MaxIterations and MaxCost against the run's own
// report), or one that several runs share — the workers of a parallel
// build (package parallel), whose iterations are numbered across them,
// whose usage-limit pauses hold them all and whose first stop that ends
// the build ends every worker (ARCHITECTURE.md §5). The engine asks the
// budget, never which one it is. Its methods are called from each run's
// goroutine at once: a shared budget locks.
type Budget interface {
	// Take reserves the next iteration before the run's attempt. It
	// returns the time to wait until first — a usage limit another run
	// met, later than waited, the last pause this run waited for — or the
	// stop that ends the run instead; neither means the slot is taken.
	Take(now, waited time.Time) (pause time.Time, end *Stop)
	// Give gives back the slot Take took; counted: the iteration ran to
	// its end.
	Give(counted bool)
	// Number numbers an iteration whose claim succeeded; own is the
	// number the run would give it.
	Number(own int) int
	// Spent reports whether the iteration budget is spent, after a
	// counted iteration; own is the run's own count of them.
	Spent(own int) bool
	// Spend adds a session's cost.
	Spend(usd float64)
	// Pause makes the runs sharing the budget wait until t before their
	// next iteration (a usage limit).
	Pause(t time.Time)
	// Stopped records a stop that ends every run sharing the budget
	// (EndsBuild); the first one recorded is what Take returns after it.
	Stopped(s Stop)
	// Ended is closed once a stop ended the runs sharing the budget: it
	// cuts their waits short. A run's own budget returns nil.
	Ended() <-chan struct{}
}

// Stop is how a run ended: an Outcome, the message, and when a usage
// limit resets (OutcomeUsageLimit).
type Stop struct {
	Outcome  Outcome
	Message  string
	ResetsAt time.Time
	// Cause is the error behind the stop, as Report.Cause.
	Cause error
}

// EndsBuild reports whether a worker whose run ends with o ends the
// whole parallel build (ARCHITECTURE.md §5: exit codes 1, 3, 4, 5, 7, 9,
// 10); the other outcomes are the plan's end as one worker saw it.
func (o Outcome) EndsBuild() bool {
	switch o {
	case OutcomeError, OutcomeTestGateFailed, OutcomeAgentFailed, OutcomeGitFailed,
		OutcomeFailure, OutcomeBudgetExhausted, OutcomeUsageLimit:
		return true
	}
	return false
}

// solo is the budget of a run of its own: Config.MaxIterations and
// Config.MaxCost against its own report.
type solo struct {
	maxIter int
	maxCost float64
	report  *Report
}

func (s *solo) Take(time.Time, time.Time) (time.Time, *Stop) {
	if s.maxCost > 0 && s.report.CostUSD >= s.maxCost {
		return time.Time{}, &Stop{Outcome: OutcomeBudgetExhausted,
			Message: fmt.Sprintf("cost budget exhausted: spent $%.4f of $%.4f", s.report.CostUSD, s.maxCost)}
	}
	return time.Time{}, nil
}

func (*solo) Give(bool)              {}
func (*solo) Number(own int) int     { return own }
func (s *solo) Spent(own int) bool   { return own >= s.maxIter }
func (*solo) Spend(float64)          {}
func (*solo) Pause(time.Time)        {}
func (*solo) Stopped(Stop)           {}
func (*solo) Ended() <-chan struct{} { return nil }

// takeSlot takes an iteration from the run's budget, waiting out the
// usage-limit pauses of the runs it shares it with.
func (r *run) takeSlot(ctx context.Context) *stop {
	for {
		now := r.cfg.Now()
		until, end := r.budget.Take(now, r.pausedUntil)
		if end != nil {
			return &stop{outcome: end.Outcome, message: end.Message, resetsAt: end.ResetsAt, cause: end.Cause}
		}
		if until.IsZero() {
			return r.poolReady(ctx)
		}
		wait := until.Sub(now)
		r.note.send(Note{Kind: NoteWait, Iteration: r.report.Iterations + 1, Until: until, Wait: wait,
			Message: "usage limit reached by another worker; waiting for the reset"})
		if err := r.sleep(ctx, wait); err != nil {
			return r.checkCancel(ctx)
		}
		r.pausedUntil = until // waited for this pause (or the run ended): not again
	}
}

// poolReady returns when an agent of the run's pool is in: at once
// without a pool, or when one is; else it waits for the earliest reset as
// for a usage limit, or returns the stop that ends the run (every agent
// out for good, the stop policy, MaxWait).
func (r *run) poolReady(ctx context.Context) *stop {
	for r.pool != nil {
		st := r.pool.state(r.cfg.Now())
		if st.next != "" {
			return nil
		}
		if st.end != nil {
			return st.end
		}
		if s := r.usageLimit(ctx, RunResult{Class: ClassUsageLimit, UsageLimit: &UsageLimit{ResetsAt: st.resetsAt}}); s != nil {
			return s
		}
	}
	return nil
}

// sleep is Config.Sleep(ctx, d), cut short when another run's stop ended
// the runs sharing the budget; its error is ctx's only.
func (r *run) sleep(ctx context.Context, d time.Duration) error {
	ended := r.budget.Ended()
	if ended == nil {
		return r.cfg.Sleep(ctx, d)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ended:
			cancel()
		case <-wctx.Done():
		}
	}()
	r.cfg.Sleep(wctx, d)
	return ctx.Err()
}

// budgetEnded reports whether another run's stop ended the runs sharing
// the budget.
func (r *run) budgetEnded() bool {
	select {
	case <-r.budget.Ended():
		return true
	default:
		return false
	}
}

// stopped tells the budget how the run ended, when that ends the runs
// sharing it.
func (r *run) stopped(s *stop) {
	if s != nil && s.outcome.EndsBuild() {
		cause := s.cause
		if s.err != nil {
			cause = s.err
		}
		r.budget.Stopped(Stop{Outcome: s.outcome, Message: s.message, ResetsAt: s.resetsAt, Cause: cause})
	}
}
