package dag_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

func TestImport(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := context.Background()
		tests := []struct {
			name      string
			existing  []dag.AddParams
			batch     []dag.ImportTask
			wantErr   error  // nil: success
			wantMsg   string // substring of the error
			wantReady []string
			wantState map[string]loop.Status
		}{
			{
				name: "forward references",
				batch: []dag.ImportTask{
					{Line: 1, ID: "b", Title: "b", BlockedBy: []string{"a"}, ParentID: "p"},
					{Line: 2, ID: "a", Title: "a", ParentID: "p"},
					{Line: 3, ID: "p", Title: "p"},
				},
				wantReady: []string{"a"},
				wantState: map[string]loop.Status{"a": "pending", "b": "pending", "p": "pending"},
			},
			{
				name: "statuses are kept, in_progress becomes pending, readiness follows",
				batch: []dag.ImportTask{
					{Line: 1, ID: "done", Title: "d", Status: loop.StatusDone},
					{Line: 2, ID: "after-done", Title: "x", BlockedBy: []string{"done"}},
					{Line: 3, ID: "failed", Title: "f", Status: loop.StatusFailed},
					{Line: 4, ID: "under-failed", Title: "u", ParentID: "failed"},
					{Line: 5, ID: "held", Title: "h", Status: loop.StatusInProgress},
					{Line: 6, ID: "blocked", Title: "b", Status: loop.StatusBlocked},
				},
				wantReady: []string{"after-done", "held"},
				wantState: map[string]loop.Status{"done": "done", "after-done": "pending", "failed": "failed",
					"under-failed": "pending", "held": "pending", "blocked": "blocked"},
			},
			{
				name:     "references to existing tasks",
				existing: []dag.AddParams{{ID: "old"}, {ID: "parent"}},
				batch: []dag.ImportTask{
					{Line: 1, ID: "new", Title: "n", ParentID: "parent", BlockedBy: []string{"old"}},
				},
				wantReady: []string{"old"},
				wantState: map[string]loop.Status{"old": "pending", "parent": "pending", "new": "pending"},
			},
			{
				name:    "missing parent names the line",
				batch:   []dag.ImportTask{{Line: 1, ID: "t-1", Title: "a"}, {Line: 7, ID: "t-3", Title: "c", ParentID: "t-99"}},
				wantErr: loop.ErrNotFound, wantMsg: "line 7: task t-3: parent t-99 does not exist",
			},
			{
				name:    "missing blocker names the line",
				batch:   []dag.ImportTask{{Line: 4, ID: "x", Title: "x", BlockedBy: []string{"nope"}}},
				wantErr: loop.ErrNotFound, wantMsg: "line 4: task x: blocker nope does not exist",
			},
			{
				name:    "duplicate within the batch",
				batch:   []dag.ImportTask{{Line: 1, ID: "a", Title: "a"}, {Line: 2, ID: "a", Title: "b"}},
				wantErr: dag.ErrDuplicateID, wantMsg: "line 2: task a",
			},
			{
				name:     "duplicate of an existing task",
				existing: []dag.AddParams{{ID: "a"}},
				batch:    []dag.ImportTask{{Line: 3, ID: "b", Title: "b"}, {Line: 4, ID: "a", Title: "a"}},
				wantErr:  dag.ErrDuplicateID, wantMsg: "line 4: task a",
			},
			{
				name: "cycle within the batch",
				batch: []dag.ImportTask{
					{Line: 1, ID: "a", Title: "a", BlockedBy: []string{"c"}},
					{Line: 2, ID: "b", Title: "b", BlockedBy: []string{"a"}},
					{Line: 3, ID: "c", Title: "c", BlockedBy: []string{"b"}},
				},
				wantErr: dag.ErrCycle, wantMsg: "line ",
			},
			{
				name: "child blocked by its parent",
				batch: []dag.ImportTask{
					{Line: 1, ID: "p", Title: "p"},
					{Line: 2, ID: "c", Title: "c", ParentID: "p", BlockedBy: []string{"p"}},
				},
				wantErr: dag.ErrCycle, wantMsg: "task",
			},
			{
				name:     "cycle through existing tasks",
				existing: []dag.AddParams{{ID: "p"}, {ID: "e", BlockedBy: []string{"p"}}},
				batch: []dag.ImportTask{
					{Line: 1, ID: "c", Title: "c", ParentID: "p", BlockedBy: []string{"e"}},
				},
				wantErr: dag.ErrCycle, wantMsg: "line 1: task c",
			},
			{
				name:    "self block",
				batch:   []dag.ImportTask{{Line: 9, ID: "a", Title: "a", BlockedBy: []string{"a"}}},
				wantErr: dag.ErrCycle, wantMsg: "line 9: task a",
			},
			{
				name:    "unknown status",
				batch:   []dag.ImportTask{{Line: 2, ID: "a", Title: "a", Status: "later"}},
				wantMsg: `line 2: task a: unknown status "later"`,
			},
			{
				name:    "blank title",
				batch:   []dag.ImportTask{{Line: 5, ID: "a", Title: " "}},
				wantMsg: "line 5: task a: a task needs a title",
			},
			{
				name:    "unknown feature",
				batch:   []dag.ImportTask{{Line: 1, ID: "a", Title: "a", Feature: "billing"}},
				wantErr: loop.ErrFeatureNotFound, wantMsg: `line 1: task a: feature "billing"`,
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := o.open(t, newClock(testStart).Now)
				mustAdd(t, s, tt.existing...)
				before := dag.Dump(t, s)
				n, err := s.Import(ctx, tt.batch)
				if tt.wantMsg != "" {
					if err == nil {
						t.Fatalf("Import succeeded, want an error with %q", tt.wantMsg)
					}
					if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
						t.Errorf("Import: %v, want %v", err, tt.wantErr)
					}
					if !strings.Contains(err.Error(), tt.wantMsg) {
						t.Errorf("Import: %q does not contain %q", err, tt.wantMsg)
					}
					if diff := cmp.Diff(before, dag.Dump(t, s)); diff != "" {
						t.Errorf("a failed import changed the database (-before +after):\n%s", diff)
					}
					return
				}
				if err != nil || n != len(tt.batch) {
					t.Fatalf("Import = %d, %v", n, err)
				}
				if diff := cmp.Diff(tt.wantReady, readyIDs(t, s)); diff != "" {
					t.Errorf("ready (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tt.wantState, statuses(t, s)); diff != "" {
					t.Errorf("statuses (-want +got):\n%s", diff)
				}
				dag.CheckCounts(t, s)
			})
		}
	})
}

