package loop

import "context"

// A Workspace is where one worker of a parallel build works
// (ARCHITECTURE.md §5): a working tree of its own, in which an attempt at a
// task starts from the integration branch's tip and whose work, once the
// task is done, lands on that branch before the task is done in the store
// ("done means merged"). Run uses it when Config.Workspace is set; package
// parallel implements it over git worktrees.
//
// The loop calls a Workspace from one goroutine at a time.
type Workspace interface {
	// Dir is the working tree: the agent's working directory (and
	// RALPH_WORKTREE), where the test gate and the verifier run.
	Dir() string
	// Begin readies the tree for an attempt at task, which the loop has
	// just claimed: whatever the tree held before is kept (committed to an
	// attempt branch), and the tree becomes the integration tip. recorded
	// is how often the store recorded the task done (its LogDone entries).
	// integrated true says that the integration branch holds more landings
	// of the task than that — a run stopped between landing the work and
	// recording it — so the loop completes the task without running an
	// agent; a task reset after its work landed (as many landings as
	// completions) is worked again. An error is a git failure.
	Begin(ctx context.Context, task Task, recorded int) (integrated bool, err error)
	// Integrate lands the attempt's work on the integration branch: the
	// change committed with the task's trailer, replayed onto the tip,
	// the test gate run again when the tip had moved, the branch moved
	// atomically. A change that cannot land — a conflict, a test gate
	// failing after the replay — is an *IntegrationError (task trouble);
	// ErrStaleClaim from req.Current is returned as it is; anything else
	// is a git failure.
	Integrate(ctx context.Context, req IntegrateRequest) (IntegrateResult, error)
}

// A TreeChecker is a Workspace that can tell whether its tree is still the
// one it made (ARCHITECTURE.md §7.2): an
// agent may have replaced its tree, by a link to the user's checkout say.
// The loop asks after the agent's session, before anything else runs in
// the tree (the verifier, the test gate, the integration). CheckTree
// returns nil when the tree is the workspace's; an *IntegrationError (task
// trouble: the attempt's work kept where it can be, the tree made again)
// when it was not; any other error is a failure to look or to mend.
type TreeChecker interface {
	CheckTree(ctx context.Context) error
}

// A Noticer is a Workspace with news for people that is no trouble of an
// attempt's: a tree found broken when an attempt began (an agent process
// left behind, a crash), set aside where the person can find its work and
// made again, say. The loop asks after each Begin and sends each message
// as a NoteNotice; Notices returns each message once.
type Noticer interface {
	Notices() []string
}

// IntegrateRequest is one task's work to land.
type IntegrateRequest struct {
	// Task is the task, under the loop's claim (its Generation is the
	// claim's).
	Task Task
	// Summary is the agent's summary of its work, for the commit message.
	Summary string
	// Gate runs the test gate in the workspace (nil: no test gate).
	Gate func(ctx context.Context) error
	// Current returns nil while the loop's claim is still the task's
	// current one, ErrStaleClaim when it is not: the work must not land
	// then.
	Current func(ctx context.Context) error
	// Checkout is how the agent's private git checkout moved during its
	// session (RunResult.Checkout); nil when the runner gave it none, and
	// the workspace reads the tree's own git metadata instead.
	Checkout *Checkout
}

// IntegrateResult says how a task's work landed.
type IntegrateResult struct {
	// Commit is the commit on the integration branch that holds the
	// work; empty when the attempt changed nothing, or when its changes,
	// replayed onto the moved tip, were the tip's already (Replayed).
	Commit string
	// Replayed is set when the tip had moved since the attempt began, so
	// that the work was replayed onto it (and the gate run again, unless
	// the replay changed nothing).
	Replayed bool
	// Elsewhere is set when another claim's landing of the task is on
	// the integration branch already (a holder that lost its claim and
	// moved the branch before it knew): the task's work is there, this
	// attempt's is kept but not landed, and the task is done.
	Elsewhere bool
}

// An IntegrationError is work that could not land: task trouble, whose
// Reason (the conflicting files, the failing test's output) the next
// attempt's prompt shows.
type IntegrationError struct {
	Reason string
	// Conflict is set when the work conflicts with what landed meanwhile:
	// the task lost a race to other workers, its work is not at fault
	// (Config.MaxConflicts).
	Conflict bool
	// Attempt is the branch that keeps the attempt's work.
	Attempt string
}

func (e *IntegrationError) Error() string {
	if e.Attempt == "" {
		return e.Reason
	}
	return e.Reason + " (the attempt is kept on " + e.Attempt + ")"
}

// A TipTree is a Workspace whose tree can be made the integration tip's
// with no task claimed: the test gate's baseline and the final command
// run there (ARCHITECTURE.md §3.5). Whatever the tree held is kept first,
// as Begin keeps it. A Workspace that is no TipTree runs them in its tree
// as it is.
type TipTree interface {
	ToTip(ctx context.Context) error
}
