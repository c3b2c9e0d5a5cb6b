package dag_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// TestErrorsChangeNothing runs calls that must fail and checks the error
// and that every row of the database is as it was.
func TestErrorsChangeNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := context.Background()
		setup := func(t *testing.T) *dag.Store {
			s := o.open(t, newClock(testStart).Now)
			if _, err := s.AddFeature(ctx, dag.FeatureParams{Name: "auth"}); err != nil {
				t.Fatal(err)
			}
			mustAdd(t, s,
				dag.AddParams{ID: "root"},
				dag.AddParams{ID: "a", ParentID: "root"},
				dag.AddParams{ID: "b", ParentID: "root", BlockedBy: []string{"a"}},
				dag.AddParams{ID: "c", BlockedBy: []string{"b"}},
				dag.AddParams{ID: "d"},
				dag.AddParams{ID: "done"},
			)
			if _, err := s.Claim(ctx, loop.ClaimParams{TaskID: "done", Agent: "ag"}); err != nil {
				t.Fatal(err)
			}
			if err := s.Complete(ctx, loop.MoveParams{TaskID: "done", Message: ""}); err != nil {
				t.Fatal(err)
			}
			return s
		}
		var te *loop.TransitionError
		tests := []struct {
			name    string
			call    func(s *dag.Store) error
			want    error // checked with errors.Is, unless wantAs
			wantAs  any
			mention string
		}{
			{"cycle a<-c closes a->b->c", func(s *dag.Store) error { return s.AddDependency(ctx, "a", "c") }, dag.ErrCycle, nil, "c"},
			{"self dependency", func(s *dag.Store) error { return s.AddDependency(ctx, "d", "d") }, dag.ErrCycle, nil, "d"},
			{"child blocked by its parent", func(s *dag.Store) error { return s.AddDependency(ctx, "a", "root") }, dag.ErrCycle, nil, "root"},
			{"dependency on unknown task", func(s *dag.Store) error { return s.AddDependency(ctx, "d", "zz") }, loop.ErrNotFound, nil, "zz"},
			{"remove missing dependency", func(s *dag.Store) error { return s.RemoveDependency(ctx, "d", "a") }, dag.ErrNoDependency, nil, "d"},
			{"add with unknown parent", func(s *dag.Store) error {
				_, err := s.Add(ctx, dag.AddParams{Title: "x", ParentID: "nope"})
				return err
			}, loop.ErrNotFound, nil, "nope"},
			{"add with unknown blocker", func(s *dag.Store) error {
				_, err := s.Add(ctx, dag.AddParams{Title: "x", BlockedBy: []string{"d", "nope"}})
				return err
			}, loop.ErrNotFound, nil, "nope"},
			{"add blocked by its own parent", func(s *dag.Store) error {
				_, err := s.Add(ctx, dag.AddParams{Title: "x", ParentID: "root", BlockedBy: []string{"root"}})
				return err
			}, dag.ErrCycle, nil, "root"},
			{"add duplicate id", func(s *dag.Store) error { _, err := s.Add(ctx, dag.AddParams{ID: "a", Title: "x"}); return err }, dag.ErrDuplicateID, nil, "a"},
			{"add unknown feature", func(s *dag.Store) error {
				_, err := s.Add(ctx, dag.AddParams{Title: "x", Feature: "billing"})
				return err
			}, loop.ErrFeatureNotFound, nil, "billing"},
			{"add under a done parent", func(s *dag.Store) error {
				_, err := s.Add(ctx, dag.AddParams{Title: "x", ParentID: "done"})
				return err
			}, nil, nil, "done"},
			{"add blank title", func(s *dag.Store) error { _, err := s.Add(ctx, dag.AddParams{Title: "  "}); return err }, nil, nil, "title"},
			{"add id with a space", func(s *dag.Store) error { _, err := s.Add(ctx, dag.AddParams{ID: "a b", Title: "x"}); return err }, nil, nil, "a b"},
			// An id names git branches (ralph/task/<id>): 300 bytes would
			// stop every --workers build with a ref too long.
			{"add id too long", func(s *dag.Store) error {
				_, err := s.Add(ctx, dag.AddParams{ID: strings.Repeat("x", 300), Title: "x"})
				return err
			}, nil, nil, "is 300 bytes long: ids are at most 80 bytes"},
			{"add id of 81 bytes", func(s *dag.Store) error {
				_, err := s.Add(ctx, dag.AddParams{ID: strings.Repeat("é", 40) + "x", Title: "x"})
				return err
			}, nil, nil, "is 81 bytes long"},
			{"add id not UTF-8", func(s *dag.Store) error { _, err := s.Add(ctx, dag.AddParams{ID: "a\xffb", Title: "x"}); return err }, nil, nil, "not UTF-8"},
			{"import with an id too long", func(s *dag.Store) error {
				_, err := s.Import(ctx, []dag.ImportTask{{Line: 1, ID: "n1", Title: "n1"}, {Line: 2, ID: strings.Repeat("y", 300), Title: "n2"}})
				return err
			}, nil, nil, "line 2: dag: task id"},
			{"complete a pending task", func(s *dag.Store) error { return s.Complete(ctx, loop.MoveParams{TaskID: "d", Message: ""}) }, nil, &te, "d"},
			{"claim a done task", func(s *dag.Store) error {
				_, err := s.Claim(ctx, loop.ClaimParams{TaskID: "done", Agent: "ag"})
				return err
			}, loop.ErrNotReady, &te, "is done"},
			{"claim a task with an open blocker", func(s *dag.Store) error {
				_, err := s.Claim(ctx, loop.ClaimParams{TaskID: "c", Agent: "ag"})
				return err
			}, loop.ErrNotReady, nil, "b"},
			{"block a done task", func(s *dag.Store) error { return s.Block(ctx, loop.MoveParams{TaskID: "done", Message: "r"}) }, nil, &te, "done"},
			{"unblock a pending task", func(s *dag.Store) error { return s.Unblock(ctx, loop.MoveParams{TaskID: "d"}) }, nil, &te, "d"},
			{"reset a pending task", func(s *dag.Store) error { return s.Reset(ctx, loop.MoveParams{TaskID: "d"}) }, nil, &te, "d"},
			{"fail unknown task", func(s *dag.Store) error { return s.Fail(ctx, loop.MoveParams{TaskID: "zz", Message: "r"}) }, loop.ErrNotFound, nil, "zz"},
			{"duplicate feature", func(s *dag.Store) error { _, err := s.AddFeature(ctx, dag.FeatureParams{Name: "auth"}); return err }, dag.ErrFeatureExists, nil, "auth"},
			{"feature name with a slash", func(s *dag.Store) error {
				_, err := s.AddFeature(ctx, dag.FeatureParams{Name: "a/b"})
				return err
			}, nil, nil, "a/b"},
			{"bad verdict", func(s *dag.Store) error { return s.SetVerification(ctx, "d", "maybe") }, nil, nil, "maybe"},
			{"import with a missing parent", func(s *dag.Store) error {
				_, err := s.Import(ctx, []dag.ImportTask{{Line: 1, ID: "n1", Title: "n1"}, {Line: 2, ID: "n2", Title: "n2", ParentID: "t-99"}})
				return err
			}, loop.ErrNotFound, nil, "line 2: task n2: parent t-99 does not exist"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := setup(t)
				before := dag.Dump(t, s)
				err := tt.call(s)
				switch {
				case err == nil:
					t.Fatalf("succeeded, want an error")
				case tt.wantAs != nil && !errors.As(err, tt.wantAs):
					t.Errorf("error %v (%T), want %T", err, err, tt.wantAs)
				case tt.want != nil && !errors.Is(err, tt.want):
					t.Errorf("error %v, want %v", err, tt.want)
				}
				if err != nil && !strings.Contains(err.Error(), tt.mention) {
					t.Errorf("error %q does not mention %q", err, tt.mention)
				}
				if diff := cmp.Diff(before, dag.Dump(t, s)); diff != "" {
					t.Errorf("database changed (-before +after):\n%s", diff)
				}
				dag.CheckCounts(t, s)
			})
		}
	})
}

