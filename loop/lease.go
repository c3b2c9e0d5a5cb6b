package loop

import (
	"context"
	"sync"
	"time"
)

// renewAgentClaims renews, every third of the lease, every claim this
// agent holds (peek mode: the agent claims in its session), until stop is
// called.
func (r *run) renewAgentClaims(ctx context.Context, n int) (stop func()) {
	return r.every(ctx, func(ctx context.Context) {
		for _, id := range r.agentTasks(ctx) {
			if err := r.store.RenewLease(ctx, id, r.cfg.AgentID, r.cfg.Lease); err != nil && ctx.Err() == nil {
				r.note.notice(n, "could not renew the lease on %s: %v", id, err)
			}
		}
	})
}

// renewHeld renews, every third of the lease, the claim the loop holds
// (r.lease), for the whole run: from the claim until its outcome is
// recorded — through the agent's session, verification, the gates and the
// retries of a durable outcome (ARCHITECTURE.md §2.2).
func (r *run) renewHeld(ctx context.Context) (stop func()) {
	return r.every(ctx, func(ctx context.Context) {
		id, _, n := r.lease.get()
		if id == "" {
			return
		}
		if err := r.store.RenewLease(ctx, id, r.cfg.AgentID, r.cfg.Lease); err == nil {
			r.lease.renewed(id, r.cfg.Now().Add(r.cfg.Lease))
		} else if ctx.Err() == nil {
			r.note.notice(n, "could not renew the lease on %s: %v", id, err)
		}
	})
}

// every runs f every third of the lease until stop is called.
func (r *run) every(ctx context.Context, f func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(max(r.cfg.Lease/3, minRenewInterval))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f(ctx)
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// lease is the claim the loop holds (ARCHITECTURE.md §2.2), shared with
// the goroutine that renews it (renewHeld): all that goroutine knows of
// the run's state besides cfg and store, which nobody writes while it
// runs.
type lease struct {
	mu sync.Mutex
	// task is the claim held (zero ID when none), with the generation its
	// outcome is fenced by.
	task  Task
	until time.Time // when the lease runs out unless renewed again
	iter  int       // the iteration under way, for notices
}

// hold holds task, the loop's claim, whose lease is renewed from now on.
func (w *lease) hold(task Task) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.task, w.until = task, task.LeaseExpiresAt
}

// drop lets the claim go (released, or its outcome recorded) and returns
// it.
func (w *lease) drop() Task {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.task
	w.task, w.until = Task{}, time.Time{}
	return t
}

// begin notes that iteration n began.
func (w *lease) begin(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.iter = n
}

func (w *lease) get() (id string, until time.Time, iter int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.task.ID, w.until, w.iter
}

// renewed records a renewal of claim id, unless the loop let it go since.
func (w *lease) renewed(id string, until time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.task.ID == id {
		w.until = until
	}
}

// unhold forgets the claim the loop held: released, or its outcome
// recorded.
func (r *run) unhold() { r.lease.drop() }
