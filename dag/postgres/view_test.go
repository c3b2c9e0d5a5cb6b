package postgres_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/loop"
)

// TestViewChanges: a viewer (ralph serve) is woken by another store's
// claim, and by a task claimed again, as by every change a waiting loop
// hears; not by a lease renewal. A waiting loop still hears no claim,
// viewer or not; a second viewer hears claims, before and after the
// first is gone; and without a viewer connected a claim notifies nobody.
func TestViewChanges(t *testing.T) {
	url := pgtest.URL(t)
	ctx := t.Context()
	other := openNamed(t, url, "view", dag.ServerOptions{})
	if _, err := other.Add(ctx, dag.AddParams{ID: "a", Title: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Add(ctx, dag.AddParams{ID: "b", Title: "b"}); err != nil {
		t.Fatal(err)
	}

	// A connection of the test's own on the claims' channel: it hears a
	// claim only while a viewer is connected.
	plans, err := postgres.Plans(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	channel, planID := "", 0
	for _, p := range plans {
		if p.Name == "view" {
			channel, planID = "ralph_plan_"+strconv.Itoa(p.ID)+"_claims", p.ID
		}
	}
	_, heard := listenSpy(t, url, channel)
	var gen int64
	claim := func(id string) {
		t.Helper()
		task, err := other.Claim(ctx, loop.ClaimParams{TaskID: id, Agent: "agent-o", Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		gen = task.Generation
	}
	claim("a")
	if heard() {
		t.Error("a claim with no viewer connected notified the claims' channel")
	}

	viewer := openNamed(t, url, "view", dag.ServerOptions{})
	waiter := openNamed(t, url, "view", dag.ServerOptions{})
	view := viewer.ViewChanges()
	const long = 20 * time.Second
	check := func(name string, wantView, wantWaiter bool, change func() error) {
		t.Helper()
		vtok, wtok := quiet(t, view), quiet(t, waiter)
		if err := change(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		d := 700 * time.Millisecond
		if wantView {
			d = long
		}
		start := time.Now()
		changed, err := view.WaitChange(ctx, vtok, d)
		if took := time.Since(start); changed != wantView || err != nil || (wantView && took > 3*time.Second) {
			t.Errorf("viewer after another store's %s: changed %v, %v after %v; want %v", name, changed, err, took, wantView)
		}
		if changed, err := waiter.WaitChange(ctx, wtok, 300*time.Millisecond); changed != wantWaiter || err != nil {
			t.Errorf("waiting loop after another store's %s: changed %v, %v; want %v", name, changed, err, wantWaiter)
		}
	}
	check("claim", true, false, func() error { claim("b"); return nil })
	if !heard() {
		t.Error("a claim with a viewer connected did not notify the claims' channel")
	}
	check("lease renewal", false, false, func() error { return other.RenewLease(ctx, "b", "agent-o", 2*time.Hour) })
	check("completion", true, true, func() error {
		return other.Complete(ctx, loop.MoveParams{TaskID: "b", By: loop.Actor{Agent: "agent-o", Generation: gen}})
	})
	check("release", true, true, func() error {
		return other.Release(ctx, loop.MoveParams{TaskID: "a", Message: "later", By: loop.Actor{Agent: "agent-o"}})
	})
	check("claimed again", true, false, func() error { claim("a"); return nil })

	// A second viewer waits for the first's lock: claims wake both, and
	// the second once the first is gone.
	second := openNamed(t, url, "view", dag.ServerOptions{})
	view2 := second.ViewChanges()
	release := func() error {
		return other.Release(ctx, loop.MoveParams{TaskID: "a", By: loop.Actor{Agent: "agent-o"}})
	}
	for _, step := range []struct {
		name   string
		change func() error
	}{
		{"release", release},
		{"claim", func() error { claim("a"); return nil }},
		{"first viewer closed", viewer.Close},
		{"release", release},
		{"claim", func() error { claim("a"); return nil }},
	} {
		tok := quiet(t, view2)
		if err := step.change(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if step.name == "first viewer closed" {
			continue
		}
		if changed, err := view2.WaitChange(ctx, tok, long); !changed || err != nil {
			t.Errorf("second viewer after %s: changed %v, %v; want woken", step.name, changed, err)
		}
	}

	// Its connections are lost: the wait ends; once they are back, a
	// claim wakes it again.
	killer, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close(context.Background())
	tok := quiet(t, view2)
	if _, err := terminate(ctx, killer); err != nil {
		t.Fatal(err)
	}
	if changed, err := view2.WaitChange(ctx, tok, long); !changed || err != nil {
		t.Errorf("second viewer after its connections ended: changed %v, %v; want woken", changed, err)
	}
	for _, step := range []func() error{release, func() error { claim("a"); return nil }} {
		tok := quiet(t, view2)
		if err := step(); err != nil {
			t.Fatal(err)
		}
		if changed, err := view2.WaitChange(ctx, tok, long); !changed || err != nil {
			t.Errorf("second viewer, back, after a release or a claim: changed %v, %v; want woken", changed, err)
		}
	}

	for heard() { // what the viewers' claims above notified
	}
	second.Close()
	// The server lets the viewer's lock go when its connection's backend
	// ends, a moment after the client closed it: until then a claim still
	// notifies (harmless, a viewer too many woken).
	for deadline := time.Now().Add(10 * time.Second); ; {
		var held bool
		if err := killer.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
			AND classid = $1 AND objid = $2 AND objsubid = 2)`, 0x52414c56 /* the viewers' lock (postgres.go viewKey) */, planID).Scan(&held); err != nil {
			t.Fatal(err)
		}
		if !held {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the viewers' advisory lock is still held 10 s after they closed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	claim("a")
	if heard() {
		t.Error("a claim after the viewers closed notified the claims' channel")
	}
}