func TestExportImportRoundTrip(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := context.Background()
		src := o.open(t, newClock(testStart).Now)
		if _, err := src.AddFeature(ctx, dag.FeatureParams{Name: "auth"}); err != nil {
			t.Fatal(err)
		}
		mustAdd(t, src,
			dag.AddParams{ID: "p", Feature: "auth", Description: "the parent", Priority: 1},
			dag.AddParams{ID: "a", ParentID: "p", Priority: 3},
			dag.AddParams{ID: "b", ParentID: "p", BlockedBy: []string{"a"}},
			dag.AddParams{ID: "c", BlockedBy: []string{"b", "a"}},
		)
		if err := src.Block(ctx, loop.MoveParams{TaskID: "c", Message: "waiting on a person"}); err != nil {
			t.Fatal(err)
		}
		exported, err := src.Export(ctx)
		if err != nil {
			t.Fatal(err)
		}
		dst := o.open(t, newClock(testStart).Now)
		if _, err := dst.AddFeature(ctx, dag.FeatureParams{Name: "auth"}); err != nil {
			t.Fatal(err)
		}
		if _, err := dst.Import(ctx, exported); err != nil {
			t.Fatal(err)
		}
		again, err := dst.Export(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(exported, again); diff != "" {
			t.Errorf("export after import (-first +second):\n%s", diff)
		}
		want := []dag.ImportTask{
			{ID: "p", Title: "task p", Description: "the parent", Priority: 1, Status: "pending", Feature: "auth"},
			{ID: "a", Title: "task a", Priority: 3, ParentID: "p", Status: "pending"},
			{ID: "b", Title: "task b", ParentID: "p", BlockedBy: []string{"a"}, Status: "pending"},
			{ID: "c", Title: "task c", BlockedBy: []string{"b", "a"}, Status: "blocked"},
		}
		if diff := cmp.Diff(want, exported); diff != "" {
			t.Errorf("export (-want +got):\n%s", diff)
		}
		dag.CheckCounts(t, src)
		dag.CheckCounts(t, dst)
	})
}

