package loop

import (
	"fmt"
	"time"
)

// MoveKind names the moves CheckMove judges.
type MoveKind string

// The moves of a claimed task.
const (
	MoveComplete MoveKind = "complete"
	MoveFail     MoveKind = "fail"
	MoveRelease  MoveKind = "release"
	MoveRetry    MoveKind = "retry"
)

// CheckMove applies ARCHITECTURE.md §2.3 and "Claim
// generations" to a move of task t (as it is now, inside the store's
// transaction) by actor by, at time now. Every TaskStore calls it, so the
// rule is written once. It returns nil when the move may go on (the status
// machine still decides whether the move itself is legal), else:
//
//   - ErrStaleClaim: by.Generation is set and t is not in_progress under
//     that generation (the claim was recovered, taken over or ended).
//   - ErrNotHolder: an agent moving an in_progress task another agent
//     holds.
//   - ErrLoopClaim: an agent other than its loop completing, failing,
//     releasing or retrying a ClaimLoop claim whose loop lives (LoopHeld).
//   - ErrHeldByLiveAgent: a person moving, without Force, an in_progress
//     task held by a live agent: its holder process runs on this host, or
//     runs elsewhere (HolderUnknown) and its lease has not expired. A claim
//     without a holder process (made by hand) is not a live agent's. The
//     error is a *HeldError.
//
// The errors name the task and its holder.
func CheckMove(t Task, kind MoveKind, by Actor, now time.Time) error {
	held := t.Status == StatusInProgress
	if by.Generation != 0 && (!held || t.Generation != by.Generation) {
		now := "it is " + string(t.Status)
		if held {
			now = fmt.Sprintf("its current claim is generation %d, held by %s", t.Generation, t.ClaimedBy)
		}
		return fmt.Errorf("%w: task %s: claim generation %d ended (%s)", ErrStaleClaim, t.ID, by.Generation, now)
	}
	if !held {
		return nil
	}
	if by.Agent != "" {
		if t.ClaimedBy != by.Agent {
			return fmt.Errorf("%w: task %s is held by %s, not %s", ErrNotHolder, t.ID, t.ClaimedBy, by.Agent)
		}
		if t.ClaimMode == ClaimLoop && !by.Loop && LoopHeld(t) {
			// Releasing it too: that, a claim of its own and a done
			// would get round verification and gates all the same.
			return fmt.Errorf("%w: task %s was claimed for you by the ralph loop, which completes it after verification and gates: "+
				"end your final answer with <task-done>%s</task-done> (or <task-failed>%s</task-failed>) instead", ErrLoopClaim, t.ID, t.ID, t.ID)
		}
		return nil
	}
	if by.Force || !liveHolder(t, now) {
		return nil
	}
	return &HeldError{TaskID: t.ID, ClaimedBy: t.ClaimedBy, Holder: t.Holder, Move: kind}
}

// HeldError is CheckMove's ErrHeldByLiveAgent error: a person moved,
// without Actor.Force, a task a live agent holds. Its fields let a caller
// word the refusal for its users (cmd/ralph names its --force flag); it
// crosses package broker's socket whole.
type HeldError struct {
	TaskID    string
	ClaimedBy string   // the agent that holds the task
	Holder    Holder   // its live holder process
	Move      MoveKind // the move refused
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%v: task %s is held by %s (holder %s); set Actor.Force to %s it anyway", ErrHeldByLiveAgent, e.TaskID, e.ClaimedBy, e.Holder, e.Move)
}

// Unwrap returns ErrHeldByLiveAgent.
func (e *HeldError) Unwrap() error { return ErrHeldByLiveAgent }

// LoopHeld reports whether t is a claim the ralph loop made for its agent
// (ClaimLoop) and whose loop may still live: only that loop moves it.
// ReleaseAgent leaves such claims alone.
func LoopHeld(t Task) bool {
	return t.Status == StatusInProgress && t.ClaimMode == ClaimLoop && t.Holder.Liveness() != HolderGone
}

// liveHolder reports whether the in_progress task t is held by a live
// agent process (see CheckMove).
func liveHolder(t Task, now time.Time) bool {
	if t.Holder.IsZero() {
		return false
	}
	switch t.Holder.Liveness() {
	case HolderAlive:
		return true
	case HolderGone:
		return false
	}
	return t.LeaseExpiresAt.IsZero() || now.Before(t.LeaseExpiresAt)
}
