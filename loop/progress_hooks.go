package loop

import (
	"context"
	"strconv"
	"time"
)

// Finisher is implemented by stores whose plan can be declared finished
// by something other than its tasks' statuses: a markdown progress file
// says RALPH_DONE in its Status section. The build loop asks
// Done before the first iteration and after every iteration, and ends the
// run as OutcomeComplete when it says true, even with tasks left open. An
// error from Done is a store error.
type Finisher interface {
	Done(ctx context.Context) (bool, error)
}

// IterationRecorder is implemented by stores that keep a log of the run
// themselves, such as a progress file's Iteration Log and Recent Attempts.
// The loop calls RecordIteration once at the end of every
// iteration that counts (usage-limit waits do not), in every mode, from
// the goroutine running the loop, before the next iteration starts. Its
// context is not cancelled when the run is (an interrupted iteration is
// recorded too) but has a timeout. An error does not stop the run: the
// loop reports it to the Observer as a notice, as it does for receipts.
type IterationRecorder interface {
	RecordIteration(ctx context.Context, rec IterationRecord) error
}

// IterationRecord is one finished iteration, as an IterationRecorder gets
// it.
type IterationRecord struct {
	Mode      Mode
	Iteration int
	// Started is when the iteration began (after the claim, before the
	// prompt was built); Duration runs to its end, gates and verifier
	// included.
	Started  time.Time
	Duration time.Duration
	// Task is the task the loop claimed; zero in peek, plan and prompt
	// mode.
	Task  Task
	Model string
	// Status is how the iteration ended; Reason says why when it is not a
	// success (the same text the session log writes as "reason").
	Status IterationStatus
	Reason string
	// TasksCompleted is how many more tasks in scope were done at the end
	// of the iteration than at its start: the agent may tick several boxes
	// of a progress file in one session. When the store could not count,
	// it is 1 for a successful iteration on a task and 0 otherwise.
	TasksCompleted int
	// CostUSD is what the iteration's sessions (verifier included) cost.
	CostUSD float64
}

// iterState is the iteration under way.
type iterState struct {
	n          int
	started    time.Time
	cost       float64
	doneBefore int // -1: unknown
	// receipted: a receipt of this iteration was recorded in the store,
	// whose result recordResult sets at the end.
	receipted bool
}

// beginIteration notes the start of iteration n and reports it to the
// Observer.
func (r *run) beginIteration(ctx context.Context, n int, task Task, model string) {
	r.iter = iterState{n: n, started: r.cfg.Now(), cost: r.report.CostUSD, doneBefore: -1}
	r.lease.begin(n)
	if _, ok := r.store.(IterationRecorder); ok {
		if c, err := r.store.Counts(ctx, r.cfg.Scope); err == nil {
			r.iter.doneBefore = c.Done
		}
	}
	r.note.send(Note{Kind: NoteIterationStart, Iteration: n, Task: task, Model: model})
}

// recordResult tells a ResultStore how iteration n ended, when a receipt
// of it was recorded.
func (r *run) recordResult(n int, status IterationStatus) {
	rs, ok := r.receipts.(ResultStore)
	if !ok || r.iter.n != n || !r.iter.receipted {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := rs.RecordResult(ctx, r.cfg.Session, r.cfg.Worker, n, status); err != nil {
		r.note.notice(n, "could not record how iteration %d ended with its receipts: %v", n, err)
	}
}

// recordIteration hands the finished iteration to the store, when it keeps
// a log of its own.
func (r *run) recordIteration(n int, task Task, model string, status IterationStatus, why string) {
	rec, ok := r.store.(IterationRecorder)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	ir := IterationRecord{
		Mode: r.cfg.Mode, Iteration: n, Started: r.iter.started, Task: task, Model: model,
		Status: status, Reason: why, CostUSD: r.report.CostUSD - r.iter.cost,
	}
	if r.iter.n != n || r.iter.started.IsZero() {
		ir.Started = r.cfg.Now()
	}
	ir.Duration = r.cfg.Now().Sub(ir.Started)
	ir.TasksCompleted = -1
	if r.iter.doneBefore >= 0 {
		if c, err := r.store.Counts(ctx, r.cfg.Scope); err == nil {
			ir.TasksCompleted = max(c.Done-r.iter.doneBefore, 0)
		}
	}
	if ir.TasksCompleted < 0 {
		ir.TasksCompleted = 0
		if status.Success() && task.ID != "" {
			ir.TasksCompleted = 1
		}
	}
	if err := rec.RecordIteration(ctx, ir); err != nil {
		r.note.notice(n, "could not record iteration %d in the store: %v", n, err)
	}
}

// finishedCheck ends a build run whose store says the plan is finished
// (Finisher): RALPH_DONE in a progress file.
func (r *run) finishedCheck(ctx context.Context) *stop {
	if r.cfg.Mode != ModeBuild {
		return nil
	}
	s, err := finished(ctx, r.store, r.cfg.Scope)
	if err != nil {
		return r.storeErr(ctx, err)
	}
	return s
}

// finished is the stop of a store that is a Finisher and says it is done,
// or nil.
func finished(ctx context.Context, store TaskStore, scope Scope) (*stop, error) {
	f, ok := store.(Finisher)
	if !ok {
		return nil, nil
	}
	done, err := f.Done(ctx)
	if err != nil || !done {
		return nil, err
	}
	c, err := store.Counts(ctx, scope)
	if err != nil {
		return nil, err
	}
	if c.Total() > 0 && c.Resolved() {
		return completeStop(c), nil
	}
	if n := c.Open() + c.InProgress; n > 0 {
		return stopWith(OutcomeComplete, "complete: the plan says it is done (RALPH_DONE), %s unfinished", remainingTasks(n)), nil
	}
	return stopWith(OutcomeComplete, "complete: the plan says it is done (RALPH_DONE)"), nil
}

// remainingTasks is "1 task" or "N tasks".
func remainingTasks(n int) string {
	if n == 1 {
		return "1 task"
	}
	return strconv.Itoa(n) + " tasks"
}