func TestGeneratedIDsNeverCollide(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := context.Background()
		s := o.open(t, newClock(testStart).Now)
		// Imported ids that look like generated ones, ahead of the sequence.
		if _, err := s.Import(ctx, []dag.ImportTask{
			{ID: "t-2", Title: "imported two"}, {ID: "t-3", Title: "imported three"}, {Title: "no id"},
		}); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, task := range mustList(t, s) {
			seen[task.ID] = true
		}
		for range 5 {
			task, err := s.Add(ctx, dag.AddParams{Title: "generated"})
			if err != nil {
				t.Fatal(err)
			}
			if seen[task.ID] {
				t.Fatalf("generated id %s collides", task.ID)
			}
			seen[task.ID] = true
		}
		if _, err := s.Import(ctx, []dag.ImportTask{{Title: "x"}, {Title: "y", ID: "t-9"}, {Title: "z"}}); err != nil {
			t.Fatal(err)
		}
		ids := map[string]int{}
		for _, task := range mustList(t, s) {
			ids[task.ID]++
			if ids[task.ID] > 1 {
				t.Errorf("id %s used twice", task.ID)
			}
		}
		if len(ids) != 11 {
			t.Errorf("%d distinct ids, want 11", len(ids))
		}
	})
}

func TestAutoTransitions(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := context.Background()
		t.Run("explicitly blocked task with blockers unblocks when they are done", func(t *testing.T) {
			s := o.open(t, newClock(testStart).Now)
			mustAdd(t, s, dag.AddParams{ID: "a"}, dag.AddParams{ID: "b"}, dag.AddParams{ID: "x", BlockedBy: []string{"a", "b"}},
				dag.AddParams{ID: "lone"})
			for _, id := range []string{"x", "lone"} {
				if err := s.Block(ctx, loop.MoveParams{TaskID: id, Message: "needs a person"}); err != nil {
					t.Fatal(err)
				}
			}
			complete := func(id string) error { return s.Complete(ctx, loop.MoveParams{TaskID: id, Message: ""}) }
			claimAndDo(t, s, "a", complete)
			if got := statuses(t, s)["x"]; got != loop.StatusBlocked {
				t.Errorf("x with one blocker left: %s, want blocked", got)
			}
			claimAndDo(t, s, "b", complete)
			want := map[string]loop.Status{"a": "done", "b": "done", "x": "pending", "lone": "blocked"}
			if diff := cmp.Diff(want, statuses(t, s)); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"x"}, readyIDs(t, s)); diff != "" {
				t.Errorf("ready (-want +got):\n%s", diff)
			}
			dag.CheckCounts(t, s)
			if err := s.Unblock(ctx, loop.MoveParams{TaskID: "lone"}); err != nil {
				t.Fatal(err)
			}
			logs, err := s.Logs(ctx, "x")
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, e := range logs {
				kinds = append(kinds, e.Kind)
			}
			if diff := cmp.Diff([]string{loop.LogBlock, loop.LogUnblock}, kinds); diff != "" {
				t.Errorf("log kinds of x (-want +got):\n%s", diff)
			}
		})
		t.Run("reset brings back ancestors that failed only because of it", func(t *testing.T) {
			s := o.open(t, newClock(testStart).Now)
			mustAdd(t, s, dag.AddParams{ID: "root"}, dag.AddParams{ID: "mid", ParentID: "root"},
				dag.AddParams{ID: "a", ParentID: "mid"}, dag.AddParams{ID: "b", ParentID: "mid"}, dag.AddParams{ID: "c", ParentID: "root"})
			fail := func(id string) error { return s.Fail(ctx, loop.MoveParams{TaskID: id, Message: "broken"}) }
			claimAndDo(t, s, "c", fail)
			claimAndDo(t, s, "a", fail)
			want := map[string]loop.Status{"root": "failed", "mid": "failed", "a": "failed", "b": "pending", "c": "failed"}
			if diff := cmp.Diff(want, statuses(t, s)); diff != "" {
				t.Errorf("after two failures (-want +got):\n%s", diff)
			}
			if err := s.Reset(ctx, loop.MoveParams{TaskID: "a"}); err != nil {
				t.Fatal(err)
			}
			// mid failed only because of a; root still has c failed.
			want = map[string]loop.Status{"root": "failed", "mid": "pending", "a": "pending", "b": "pending", "c": "failed"}
			if diff := cmp.Diff(want, statuses(t, s)); diff != "" {
				t.Errorf("after Reset(a) (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"a", "b"}, readyIDs(t, s)); diff != "" {
				t.Errorf("ready after Reset(a) (-want +got):\n%s", diff)
			}
			if err := s.Reset(ctx, loop.MoveParams{TaskID: "c"}); err != nil {
				t.Fatal(err)
			}
			dag.CheckCounts(t, s)
			if got := statuses(t, s)["root"]; got != loop.StatusPending {
				t.Errorf("root after Reset(c): %s, want pending", got)
			}
			task, err := s.Get(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			if task.RetryCount != 0 {
				t.Errorf("RetryCount after Reset = %d, want 0", task.RetryCount)
			}
		})
		t.Run("a dependency on a done task is met at once; removing an open one frees the task", func(t *testing.T) {
			s := o.open(t, newClock(testStart).Now)
			mustAdd(t, s, dag.AddParams{ID: "a"}, dag.AddParams{ID: "b"}, dag.AddParams{ID: "x"})
			claimAndDo(t, s, "a", func(id string) error { return s.Complete(ctx, loop.MoveParams{TaskID: id, Message: ""}) })
			for _, blocker := range []string{"a", "b", "b"} { // the second b is a no-op
				if err := s.AddDependency(ctx, "x", blocker); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff([]string{"b"}, readyIDs(t, s)); diff != "" {
				t.Errorf("ready with x waiting for b (-want +got):\n%s", diff)
			}
			if err := s.RemoveDependency(ctx, "x", "b"); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"b", "x"}, readyIDs(t, s)); diff != "" {
				t.Errorf("ready after removing b (-want +got):\n%s", diff)
			}
			task, err := s.Get(ctx, "x")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"a"}, task.BlockedBy); diff != "" {
				t.Errorf("BlockedBy (-want +got):\n%s", diff)
			}
			dag.CheckCounts(t, s)
		})
	})
}

