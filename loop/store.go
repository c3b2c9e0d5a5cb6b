package loop

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors returned by TaskStore implementations. Stores wrap them with the
// task id, so check them with errors.Is.
var (
	// ErrNotFound: no task has the given id.
	ErrNotFound = errors.New("loop: no such task")
	// ErrNoReadyTask: Claim without a task id found nothing ready in scope.
	ErrNoReadyTask = errors.New("loop: no ready task")
	// ErrNotReady: Claim named a task that exists but is not ready (not
	// pending, has children, a blocker not done, or a failed parent). The
	// wrapping message says which.
	ErrNotReady = errors.New("loop: task is not ready")
	// ErrNotHolder: the task is not in_progress under the given agent's
	// claim, for example because its lease expired and it was recovered,
	// or another agent holds it. The message names the holder.
	ErrNotHolder = errors.New("loop: claim not held by this agent")
	// ErrLoopClaim: an agent tried to complete or fail a task that the
	// ralph loop claimed for it (ClaimLoop). Only the loop moves those,
	// after verification and gates: the agent answers with the sigil.
	ErrLoopClaim = errors.New("loop: the ralph loop holds this claim")
	// ErrStaleClaim: a move came from a claim that is no longer the task's
	// current one (Actor.Generation): the claim was recovered or taken
	// over since. The store logs the refusal (LogOutcomeRefused).
	ErrStaleClaim = errors.New("loop: the claim is no longer the task's current one")
	// ErrHeldByLiveAgent: a person tried to move a task that a live agent
	// holds, without Actor.Force. The error is a *HeldError, which names
	// the task and its holder.
	ErrHeldByLiveAgent = errors.New("loop: a live agent holds the task")
)

// TransitionError reports a status move that the task status machine does
// not allow, such as completing a pending task or claiming a done one.
type TransitionError struct {
	TaskID string
	From   Status
	To     Status
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("loop: task %s: illegal transition %s -> %s", e.TaskID, e.From, e.To)
}

// DefaultLease is how long a claim lasts unless renewed.
const DefaultLease = 15 * time.Minute

// ClaimParams are the arguments of TaskStore.Claim.
type ClaimParams struct {
	// TaskID names the task to claim. Empty means the first ready task in
	// Scope (priority ascending, then insertion order).
	TaskID string
	// Scope limits which tasks an id-less claim may take.
	Scope Scope
	// Agent is the claim holder, e.g. "agent-1a2b3c4d". Required.
	Agent string
	// Lease is how long the claim lasts unless renewed; zero means
	// DefaultLease.
	Lease time.Duration
	// Holder is the process that keeps the claim alive: the loop that runs
	// the agent (ARCHITECTURE.md §2.2). Zero for a claim made by hand,
	// which lives by its lease alone.
	Holder Holder
	// Mode says who claimed: ClaimLoop when the loop claims for the agent
	// it runs (then only the loop may complete or fail the task),
	// ClaimAgent when the agent claims for itself; "" for a claim by hand.
	Mode ClaimMode
}

// ClaimMessage is the history entry of a claim: who made it, its
// generation, who claimed (the loop or the agent) and the process that
// holds it. Every store writes it in these words.
func ClaimMessage(p ClaimParams, generation int64) string {
	msg := fmt.Sprintf("claimed by %s (claim %d", p.Agent, generation)
	if p.Mode != "" {
		msg += ", by the " + string(p.Mode)
	}
	if !p.Holder.IsZero() {
		msg += ", holder " + p.Holder.String()
	}
	return msg + ")"
}

// Actor is who moves a task (ARCHITECTURE.md §2.3), recorded
// in the task's history.
type Actor struct {
	// Agent is the id of the agent that moves the task; it may move only
	// the tasks it holds. Empty for a person.
	Agent string
	// Person names a person in the history ("user-alice"), when Agent is
	// empty. A person may move any task, but one held by a live agent only
	// with Force.
	Person string
	// Loop marks the ralph loop moving a claim it holds for its agent
	// (Agent is that agent): the only actor that may complete or fail a
	// ClaimLoop claim.
	Loop bool
	// Generation, when not 0, is the generation of the claim the move comes
	// from (Task.Generation at claim time): a move from a claim that is no
	// longer the task's current one is refused with ErrStaleClaim.
	Generation int64
	// Force lets a person move a task a live agent holds.
	Force bool
}

