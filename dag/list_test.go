package dag_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// TestEachTaskBlockers: the blockers EachTask merges in from its second
// cursor are those Get reads task by task, in the order they were added,
// under every filter and limit — also when dependencies were added long
// after their tasks, and when the filter skips tasks that have some.
func TestEachTaskBlockers(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := context.Background()
		clock := newClock(testStart)
		s := o.open(t, clock.Now)
		if _, err := s.AddFeature(ctx, dag.FeatureParams{Name: "auth"}); err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			p := dag.AddParams{ID: "t" + strconv.Itoa(i), Title: "task " + strconv.Itoa(i)}
			if i%3 == 0 {
				p.Feature = "auth"
			}
			if i > 2 && i%4 == 0 {
				p.BlockedBy = []string{"t" + strconv.Itoa(i-1), "t" + strconv.Itoa(i/2)}
			}
			mustAdd(t, s, p)
		}
		// Later dependencies of earlier tasks: their rows in deps come after
		// those of later tasks.
		for _, d := range [][2]string{{"t1", "t29"}, {"t1", "t2"}, {"t5", "t28"}, {"t29", "t0"}} {
			if err := s.AddDependency(ctx, d[0], d[1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Block(ctx, loop.MoveParams{TaskID: "t8"}); err != nil {
			t.Fatal(err)
		}
		// Claims, later: one held by a loop with a holder process, one done,
		// one failed and retried, one verified.
		clock.Advance(time.Minute)
		holder := loop.Holder{Host: "host-1", PID: 4242, Start: 99}
		if _, err := s.Claim(ctx, loop.ClaimParams{TaskID: "t3", Agent: "agent-a", Mode: loop.ClaimLoop, Holder: holder}); err != nil {
			t.Fatal(err)
		}
		claimAndDo(t, s, "t2", func(id string) error {
			return s.Complete(ctx, loop.MoveParams{TaskID: id, By: loop.Actor{Agent: "agent-t"}})
		})
		claimAndDo(t, s, "t7", func(id string) error {
			return s.Retry(ctx, loop.MoveParams{TaskID: id, By: loop.Actor{Agent: "agent-t"}})
		})
		if err := s.SetVerification(ctx, "t2", "pass"); err != nil {
			t.Fatal(err)
		}
		all := map[string]loop.Task{}
		var order []string
		for i := range 30 {
			task, err := s.Get(ctx, "t"+strconv.Itoa(i))
			if err != nil {
				t.Fatal(err)
			}
			all[task.ID] = task
			order = append(order, task.ID)
		}
		for _, p := range []dag.ListParams{
			{},
			{Feature: "auth"},
			{Status: loop.StatusBlocked},
			{Status: loop.StatusPending, Limit: 7},
			{Limit: 1},
			{Limit: 100},
			{Status: loop.StatusInProgress},
		} {
			var want []loop.Task
			for _, id := range order {
				task := all[id]
				if (p.Feature == "" || task.Feature == p.Feature) && (p.Status == "" || task.Status == p.Status) &&
					(p.Limit == 0 || len(want) < p.Limit) {
					want = append(want, task)
				}
			}
			var shape dag.ListShape
			p.Shape = func(sh dag.ListShape) error { shape = sh; return nil }
			got, err := s.List(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("List(%+v) (-Get +List):\n%s", p, diff)
			}
			wantShape := dag.ListShape{Tasks: len(want)}
			for _, task := range want {
				wantShape.IDWidth = max(wantShape.IDWidth, len(task.ID))
				wantShape.StatusWidth = max(wantShape.StatusWidth, len(task.Status))
				wantShape.PriorityWidth = max(wantShape.PriorityWidth, len(strconv.Itoa(task.Priority)))
			}
			if shape != wantShape {
				t.Errorf("List(%+v): shape %+v, want %+v", p, shape, wantShape)
			}
		}
		if err := s.EachTask(ctx, dag.ListParams{Limit: -1}, func(loop.Task) error { return nil }); err == nil {
			t.Error("EachTask with a negative limit succeeded")
		}
	})
}

// TestEachTaskStops: an error from fn ends the listing at once, comes back
// as it is, and leaves no read transaction behind (a write goes through).
func TestEachTaskStops(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := context.Background()
		s := o.open(t, newClock(testStart).Now)
		if _, err := s.Import(ctx, dag.Fixture(500)); err != nil {
			t.Fatal(err)
		}
		stop := errors.New("reader went away")
		calls := 0
		err := s.EachTask(ctx, dag.ListParams{}, func(loop.Task) error {
			calls++
			if calls == 3 {
				return stop
			}
			return nil
		})
		if err != stop || calls != 3 {
			t.Errorf("EachTask = %v after %d calls, want the callback's error after 3", err, calls)
		}
		shapeErr := errors.New("no room")
		calls = 0
		err = s.EachTask(ctx, dag.ListParams{Shape: func(dag.ListShape) error { return shapeErr }}, func(loop.Task) error {
			calls++
			return nil
		})
		if err != shapeErr || calls != 0 {
			t.Errorf("EachTask = %v after %d calls, want Shape's error before any task", err, calls)
		}
		if _, err := s.Add(ctx, dag.AddParams{Title: "after the listing"}); err != nil {
			t.Fatal(err)
		}
		// A read transaction left open would keep the checkpoint from
		// truncating the log (SQLite), or sit idle in a transaction (a
		// server).
		o.checkNoReadOpen(t, s)
	})
}
