package progress

import (
	"context"
	"strings"

	"github.com/ralph-dev/ralph/loop"
)

// Recorder is a Store that keeps the run's log in the file, as `ralph
// build --progress` does: it is the loop's IterationRecorder (and, through
// Store, its Finisher). Hand it to loop.Run instead of the bare Store:
//
//	loop.Run(ctx, cfg, progress.Recorder{Store: st}, &progress.DocumentRunner{Runner: agent, Store: st})
//
// A bare Store writes no Iteration Log rows of its own: a caller that
// keeps its own log (AppendIteration, AddAttempt) is not given a second
// one.
type Recorder struct {
	*Store
}

var (
	_ loop.Finisher          = Recorder{}
	_ loop.IterationRecorder = Recorder{}
)

// RecordIteration implements loop.IterationRecorder. Every iteration that
// counts gets a row in the Iteration Log table ("title (id): status" in
// Notes), which also trims Recent Attempts to the last KeepAttempts. An
// iteration on a task that neither finished nor failed it (no sigil, agent
// or gate trouble, …) also gets an attempt block saying why, its Result
// the status and the loop's reason on one line, and "the task is offered
// again" as Next. A failed task is not given one here: the store writes
// its block when the task fails (Fail).
func (r Recorder) RecordIteration(ctx context.Context, rec loop.IterationRecord) error {
	tried := rec.Task.Title
	if rec.Task.ID != "" {
		tried += " (" + rec.Task.ID + ")"
	}
	note := string(rec.Status)
	if tried != "" {
		note = tried + ": " + note
	}
	if rec.Task.ID != "" && !rec.Status.Success() && rec.Status != loop.IterTaskFailed {
		result := string(rec.Status)
		if rec.Reason != "" {
			result += ": " + loop.ReasonLine(rec.Reason)
		}
		a := Attempt{Iteration: rec.Iteration, Tried: tried, Result: result, Next: "the task is offered again"}
		if err := r.AddAttempt(ctx, a); err != nil {
			return err
		}
	}
	return r.AppendIteration(ctx, IterationRow{
		Iteration: rec.Iteration, Started: rec.Started, Duration: rec.Duration,
		TasksCompleted: rec.TasksCompleted, Notes: note,
	})
}

// DocumentRunner lets a progress-file agent answer with the whole updated
// document, as `ralph build --progress` does: when a clean session's
// final text (leading blanks and a byte order mark aside) starts
// "# Progress:", it is handed to Store.ReplaceDocument before the loop
// looks at the task. A document that drops boxes or does not parse is
// refused (ErrLostTasks, a *ParseError): the file is left alone and
// Refused, when set, is told why; the session's result is the runner's
// either way. Only a work session's answer counts (RunRequest.Sandboxed):
// a read-only verifier session's is never written, whichever runner it
// reaches.
type DocumentRunner struct {
	loop.Runner
	Store *Store
	// Refused, if not nil, gets the error of a document that was not
	// written. It is called from the goroutine running the session.
	Refused func(error)
}

// Run implements loop.Runner.
func (r *DocumentRunner) Run(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
	res, err := r.Runner.Run(ctx, req)
	if err != nil || !res.OK() || !req.Sandboxed {
		return res, err
	}
	text := strings.TrimLeft(res.Text, " \t\r\n\ufeff")
	if !strings.HasPrefix(text, "# Progress:") {
		return res, nil
	}
	if err := r.Store.ReplaceDocument(ctx, text); err != nil && r.Refused != nil {
		r.Refused(err)
	}
	return res, nil
}
