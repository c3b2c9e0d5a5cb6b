package loop

import (
	"context"
	"errors"
	"time"
)

// A Landing is one commit ralph puts on a plan's integration branch: the
// work of one task under one claim
// (ARCHITECTURE.md §7.3). "Done means merged" counts only these:
// a commit on the branch that no landing names — a `Ralph-Task` trailer
// on a commit an agent made and put there, say — means nothing.
//
// A landing is recorded before the branch moves to its commit and
// confirmed after, so that a crash between the two never lands a task
// twice: the next build finds a recorded landing whose commit is in the
// branch's history (it landed: confirmed, and the task is done without
// running an agent) or is not (it never landed: void).
type Landing struct {
	// Branch is the integration branch (its short name,
	// "ralph/integration").
	Branch string
	// Commit is the commit ralph made of the task's work.
	Commit string
	// Parent is the tip Commit was made on: the branch moves from Parent
	// to Commit (a compare-and-swap, or a push that only fast-forwards).
	Parent string
	// TaskID and Generation name the task and the claim the work was
	// done under (ARCHITECTURE.md §2.2).
	TaskID     string
	Generation int64
	// Completions is how often the store had recorded the task done (its
	// LogDone entries) when the landing was recorded: a landing with
	// Completions at least the task's count now is one the task's done
	// status does not account for yet (a run stopped between landing the
	// work and recording the task done), while a task reset after its
	// work landed has more completions than that, and is worked again.
	Completions int
	State       LandingState
	RecordedAt  time.Time
	UpdatedAt   time.Time
}

// LandingState is where a landing stands.
type LandingState string

// The states of a landing.
const (
	// LandingRecorded: recorded before the branch moves; the move may
	// have happened or not (a crash between, another process under way).
	LandingRecorded LandingState = "recorded"
	// LandingLanded: the branch moved to the commit (confirmed).
	LandingLanded LandingState = "landed"
	// LandingVoid: the branch moved on without the commit, which can no
	// longer land (its compare-and-swap lost a race); it never landed.
	LandingVoid LandingState = "void"
	// LandingDropped: the commit landed, but the branch no longer holds
	// it and a person accepted the branch as it is (ralph build
	// --accept-tip); its task went back to pending if it was done.
	LandingDropped LandingState = "dropped"
)

// LandingStates lists the states of a landing.
func LandingStates() []LandingState {
	return []LandingState{LandingRecorded, LandingLanded, LandingVoid, LandingDropped}
}

// Valid reports whether s is one of LandingStates.
func (s LandingState) Valid() bool {
	for _, v := range LandingStates() {
		if s == v {
			return true
		}
	}
	return false
}

// LandingQuery selects landings of one branch.
type LandingQuery struct {
	// Branch is required.
	Branch string
	// TaskID, if not "", selects the landings of that task.
	TaskID string
	// Commit, if not "", selects the landing of that commit.
	Commit string
	// States, if not empty, selects landings in one of these states.
	States []LandingState
}

// AcceptTipParams are the arguments of LandingStore.AcceptTip.
type AcceptTipParams struct {
	// Branch is the integration branch.
	Branch string
	// Tip is the commit the branch is at now, accepted as where ralph
	// last put it.
	Tip string
	// Drop are the commits of the landings the branch no longer holds:
	// each becomes LandingDropped, and its task, if done, goes back to
	// pending.
	Drop []string
	// Reason is the history entry of each task that goes back (kind
	// LogReopen).
	Reason string
	// By is who accepts: a person.
	By Actor
}

// LandingStore is implemented by stores that record what ralph lands on a
// plan's integration branch and where ralph last put its tip
// (ARCHITECTURE.md §7). Every machine of a plan on a database server
// (ARCHITECTURE.md §6) records its landings in the one store, so that a tip
// another machine moved is explained by that machine's landings.
//
// Every method is safe for concurrent use, atomic, and returns the
// context's error, changing nothing, when ctx is cancelled.
type LandingStore interface {
	// RecordLanding records l as LandingRecorded (l.State and the times
	// are the store's). Recording again the landing of a commit with the
	// same task, generation and parent changes nothing; any other landing
	// of a commit the branch has one of is ErrLandingExists. A landing
	// whose Commit is its Parent (the branch would not move: nothing
	// lands) is an error, and nothing is recorded.
	RecordLanding(ctx context.Context, l Landing) error
	// ConfirmLanding marks the landing of commit on branch LandingLanded
	// (the branch moved to it, or holds it), and moves the branch's
	// recorded tip to commit where it was the landing's parent. Confirming
	// a landed landing only moves the tip so. Error: ErrNoLanding when
	// branch has no landing of commit, or a void or dropped one.
	ConfirmLanding(ctx context.Context, branch, commit string) error
	// VoidLanding marks a recorded landing LandingVoid: it will never
	// land. A landing in another state is left as it is. Error:
	// ErrNoLanding when branch has no landing of commit.
	VoidLanding(ctx context.Context, branch, commit string) error
	// Landings returns the landings q selects, in the order they were
	// recorded.
	Landings(ctx context.Context, q LandingQuery) ([]Landing, error)
	// BranchTip returns where ralph last put branch: ok false when it
	// never recorded one.
	BranchTip(ctx context.Context, branch string) (commit string, ok bool, err error)
	// MoveBranchTip sets branch's recorded tip to new if it is at old (""
	// when none is recorded), and returns the tip recorded now: new, or
	// where another process moved it.
	MoveBranchTip(ctx context.Context, branch, old, new string) (string, error)
	// AcceptTip records p.Tip as branch's tip whatever it was, marks the
	// landings of p.Drop LandingDropped, and returns to pending, logged
	// LogReopen with p.Reason, each of their tasks that is done — with
	// its ancestors that are done (a done parent has no pending child) —
	// in one transaction. Their dependents wait for them again. It
	// returns the ids of the tasks it moved, in the order it moved them.
	// This move is no trigger of the status machine (Transitions): only
	// accepting a tip makes it.
	AcceptTip(ctx context.Context, p AcceptTipParams) ([]string, error)
}

// Errors of LandingStore implementations.
var (
	// ErrNoLanding: the branch has no (usable) landing of that commit.
	ErrNoLanding = errors.New("loop: no such landing")
	// ErrLandingExists: the branch has another landing of that commit.
	ErrLandingExists = errors.New("loop: a landing of that commit exists already")
)

// LogReopen: a done task went back to pending because the integration
// branch a person accepted (ralph build --accept-tip) no longer holds its
// work.
const LogReopen = "reopen"
