package loop

import "time"

// Outcome is how a run of the loop ended.
type Outcome string

// The outcomes of a run. ExitCode maps each to its exit code (README, "Exit
// codes").
const (
	// OutcomeComplete: every task in scope is done (or, in peek mode,
	// nothing is claimable).
	OutcomeComplete Outcome = "complete"
	// OutcomeCompleteWithFailures: nothing is open or active, but some
	// tasks failed ("done with skips").
	OutcomeCompleteWithFailures Outcome = "complete_with_failures"
	// OutcomeLimitReached: the iteration limit (or --once) was reached with
	// tasks left.
	OutcomeLimitReached Outcome = "limit_reached"
	// OutcomeNoPlan: the scope holds no task at all.
	OutcomeNoPlan Outcome = "no_plan"
	// OutcomeBlocked: tasks remain, but none is ready and no live agent
	// holds one (a loop waits for tasks other agents hold).
	OutcomeBlocked Outcome = "blocked"
	// OutcomeFailure: the agent declared <promise>FAILURE</promise>.
	OutcomeFailure Outcome = "failure"
	// OutcomeCancelled: the context was cancelled (SIGINT/SIGTERM).
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeBudgetExhausted: the cost budget was spent before an iteration.
	OutcomeBudgetExhausted Outcome = "budget_exhausted"
	// OutcomeUsageLimit: a usage limit was hit and the policy is stop, or
	// the reset lies further away than MaxWait.
	OutcomeUsageLimit Outcome = "usage_limit"
	// OutcomeAgentFailed: agent trouble found no retry left.
	OutcomeAgentFailed Outcome = "agent_failed"
	// OutcomeTestGateFailed: the test gate failed with no retry left.
	OutcomeTestGateFailed Outcome = "test_gate_failed"
	// OutcomeGitFailed: the commit gate failed with no retry left, or
	// Commit was asked outside a git repository.
	OutcomeGitFailed Outcome = "git_failed"
	// OutcomeError: a usage or internal error (bad configuration, a store
	// or runner error); Run returns it as its error too.
	OutcomeError Outcome = "error"
)

// Outcomes lists every outcome.
func Outcomes() []Outcome {
	return []Outcome{OutcomeComplete, OutcomeCompleteWithFailures, OutcomeLimitReached,
		OutcomeNoPlan, OutcomeBlocked, OutcomeFailure, OutcomeCancelled, OutcomeBudgetExhausted,
		OutcomeUsageLimit, OutcomeAgentFailed, OutcomeTestGateFailed, OutcomeGitFailed, OutcomeError}
}

// ExitCode is the process exit code for the outcome (README, "Exit codes").
// The CLI calls it; it never re-derives the policy. An unknown outcome is 1.
func (o Outcome) ExitCode() int {
	switch o {
	case OutcomeComplete, OutcomeLimitReached:
		return 0
	case OutcomeNoPlan:
		return 2
	case OutcomeTestGateFailed:
		return 3
	case OutcomeAgentFailed:
		return 4
	case OutcomeGitFailed:
		return 5
	case OutcomeBlocked:
		return 6
	case OutcomeFailure:
		return 7
	case OutcomeCompleteWithFailures:
		return 8
	case OutcomeBudgetExhausted:
		return 9
	case OutcomeUsageLimit:
		return 10
	case OutcomeCancelled:
		return 130
	default:
		return 1
	}
}

// Succeeded reports whether the run ended by the plan's own state rather
// than by trouble: Complete, CompleteWithFailures or LimitReached. Those end
// the machine in StateDone; every other outcome ends it in StateFailed.
func (o Outcome) Succeeded() bool {
	switch o {
	case OutcomeComplete, OutcomeCompleteWithFailures, OutcomeLimitReached:
		return true
	}
	return false
}

// Report is what a run did.
type Report struct {
	Outcome Outcome
	// Message is one line for people: why the run stopped, e.g.
	// "iteration limit reached (20); 3 tasks remain" or
	// "usage limit reached; resets at 2026-11-22T12:00:00Z".
	Message string
	Session string
	AgentID string
	// Iterations counts the iterations run (usage-limit waits excluded).
	Iterations int
	// Successes counts iterations that completed a task (peek mode: ran
	// cleanly); Failures counts the others.
	Successes int
	Failures  int
	// Remaining is the number of open plus active tasks in scope when the
	// run ended, or -1 when the store could not say.
	Remaining int
	// Counts are the scope's counts at the end (zero when unknown).
	Counts Counts
	// Receipts lists every agent session of the run, verifier sessions
	// included, in order.
	Receipts []Receipt
	// CostUSD is the sum of the receipts' costs.
	CostUSD float64
	// Cause is the error behind the outcome, when there is one, for a
	// caller to match with errors.Is and errors.As: Run's error with
	// OutcomeError; ErrNotGitRepo when Config.Commit found no repository;
	// a *NoSpecsError or *EmptyFeatureError in plan mode. Message says it
	// for people.
	Cause error
	// ResetsAt is when the usage limit resets, for OutcomeUsageLimit.
	ResetsAt  time.Time
	StartedAt time.Time
	Duration  time.Duration
}

// ExitCode is Outcome.ExitCode.
func (r Report) ExitCode() int { return r.Outcome.ExitCode() }
