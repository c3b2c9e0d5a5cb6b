package dag

import (
	"context"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// AddParams are the arguments of Store.Add.
type AddParams struct {
	// ID is the new task's id; when empty one is generated ("t-<n>"), never
	// equal to an existing id.
	ID string
	// Title is required and must not be blank.
	Title       string
	Description string
	// Priority is used as is; callers pass DefaultPriority when the user
	// gave none.
	Priority int
	// ParentID, if set, must name an existing task.
	ParentID string
	// Feature, if set, must name an existing feature (loop.ErrFeatureNotFound).
	Feature string
	// BlockedBy lists existing tasks that must be done first; a cycle is
	// refused with ErrCycle.
	BlockedBy []string
}

// Add creates a pending task and returns it.
// Errors: ErrDuplicateID, loop.ErrNotFound (parent or blocker),
// loop.ErrFeatureNotFound, ErrCycle, or a plain error for a blank title.
func (s *Store) Add(ctx context.Context, p AddParams) (loop.Task, error) {
	return loop.Task{}, errTODO
}

// AddDependency makes blocked wait for blocker. It is a no-op when the
// dependency exists. Errors: ErrCycle (a task blocking itself included),
// loop.ErrNotFound.
func (s *Store) AddDependency(ctx context.Context, blocked, blocker string) error {
	return errTODO
}

// RemoveDependency removes the dependency of blocked on blocker; it is an
// error if there is none.
func (s *Store) RemoveDependency(ctx context.Context, blocked, blocker string) error {
	return errTODO
}

// Block moves a pending task to blocked (explicitly), logging reason.
// Errors: loop.ErrNotFound, *loop.TransitionError.
func (s *Store) Block(ctx context.Context, id, reason string) error { return errTODO }

// Unblock moves a blocked task back to pending, logged.
// Errors: loop.ErrNotFound, *loop.TransitionError.
func (s *Store) Unblock(ctx context.Context, id string) error { return errTODO }

// Reset moves a failed task back to pending, logged; ancestors that failed
// only because of it (no other failed descendant) go back to pending too.
// RetryCount is not changed. Errors: loop.ErrNotFound, *loop.TransitionError.
func (s *Store) Reset(ctx context.Context, id string) error { return errTODO }

// ListParams filter Store.List; the zero value lists everything.
type ListParams struct {
	Status  loop.Status
	Feature string
}

// List returns the tasks that match p, in insertion order.
func (s *Store) List(ctx context.Context, p ListParams) ([]loop.Task, error) {
	return nil, errTODO
}

// RecoverExpired returns every claim whose lease has expired to pending,
// logging kind loop.LogLeaseExpired with the old holder, and returns the
// recovered ids. Every TaskStore method does this first.
func (s *Store) RecoverExpired(ctx context.Context) ([]string, error) { return nil, errTODO }

// ImportTask is one task of an Import batch (and of an Export).
type ImportTask struct {
	// Line is the 1-based line of the input file, used in error messages
	// when > 0.
	Line        int
	ID          string
	Title       string
	Description string
	Priority    int
	// ParentID and BlockedBy may name existing tasks or tasks later in the
	// batch.
	ParentID  string
	BlockedBy []string
	// Status is pending, done, failed or blocked; in_progress is imported
	// as pending; "" means pending.
	Status  loop.Status
	Feature string
}

// Import adds all tasks in one transaction, all or nothing, and returns how
// many were added. Errors name the offending task by its Line, e.g.
// "line 7: task t-3: parent t-99 does not exist".
func (s *Store) Import(ctx context.Context, tasks []ImportTask) (int, error) { return 0, errTODO }

// Export returns every task in insertion order, ready for Import.
func (s *Store) Export(ctx context.Context) ([]ImportTask, error) { return nil, errTODO }

// FeatureParams are the arguments of Store.AddFeature.
type FeatureParams struct{ Name, SpecPath, PlanPath string }

// AddFeature creates a feature. Errors: ErrFeatureExists, a plain error for
// a blank name.
func (s *Store) AddFeature(ctx context.Context, p FeatureParams) (loop.Feature, error) {
	return loop.Feature{}, errTODO
}

// Features returns every feature, in creation order.
func (s *Store) Features(ctx context.Context) ([]loop.Feature, error) { return nil, errTODO }

// Feature returns the named feature. Error: loop.ErrFeatureNotFound.
func (s *Store) Feature(ctx context.Context, name string) (loop.Feature, error) {
	return loop.Feature{}, errTODO
}

// Get implements loop.TaskStore.
func (s *Store) Get(ctx context.Context, id string) (loop.Task, error) { return loop.Task{}, errTODO }

// Ready implements loop.TaskStore.
func (s *Store) Ready(ctx context.Context, scope loop.Scope, limit int) ([]loop.Task, error) {
	return nil, errTODO
}

// Active implements loop.TaskStore.
func (s *Store) Active(ctx context.Context, scope loop.Scope) ([]loop.Task, error) {
	return nil, errTODO
}

// Counts implements loop.TaskStore.
func (s *Store) Counts(ctx context.Context, scope loop.Scope) (loop.Counts, error) {
	return loop.Counts{}, errTODO
}

// Claim implements loop.TaskStore.
func (s *Store) Claim(ctx context.Context, p loop.ClaimParams) (loop.Task, error) {
	return loop.Task{}, errTODO
}

// RenewLease implements loop.TaskStore.
func (s *Store) RenewLease(ctx context.Context, id, agent string, lease time.Duration) error {
	return errTODO
}

// Complete implements loop.TaskStore.
func (s *Store) Complete(ctx context.Context, id, summary string) error { return errTODO }

// Fail implements loop.TaskStore.
func (s *Store) Fail(ctx context.Context, id, reason string) error { return errTODO }

// Release implements loop.TaskStore.
func (s *Store) Release(ctx context.Context, id, reason string) error { return errTODO }

// ReleaseAgent implements loop.TaskStore.
func (s *Store) ReleaseAgent(ctx context.Context, agent, reason string) ([]string, error) {
	return nil, errTODO
}

// Retry implements loop.TaskStore.
func (s *Store) Retry(ctx context.Context, id, reason string) error { return errTODO }

// SetVerification implements loop.TaskStore.
func (s *Store) SetVerification(ctx context.Context, id, verdict string) error { return errTODO }

// AddLog implements loop.TaskStore.
func (s *Store) AddLog(ctx context.Context, id, kind, message string) error { return errTODO }

// Logs implements loop.TaskStore.
func (s *Store) Logs(ctx context.Context, id string) ([]loop.LogEntry, error) { return nil, errTODO }

// RecordReceipt implements loop.ReceiptStore.
func (s *Store) RecordReceipt(ctx context.Context, r loop.Receipt) error { return errTODO }

// Receipts implements loop.ReceiptStore.
func (s *Store) Receipts(ctx context.Context, limit int) ([]loop.Receipt, error) {
	return nil, errTODO
}
