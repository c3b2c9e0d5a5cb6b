package looptest_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// newMemStore is the StoreFactory for MemStore: a user's custom store
// plugs into TestTaskStore the same way.
func newMemStore(t *testing.T, seeds []looptest.Seed, now func() time.Time) loop.TaskStore {
	t.Helper()
	s := looptest.NewMemStore(now)
	tasks := make([]loop.Task, len(seeds))
	for i, sd := range seeds {
		tasks[i] = sd.Task()
		if sd.Feature != "" {
			// AddFeature refuses a name twice; seeds repeat features.
			_ = s.AddFeature(loop.Feature{Name: sd.Feature})
		}
	}
	if err := s.Add(tasks...); err != nil {
		t.Fatalf("seeding MemStore: %v", err)
	}
	return s
}

func TestMemStoreConformance(t *testing.T) {
	looptest.TestTaskStore(t, newMemStore)
}

func TestMemStoreLandings(t *testing.T) {
	looptest.TestLandingStore(t, newMemStore)
}

// TestSuiteOptions runs the suite with every capability switched off: the
// subtests that remain must still pass, and the skipped ones must say why.
func TestSuiteOptions(t *testing.T) {
	looptest.TestTaskStore(t, newMemStore,
		looptest.WithoutDependencies(), looptest.WithoutLeases(), looptest.WithoutPriorities(),
		looptest.WithoutFeatures(), looptest.WithoutNesting())
}

