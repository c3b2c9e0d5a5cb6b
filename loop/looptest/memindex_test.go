package looptest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
)

// checkIndexes recomputes every index of s from scratch and compares.
func checkIndexes(t *testing.T, s *MemStore, step string) {
	t.Helper()
	var wantReady []string
	var wantClaimed []string
	var wantCounts loop.Counts
	for _, mt := range s.order {
		count(&wantCounts, mt.task.Status, 1)
		if mt.task.Status == loop.StatusInProgress {
			wantClaimed = append(wantClaimed, mt.task.ID)
		}
		unmet := 0
		for _, b := range mt.task.BlockedBy {
			if s.tasks[b].task.Status != loop.StatusDone {
				unmet++
			}
		}
		if unmet != mt.unmet {
			t.Fatalf("%s: task %s unmet = %d, want %d", step, mt.task.ID, mt.unmet, unmet)
		}
		parentFailed := mt.task.ParentID != "" && s.tasks[mt.task.ParentID].task.Status == loop.StatusFailed
		hasChildren := slices.ContainsFunc(s.order, func(c *memTask) bool { return c.task.ParentID == mt.task.ID })
		if mt.task.Status == loop.StatusPending && !hasChildren && !parentFailed && unmet == 0 {
			wantReady = append(wantReady, mt.task.ID)
		}
	}
	// Each task's chain, recomputed: the longest path of what waits for it
	// (dependents, parent), itself included.
	chain := map[*memTask]int{}
	var walk func(mt *memTask) int
	walk = func(mt *memTask) int {
		if c, ok := chain[mt]; ok {
			return c
		}
		c := 1
		for _, d := range mt.dependents {
			c = max(c, 1+walk(d))
		}
		if mt.parent != nil {
			c = max(c, 1+walk(mt.parent))
		}
		chain[mt] = c
		return c
	}
	for _, mt := range s.order {
		if walk(mt) != mt.chain {
			t.Fatalf("%s: task %s chain = %d, want %d", step, mt.task.ID, mt.chain, walk(mt))
		}
	}
	slices.SortStableFunc(wantReady, func(a, b string) int {
		ta, tb := s.tasks[a], s.tasks[b]
		if c := ta.task.Priority - tb.task.Priority; c != 0 {
			return c
		}
		if ta.raced != tb.raced {
			if ta.raced {
				return -1
			}
			return 1
		}
		return chain[tb] - chain[ta]
	})
	var gotReady, gotClaimed []string
	for _, mt := range s.ready {
		gotReady = append(gotReady, mt.task.ID)
	}
	for mt := range s.claimed {
		gotClaimed = append(gotClaimed, mt.task.ID)
	}
	slices.Sort(gotClaimed)
	slices.Sort(wantClaimed)
	if diff := cmp.Diff(wantReady, gotReady); diff != "" {
		t.Fatalf("%s: ready index (-want +got):\n%s", step, diff)
	}
	if diff := cmp.Diff(wantClaimed, gotClaimed); diff != "" {
		t.Fatalf("%s: claimed index (-want +got):\n%s", step, diff)
	}
	if diff := cmp.Diff(wantCounts, s.counts); diff != "" {
		t.Fatalf("%s: counts (-want +got):\n%s", step, diff)
	}
}

// TestMemStoreIndexes drives a store through random operations, legal and
// not, and checks after each that the indexes kept on write match a
// recomputation from the tasks.
func TestMemStoreIndexes(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			clock := NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			s := NewMemStore(clock.Now)
			ctx := t.Context()
			statuses := []loop.Status{loop.StatusPending, loop.StatusPending, loop.StatusDone, loop.StatusFailed, loop.StatusBlocked}
			var ids []string
			pick := func() string { return ids[rng.IntN(len(ids))] }
			add := func() {
				id := fmt.Sprintf("t%d", len(ids))
				task := loop.Task{ID: id, Priority: rng.IntN(4), Status: statuses[rng.IntN(len(statuses))]}
				if len(ids) > 0 && rng.IntN(4) == 0 {
					task.ParentID = pick()
				}
				if len(ids) > 0 && rng.IntN(3) == 0 {
					task.BlockedBy = []string{pick()}
				}
				if rng.IntN(10) == 0 {
					task.Status, task.ClaimedBy = loop.StatusInProgress, "agent-seed"
				}
				err := s.Add(task)
				if err != nil && strings.Contains(err.Error(), "cycle") {
					// A child blocked by its own ancestor: without it.
					task.BlockedBy = nil
					err = s.Add(task)
				}
				if err != nil {
					t.Fatalf("Add(%+v): %v", task, err)
				}
				ids = append(ids, id)
			}
			for range 20 {
				add()
			}
			checkIndexes(t, s, "after seeding")
			ops := []struct {
				name string
				do   func() error
			}{
				{"add", func() error { add(); return nil }},
				{"claim next", func() error {
					_, err := s.Claim(ctx, loop.ClaimParams{Agent: "agent-a", Lease: time.Duration(1+rng.IntN(5)) * time.Minute})
					return err
				}},
				{"claim id", func() error {
					_, err := s.Claim(ctx, loop.ClaimParams{TaskID: pick(), Agent: "agent-b"})
					return err
				}},
				{"complete", func() error { return s.Complete(ctx, loop.MoveParams{TaskID: pick(), Message: "ok"}) }},
				{"fail", func() error { return s.Fail(ctx, loop.MoveParams{TaskID: pick(), Message: "no"}) }},
				{"release", func() error { return s.Release(ctx, loop.MoveParams{TaskID: pick(), Message: "later"}) }},
				{"retry", func() error { return s.Retry(ctx, loop.MoveParams{TaskID: pick(), Message: "again"}) }},
				{"block", func() error { return s.Block(ctx, loop.MoveParams{TaskID: pick(), Message: "wait"}) }},
				{"unblock", func() error { return s.Unblock(ctx, loop.MoveParams{TaskID: pick()}) }},
				{"dep", func() error { return s.AddDependency(ctx, pick(), pick()) }},
				{"release agent", func() error { _, err := s.ReleaseAgent(ctx, "agent-a", "bye"); return err }},
				{"tick", func() error { clock.Advance(time.Minute); _, err := s.Counts(ctx, loop.Scope{}); return err }},
			}
			for i := range 1500 {
				op := ops[rng.IntN(len(ops))]
				_ = op.do() // errors are expected: most random moves are illegal
				checkIndexes(t, s, fmt.Sprintf("op %d (%s)", i, op.name))
			}
		})
	}
}
