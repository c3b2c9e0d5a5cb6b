package looptest_test

import (
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop/looptest"
)

// TestPickup runs the pickup harness on MemStore: every blocker's
// completion is followed by its dependent's start in the waiting loop.
func TestPickup(t *testing.T) {
	const n = 20
	s := looptest.NewMemStore(time.Now)
	for _, sd := range looptest.PickupPlan(n) {
		if err := s.Add(sd.Task()); err != nil {
			t.Fatal(err)
		}
	}
	pickups, err := looptest.MeasurePickup(t.Context(), s, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(pickups) != n {
		t.Fatalf("%d pickups; want %d", len(pickups), n)
	}
	for i, p := range pickups {
		if p <= 0 || (i > 0 && p < pickups[i-1]) {
			t.Fatalf("pickups not positive and sorted: %v", pickups)
		}
	}
	if p50, p99 := looptest.Percentile(pickups, 50), looptest.Percentile(pickups, 99); p50 != pickups[9] || p99 != pickups[19] {
		t.Errorf("Percentile: p50 = %v, p99 = %v; want the 10th and the 20th of %v", p50, p99, pickups)
	}
}