func TestMemStoreAdd(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	tests := []struct {
		name    string
		tasks   []loop.Task
		wantErr string // substring; "" means success
	}{
		{"forward references", []loop.Task{
			{ID: "a", ParentID: "p", BlockedBy: []string{"b"}}, {ID: "b"}, {ID: "p"},
		}, ""},
		{"empty id", []loop.Task{{Title: "x"}}, "empty id"},
		{"duplicate in batch", []loop.Task{{ID: "a"}, {ID: "a"}}, "id given twice"},
		{"duplicate of stored", []loop.Task{{ID: "old"}}, "already exists"},
		{"unknown status", []loop.Task{{ID: "a", Status: "later"}}, "unknown status"},
		{"in progress without holder", []loop.Task{{ID: "a", Status: loop.StatusInProgress}}, "ClaimedBy"},
		{"unknown parent", []loop.Task{{ID: "a", ParentID: "nope"}}, "parent nope"},
		{"unknown blocker", []loop.Task{{ID: "a", BlockedBy: []string{"nope"}}}, "blocker nope"},
		{"self block", []loop.Task{{ID: "a", BlockedBy: []string{"a"}}}, "itself"},
		{"blocker cycle", []loop.Task{{ID: "a", BlockedBy: []string{"b"}}, {ID: "b", BlockedBy: []string{"a"}}}, "cycle"},
		{"parent cycle", []loop.Task{{ID: "a", ParentID: "b"}, {ID: "b", ParentID: "a"}}, "cycle"},
		{"blocked by own parent is fine", []loop.Task{{ID: "p"}, {ID: "c", ParentID: "p", BlockedBy: []string{"old"}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := looptest.NewMemStore(func() time.Time { return now })
			if err := s.Add(loop.Task{ID: "old"}); err != nil {
				t.Fatal(err)
			}
			before := s.Tasks()
			err := s.Add(tt.tasks...)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Add: %v", err)
				}
				if got, want := len(s.Tasks()), 1+len(tt.tasks); got != want {
					t.Errorf("%d tasks after Add, want %d", got, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Add error = %v, want one containing %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(before, s.Tasks(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("a refused Add changed the store (-before +after):\n%s", diff)
			}
		})
	}
}

func TestMemStoreAddDefaults(t *testing.T) {
	clock := looptest.NewClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	s := looptest.NewMemStore(clock.Now)
	err := s.Add(
		loop.Task{ID: "a", Priority: 0},
		loop.Task{ID: "b", Status: loop.StatusInProgress, ClaimedBy: "agent-x"},
		loop.Task{ID: "c", Status: loop.StatusDone, ClaimedBy: "stale"},
	)
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	want := []loop.Task{
		{ID: "a", Status: loop.StatusPending, CreatedAt: now, UpdatedAt: now},
		{ID: "b", Status: loop.StatusInProgress, ClaimedBy: "agent-x", ClaimedAt: now,
			LeaseExpiresAt: now.Add(loop.DefaultLease), CreatedAt: now, UpdatedAt: now},
		{ID: "c", Status: loop.StatusDone, CreatedAt: now, UpdatedAt: now},
	}
	if diff := cmp.Diff(want, s.Tasks(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Tasks after Add (-want +got):\n%s", diff)
	}
	// A seeded claim expires like any other.
	clock.Advance(loop.DefaultLease)
	b, err := s.Get(t.Context(), "b")
	if err != nil {
		t.Fatal(err)
	}
	if b.Status != loop.StatusPending || b.ClaimedBy != "" {
		t.Errorf("seeded claim after its lease: %s held by %q, want pending", b.Status, b.ClaimedBy)
	}
}

func TestMemStoreAddDependency(t *testing.T) {
	tests := []struct {
		name             string
		blocked, blocker string
		wantErr          error  // errors.Is target
		wantMsg          string // substring, when wantErr is nil and an error is expected
		wantBlockedBy    []string
	}{
		{name: "new", blocked: "c", blocker: "a", wantBlockedBy: []string{"b", "a"}},
		{name: "existing is a no-op", blocked: "c", blocker: "b", wantBlockedBy: []string{"b"}},
		{name: "unknown blocked", blocked: "x", blocker: "a", wantErr: loop.ErrNotFound, wantBlockedBy: []string{"b"}},
		{name: "unknown blocker", blocked: "c", blocker: "x", wantErr: loop.ErrNotFound, wantBlockedBy: []string{"b"}},
		{name: "self", blocked: "c", blocker: "c", wantMsg: "itself", wantBlockedBy: []string{"b"}},
		{name: "cycle", blocked: "b", blocker: "c", wantMsg: "cycle", wantBlockedBy: []string{"b"}},
		// A parent waits for its children (as in dag): a child blocked by
		// its parent closes a cycle; a parent blocked by its child only
		// says again what holds.
		{name: "cycle through a parent", blocked: "child", blocker: "p", wantMsg: "cycle", wantBlockedBy: []string{"b"}},
		{name: "parent blocked by its child", blocked: "p", blocker: "child", wantBlockedBy: []string{"b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := looptest.NewMemStore(nil)
			if err := s.Add(loop.Task{ID: "a"}, loop.Task{ID: "b"}, loop.Task{ID: "c", BlockedBy: []string{"b"}},
				loop.Task{ID: "p"}, loop.Task{ID: "child", ParentID: "p"}); err != nil {
				t.Fatal(err)
			}
			before := s.Tasks()
			err := s.AddDependency(t.Context(), tt.blocked, tt.blocker)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("AddDependency error = %v, want %v", err, tt.wantErr)
				}
			case tt.wantMsg != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Fatalf("AddDependency error = %v, want one containing %q", err, tt.wantMsg)
				}
			case err != nil:
				t.Fatalf("AddDependency: %v", err)
			}
			if err != nil {
				if diff := cmp.Diff(before, s.Tasks(), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("a refused AddDependency changed the store (-before +after):\n%s", diff)
				}
			}
			c, err := s.Get(t.Context(), "c")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantBlockedBy, c.BlockedBy); diff != "" {
				t.Errorf("c.BlockedBy (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMemStoreBlockUnblock(t *testing.T) {
	ctx := t.Context()
	s := looptest.NewMemStore(nil)
	if err := s.Add(loop.Task{ID: "a"}, loop.Task{ID: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Block(ctx, loop.MoveParams{TaskID: "a", Message: "needs a human"}); err != nil {
		t.Fatal(err)
	}
	ready, err := s.Ready(ctx, loop.Scope{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b"}, ids(ready)); diff != "" {
		t.Errorf("Ready with a blocked (-want +got):\n%s", diff)
	}
	var te *loop.TransitionError
	if err := s.Block(ctx, loop.MoveParams{TaskID: "a", Message: "again"}); !errors.As(err, &te) {
		t.Errorf("Block of a blocked task: error = %v, want a *loop.TransitionError", err)
	}
	if err := s.Unblock(ctx, loop.MoveParams{TaskID: "a"}); err != nil {
		t.Fatal(err)
	}
	logs, err := s.Logs(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range logs {
		kinds = append(kinds, e.Kind+": "+e.Message)
	}
	if diff := cmp.Diff([]string{"block: needs a human", "unblock: unblocked"}, kinds); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
	if err := s.Unblock(ctx, loop.MoveParams{TaskID: "b"}); !errors.As(err, &te) {
		t.Errorf("Unblock of a pending task: error = %v, want a *loop.TransitionError", err)
	}
}

func TestMemStoreBadInput(t *testing.T) {
	ctx := t.Context()
	s := looptest.NewMemStore(nil)
	if err := s.Add(loop.Task{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	before := s.Tasks()
	tests := []struct {
		name string
		call func() error
	}{
		{"negative lease", func() error {
			_, err := s.Claim(ctx, loop.ClaimParams{Agent: "agent-a", Lease: -time.Second})
			return err
		}},
		{"unknown verdict", func() error { return s.SetVerification(ctx, "a", "maybe") }},
		{"log without kind", func() error { return s.AddLog(ctx, "a", "", "hi") }},
		{"release without agent", func() error { _, err := s.ReleaseAgent(ctx, "", "x"); return err }},
		{"scope of unknown task", func() error { _, err := s.Ready(ctx, loop.Scope{TaskID: "nope"}, 0); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); err == nil {
				t.Error("no error")
			}
		})
	}
	if diff := cmp.Diff(before, s.Tasks(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("bad input changed the store (-before +after):\n%s", diff)
	}
}

func TestMemStoreFeaturesAndReceipts(t *testing.T) {
	ctx := t.Context()
	clock := looptest.NewClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	s := looptest.NewMemStore(clock.Now)
	auth := loop.Feature{Name: "auth", SpecPath: ".ralph/features/auth/spec.md", PlanPath: ".ralph/features/auth/plan.md"}
	if err := s.AddFeature(auth); err != nil {
		t.Fatal(err)
	}
	if err := s.AddFeature(loop.Feature{Name: "auth"}); err == nil {
		t.Error("AddFeature of an existing name succeeded")
	}
	got, err := s.Feature(ctx, "auth")
	if err != nil {
		t.Fatal(err)
	}
	auth.CreatedAt = clock.Now()
	if diff := cmp.Diff(auth, got); diff != "" {
		t.Errorf("Feature (-want +got):\n%s", diff)
	}
	if _, err := s.Feature(ctx, "nope"); !errors.Is(err, loop.ErrFeatureNotFound) {
		t.Errorf("Feature(nope): error = %v, want ErrFeatureNotFound", err)
	}

	for i := 1; i <= 3; i++ {
		if err := s.RecordReceipt(ctx, loop.Receipt{Iteration: i, Mode: "build"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		limit int
		want  []int
	}{{0, []int{3, 2, 1}}, {2, []int{3, 2}}, {5, []int{3, 2, 1}}} {
		rs, err := s.Receipts(ctx, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		var iters []int
		for _, r := range rs {
			iters = append(iters, r.Iteration)
		}
		if diff := cmp.Diff(tt.want, iters); diff != "" {
			t.Errorf("Receipts(%d), newest first (-want +got):\n%s", tt.limit, diff)
		}
	}
}

func ids(tasks []loop.Task) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

func TestMemStoreRuns(t *testing.T) {
	looptest.TestRunRecorder(t, newMemStore)
	looptest.TestReceiptStore(t, newMemStore)
}