// TestUnblockMovesOnlyBlocked: an unblock of a claimed or failed task once
// released or reset it; blocked -> pending is the only unblock.
func TestUnblockMovesOnlyBlocked(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := context.Background()
		s := o.open(t, newClock(testStart).Now)
		mustAdd(t, s, dag.AddParams{ID: "w"}, dag.AddParams{ID: "f"})
		if _, err := s.Claim(ctx, loop.ClaimParams{TaskID: "w", Agent: "ag"}); err != nil {
			t.Fatal(err)
		}
		claimAndDo(t, s, "f", func(id string) error { return s.Fail(ctx, loop.MoveParams{TaskID: id, Message: "broken"}) })
		for _, id := range []string{"w", "f"} {
			var te *loop.TransitionError
			if err := s.Unblock(ctx, loop.MoveParams{TaskID: id}); !errors.As(err, &te) || te.To != loop.StatusPending {
				t.Errorf("Unblock(%s) = %v, want a *loop.TransitionError to pending", id, err)
			}
		}
		want := map[string]loop.Status{"w": "in_progress", "f": "failed"}
		if diff := cmp.Diff(want, statuses(t, s)); diff != "" {
			t.Errorf("statuses after the refused unblocks (-want +got):\n%s", diff)
		}
	})
}

func TestRecover(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := context.Background()
		clk := newClock(testStart)
		s := o.open(t, clk.Now)
		mustAdd(t, s, dag.AddParams{ID: "a"}, dag.AddParams{ID: "b"}, dag.AddParams{ID: "c"})
		for _, c := range []struct {
			id    string
			lease time.Duration
		}{{"a", time.Minute}, {"b", time.Hour}, {"c", 2 * time.Minute}} {
			if _, err := s.Claim(ctx, loop.ClaimParams{TaskID: c.id, Agent: "agent-" + c.id, Lease: c.lease}); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(90 * time.Second)
		ids, err := s.Recover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"a"}, ids); diff != "" {
			t.Errorf("recovered (-want +got):\n%s", diff)
		}
		logs, err := s.Logs(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if len(logs) != 2 || logs[1].Kind != loop.LogLeaseExpired || !strings.Contains(logs[1].Message, "agent-a") ||
			!logs[1].At.Equal(testStart.Add(90*time.Second)) || logs[1].Actor != loop.ActorRalph {
			t.Errorf("logs of a = %+v, want the claim, then one lease-expired entry by ralph naming agent-a at the recovery time", logs)
		}
		// A read recovers too.
		clk.Advance(time.Minute)
		task, err := s.Get(ctx, "c")
		if err != nil {
			t.Fatal(err)
		}
		if task.Status != loop.StatusPending || task.ClaimedBy != "" || !task.LeaseExpiresAt.IsZero() {
			t.Errorf("c after its lease expired: %+v", task)
		}
		if ids, err := s.Recover(ctx); err != nil || len(ids) != 0 {
			t.Errorf("RecoverExpired again = %v, %v; want nothing", ids, err)
		}
	})
}

