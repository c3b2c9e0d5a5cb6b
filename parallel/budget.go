package parallel

import (
	"fmt"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// budget is the loop.Budget the workers of one build share
// (ARCHITECTURE.md §5): the iterations and their numbers, the cost, a
// usage-limit pause, and the first stop.
//
// Iterations are numbered across the workers in the order their claims
// succeed. MaxIterations counts the iterations of all workers together: a
// worker takes a slot before it claims, and when every slot is taken or
// spent it ends (the iterations in flight finish). The first stop of a
// worker that ends the build — exit codes 1, 3, 4, 5, 7, 9 and 10 — makes
// every other worker end before its next claim, with that stop.
type budget struct {
	mu       sync.Mutex
	maxIter  int
	maxCost  float64
	inFlight int // slots taken by iterations under way
	counted  int // iterations that ran to their end
	numbered int // the last iteration number handed out
	cost     float64
	paused   time.Time // no claims before then: a usage limit
	first    *loop.Stop
	// done is closed with the first stop that ends the build: it wakes
	// the workers waiting for a usage limit's reset.
	done chan struct{}
}

var _ loop.Budget = (*budget)(nil)

// newBudget is the budget of a build: maxIterations iterations in all
// (0: loop.DefaultMaxIterations) and maxCost USD (0: none).
func newBudget(maxIterations int, maxCost float64) *budget {
	if maxIterations <= 0 {
		maxIterations = loop.DefaultMaxIterations
	}
	return &budget{maxIter: maxIterations, maxCost: maxCost, done: make(chan struct{})}
}

// Take takes an iteration slot, unless the workers must wait for a usage
// limit's reset first. It returns the stop that ends the worker instead:
// another worker's stop, the cost budget, the iteration budget.
func (b *budget) Take(now, waited time.Time) (time.Time, *loop.Stop) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.first != nil:
		f := *b.first
		f.Message = "stopped with another worker: " + f.Message
		return time.Time{}, &f
	case b.maxCost > 0 && b.cost >= b.maxCost:
		return time.Time{}, &loop.Stop{Outcome: loop.OutcomeBudgetExhausted,
			Message: fmt.Sprintf("cost budget exhausted: spent $%.4f of $%.4f", b.cost, b.maxCost)}
	case b.counted+b.inFlight >= b.maxIter:
		return time.Time{}, &loop.Stop{Outcome: loop.OutcomeLimitReached,
			Message: fmt.Sprintf("iteration limit reached (%d of %d run or under way)", b.counted, b.maxIter)}
	}
	if until := b.paused; until.Sub(now) > 0 && until.After(waited) {
		return until, nil
	}
	b.inFlight++
	return time.Time{}, nil
}

// Give gives back the slot Take took.
func (b *budget) Give(counted bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inFlight--
	if counted {
		b.counted++
	}
}

// Number numbers an iteration whose claim succeeded, across the workers.
func (b *budget) Number(int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.numbered++
	return b.numbered
}

// Spent reports whether the iterations of all workers reached the limit.
func (b *budget) Spent(int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counted >= b.maxIter
}

func (b *budget) Spend(usd float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cost += usd
}

// Pause makes every worker wait for a usage limit's reset.
func (b *budget) Pause(t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.After(b.paused) {
		b.paused = t
	}
}

// Stopped records a worker's stop that ends the build; the first is kept.
func (b *budget) Stopped(s loop.Stop) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.first == nil {
		b.first = &s
		close(b.done)
	}
}

func (b *budget) Ended() <-chan struct{} { return b.done }

// stop ends the build from outside a worker's loop (a worker that could
// not start: a failing --setup), if it is the first stop that ends it.
func (b *budget) stop(o loop.Outcome, message string) {
	if o.EndsBuild() {
		b.Stopped(loop.Stop{Outcome: o, Message: message})
	}
}

// firstStop is the first stop that ended the build; ok false when none
// did.
func (b *budget) firstStop() (s loop.Stop, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.first == nil {
		return loop.Stop{}, false
	}
	return *b.first, true
}
