package serve

import (
	"testing"

	"github.com/ralph-dev/ralph/loop"
)

// TestReady: the frontier the page highlights is the one claims take
// from (ARCHITECTURE.md §2), not merely "pending with its blockers done".
func TestReady(t *testing.T) {
	status := map[string]loop.Status{"done": loop.StatusDone, "open": loop.StatusPending, "failed": loop.StatusFailed, "active": loop.StatusInProgress}
	for _, tc := range []struct {
		name        string
		task        loop.Task
		hasChildren bool
		want        bool
	}{
		{"pending leaf", loop.Task{Status: loop.StatusPending}, false, true},
		{"blockers done", loop.Task{Status: loop.StatusPending, BlockedBy: []string{"done"}}, false, true},
		{"a blocker open", loop.Task{Status: loop.StatusPending, BlockedBy: []string{"done", "open"}}, false, false},
		{"a blocker active", loop.Task{Status: loop.StatusPending, BlockedBy: []string{"active"}}, false, false},
		{"a blocker not in the plan", loop.Task{Status: loop.StatusPending, BlockedBy: []string{"gone"}}, false, true},
		{"a parent", loop.Task{Status: loop.StatusPending}, true, false},
		{"parent failed", loop.Task{Status: loop.StatusPending, ParentID: "failed"}, false, false},
		{"parent open", loop.Task{Status: loop.StatusPending, ParentID: "open"}, false, true},
		{"in progress", loop.Task{Status: loop.StatusInProgress}, false, false},
		{"blocked", loop.Task{Status: loop.StatusBlocked}, false, false},
		{"done", loop.Task{Status: loop.StatusDone}, false, false},
	} {
		if got := ready(tc.task, tc.hasChildren, status); got != tc.want {
			t.Errorf("%s: ready = %v, want %v", tc.name, got, tc.want)
		}
	}
}
