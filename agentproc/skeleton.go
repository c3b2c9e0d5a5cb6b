package agentproc

// The skeleton every runner's Run shares: Bin finds the executable
// (lookpath.go); Spec.WithRequest fills a Spec from the loop's request;
// Run runs the agent; Exit.Ending says how it ended for the runner's
// Classify, Ending.Stopped the class of a stop ralph ordered; Exit.Fill
// puts what Run measured into the result.

import (
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// Ending says how an agent's process ended, for a runner's Classify: the
// one shape the four runners share. Exit.Ending makes it from Run's Exit;
// tests write it by hand.
type Ending struct {
	// ExitCode is the process's exit code (-1 when killed by a signal).
	ExitCode int
	// Cancelled, TimedOut and IdleTimedOut say that ralph stopped the
	// agent before its result, and why. At most one is set.
	Cancelled    bool
	TimedOut     bool
	IdleTimedOut bool
	// GaveUp says that the runner stopped the agent itself, before its
	// result, because it kept retrying an API it could not reach (Codex
	// reconnects for ever) or a request that kept failing (OpenCode): an
	// API error, not a crash.
	GaveUp bool
	// StoppedAfterResult says that ralph stopped the agent after its
	// result (it did not exit in time, or was cancelled or timed out
	// then): its exit code is ralph's doing and says nothing against the
	// result.
	StoppedAfterResult bool
	// Now is the time of classification, to resolve usage-limit reset and
	// retry-after times.
	Now time.Time
	// Stderr is the tail of what the agent wrote on standard error.
	Stderr string
	// Model is the model the runner asked for, for pricing the session's
	// tokens (OpenCode's Classify reads it); "" when the agent's own
	// configuration chose it.
	Model string
}

// Ending maps how Run ended to an Ending, the same for every runner:
//
//   - After the result, the result stands whatever stopped the agent —
//     unless it is an error result while the caller's context is
//     cancelled: the cancel's signal may have caused it.
//   - A stop on cancel is Cancelled when the caller's context was
//     cancelled; otherwise the runner cancelled Run's context itself, a
//     watch of its own having given up on the agent (GaveUp).
//   - A wall or idle timeout is TimedOut or IdleTimedOut.
//   - An agent that exited by itself, without a result or with an error
//     result, while the caller's context was cancelled is Cancelled: the
//     signal that cancelled the context may have reached it first.
//
// cancelled says that the caller's context was cancelled (Exit.Cancelled
// when Run got that context, not one of the runner's own); result is the
// agent's result, nil when none came (or when the runner has no error
// results: OpenCode's errors come on lines of their own); now is the
// clock for Ending.Now, nil meaning time.Now.
func (x Exit) Ending(cancelled bool, result *loop.RunResult, now func() time.Time) Ending {
	if now == nil {
		now = time.Now
	}
	e := Ending{ExitCode: x.ExitCode, Now: now(), Stderr: x.Stderr,
		StoppedAfterResult: x.AfterResult && x.Stop != StopNone}
	failed := result == nil || result.IsError
	switch {
	case x.AfterResult:
		e.Cancelled = cancelled && result != nil && result.IsError
	case x.Stop == StopCancel && !cancelled:
		e.GaveUp = true
	case x.Stop == StopCancel:
		e.Cancelled = true
	case x.Stop == StopTimeout:
		e.TimedOut = true
	case x.Stop == StopIdle:
		e.IdleTimedOut = true
	default:
		e.Cancelled = cancelled && failed
	}
	return e
}

// Stopped is the class of a run ralph stopped before its result —
// loop.ClassCancelled, ClassTimeout or ClassIdleTimeout — or "" for one
// it did not. A runner's Classify checks it first: why ralph stopped the
// agent outweighs the agent's own account of its interrupted run.
func (e Ending) Stopped() loop.ErrorClass {
	switch {
	case e.Cancelled:
		return loop.ClassCancelled
	case e.TimedOut:
		return loop.ClassTimeout
	case e.IdleTimedOut:
		return loop.ClassIdleTimeout
	}
	return ""
}

// WithRequest returns s with the fields the loop's request sets: Dir, Plan,
// LogPath, LogRoot, Timeout and IdleTimeout. The prompt is not one of
// them: how it reaches the agent (Stdin, an argument) is the runner's.
func (s Spec) WithRequest(req loop.RunRequest) Spec {
	s.Dir, s.Plan = req.Dir, req.Plan
	s.LogPath, s.LogRoot = req.LogPath, req.LogRoot
	s.Timeout, s.IdleTimeout = req.Timeout, req.IdleTimeout
	return s
}

// Fill puts what Run measured into a runner's result: Duration, Stderr,
// LogErr and Checkout.
func (x Exit) Fill(res *loop.RunResult) {
	res.Duration, res.Stderr = x.Duration, x.Stderr
	res.LogErr, res.Checkout = x.LogErr, x.Checkout
}
