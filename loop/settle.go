package loop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Backoff of settle: the first wait, and the longest.
const (
	settleFirstWait = 50 * time.Millisecond
	settleMaxWait   = 2 * time.Second
)

// transient reports whether a store error may pass if the move is tried
// again: the store says so, with an error in its chain whose Temporary
// method returns true (a locked database, a full disk; see TaskStore).
// Anything else — a refusal, a corrupt file, a context's end — is not
// retried.
func transient(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary() && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// settle makes move, an outcome of the loop's claim on task, durable
// (ARCHITECTURE.md §4): a transient store error (the
// database locked by another process, a full disk, an I/O error) is retried
// with backoff for as long as the claim's lease (as it stood at the first
// failure) lives, and the lease is renewed between tries, so that another
// loop does not take the task over while its finished work waits to be
// recorded. The store's refusals (a
// lost claim, an illegal move) and the end of ctx are returned at once.
// The first transient error is said once, as a notice.
func (b *buildMode) settle(ctx context.Context, task Task, what string, move func(context.Context) error) error {
	until := b.leaseUntil(task)
	wait := settleFirstWait
	for said := false; ; said = true {
		err := move(ctx)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		now := b.cfg.Now()
		if !now.Add(wait).Before(until) {
			return err
		}
		if !said {
			b.note.notice(b.iter.n, "could not record that task %s %s yet (%v); retrying while its claim lasts (until %s)",
				task.ID, what, err, until.Format(time.RFC3339))
		}
		if err := b.cfg.Sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, settleMaxWait)
		// Renewed, the claim stays the loop's while it tries; the tries
		// still end with the lease they started under, so that a store
		// that renews but never records cannot hold the run forever.
		if b.store.RenewLease(ctx, task.ID, b.cfg.AgentID, b.cfg.Lease) == nil {
			b.lease.renewed(task.ID, b.cfg.Now().Add(b.cfg.Lease))
		}
	}
}

// keepReceipt records rc, the receipt of a session, as durably as settle
// records an outcome: a transient store error (the database locked by
// another process, a full disk) is retried with settle's backoff for up
// to a lease (Config.Lease, the longest an outcome waits between
// renewals), and said once, as a notice. In a build the outcome is
// recorded after the receipt, so a store busy when a session ends delays
// both and drops neither. The end of ctx ends the tries (after one).
//
// A receipt that cannot be recorded (the tries ran out, or the store
// refused it) is said as a notice naming the session and its cost: the
// run's Report still counts it, but the plan's receipts, which status
// views sum, lack it.
func (r *run) keepReceipt(ctx context.Context, rc Receipt) {
	until := r.cfg.Now().Add(r.cfg.Lease)
	wait := settleFirstWait
	for said := false; ; said = true {
		err := r.receipts.RecordReceipt(context.WithoutCancel(ctx), rc)
		if err == nil {
			r.iter.receipted = r.iter.receipted || rc.Iteration == r.iter.n
			return
		}
		if !transient(err) || ctx.Err() != nil || !r.cfg.Now().Add(wait).Before(until) {
			r.note.notice(rc.Iteration, "could not record the receipt of the %s session (cost $%.4f): %v; the plan's receipts lack it",
				rc.Mode, rc.CostUSD, err)
			return
		}
		if !said {
			r.note.notice(rc.Iteration, "could not record the receipt of the %s session yet (%v); retrying for up to %s",
				rc.Mode, err, r.cfg.Lease)
		}
		// A cancelled ctx ends the sleep at once; the next try is the last.
		_ = r.cfg.Sleep(ctx, wait)
		wait = min(2*wait, settleMaxWait)
	}
}

// waitStore is a claim the store could not make for a reason that may
// pass (transient: the disk full, the database locked by another process,
// a server away): the loop waits with settle's backoff and claims again,
// saying so once, as several loops on one plan each wait out the trouble
// with their outcomes (settle) — for up to a lease (Config.Lease) from the
// first failure; then it stops as with any store error (exit 1). A nil
// stop: try again.
func (r *run) waitStore(ctx context.Context, err error) *stop {
	now := r.cfg.Now()
	if r.unwritable.IsZero() {
		r.unwritable, r.unwritableWait = now, settleFirstWait
		r.note.notice(r.report.Iterations+1, "could not claim a task (%v); waiting for the plan to take writes again, for up to %s", err, r.cfg.Lease)
	} else if !now.Add(r.unwritableWait).Before(r.unwritable.Add(r.cfg.Lease)) {
		return r.storeErr(ctx, fmt.Errorf("%w (claims failed so for %s)", err, now.Sub(r.unwritable).Round(time.Second)))
	}
	if err := r.cfg.Sleep(ctx, r.unwritableWait); err != nil {
		return r.checkCancel(ctx)
	}
	r.unwritableWait = min(2*r.unwritableWait, settleMaxWait)
	return nil
}

// storeBack notes that a claim went through (or found nothing ready)
// after waitStore waited: said once, with how long it took.
func (r *run) storeBack() {
	if r.unwritable.IsZero() {
		return
	}
	r.note.notice(r.report.Iterations+1, "the plan takes writes again, after %s", r.cfg.Now().Sub(r.unwritable).Round(time.Second))
	r.unwritable = time.Time{}
}

// leaseUntil is when the loop's claim on task lapses unless renewed: the
// last renewal's lease, else the claim's.
func (b *buildMode) leaseUntil(task Task) time.Time {
	until := task.LeaseExpiresAt
	if id, renewed, _ := b.lease.get(); id == task.ID && renewed.After(until) {
		until = renewed
	}
	if until.IsZero() {
		until = b.cfg.Now().Add(b.cfg.Lease)
	}
	return until
}

// commitMove makes move, an outcome of the loop's claim on task, durably
// (settle) and ends the iteration when it cannot: a claim lost meanwhile
// goes the way of claimLost; a store that stays unwritable stops the run
// (exit 1) with a message naming the task and the outcome, and the
// session log keeps the agent's final text, agentText. what says the
// outcome ("done", "failed", …). ok reports that the move was made; when
// it was not, the verdict ends the iteration.
func (b *buildMode) commitMove(ctx context.Context, n int, task Task, what, agentText string, move func(context.Context) error) (v verdict, ok bool) {
	return b.commit(ctx, n, task, what, agentText, false, move)
}

// commit is commitMove; recount is claimLost's.
func (b *buildMode) commit(ctx context.Context, n int, task Task, what, agentText string, recount bool, move func(context.Context) error) (v verdict, ok bool) {
	err := b.settle(ctx, task, what, move)
	if err == nil {
		return verdict{}, true
	}
	if ctx.Err() != nil {
		return judged(IterCancelled, "", b.checkCancel(ctx)), false
	}
	var te *TransitionError
	if errors.Is(err, ErrStaleClaim) || errors.Is(err, ErrNotHolder) || errors.As(err, &te) {
		if cur, gerr := b.store.Get(ctx, task.ID); gerr == nil && !holds(cur, task) {
			return b.claimLost(ctx, n, task, cur, recount), false
		}
	}
	err = fmt.Errorf("loop: could not record that task %s is %s: %w", task.ID, what, err)
	msg := strings.TrimPrefix(err.Error(), "loop: ")
	if agentText != "" {
		msg += "; the agent's final text is kept in the session log"
	}
	b.note.send(Note{Kind: NoteNotice, Iteration: n, Message: msg, Text: agentText})
	return judged(IterNotRecorded, msg, &stop{outcome: OutcomeError, message: msg, err: err}), false
}
