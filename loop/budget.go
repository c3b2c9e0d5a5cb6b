package loop

import (
	"context"
	"time"
)

// budget is what a run takes its iterations and its cost from, and what it
// shares with the runs it works beside: nothing (solo, a run of its own) or
// the workers' Shared. The engine asks it, never which one it is.
type budget interface {
	// take reserves the next iteration before the mode's attempt. It
	// returns the time to wait until first (a usage limit another worker
	// met, after waited, the last pause this run waited for), or the stop
	// that ends the run instead; neither means the slot is taken.
	take(now, waited time.Time) (pause time.Time, s *stop)
	// give gives back the slot take took; counted: the iteration ran to
	// its end.
	give(counted bool)
	// number numbers an iteration whose claim succeeded: own is the run's
	// own next number.
	number(own int) int
	// spent reports whether the iteration budget is spent, after a
	// counted iteration (own: the run's own iterations).
	spent(own int) bool
	// spend adds a session's cost.
	spend(usd float64)
	// pause makes the runs sharing the budget wait until t.
	pause(t time.Time)
	// sleep is sleep(ctx, d), cut short when another run's stop ends
	// them all; its error is ctx's only.
	sleep(ctx context.Context, sleep func(context.Context, time.Duration) error, d time.Duration) error
	// stopped records the stop the run ended with.
	stopped(s *stop)
	// ended reports whether another run's stop ended the runs sharing it.
	ended() bool
	// log is the session log the runs share (nil: the run opens its own).
	log() *SessionLog
	// agentsTest is read(), done once for the runs sharing the budget.
	agentsTest(read func() (AgentsTest, error)) (AgentsTest, error)
	// first reports whether this is the first time what is to be said by
	// the runs sharing the budget (a notice they say once).
	first(what string) bool
}

// solo is the budget of a run of its own: Config.MaxIterations and
// Config.MaxCost against its own report.
type solo struct {
	maxIter int
	maxCost float64
	report  *Report
}

func (s solo) take(time.Time, time.Time) (time.Time, *stop) {
	if s.maxCost > 0 && s.report.CostUSD >= s.maxCost {
		return time.Time{}, stopWith(OutcomeBudgetExhausted, "cost budget exhausted: spent $%.4f of $%.4f", s.report.CostUSD, s.maxCost)
	}
	return time.Time{}, nil
}

func (solo) give(bool)                                                      {}
func (solo) number(own int) int                                             { return own }
func (s solo) spent(own int) bool                                           { return own >= s.maxIter }
func (solo) spend(float64)                                                  {}
func (solo) pause(time.Time)                                                {}
func (solo) stopped(*stop)                                                  {}
func (solo) ended() bool                                                    { return false }
func (solo) log() *SessionLog                                               { return nil }
func (solo) first(string) bool                                              { return true }
func (solo) agentsTest(read func() (AgentsTest, error)) (AgentsTest, error) { return read() }

func (solo) sleep(ctx context.Context, sleep func(context.Context, time.Duration) error, d time.Duration) error {
	return sleep(ctx, d)
}

// takeSlot takes an iteration from the run's budget, waiting out the
// usage-limit pauses of the runs it shares it with.
func (r *run) takeSlot(ctx context.Context) *stop {
	for {
		now := r.cfg.Now()
		until, s := r.budget.take(now, r.pausedUntil)
		if s != nil || until.IsZero() {
			return s
		}
		wait := until.Sub(now)
		r.note.send(Note{Kind: NoteWait, Iteration: r.report.Iterations + 1, Until: until, Wait: wait,
			Message: "usage limit reached by another worker; waiting for the reset"})
		if err := r.budget.sleep(ctx, r.cfg.Sleep, wait); err != nil {
			return r.checkCancel(ctx)
		}
		r.pausedUntil = until // waited for this pause (or the run ended): not again
	}
}