// A commit by another process (here: another Store on the plan: on the
// file, or on the server) changes the token; nothing else does.
func TestChangeWatcher(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		a := o.open(t, nil)
		b := o.again(t, a, nil)
		mustAdd(t, a, dag.AddParams{ID: "x"})
		tok := settled(t, a)
		if _, err := b.Ready(t.Context(), loop.Scope{}, 10); err != nil { // a read changes nothing
			t.Fatal(err)
		}
		if changed, err := a.WaitChange(t.Context(), tok, 200*time.Millisecond); changed || err != nil {
			t.Fatalf("WaitChange after a read = %v, %v; want no change", changed, err)
		}
		added := make(chan error)
		go func() {
			time.Sleep(100 * time.Millisecond)
			_, err := b.Add(t.Context(), dag.AddParams{ID: "y", Title: "y"})
			added <- err
		}()
		start := time.Now()
		changed, err := a.WaitChange(t.Context(), tok, 10*time.Second)
		if !changed || err != nil || time.Since(start) > 5*time.Second {
			t.Errorf("WaitChange after another store's commit = %v, %v after %v", changed, err, time.Since(start))
		}
		if err := <-added; err != nil {
			t.Errorf("Add(y): %v", err)
		}
	})
}

// settled returns a change token of s from which a wait ends by a
// change only: the first wait of a store on a server may end at once (it
// starts listening then, and changes before it went unheard).
func settled(t *testing.T, s *dag.Store) string {
	t.Helper()
	for {
		tok, err := s.ChangeToken(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		changed, err := s.WaitChange(t.Context(), tok, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if !changed {
			return tok
		}
	}
}

func TestPlanSettingRecordedOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := t.Context()
		s := o.open(t, nil)
		if _, ok, err := s.PlanSetting(ctx, "integration_branch"); err != nil || ok {
			t.Fatalf("PlanSetting before any: ok %v, err %v; want none", ok, err)
		}
		got, err := s.RecordPlanSetting(ctx, "integration_branch", "ralph/integration")
		if err != nil || got != "ralph/integration" {
			t.Fatalf("RecordPlanSetting = %q, %v", got, err)
		}
		got, err = s.RecordPlanSetting(ctx, "integration_branch", "other")
		if err != nil || got != "ralph/integration" {
			t.Fatalf("second RecordPlanSetting = %q, %v; want the first value kept", got, err)
		}
		v, ok, err := s.PlanSetting(ctx, "integration_branch")
		if err != nil || !ok || v != "ralph/integration" {
			t.Fatalf("PlanSetting = %q, %v, %v", v, ok, err)
		}
	})
}

