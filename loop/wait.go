package loop

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ChangeWatcher is implemented by stores that can tell a waiting loop when
// the plan may have changed, so that it need not poll them
// (ARCHITECTURE.md §3.1). The SQLite store watches its files, a
// PostgreSQL store its notifications, MemStore its writes.
type ChangeWatcher interface {
	// ChangeToken returns a token for the store's state now.
	ChangeToken(ctx context.Context) (string, error)
	// WaitChange blocks until the store's state may differ from the one
	// token was taken in (it returns true), until d has passed (false), or
	// until ctx is done (its error).
	WaitChange(ctx context.Context, token string, d time.Duration) (bool, error)
}

// holderCheckEvery is how often a waiting loop looks whether the holders
// it waits for still live (/proc, not the store), and how often it looks
// at a store that is no ChangeWatcher.
const holderCheckEvery = time.Second

// changeToken takes the token a wait starts from, before the store is
// read; "" when the store is no ChangeWatcher or cannot say.
func (b *buildMode) changeToken(ctx context.Context) string {
	w, ok := b.store.(ChangeWatcher)
	if !ok {
		return ""
	}
	tok, err := w.ChangeToken(ctx)
	if err != nil {
		return ""
	}
	return tok
}

// waitKey names what a loop waits for: the tasks and their holders.
func waitKey(active []Task) string {
	var b strings.Builder
	for _, t := range active {
		fmt.Fprintf(&b, "%s/%s/%d;", t.ID, t.ClaimedBy, t.Generation)
	}
	return b.String()
}

// describeHeld lists held tasks for people: "t-3 (agent-1a2b3c4d, pid 42
// on this host), t-5 (agent-…, lease only)".
func describeHeld(active []Task) string {
	held := listSome(active, 5, ", ", func(t Task) string {
		return fmt.Sprintf("%s (%s, %s)", t.ID, t.ClaimedBy, DescribeHolder(t.Holder))
	})
	return fmt.Sprintf("%d %s held by other agents: %s", len(active), plural(len(active), "task", "tasks"), held)
}

// listSome says the first most of items, each as say says it, joined by
// sep, then how many more: "a, b, c, and 2 more".
func listSome[T any](items []T, most int, sep string, say func(T) string) string {
	var parts []string
	for i, it := range items {
		if i == most {
			parts = append(parts, fmt.Sprintf("and %d more", len(items)-most))
			break
		}
		parts = append(parts, say(it))
	}
	return strings.Join(parts, sep)
}

// DescribeHolder says who keeps a claim alive, for people: "pid 42 on this
// host", "pid 42 on HOST", "lease only".
func DescribeHolder(h Holder) string {
	switch {
	case h.IsZero():
		return "lease only"
	case h.Host == HostID():
		return fmt.Sprintf("pid %d on this host", h.PID)
	}
	return fmt.Sprintf("pid %d on %s", h.PID, h.Host)
}

func earliestLease(active []Task) time.Time {
	var at time.Time
	for _, t := range active {
		if !t.LeaseExpiresAt.IsZero() && (at.IsZero() || t.LeaseExpiresAt.Before(at)) {
			at = t.LeaseExpiresAt
		}
	}
	return at
}

func leaseRanOut(active []Task, now time.Time) bool {
	return slices.ContainsFunc(active, func(t Task) bool {
		return !t.LeaseExpiresAt.IsZero() && !now.Before(t.LeaseExpiresAt)
	})
}

func holderDied(active []Task) bool {
	return slices.ContainsFunc(active, func(t Task) bool { return t.Holder.Liveness() == HolderGone })
}

// waitForAgents is step 2 when nothing in scope is ready but tasks in it
// are held by other agents (ARCHITECTURE.md §3.1): the
// loop waits for them instead of stopping as blocked, says which tasks and
// holders it waits for (again only when that changes), and returns nil
// once work may have become ready: the store changed (since token was
// taken, before the failed claim), a claim's lease ran out, or a holder
// process on this host died (its claim is recovered by the next store
// call). Cancelling ctx ends the wait and the run.
func (b *buildMode) waitForAgents(ctx context.Context, token string) *stop {
	active, err := b.store.Active(ctx, b.cfg.Scope)
	if err != nil {
		return b.storeErr(ctx, err)
	}
	if slices.ContainsFunc(active, func(t Task) bool { return t.ClaimedBy == b.cfg.AgentID }) {
		// Claims its own agent made beside the task the loop gave it: the
		// loop holds nothing now, so they are nobody's work.
		b.releaseAgent(ctx, "claimed by the agent beside the task its loop gave it")
		return nil
	}
	if len(active) == 0 {
		return nil // they finished meanwhile: look again
	}
	if key := waitKey(active); key != b.waitingFor {
		b.waitingFor = key
		b.note.send(Note{Kind: NoteWaitAgents, Iteration: b.report.Iterations + 1, Held: active,
			Message: "nothing is ready; waiting for " + describeHeld(active)})
	}
	watcher, _ := b.store.(ChangeWatcher)
	for {
		if b.budgetEnded() {
			return nil // another worker's stop ends this one: take says so
		}
		d := holderCheckEvery
		if next := earliestLease(active); !next.IsZero() {
			d = min(d, max(next.Sub(b.cfg.Now()), minRenewInterval))
		}
		var changed bool
		if watcher != nil && token != "" {
			changed, err = watcher.WaitChange(ctx, token, d)
		} else {
			changed, err = true, b.cfg.Sleep(ctx, d)
		}
		if err != nil || ctx.Err() != nil {
			if ctx.Err() == nil {
				return b.storeErr(ctx, err)
			}
			return b.checkCancel(ctx)
		}
		if changed || leaseRanOut(active, b.cfg.Now()) || holderDied(active) {
			return nil
		}
		// A token can miss a change: a file's times have the clock's
		// coarse tick, and two writes within one tick that leave the WAL's
		// size as it was look like none (two machines finishing at once
		// left a loop waiting for a task done long since). The held
		// tasks themselves say, one read a wait.
		now, err := b.store.Active(ctx, b.cfg.Scope)
		if err != nil || waitKey(now) != waitKey(active) {
			return nil
		}
	}
}
