package postgres_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/loop"
)

// waitKey is the first key of the plan's waiting locks (listen.go).
const waitKey = 0x52414c57

// TestNotifyOnlyWhileWaiting: a change that can make a task ready
// notifies the plan's channel only while a loop waits (migration 0013);
// a waiting loop hears it at once; a wait that starts while such a change
// is under way, unnotified, waits for its commit before the loop reads
// the plan; and a while after the last wait the changes notify nobody
// again.
func TestNotifyOnlyWhileWaiting(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	other := openNamed(t, url, "notify", dag.ServerOptions{})
	waiter := openNamed(t, url, "notify", dag.ServerOptions{})
	plan := planID(t, url, "notify")
	channel := "ralph_plan_" + strconv.Itoa(plan)

	spy, heard := listenSpy(t, url, channel)
	add := func(id string) {
		t.Helper()
		if _, err := other.Add(ctx, dag.AddParams{ID: id, Title: id}); err != nil {
			t.Fatal(err)
		}
	}
	complete := func(id string) {
		t.Helper()
		task, err := other.Claim(ctx, loop.ClaimParams{TaskID: id, Agent: "agent-o"})
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Complete(ctx, loop.MoveParams{TaskID: id, By: loop.Actor{Agent: "agent-o", Generation: task.Generation}}); err != nil {
			t.Fatal(err)
		}
	}

	add("a")
	complete("a")
	if heard() {
		t.Fatal("an addition and a completion with no loop waiting notified the plan's channel")
	}

	// A loop waits: a completion notifies, and wakes it at once.
	add("b")
	tok := quiet(t, waiter)
	done := make(chan error, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		claimed, err := other.Claim(ctx, loop.ClaimParams{TaskID: "b", Agent: "agent-o"})
		if err == nil {
			err = other.Complete(ctx, loop.MoveParams{TaskID: "b", By: loop.Actor{Agent: "agent-o", Generation: claimed.Generation}})
		}
		done <- err
	}()
	start := time.Now()
	if changed, err := waiter.WaitChange(ctx, tok, 20*time.Second); !changed || err != nil || time.Since(start) > 3*time.Second {
		t.Errorf("WaitChange while another store completes a task = %v, %v after %v; want woken at once", changed, err, time.Since(start))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !heard() {
		t.Error("a completion while a loop waited did not notify the plan's channel")
	}

	// A while after the wait the loop's waiting locks are let go, and
	// changes notify nobody again.
	released := func() bool {
		var held bool
		if err := spy.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
			AND classid::bigint BETWEEN $1::bigint AND $1::bigint + 31 AND objid::bigint = $2 AND objsubid = 2)`, waitKey, plan).Scan(&held); err != nil {
			t.Fatal(err)
		}
		return !held
	}
	for deadline := time.Now().Add(20 * time.Second); !released(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiting locks are still held 20 s after the last wait")
		}
	}
	for heard() {
	}
	add("c")
	complete("c")
	if heard() {
		t.Error("an addition and a completion a while after the last wait notified the plan's channel")
	}

	// A change under way (here: a transaction holding every shard's
	// exclusive form, as an unnotified change holds its own) holds up the
	// start of a wait until it commits: the loop then reads the plan with
	// the change in it.
	changer, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer changer.Close(context.Background())
	tx, err := changer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT count(pg_advisory_xact_lock($1 + s, $2)) FROM generate_series(0, 31) AS s`,
		waitKey, plan); err != nil {
		t.Fatal(err)
	}
	tok, err = waiter.ChangeToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan time.Time, 1)
	go func() {
		waiter.WaitChange(ctx, tok, 20*time.Second)
		waited <- time.Now()
	}()
	time.Sleep(500 * time.Millisecond)
	committed := time.Now()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if at := <-waited; at.Before(committed) {
		t.Errorf("a wait that started during an unnotified change returned %v before the change's commit", committed.Sub(at))
	}
}

// listenSpy opens a connection of the test's own that LISTENs on channel;
// heard reports whether a notification came within half a second.
func listenSpy(t *testing.T, url, channel string) (spy *pgx.Conn, heard func() bool) {
	t.Helper()
	ctx := t.Context()
	spy, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { spy.Close(context.Background()) })
	if _, err := spy.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return spy, func() bool {
		wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := spy.WaitForNotification(wctx)
		return err == nil
	}
}