// Name is the actor as the history records it: the agent id, else the
// person's name, else "user".
func (a Actor) Name() string {
	switch {
	case a.Agent != "":
		return a.Agent
	case a.Person != "":
		return a.Person
	}
	return "user"
}

// ActorRalph is the actor of moves ralph makes by itself: auto-transitions
// and the recovery of expired or orphaned claims.
const ActorRalph = "ralph"

// MoveParams are the arguments of Complete, Fail, Release and Retry.
type MoveParams struct {
	// TaskID names the task.
	TaskID string
	// Message is the completion summary (Complete; may be empty) or the
	// reason (Fail, Release, Retry), logged with the move.
	Message string
	// By is who moves the task.
	By Actor
	// Raced marks a Release of a task that lost a race to land (its work
	// conflicts with what other workers landed meanwhile): until its next
	// claim it comes before the other ready tasks of its priority
	// (DESIGN §17). Other moves ignore it, and so do stores that keep no
	// order of their own (the progress file: its lines are its order).
	Raced bool
}

// TaskStore is the plan the loop works through. Implementations: the SQLite
// graph in package dag, the markdown progress file, and looptest.MemStore.
//
// Every method is safe for concurrent use. Each method is atomic: on error
// the store is exactly as it was. A cancelled context makes a method return
// the context's error without changing anything.
//
// An error that may pass if the call is made again (the database locked by
// another process, a full disk, a dropped connection) has, somewhere in its
// chain, a method Temporary() bool that returns true: the loop retries the
// outcomes of finished work on those
// (ARCHITECTURE.md §4), and on no other.
//
// Any method may first return expired claims to pending (with a log entry of
// kind LogLeaseExpired naming the old holder); that is the only change a
// read-only-looking method makes.
type TaskStore interface {
	// Get returns one task. Error: ErrNotFound.
	Get(ctx context.Context, id string) (Task, error)

	// Ready returns the ready tasks in scope, in claim order (priority
	// ascending, then insertion order), at most limit of them (limit <= 0:
	// all). A task is ready when it is pending, has no children, its parent
	// is not failed and every blocker is done.
	Ready(ctx context.Context, scope Scope, limit int) ([]Task, error)

	// Active returns the in_progress tasks in scope, oldest claim first.
	Active(ctx context.Context, scope Scope) ([]Task, error)

	// Counts counts the tasks in scope by status.
	Counts(ctx context.Context, scope Scope) (Counts, error)

	// Claim moves a ready task to in_progress under p.Agent with a lease,
	// atomically: of many concurrent claimers, exactly one gets each task.
	// Errors: ErrNoReadyTask (no id, nothing ready), ErrNotFound,
	// ErrNotReady (the named task is not ready; the message says why).
	Claim(ctx context.Context, p ClaimParams) (Task, error)

	// RenewLease extends the claim agent holds on task id to now+lease
	// (zero: DefaultLease). Error: ErrNotHolder when the task is not
	// in_progress under that agent.
	RenewLease(ctx context.Context, id, agent string, lease time.Duration) error

	// Complete moves an in_progress task to done, logging p.Message (if not
	// empty) as kind LogDone. In the same transaction, blocked dependents
	// whose blockers are all done become pending, and a parent whose
	// children are all done becomes done, recursively.
	// Errors: ErrNotFound, *TransitionError, and the refusals of CheckMove.
	Complete(ctx context.Context, p MoveParams) error

	// Fail moves an in_progress task to failed, logging p.Message as kind
	// LogFail; its ancestors become failed too, in the same transaction.
	// Errors: ErrNotFound, *TransitionError, and the refusals of CheckMove.
	Fail(ctx context.Context, p MoveParams) error

	// Release returns an in_progress task to pending without counting a
	// retry, logging p.Message as kind LogRelease.
	// Errors: ErrNotFound, *TransitionError, and the refusals of CheckMove.
	Release(ctx context.Context, p MoveParams) error

	// ReleaseAgent releases every task agent holds and returns their ids,
	// but for the claims a live ralph loop made for it (LoopHeld): the loop
	// releases those itself.
	ReleaseAgent(ctx context.Context, agent, reason string) ([]string, error)

	// Retry returns an in_progress or failed task to pending with
	// RetryCount+1, logging p.Message as kind LogRetry. Ancestors that had
	// failed because of it are not touched (use Reset on them).
	// Errors: ErrNotFound, *TransitionError, and the refusals of CheckMove.
	Retry(ctx context.Context, p MoveParams) error

	// SetVerification records the verifier's verdict ("pass" or "fail")
	// on the task.
	SetVerification(ctx context.Context, id, verdict string) error

	// AddLog appends an entry to a task's log. Error: ErrNotFound.
	AddLog(ctx context.Context, id, kind, message string) error

	// Logs returns a task's log, oldest first. Error: ErrNotFound.
	Logs(ctx context.Context, id string) ([]LogEntry, error)
}

