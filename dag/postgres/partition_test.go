package postgres_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// troubleLog collects what ServerOptions.OnTrouble hears.
type troubleLog struct {
	mu  sync.Mutex
	got []dag.ServerTrouble
}

func (l *troubleLog) add(tr dag.ServerTrouble) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, tr)
}

func (l *troubleLog) downs() (down, up int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, tr := range l.got {
		if tr.Down {
			down++
		} else {
			up++
		}
	}
	return down, up
}

// TestPartition: a server cut off by the network (packets dropped, no
// reset) is said as such, in bounded time: the write under way fails
// once the server has been silent for AnswerTimeout and its retries ran
// out, and a write of the same process waiting behind it is not told
// that "another process" holds a lock. OnTrouble hears of the outage
// once, and of its end once a call goes through again.
func TestPartition(t *testing.T) {
	proxy, url := pgtest.NewProxy(t, pgtest.URL(t))
	var log troubleLog
	s, err := postgres.Open(t.Context(), postgres.Config{URL: url, Plan: "cut", Create: true, AnswerTimeout: 300 * time.Millisecond,
		Options: dag.ServerOptions{Options: dag.Options{BusyTimeout: time.Second}, RetryFor: time.Second, OnTrouble: log.add}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, id := range []string{"a", "b"} {
		if _, err := s.Add(ctx, dag.AddParams{ID: id, Title: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Claim(ctx, loop.ClaimParams{Agent: "x", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}

	proxy.Partition()
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = s.RenewLease(ctx, "a", "x", time.Minute) })
	}
	wg.Wait()
	t.Logf("the writes said: %v", errs)
	if ctx.Err() != nil {
		t.Fatalf("the writes were still waiting after 30 s: %v", errs)
	}
	for i, err := range errs {
		var tmp interface{ Temporary() bool }
		switch {
		case err == nil:
			t.Errorf("write %d went through a partition", i)
		case errors.Is(err, dag.ErrLocked) || strings.Contains(err.Error(), "another process"):
			t.Errorf("write %d blames a lock: %v", i, err)
		case !strings.Contains(err.Error(), "no answer from the server") && !errors.Is(err, dag.ErrNoAnswer):
			t.Errorf("write %d does not say the server did not answer: %v", i, err)
		case !errors.As(err, &tmp) || !tmp.Temporary():
			t.Errorf("write %d is not marked temporary (the loop would not retry it): %v", i, err)
		}
	}
	if down, up := log.downs(); down != 1 || up != 0 {
		t.Errorf("OnTrouble heard %d outages and %d ends during the partition; want 1 and 0", down, up)
	}

	proxy.Heal()
	if err := s.RenewLease(ctx, "a", "x", time.Minute); err != nil {
		t.Fatalf("RenewLease after the partition healed: %v", err)
	}
	if down, up := log.downs(); down != 1 || up != 1 {
		t.Errorf("OnTrouble heard %d outages and %d ends after it healed; want 1 and 1", down, up)
	}
}

// TestOutageEndsWithRefusal: a server that refuses a call after an outage
// (the claim's lease ran out meanwhile) answers all the same: OnTrouble
// hears of the outage's end from a refusal as from a success.
func TestOutageEndsWithRefusal(t *testing.T) {
	proxy, url := pgtest.NewProxy(t, pgtest.URL(t))
	var log troubleLog
	clock := looptest.NewClock(testStart)
	s, err := postgres.Open(t.Context(), postgres.Config{URL: url, Plan: "down", Create: true,
		Options: dag.ServerOptions{Options: dag.Options{Now: clock.Now}, RetryFor: 300 * time.Millisecond, OnTrouble: log.add}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	if _, err := s.Add(ctx, dag.AddParams{ID: "a", Title: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, loop.ClaimParams{Agent: "x", Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	proxy.Down()
	if err := s.RenewLease(ctx, "a", "x", time.Minute); err == nil {
		t.Fatal("RenewLease went through an outage")
	}
	if down, up := log.downs(); down != 1 || up != 0 {
		t.Fatalf("OnTrouble heard %d outages and %d ends during the outage; want 1 and 0", down, up)
	}
	clock.Advance(2 * time.Minute)
	proxy.Heal()
	if err := s.RenewLease(ctx, "a", "x", time.Minute); !errors.Is(err, loop.ErrNotHolder) {
		t.Fatalf("RenewLease after the lease ran out = %v, want ErrNotHolder", err)
	}
	if down, up := log.downs(); down != 1 || up != 1 {
		t.Errorf("OnTrouble heard %d outages and %d ends after a refusal; want 1 and 1", down, up)
	}
}

// TestConnectErrorSaidOnce: pgx tries a server twice with sslmode=prefer
// (with TLS, then without) and joins both errors: the words are said once.
func TestConnectErrorSaidOnce(t *testing.T) {
	_, err := postgres.Open(t.Context(), postgres.Config{URL: "postgres://postgres@127.0.0.1:1/postgres", Plan: "x"})
	if err == nil {
		t.Fatal("Open of a closed port succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, "connection refused") || strings.Count(msg, "connection refused") != 1 {
		t.Errorf("the error says 'connection refused' %d times: %q", strings.Count(msg, "connection refused"), msg)
	}
}