func TestReceiptWorker(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := t.Context()
		s := o.open(t, nil)
		if err := s.RecordReceipt(ctx, loop.Receipt{Session: "s", Iteration: 1, Worker: "w3"}); err != nil {
			t.Fatal(err)
		}
		rs, err := s.Receipts(ctx, 1)
		if err != nil || len(rs) != 1 || rs[0].Worker != "w3" {
			t.Fatalf("Receipts = %+v, %v; want worker w3", rs, err)
		}
	})
}

// TestGuardedWritesRecoverFirst covers the claims and completions that
// check for expired leases inside their first statement: with a lease
// expired, they still recover it before doing their work, in the same
// transaction.
func TestGuardedWritesRecoverFirst(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		tests := []struct {
			name string
			// do runs once a's lease has expired and b is still held.
			do         func(ctx context.Context, s *dag.Store) error
			wantStatus map[string]loop.Status
		}{
			{
				name: "complete another task",
				do: func(ctx context.Context, s *dag.Store) error {
					return s.Complete(ctx, loop.MoveParams{TaskID: "b", Message: "ok"})
				},
				wantStatus: map[string]loop.Status{"a": loop.StatusPending, "b": loop.StatusDone, "c": loop.StatusPending},
			},
			{
				name: "complete the expired task",
				do: func(ctx context.Context, s *dag.Store) error {
					err := s.Complete(ctx, loop.MoveParams{TaskID: "a", Message: "late"})
					var te *loop.TransitionError
					if !errors.As(err, &te) || te.From != loop.StatusPending {
						return fmt.Errorf("Complete(a) = %v, want a TransitionError from pending", err)
					}
					return nil
				},
				wantStatus: map[string]loop.Status{"a": loop.StatusPending, "b": loop.StatusInProgress, "c": loop.StatusPending},
			},
			{
				name: "claim the first ready task",
				do: func(ctx context.Context, s *dag.Store) error {
					task, err := s.Claim(ctx, loop.ClaimParams{Agent: "agent-new"})
					if err == nil && task.ID != "a" {
						err = fmt.Errorf("claimed %s, want a (recovered, first in order)", task.ID)
					}
					return err
				},
				wantStatus: map[string]loop.Status{"a": loop.StatusInProgress, "b": loop.StatusInProgress, "c": loop.StatusPending},
			},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				clk := newClock(testStart)
				s := o.open(t, clk.Now)
				mustAdd(t, s, dag.AddParams{ID: "a"}, dag.AddParams{ID: "b"}, dag.AddParams{ID: "c"})
				for _, c := range []struct {
					id    string
					lease time.Duration
				}{{"a", time.Minute}, {"b", time.Hour}} {
					if _, err := s.Claim(t.Context(), loop.ClaimParams{TaskID: c.id, Agent: "agent-" + c.id, Lease: c.lease}); err != nil {
						t.Fatal(err)
					}
				}
				clk.Advance(2 * time.Minute)
				if err := tt.do(t.Context(), s); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.wantStatus, statuses(t, s)); diff != "" {
					t.Errorf("statuses (-want +got):\n%s", diff)
				}
				logs, err := s.Logs(t.Context(), "a")
				if err != nil {
					t.Fatal(err)
				}
				// The claim, then its recovery before anything else.
				if len(logs) < 2 || logs[0].Kind != loop.LogClaim || logs[1].Kind != loop.LogLeaseExpired {
					t.Errorf("logs of a = %+v, want the claim, then a lease-expired entry", logs)
				}
				dag.CheckCounts(t, s)
			})
		}
	})
}