// DoneMarker is implemented by stores in which the agent can mark its task
// done in the store's own way, outside ralph's commands: the progress file,
// whose box the agent ticks. The loop takes
// such a mark like the done sigil: it verifies, runs the gates and then
// completes the task.
type DoneMarker interface {
	// MarkedDone reports whether the agent marked task id done.
	MarkedDone(ctx context.Context, id string) (bool, error)
}

// Feature is a named slice of the plan with a spec and a plan file.
type Feature struct {
	Name      string
	SpecPath  string
	PlanPath  string
	CreatedAt time.Time
}

// FeatureStore is implemented by stores that know features. The loop uses
// it, when the store offers it, to put a feature's spec and plan into the
// prompt, and plan mode without a feature scope to plan every feature's
// spec.
type FeatureStore interface {
	// Feature returns the named feature. Error: ErrFeatureNotFound.
	Feature(ctx context.Context, name string) (Feature, error)
	// Features returns every feature, in the order they were added.
	Features(ctx context.Context) ([]Feature, error)
}

// ErrFeatureNotFound: no feature has the given name.
var ErrFeatureNotFound = errors.New("loop: no such feature")

// Receipt records one iteration (or verifier session): what it cost and how
// it ended.
type Receipt struct {
	Session          string
	Iteration        int
	Mode             string // "build", "plan", "prompt", "verify"
	TaskID           string
	Model            string
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	CostUSD          float64
	StartedAt        time.Time
	Duration         time.Duration
	Turns            int
	ExitReason       string
	Verdict          string
	// Worker is the worker of a parallel build ("w2"); empty without
	// workers.
	Worker string
	// Agent is the agent CLI that ran the session (RunResult.Agent).
	Agent string
	// CostSource says whether CostUSD was reported by the agent,
	// estimated from tokens, or is unknown (RunResult.CostSource; ""
	// means reported).
	CostSource CostSource
	// Result is how the iteration the session belongs to ended, once it
	// has (an IterationStatus: a worker's session that succeeded may
	// still end in "tests_failed", "check_failed" or "verify_failed");
	// "" while it is under way, for a verifier's session (its Verdict
	// says), and in stores that keep no results (ResultStore).
	Result IterationStatus
}

// SettingStore is implemented by stores that record settings with the
// plan, once: a parallel build's integration branch (ARCHITECTURE.md §5).
type SettingStore interface {
	// PlanSetting returns the value recorded under key, ok false when
	// none is.
	PlanSetting(ctx context.Context, key string) (value string, ok bool, err error)
	// RecordPlanSetting records value under key unless key has a value
	// already, atomically, and returns the value key has now.
	RecordPlanSetting(ctx context.Context, key, value string) (string, error)
}

// ReceiptStore is implemented by stores that keep iteration receipts for
// `ralph status` and the cost budget.
type ReceiptStore interface {
	// RecordReceipt keeps r. The loop retries an error marked Temporary()
	// (see TaskStore) as it retries an outcome, so a receipt is as
	// durable as the outcome it goes with.
	RecordReceipt(ctx context.Context, r Receipt) error
	// Receipts returns the latest receipts, newest first, at most limit
	// (limit <= 0: all).
	Receipts(ctx context.Context, limit int) ([]Receipt, error)
}

// ResultStore is implemented by receipt stores that keep, with the
// receipts of an iteration's sessions, how the iteration ended
// (Receipt.Result): a session can succeed while its iteration fails a
// gate, a check or verification, and status views must not show such an
// iteration as a success. The loop calls RecordResult once at the end of
// every iteration that recorded a receipt, after RecordReceipt, from the
// goroutine running the loop, with a context that outlives the run's
// cancellation but has a timeout; an error is said as a notice and does
// not stop the run.
type ResultStore interface {
	// RecordResult sets Result of the receipts of iteration n of session
	// (worker: the worker of a parallel build, "" without workers) to
	// status, except a verifier's (Mode "verify"). No receipt is no
	// error.
	RecordResult(ctx context.Context, session, worker string, n int, status IterationStatus) error
}
