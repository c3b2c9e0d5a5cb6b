package loop

import (
	"context"
	"time"
)

// PlanAccess is what a runner needs so that an agent it confines to a
// sandbox can still reach the plan (ARCHITECTURE.md §7.4): inside the
// sandbox the plan is read-only and the database credentials are withheld,
// so the agent's `$RALPH_BIN task …` commands go through a broker that
// serves this session's agent, on a Unix socket of its own ($RALPH_SOCKET).
// Package broker serves it; package agentproc starts one for every
// sandboxed session whose RunRequest carries a PlanAccess. A runner whose
// agent is not sandboxed ignores it: the agent's commands open the store
// themselves, as a person's do.
//
// The loop fills RunRequest.Plan for every session. The broker applies
// each command as Agent under ARCHITECTURE.md §2.3 (never as a person, never
// with force): it claims with Holder (peek mode only), completes and fails
// only Agent's own claims (a ClaimLoop claim is the loop's to complete),
// adds tasks and dependencies, and notes; a ReadOnly session reads only.
type PlanAccess struct {
	// Store is the run's plan. The optional interfaces it implements widen
	// what is served: TaskAdder (`task add`, `task dep add`), TaskLister
	// (`task list`), TaskNoter (`task note`).
	Store TaskStore
	// Agent is the session's agent id (RALPH_AGENT_ID): the only actor the
	// agent's commands are applied as.
	Agent string
	// Holder is the loop that keeps the agent's claims alive
	// (RALPH_HOLDER): a claim the agent makes takes it.
	Holder Holder
	// Mode is the run's mode; ClaimMode its claim mode. The agent may
	// claim only in peek mode: ModeBuild with ClaimAgent.
	Mode      Mode
	ClaimMode ClaimMode
	// TaskID is the task the loop claimed for this session (ClaimLoop),
	// "" when it claimed none: the session's whole job, so the agent
	// claims nothing else.
	TaskID string
	// Lease is the run's claim lease (0: DefaultLease), the lease of a
	// claim whose command names none.
	Lease time.Duration
	// Scope is the run's scope: what the agent sees as claimable (Ready,
	// Active) and what a claim without a task id takes from.
	Scope Scope
	// ReadOnly marks the verifier's session: it may read the plan only.
	ReadOnly bool
}

// NewTask is a task to add to the plan (TaskAdder.AddTask), as `ralph
// task add` gives it.
type NewTask struct {
	// ID is the new task's id; "" lets the store make one.
	ID          string
	Title       string
	Description string
	// Priority is used as is: callers pass the default (2) when none was
	// given.
	Priority int
	// ParentID, if set, names an existing task that is not done.
	ParentID string
	// Feature, if set, names an existing feature (ErrFeatureNotFound).
	Feature string
	// BlockedBy lists existing tasks that must be done first; a cycle is
	// refused.
	BlockedBy []string
	// Check is the task's check command (Task.Check), "" for none.
	Check string
	// CheckBy is the agent that wrote Check (Task.CheckBy): set by `ralph
	// task add` under RALPH_AGENT_ID and by the broker for its agent, ""
	// for a person's. It is kept only with a Check.
	CheckBy string
}

// TaskAdder is implemented by stores that take new tasks and
// dependencies (the SQLite and PostgreSQL stores, looptest.MemStore).
type TaskAdder interface {
	// AddTask adds a pending task and returns it. Errors: ErrNotFound (a
	// parent or blocker), ErrFeatureNotFound, and the store's own (a
	// duplicate id, a blank title, a cycle).
	AddTask(ctx context.Context, t NewTask) (Task, error)
	// AddDependency makes blocked wait until blocker is done; a dependency
	// that would close a cycle is refused and nothing changes.
	AddDependency(ctx context.Context, blocked, blocker string) error
}

// ListQuery filters TaskLister.ListTasks; the zero value lists every task.
type ListQuery struct {
	// Status, if set, keeps the tasks with that status.
	Status Status
	// Feature, if set, keeps the feature's tasks.
	Feature string
	// Limit, when positive, stops after that many tasks (the first in
	// insertion order).
	Limit int
	// Shape, if set, is called once before the first task with the shape
	// of the listing, read from the same snapshot.
	Shape func(ListShape) error
}

// ListShape describes the tasks of a listing: how many, and the widths in
// characters of the longest id, status and priority (as decimal text) —
// what a table needs before it prints its first row.
type ListShape struct {
	Tasks                               int
	IDWidth, StatusWidth, PriorityWidth int
}

// TaskLister is implemented by stores that list the plan's tasks in
// insertion order, streaming them: memory does not grow with the plan.
type TaskLister interface {
	// ListTasks calls fn with each task that matches q, in insertion
	// order. An error from fn (or q.Shape) stops the listing and is
	// returned as it is.
	ListTasks(ctx context.Context, q ListQuery, fn func(Task) error) error
}

// TaskNoter is implemented by stores that take notes on tasks: a log
// entry of kind LogNote made by an actor, which changes nothing else (a
// note is never a completion summary).
type TaskNoter interface {
	// Note appends p.Message to task p.TaskID's log as kind LogNote, with
	// p.By's name as its actor. Error: ErrNotFound.
	Note(ctx context.Context, p MoveParams) error
}