// TestHistoryInTimeOrder: two machines whose clocks disagree write one
// task's history; read in order, it is in time order too: an entry is
// never stamped earlier than the one before it.
func TestHistoryInTimeOrder(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := context.Background()
		ahead := o.open(t, newClock(testStart.Add(time.Hour)).Now)
		behind := o.again(t, ahead, newClock(testStart).Now)
		mustAdd(t, ahead, dag.AddParams{ID: "a"})
		if _, err := ahead.Claim(ctx, loop.ClaimParams{TaskID: "a", Agent: "ag"}); err != nil {
			t.Fatal(err)
		}
		if err := behind.Complete(ctx, loop.MoveParams{TaskID: "a", Message: "done"}); err != nil {
			t.Fatal(err)
		}
		logs, err := behind.Logs(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if len(logs) < 2 {
			t.Fatalf("history of a: %+v, want claimed, done", logs)
		}
		for i := 1; i < len(logs); i++ {
			if logs[i].At.Before(logs[i-1].At) {
				t.Errorf("entry %d (%s at %v) is earlier than entry %d (%s at %v)", i, logs[i].Kind, logs[i].At, i-1, logs[i-1].Kind, logs[i-1].At)
			}
		}
	})
}

// TestReadLeaseLook: a read skips its look for expired claims (a round
// trip on a server) for a moment after a look that found none, but never
// past the earliest lease that look saw nor longer than that moment; an
// explicit Recover always looks.
func TestReadLeaseLook(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		ctx := context.Background()
		clkA, clkB := newClock(testStart), newClock(testStart)
		a := o.open(t, clkA.Now)
		b := o.again(t, a, clkB.Now)
		advance := func(d time.Duration) { clkA.Advance(d); clkB.Advance(d) }
		status := func(id string) loop.Status {
			t.Helper()
			task, err := a.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return task.Status
		}
		claim := func(s *dag.Store, id string, lease time.Duration) {
			t.Helper()
			if _, err := s.Claim(ctx, loop.ClaimParams{TaskID: id, Agent: "ag-" + id, Lease: lease}); err != nil {
				t.Fatal(err)
			}
		}
		mustAdd(t, a, dag.AddParams{ID: "x"}, dag.AddParams{ID: "y"}, dag.AddParams{ID: "z"})

		// Another machine's claim made after a's look, with a lease shorter
		// than the moment: a sees it expire once the moment has passed.
		status("x") // a looks: no claim
		claim(b, "y", time.Millisecond)
		advance(dag.LeaseLookFor + time.Millisecond)
		if got := status("y"); got != loop.StatusPending {
			t.Errorf("y, whose lease expired %v ago, is %s after a read; want pending", dag.LeaseLookFor, got)
		}

		// A lease the look saw bounds it: x's expires before the moment ends.
		claim(a, "x", dag.LeaseLookFor/2)
		status("z") // a looks: x's lease is the earliest
		advance(dag.LeaseLookFor/2 + time.Millisecond)
		if got := status("x"); got != loop.StatusPending {
			t.Errorf("x, whose lease expired after the look that saw it, is %s after a read; want pending", got)
		}

		// Recover looks whatever a read saw a moment ago.
		status("z")
		claim(b, "z", time.Millisecond)
		advance(2 * time.Millisecond)
		ids, err := a.Recover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"z"}, ids); diff != "" {
			t.Errorf("Recover (-want +got):\n%s", diff)
		}
	})
}
