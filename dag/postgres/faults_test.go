package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

var testStart = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// terminate ends, from the server's side, every connection ralph's stores
// hold to conn's database, and returns how many it ended.
func terminate(ctx context.Context, conn *pgx.Conn) (int, error) {
	var n int
	err := conn.QueryRow(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = 'ralph' AND datname = current_database() AND pid <> pg_backend_pid()) AS ended`).Scan(&n)
	return n, err
}

// isTemporary reports whether err says the call may pass if made again.
func isTemporary(err error) bool {
	var temp interface{ Temporary() bool }
	return errors.As(err, &temp) && temp.Temporary()
}

// TestDroppedConnections ends the stores' connections from the server's
// side again and again while 6 claimers (3 stores, 2 goroutines each)
// claim and complete a plan: the stores connect again and retry, so the
// claimers go on to the end; no task is claimed by two at once, none is
// lost, every task is done exactly once. A claim whose commit's outcome
// the lost connection hid (the claimer got an error, the claim stood) is
// recovered when its lease expires, as after a crash: the history says
// so.
func TestDroppedConnections(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	tasks, leaves := fixture(150)
	clock := looptest.NewClock(testStart)
	opts := dag.ServerOptions{Options: dag.Options{Now: clock.Now, BusyTimeout: time.Minute}, RetryFor: 30 * time.Second}
	seed := openNamed(t, url, "drops", opts)
	if _, err := seed.Import(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	const lease = time.Minute

	// The clock stands still: no lease expires while a claimer works.
	// When nothing is ready, open tasks remain and no claimer is between
	// its claim and its completion (gate), the tasks still in_progress are
	// claims nobody holds: the clock moves past their leases.
	var gate sync.RWMutex
	var expired atomic.Int64

	var mu sync.Mutex
	completed := map[string]int{}
	var errs []error

	killer, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close(context.Background())
	stop := make(chan struct{})
	var kills atomic.Int64
	var killerDone sync.WaitGroup
	killerDone.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(20+i%5*15) * time.Millisecond):
			}
			n, err := terminate(ctx, killer)
			if err != nil {
				t.Errorf("terminate: %v", err)
				return
			}
			kills.Add(int64(n))
		}
	})

	claimer := func(s *dag.Store, agent string) error {
		for {
			gate.RLock()
			task, err := s.Claim(ctx, loop.ClaimParams{Agent: agent, Lease: lease, Mode: loop.ClaimLoop, Holder: loop.ThisProcess()})
			if errors.Is(err, loop.ErrNoReadyTask) {
				gate.RUnlock()
				c, err := s.Counts(ctx, loop.Scope{})
				if err != nil {
					return fmt.Errorf("counts: %w", err)
				}
				if c.Open() == 0 {
					return nil
				}
				if c.InProgress > 0 {
					gate.Lock()
					active, err := s.Active(ctx, loop.Scope{})
					if err == nil && len(active) > 0 {
						// No claimer holds a claim now: these are lost.
						expired.Add(int64(len(active)))
						clock.Advance(2 * lease)
					}
					gate.Unlock()
					if err != nil {
						return fmt.Errorf("active: %w", err)
					}
				}
				time.Sleep(time.Millisecond)
				continue
			}
			if err != nil {
				gate.RUnlock()
				// The claim may stand: its lease will tell.
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: claim: %w", agent, err))
				mu.Unlock()
				continue
			}
			by := loop.Actor{Agent: agent, Loop: true, Generation: task.Generation}
			for {
				err := s.Complete(ctx, loop.MoveParams{TaskID: task.ID, Message: "done by " + agent, By: by})
				if err == nil {
					break
				}
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: complete %s: %w", agent, task.ID, err))
				mu.Unlock()
				// Did it commit?
				got, gerr := s.Get(ctx, task.ID)
				if gerr != nil {
					gate.RUnlock()
					return fmt.Errorf("get %s: %w", task.ID, gerr)
				}
				if got.Status == loop.StatusDone {
					break
				}
				if got.Status != loop.StatusInProgress || got.ClaimedBy != agent || got.Generation != task.Generation {
					gate.RUnlock()
					return fmt.Errorf("%s: lost its claim of %s: %+v", agent, task.ID, got)
				}
			}
			gate.RUnlock()
			mu.Lock()
			completed[task.ID]++
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	for i := range 3 {
		s := openNamed(t, url, "drops", opts)
		for j := range 2 {
			agent := fmt.Sprintf("agent-%d-%d", i, j)
			wg.Go(func() {
				if err := claimer(s, agent); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	killerDone.Wait()

	t.Logf("%d connections ended, %d errors returned, %d lost claims recovered", kills.Load(), len(errs), expired.Load())
	if kills.Load() < 20 {
		t.Errorf("only %d connections ended: the test did not test", kills.Load())
	}
	for _, err := range errs {
		t.Logf("returned: %v", err)
		if !isTemporary(err) {
			t.Errorf("%v: not Temporary, so a loop would not retry it", err)
		}
	}
	if len(errs) >= int(kills.Load())/2 {
		t.Errorf("%d errors for %d connections ended: the stores do not retry", len(errs), kills.Load())
	}
	checkClaimed(t, completed, leaves)
	if c, err := seed.Counts(ctx, loop.Scope{}); err != nil || c != (loop.Counts{Done: len(tasks)}) {
		t.Errorf("counts after the run = %+v, %v; want all %d done", c, err, len(tasks))
	}

	// Each leaf: claims, each but the last ended by a lease-expired
	// recovery, then one completion by the last claimer.
	leaf := map[string]bool{}
	for _, id := range leaves {
		leaf[id] = true
	}
	history := regexp.MustCompile(`^(claim lease-expired )*claim done $`)
	recovered := 0
	for _, task := range tasks {
		logs, err := seed.Logs(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		var kinds strings.Builder
		lastClaim := ""
		for _, e := range logs {
			switch e.Kind {
			case loop.LogUnblock:
				continue
			case loop.LogClaim:
				lastClaim = e.Actor
			case loop.LogLeaseExpired:
				recovered++
			case loop.LogDone:
				if leaf[task.ID] && e.Actor != lastClaim {
					t.Errorf("%s: completed by %s, last claimed by %s", task.ID, e.Actor, lastClaim)
				}
			}
			kinds.WriteString(e.Kind + " ")
		}
		switch {
		case !leaf[task.ID] && kinds.String() != "done ":
			t.Errorf("history of parent %s: %q, want done alone", task.ID, kinds.String())
		case leaf[task.ID] && !history.MatchString(kinds.String()):
			t.Errorf("history of %s: %q, want claims ended by lease-expired, then a claim and done", task.ID, kinds.String())
		}
	}
	if recovered > int(expired.Load()) {
		t.Errorf("%d lease-expired recoveries, but only %d claims were lost", recovered, expired.Load())
	}
	checkPlan(t, url, "drops")
}

// TestServerRestart restarts the server in the middle of a stream of
// writes and reads: each goes through (the store connects again and
// retries), none is made twice.
func TestServerRestart(t *testing.T) {
	// A server of the test's own: a restart of the shared one would
	// break the tests running on it meanwhile.
	srv := pgtest.Own(t)
	url := srv.URL(t)
	ctx := t.Context()
	s := openNamed(t, url, "restart", dag.ServerOptions{RetryFor: time.Minute})
	reader := openNamed(t, url, "restart", dag.ServerOptions{RetryFor: time.Minute})
	const n = 60
	var wrote atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range n {
			id := fmt.Sprintf("w%02d", i)
			if _, err := s.Add(ctx, dag.AddParams{ID: id, Title: id}); err != nil {
				t.Errorf("Add(%s): %v", id, err)
				return
			}
			task, err := s.Claim(ctx, loop.ClaimParams{Agent: "agent-w"})
			if err != nil || task.ID != id {
				t.Errorf("Claim = %s, %v; want %s", task.ID, err, id)
				return
			}
			if err := s.Complete(ctx, loop.MoveParams{TaskID: id, By: loop.Actor{Agent: "agent-w", Generation: task.Generation}}); err != nil {
				t.Errorf("Complete(%s): %v", id, err)
				return
			}
			wrote.Add(1)
			time.Sleep(20 * time.Millisecond)
		}
	})
	stop := make(chan struct{})
	reads := 0
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			c, err := reader.Counts(ctx, loop.Scope{})
			if err != nil {
				t.Errorf("Counts: %v", err)
				return
			}
			if _, err := reader.List(ctx, dag.ListParams{Limit: 5}); err != nil {
				t.Errorf("List: %v", err)
				return
			}
			if c.InProgress > 1 {
				t.Errorf("counts %+v: more than the one claim", c)
			}
			reads++
		}
	})
	for wrote.Load() < n/3 {
		time.Sleep(5 * time.Millisecond)
	}
	before := wrote.Load()
	srv.Restart(t, "fast")
	after := wrote.Load()
	// The writer ends by itself (or by failing); the reader when told.
	for deadline := time.Now().Add(2 * time.Minute); wrote.Load() < n && !t.Failed() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("restarted after %d writes, %d done during the restart, %d reads", before, after-before, reads)
	ts, err := reader.List(ctx, dag.ListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != n {
		t.Errorf("%d tasks, want %d", len(ts), n)
	}
	for i, task := range ts {
		if want := fmt.Sprintf("w%02d", i); task.ID != want || task.Status != loop.StatusDone {
			t.Errorf("task %d = %s %s, want %s done", i, task.ID, task.Status, want)
		}
		logs, err := reader.Logs(ctx, task.ID)
		if err != nil || len(logs) != 2 {
			t.Errorf("history of %s = %+v, %v; want a claim and done", task.ID, logs, err)
		}
	}
	checkPlan(t, url, "restart")
}

// TestLeaseExpiredWhileServerDown: a claim whose lease expires while the
// server restarts is recovered by the next calls after it, reads (within
// seconds), a claim or Recover, with a lease-expired entry naming the old holder.
func TestLeaseExpiredWhileServerDown(t *testing.T) {
	// A server of the test's own: a restart of the shared one would
	// break the tests running on it meanwhile.
	srv := pgtest.Own(t)
	url := srv.URL(t)
	ctx := t.Context()
	clock := looptest.NewClock(testStart)
	opts := dag.ServerOptions{Options: dag.Options{Now: clock.Now}, RetryFor: time.Minute}
	// A plan for each call, so that each finds a claim to recover.
	readPlan := openNamed(t, url, "lease-read", opts)
	claimPlan := openNamed(t, url, "lease-claim", opts)
	recoverPlan := openNamed(t, url, "lease-recover", opts)
	for _, s := range []*dag.Store{readPlan, claimPlan, recoverPlan} {
		if _, err := s.Add(ctx, dag.AddParams{ID: "x", Title: "x"}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Claim(ctx, loop.ClaimParams{Agent: "agent-gone", Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
		// Warm the pool and the writer: the restart breaks them.
		if _, err := s.Get(ctx, "x"); err != nil {
			t.Fatal(err)
		}
	}
	srv.Restart(t, "fast")
	clock.Advance(2 * time.Minute)

	// A read waits for the recovery readRecoverWait (200 ms) at most,
	// and the restart broke its connections: on a busy machine the first
	// read may come back before the recovery, the next ones not much
	// later.
	got, err := readPlan.Get(ctx, "x")
	for deadline := time.Now().Add(10 * time.Second); err == nil && got.Status != loop.StatusPending && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		got, err = readPlan.Get(ctx, "x")
	}
	if err != nil || got.Status != loop.StatusPending {
		t.Errorf("Get after the restart: %s, %v; want pending, recovered within seconds", got.Status, err)
	}
	claimed, err := claimPlan.Claim(ctx, loop.ClaimParams{Agent: "agent-next"})
	if err != nil || claimed.ID != "x" || claimed.Generation != 2 {
		t.Errorf("Claim after the restart: %+v, %v; want x, recovered and claimed again (generation 2)", claimed, err)
	}
	if ids, err := recoverPlan.Recover(ctx); err != nil || len(ids) != 1 || ids[0] != "x" {
		t.Errorf("Recover after the restart = %v, %v; want [x]", ids, err)
	}
	for _, c := range []struct {
		s    *dag.Store
		want []string
	}{
		{readPlan, []string{loop.LogClaim, loop.LogLeaseExpired}},
		{recoverPlan, []string{loop.LogClaim, loop.LogLeaseExpired}},
		{claimPlan, []string{loop.LogClaim, loop.LogLeaseExpired, loop.LogClaim}},
	} {
		logs, err := c.s.Logs(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, e := range logs {
			kinds = append(kinds, e.Kind)
		}
		if strings.Join(kinds, " ") != strings.Join(c.want, " ") || !strings.Contains(logs[1].Message, "agent-gone") ||
			!logs[1].At.Equal(testStart.Add(2*time.Minute)) {
			t.Errorf("history of x on %s = %+v, want %v, the recovery naming agent-gone", c.s.Path(), logs, c.want)
		}
	}
}

// quiet waits until s has heard of no change for a moment and returns a
// change token from then.
func quiet(t testing.TB, s loop.ChangeWatcher) string {
	t.Helper()
	for {
		tok, err := s.ChangeToken(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		changed, err := s.WaitChange(t.Context(), tok, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if !changed {
			return tok
		}
	}
}

// TestWaitChange: a store waiting for a change is woken, well before its
// wait ends, by another store's commit that can make a task ready or end
// a claim; not by a claim, a lease renewal or a read; a lost listening
// connection wakes it (a change may have been missed) and is opened
// again.
func TestWaitChange(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	waiter := openNamed(t, url, "wait", dag.ServerOptions{})
	other := openNamed(t, url, "wait", dag.ServerOptions{})
	if _, err := other.Add(ctx, dag.AddParams{ID: "a", Title: "a"}); err != nil {
		t.Fatal(err)
	}
	const long = 20 * time.Second
	wakes := func(name string, change func() error) {
		t.Helper()
		tok := quiet(t, waiter)
		done := make(chan error)
		go func() {
			time.Sleep(50 * time.Millisecond)
			done <- change()
		}()
		start := time.Now()
		changed, err := waiter.WaitChange(ctx, tok, long)
		if took := time.Since(start); !changed || err != nil || took > 3*time.Second {
			t.Errorf("WaitChange with another store's %s = %v, %v after %v; want woken at once", name, changed, err, took)
		}
		if err := <-done; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	sleeps := func(name string, change func() error) {
		t.Helper()
		tok := quiet(t, waiter)
		if err := change(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		const d = 700 * time.Millisecond
		start := time.Now()
		changed, err := waiter.WaitChange(ctx, tok, d)
		if took := time.Since(start); changed || err != nil || took < d || took > d+2*time.Second {
			t.Errorf("WaitChange(%v) after another store's %s = %v, %v after %v; want no change after %v", d, name, changed, err, took, d)
		}
	}
	var gen int64
	claim := func(id string) func() error {
		return func() error {
			task, err := other.Claim(ctx, loop.ClaimParams{TaskID: id, Agent: "agent-o"})
			gen = task.Generation
			return err
		}
	}
	sleeps("nothing", func() error { return nil })
	sleeps("read", func() error { _, err := other.List(ctx, dag.ListParams{}); return err })
	wakes("add", func() error { _, err := other.Add(ctx, dag.AddParams{ID: "b", Title: "b"}); return err })
	sleeps("claim", claim("a"))
	sleeps("lease renewal", func() error { return other.RenewLease(ctx, "a", "agent-o", time.Hour) })
	sleeps("log entry", func() error { return other.AddLog(ctx, "a", "note", "working") })
	wakes("completion", func() error {
		return other.Complete(ctx, loop.MoveParams{TaskID: "a", By: loop.Actor{Agent: "agent-o", Generation: gen}})
	})
	sleeps("claim", claim("b"))
	wakes("release", func() error {
		return other.Release(ctx, loop.MoveParams{TaskID: "b", Message: "later", By: loop.Actor{Agent: "agent-o"}})
	})
	wakes("new dependency", func() error {
		if _, err := other.Add(ctx, dag.AddParams{ID: "c", Title: "c"}); err != nil {
			return err
		}
		return other.AddDependency(ctx, "b", "c")
	})

	// The listening connection is lost: the wait ends (a change may
	// have gone unheard); once it is back, changes wake the waiter again.
	killer, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close(context.Background())
	wakes("connections ended", func() error { _, err := terminate(ctx, killer); return err })
	wakes("add after the listener came back", func() error {
		_, err := other.Add(ctx, dag.AddParams{ID: "d", Title: "d"})
		return err
	})
}
