package loop

import (
	"fmt"
	"time"
)

// Status is the state of a task in the plan. The legal moves between
// statuses are listed by Transitions; a store rejects every other move with a
// *TransitionError.
type Status string

// The task statuses of ARCHITECTURE.md §2.
const (
	StatusPending    Status = "pending"
	StatusInProgress Status = "in_progress"
	StatusDone       Status = "done"
	StatusFailed     Status = "failed"
	StatusBlocked    Status = "blocked"
)

// Statuses lists every status, in lifecycle order.
func Statuses() []Status {
	return []Status{StatusPending, StatusInProgress, StatusDone, StatusFailed, StatusBlocked}
}

// Valid reports whether s is one of Statuses.
func (s Status) Valid() bool {
	for _, v := range Statuses() {
		if s == v {
			return true
		}
	}
	return false
}

// ParseStatus returns the status named s, or an error naming the valid ones.
func ParseStatus(s string) (Status, error) {
	st := Status(s)
	if !st.Valid() {
		return "", fmt.Errorf("loop: unknown status %q (want one of pending, in_progress, done, failed, blocked)", s)
	}
	return st, nil
}

// Transition is one legal status move and the trigger that causes it.
type Transition struct {
	From    Status
	To      Status
	Trigger string
}

// Transitions is the task status machine of ARCHITECTURE.md §2. Anything
// not listed is illegal.
func Transitions() []Transition {
	return []Transition{
		{StatusPending, StatusInProgress, "claim"},
		{StatusPending, StatusBlocked, "block"},
		{StatusInProgress, StatusDone, "complete"},
		{StatusInProgress, StatusFailed, "fail"},
		{StatusInProgress, StatusPending, "release"},
		{StatusInProgress, StatusPending, "retry"},
		{StatusBlocked, StatusPending, "unblock"},
		{StatusFailed, StatusPending, "retry"},
		{StatusFailed, StatusPending, "reset"},
	}
}

// CanTransition reports whether a task may move from one status to another.
func CanTransition(from, to Status) bool {
	for _, t := range Transitions() {
		if t.From == from && t.To == to {
			return true
		}
	}
	return false
}

// Task is one unit of work in the plan.
type Task struct {
	ID          string
	Title       string
	Description string
	Status      Status
	// Priority orders ready tasks: lower first. The default is 2.
	Priority int
	// ParentID is the id of the parent task, or "" for a top-level task.
	ParentID string
	// Feature is the name of the feature the task belongs to, or "".
	Feature string
	// ClaimedBy is the agent holding the task while it is in_progress.
	ClaimedBy string
	// ClaimedAt is when the current claim was taken (zero when unclaimed).
	ClaimedAt time.Time
	// LeaseExpiresAt is when the current claim lapses unless renewed (zero
	// when unclaimed).
	LeaseExpiresAt time.Time
	// Holder is the process that keeps the current claim alive (zero when
	// unclaimed, or for a claim made by hand).
	Holder Holder
	// ClaimMode says who made the current claim: ClaimLoop, ClaimAgent, or
	// "" (by hand, or unclaimed).
	ClaimMode ClaimMode
	// Generation counts the task's claims: the current (or last) claim's
	// number, a fencing token for its outcomes
	// (ARCHITECTURE.md §2.2). 0: never claimed.
	Generation int64
	// RetryCount counts how often the task went back to pending after a
	// failed attempt (verification fail, retry, reset).
	RetryCount int
	// VerificationStatus is the verifier's last verdict ("", "pass", "fail").
	VerificationStatus string
	// BlockedBy lists the ids of the tasks that must be done before this one
	// is ready, in the order they were added.
	BlockedBy []string
	// Check is the task's own check, a shell command ("" for none): after
	// the agent reports the task done, the build loop runs it (sh -c) in
	// the task's working tree, before the verifier; a failing check is
	// task trouble (DESIGN §14, ARCHITECTURE.md §3.1).
	Check string
	// CheckBy is the id of the agent that wrote Check, "" when a person
	// (or ralph) did: `ralph task show` marks such a check, and a build
	// lists the agents' checks it will run when it starts.
	CheckBy   string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// LogEntry is one line of a task's history: claims, fail reasons,
// summaries, releases, recoveries. The latest LogDone entry of a done task
// is what its dependents see as its summary (see Summary).
type LogEntry struct {
	At      time.Time
	Kind    string
	Message string
	// Actor is who made the entry: an agent id, a person ("user-alice"),
	// or ActorRalph for what ralph did by itself.
	Actor string
}

// Log entry kinds written by stores and the loop.
const (
	LogClaim        = "claim"
	LogDone         = "done"
	LogFail         = "fail"
	LogRelease      = "release"
	LogRetry        = "retry"
	LogReset        = "reset"
	LogBlock        = "block"
	LogUnblock      = "unblock"
	LogLeaseExpired = "lease-expired"
	// LogHolderGone: a claim whose holder process is gone was returned to
	// pending (ARCHITECTURE.md §2.2).
	LogHolderGone = "holder-gone"
	// LogOutcomeRefused: a move from a claim that is no longer current
	// was refused (ErrStaleClaim).
	LogOutcomeRefused = "outcome-refused"
	LogNote           = "note"
)

// Counts is the number of tasks in each status.
type Counts struct {
	Pending    int
	InProgress int
	Done       int
	Failed     int
	Blocked    int
}

// Total is the number of tasks counted.
func (c Counts) Total() int {
	return c.Pending + c.InProgress + c.Done + c.Failed + c.Blocked
}

// Open is the number of tasks not yet started: pending plus blocked.
func (c Counts) Open() int { return c.Pending + c.Blocked }

// Resolved reports whether no task is open or in progress.
func (c Counts) Resolved() bool { return c.Open() == 0 && c.InProgress == 0 }

// String is the plan-status line:
// "open=N active=N done=N failed=N blocked=N total=N".
func (c Counts) String() string {
	return fmt.Sprintf("open=%d active=%d done=%d failed=%d blocked=%d total=%d",
		c.Open(), c.InProgress, c.Done, c.Failed, c.Blocked, c.Total())
}

// Scope narrows the tasks the loop looks at. The zero Scope is the whole
// plan. With TaskID set, only that task (or, if it has children, its
// descendants) is in scope; with Feature set, only the feature's tasks.
type Scope struct {
	Feature string
	TaskID  string
}

// Summary is the completion summary dependents see: the message of the
// latest LogDone entry, "" when there is none.
func Summary(logs []LogEntry) string {
	for i := len(logs) - 1; i >= 0; i-- {
		if logs[i].Kind == LogDone {
			return logs[i].Message
		}
	}
	return ""
}