func TestFeaturesAndReceipts(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := context.Background()
		s := o.open(t, newClock(testStart).Now)
		for _, name := range []string{"auth", "billing"} {
			if _, err := s.AddFeature(ctx, dag.FeatureParams{Name: name, SpecPath: ".ralph/features/" + name + "/spec.md",
				PlanPath: ".ralph/features/" + name + "/plan.md"}); err != nil {
				t.Fatal(err)
			}
		}
		fs, err := s.Features(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f, err := s.Feature(ctx, "billing")
		if err != nil {
			t.Fatal(err)
		}
		want := loop.Feature{Name: "billing", SpecPath: ".ralph/features/billing/spec.md",
			PlanPath: ".ralph/features/billing/plan.md", CreatedAt: testStart}
		if diff := cmp.Diff([]loop.Feature{{Name: "auth", SpecPath: ".ralph/features/auth/spec.md",
			PlanPath: ".ralph/features/auth/plan.md", CreatedAt: testStart}, want}, fs); diff != "" {
			t.Errorf("Features (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, f); diff != "" {
			t.Errorf("Feature (-want +got):\n%s", diff)
		}
		if _, err := s.Feature(ctx, "nope"); !errors.Is(err, loop.ErrFeatureNotFound) {
			t.Errorf("Feature(nope): %v, want ErrFeatureNotFound", err)
		}

		rs := []loop.Receipt{
			{Session: "s1", Iteration: 1, Mode: "build", TaskID: "t-1", Model: "sonnet", InputTokens: 10,
				OutputTokens: 20, CacheReadTokens: 30, CacheWriteTokens: 40, CostUSD: 0.125, StartedAt: testStart,
				Duration: 90 * time.Second, Turns: 7, ExitReason: "success", Verdict: "pass"},
			{Session: "s1", Iteration: 2, Mode: "prompt", Model: "opus", CostUSD: 1.5},
			{Session: "s1", Iteration: 3, Mode: "verify", Model: "gpt-5.5", CostUSD: 0.02, Agent: "codex",
				CostSource: loop.CostEstimated},
		}
		for _, r := range rs {
			if err := s.RecordReceipt(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Receipts(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]loop.Receipt{rs[2], rs[1], rs[0]}, got); diff != "" {
			t.Errorf("Receipts (-want +got):\n%s", diff)
		}
		if got, _ := s.Receipts(ctx, 1); len(got) != 1 || got[0].Iteration != 3 {
			t.Errorf("Receipts(1) = %+v, want the newest only", got)
		}
	})
}

func TestListFilters(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := context.Background()
		s := o.open(t, newClock(testStart).Now)
		if _, err := s.AddFeature(ctx, dag.FeatureParams{Name: "auth"}); err != nil {
			t.Fatal(err)
		}
		mustAdd(t, s, dag.AddParams{ID: "a", Feature: "auth"}, dag.AddParams{ID: "b"}, dag.AddParams{ID: "c", Feature: "auth"})
		if err := s.Block(ctx, loop.MoveParams{TaskID: "c", Message: ""}); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			p    dag.ListParams
			want []string
		}{
			{dag.ListParams{}, []string{"a", "b", "c"}},
			{dag.ListParams{Feature: "auth"}, []string{"a", "c"}},
			{dag.ListParams{Status: loop.StatusPending}, []string{"a", "b"}},
			{dag.ListParams{Status: loop.StatusBlocked, Feature: "auth"}, []string{"c"}},
			{dag.ListParams{Status: loop.StatusDone}, nil},
		}
		for _, tt := range tests {
			ts, err := s.List(ctx, tt.p)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, task := range ts {
				ids = append(ids, task.ID)
			}
			if diff := cmp.Diff(tt.want, ids); diff != "" {
				t.Errorf("List(%+v) (-want +got):\n%s", tt.p, diff)
			}
		}
		if _, err := s.List(ctx, dag.ListParams{Status: "later"}); err == nil {
			t.Errorf("List with an unknown status succeeded")
		}
	})
}
