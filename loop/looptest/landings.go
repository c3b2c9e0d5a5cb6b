package looptest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
)

// TestLandingStore runs the conformance subtests of loop.LandingStore
// against stores from newStore, which must implement it (and seed the
// tasks, as for TestTaskStore). Beyond loop.LandingStore's doc the suite
// expects: a task that AcceptTip reopens has a LogReopen entry whose
// message is the reason given and whose actor is the person who accepted;
// a done parent reopened with it is logged LogReopen too; a dependent of a
// reopened task is no longer ready.
func TestLandingStore(t *testing.T, newStore StoreFactory) {
	t.Helper()
	tests := []struct {
		name string
		run  func(*testing.T, StoreFactory)
	}{
		{"RecordConfirm", testLandingRecordConfirm},
		{"OwnParentRefused", testLandingOwnParent},
		{"Void", testLandingVoid},
		{"Query", testLandingQuery},
		{"TipCompareAndSwap", testLandingTipSwap},
		{"ConfirmOutOfOrder", testLandingConfirmOutOfOrder},
		{"AcceptTipReopens", testLandingAcceptTip},
		{"ConcurrentTipMoves", testLandingConcurrentTip},
		{"CancelledContext", testLandingCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newStore) })
	}
}

const landBranch = "ralph/integration"

func landingStore(t *testing.T, newStore StoreFactory, seeds ...Seed) (loop.TaskStore, loop.LandingStore) {
	t.Helper()
	clock := NewClock(suiteStart)
	s := newStore(t, seeds, clock.Now)
	ls, ok := s.(loop.LandingStore)
	if !ok {
		t.Fatalf("%T does not implement loop.LandingStore", s)
	}
	return s, ls
}

func mustLand(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// landingView is what the suite compares of a landing (not its times).
type landingView struct {
	Commit, Parent, TaskID string
	Generation             int64
	Completions            int
	State                  loop.LandingState
}

func viewLandings(ls []loop.Landing) []landingView {
	out := make([]landingView, len(ls))
	for i, l := range ls {
		out[i] = landingView{l.Commit, l.Parent, l.TaskID, l.Generation, l.Completions, l.State}
	}
	return out
}

func testLandingRecordConfirm(t *testing.T, newStore StoreFactory) {
	ctx := t.Context()
	_, ls := landingStore(t, newStore, Seed{ID: "a", Title: "a", Priority: 2})
	if _, ok, err := ls.BranchTip(ctx, landBranch); err != nil || ok {
		t.Fatalf("BranchTip of a new plan: ok %v, %v; want none", ok, err)
	}
	now, err := ls.MoveBranchTip(ctx, landBranch, "", "c0")
	if err != nil || now != "c0" {
		t.Fatalf("MoveBranchTip from none = %q, %v; want c0", now, err)
	}
	l := loop.Landing{Branch: landBranch, Commit: "c1", Parent: "c0", TaskID: "a", Generation: 3, Completions: 1}
	mustLand(t, ls.RecordLanding(ctx, l), "RecordLanding")
	mustLand(t, ls.RecordLanding(ctx, l), "RecordLanding again, the same")
	other := l
	other.TaskID = "b"
	if err := ls.RecordLanding(ctx, other); !errors.Is(err, loop.ErrLandingExists) {
		t.Errorf("RecordLanding of c1 for another task = %v; want ErrLandingExists", err)
	}
	got, err := ls.Landings(ctx, loop.LandingQuery{Branch: landBranch})
	mustLand(t, err, "Landings")
	want := []landingView{{"c1", "c0", "a", 3, 1, loop.LandingRecorded}}
	if diff := cmp.Diff(want, viewLandings(got)); diff != "" {
		t.Fatalf("after recording (-want +got):\n%s", diff)
	}
	if got[0].Branch != landBranch || got[0].RecordedAt.IsZero() {
		t.Errorf("landing %+v: want its branch and the time it was recorded", got[0])
	}
	if tip, _, _ := ls.BranchTip(ctx, landBranch); tip != "c0" {
		t.Errorf("tip %q after recording; want c0 until the landing is confirmed", tip)
	}
	mustLand(t, ls.ConfirmLanding(ctx, landBranch, "c1"), "ConfirmLanding")
	mustLand(t, ls.ConfirmLanding(ctx, landBranch, "c1"), "ConfirmLanding again")
	got, _ = ls.Landings(ctx, loop.LandingQuery{Branch: landBranch, Commit: "c1"})
	if len(got) != 1 || got[0].State != loop.LandingLanded {
		t.Errorf("after confirming: %+v; want landed", got)
	}
	if tip, ok, _ := ls.BranchTip(ctx, landBranch); !ok || tip != "c1" {
		t.Errorf("tip %q after confirming; want c1 (the landing's parent was the tip)", tip)
	}
	if err := ls.ConfirmLanding(ctx, landBranch, "nope"); !errors.Is(err, loop.ErrNoLanding) {
		t.Errorf("ConfirmLanding of an unknown commit = %v; want ErrNoLanding", err)
	}
	if err := ls.ConfirmLanding(ctx, "other/branch", "c1"); !errors.Is(err, loop.ErrNoLanding) {
		t.Errorf("ConfirmLanding on another branch = %v; want ErrNoLanding", err)
	}
}

// testLandingOwnParent: a landing whose commit is its parent — a replay
// that changed nothing, the work on the tip already — moves no branch and
// is refused, with an error that is not ErrLandingExists, recording
// nothing; the landing already recorded for that commit stays as it was.
func testLandingOwnParent(t *testing.T, newStore StoreFactory) {
	ctx := t.Context()
	_, ls := landingStore(t, newStore, Seed{ID: "a", Title: "a", Priority: 2}, Seed{ID: "b", Title: "b", Priority: 2})
	mustLand(t, ls.RecordLanding(ctx, loop.Landing{Branch: landBranch, Commit: "c1", Parent: "c0", TaskID: "a", Generation: 1}), "record c1")
	for _, l := range []loop.Landing{
		{Branch: landBranch, Commit: "c2", Parent: "c2", TaskID: "b", Generation: 1},
		{Branch: landBranch, Commit: "c1", Parent: "c1", TaskID: "b", Generation: 1},
		{Branch: landBranch, Commit: "c1", Parent: "c1", TaskID: "a", Generation: 1},
	} {
		err := ls.RecordLanding(ctx, l)
		if err == nil || errors.Is(err, loop.ErrLandingExists) {
			t.Errorf("RecordLanding of %s on itself for %s = %v; want an error that is not ErrLandingExists", l.Commit, l.TaskID, err)
		}
	}
	got, err := ls.Landings(ctx, loop.LandingQuery{Branch: landBranch})
	mustLand(t, err, "Landings")
	want := []landingView{{"c1", "c0", "a", 1, 0, loop.LandingRecorded}}
	if diff := cmp.Diff(want, viewLandings(got)); diff != "" {
		t.Errorf("landings after the refusals (-want +got):\n%s", diff)
	}
}

func testLandingVoid(t *testing.T, newStore StoreFactory) {
	ctx := t.Context()
	_, ls := landingStore(t, newStore, Seed{ID: "a", Title: "a", Priority: 2})
	ls.MoveBranchTip(ctx, landBranch, "", "c0")
	mustLand(t, ls.RecordLanding(ctx, loop.Landing{Branch: landBranch, Commit: "c1", Parent: "c0", TaskID: "a", Generation: 1}), "record c1")
	mustLand(t, ls.VoidLanding(ctx, landBranch, "c1"), "VoidLanding")
	if err := ls.ConfirmLanding(ctx, landBranch, "c1"); !errors.Is(err, loop.ErrNoLanding) {
		t.Errorf("ConfirmLanding of a void landing = %v; want ErrNoLanding", err)
	}
	if tip, _, _ := ls.BranchTip(ctx, landBranch); tip != "c0" {
		t.Errorf("tip %q; a void landing moves nothing", tip)
	}
	if err := ls.VoidLanding(ctx, landBranch, "nope"); !errors.Is(err, loop.ErrNoLanding) {
		t.Errorf("VoidLanding of an unknown commit = %v; want ErrNoLanding", err)
	}
	// A landed landing is not made void.
	mustLand(t, ls.RecordLanding(ctx, loop.Landing{Branch: landBranch, Commit: "c2", Parent: "c0", TaskID: "a", Generation: 2}), "record c2")
	mustLand(t, ls.ConfirmLanding(ctx, landBranch, "c2"), "confirm c2")
	mustLand(t, ls.VoidLanding(ctx, landBranch, "c2"), "VoidLanding of a landed one")
	got, _ := ls.Landings(ctx, loop.LandingQuery{Branch: landBranch})
	if diff := cmp.Diff([]loop.LandingState{loop.LandingVoid, loop.LandingLanded}, states(got)); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
}

func states(ls []loop.Landing) []loop.LandingState {
	var out []loop.LandingState
	for _, l := range ls {
		out = append(out, l.State)
	}
	return out
}

func testLandingQuery(t *testing.T, newStore StoreFactory) {
	ctx := t.Context()
	_, ls := landingStore(t, newStore, Seed{ID: "a", Title: "a", Priority: 2}, Seed{ID: "b", Title: "b", Priority: 2})
	for i, l := range []loop.Landing{
		{Commit: "c1", Parent: "c0", TaskID: "a", Generation: 1},
		{Commit: "c2", Parent: "c1", TaskID: "b", Generation: 1},
		{Commit: "c3", Parent: "c2", TaskID: "a", Generation: 2, Completions: 1},
		{Commit: "x1", Parent: "x0", TaskID: "a", Generation: 1, Branch: "other"},
	} {
		if l.Branch == "" {
			l.Branch = landBranch
		}
		mustLand(t, ls.RecordLanding(ctx, l), "record")
		if i == 0 {
			mustLand(t, ls.ConfirmLanding(ctx, landBranch, "c1"), "confirm c1")
		}
	}
	commits := func(q loop.LandingQuery) []string {
		got, err := ls.Landings(ctx, q)
		mustLand(t, err, "Landings")
		var out []string
		for _, l := range got {
			out = append(out, l.Commit)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    loop.LandingQuery
		want []string
	}{
		{"branch", loop.LandingQuery{Branch: landBranch}, []string{"c1", "c2", "c3"}},
		{"task", loop.LandingQuery{Branch: landBranch, TaskID: "a"}, []string{"c1", "c3"}},
		{"commit", loop.LandingQuery{Branch: landBranch, Commit: "c2"}, []string{"c2"}},
		{"states", loop.LandingQuery{Branch: landBranch, States: []loop.LandingState{loop.LandingRecorded}}, []string{"c2", "c3"}},
		{"task and state", loop.LandingQuery{Branch: landBranch, TaskID: "a", States: []loop.LandingState{loop.LandingLanded}}, []string{"c1"}},
		{"other branch", loop.LandingQuery{Branch: "other"}, []string{"x1"}},
		{"none", loop.LandingQuery{Branch: "none"}, nil},
	} {
		if diff := cmp.Diff(tc.want, commits(tc.q)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func testLandingTipSwap(t *testing.T, newStore StoreFactory) {
	ctx := t.Context()
	_, ls := landingStore(t, newStore)
	for _, step := range []struct{ old, new, want string }{
		{"", "c0", "c0"},
		{"", "x", "c0"},   // recorded already: not from none
		{"c9", "x", "c0"}, // not at c9
		{"c0", "c1", "c1"},
	} {
		got, err := ls.MoveBranchTip(ctx, landBranch, step.old, step.new)
		if err != nil || got != step.want {
			t.Errorf("MoveBranchTip(%q → %q) = %q, %v; want %q", step.old, step.new, got, err, step.want)
		}
	}
	if tip, _, _ := ls.BranchTip(ctx, "other"); tip != "" {
		t.Errorf("another branch's tip %q; want none", tip)
	}
}

// testLandingConfirmOutOfOrder: two processes land c1 then c2 (on c1), and
// confirm in the other order; the tip follows as far as the chain allows.
func testLandingConfirmOutOfOrder(t *testing.T, newStore StoreFactory) {
	ctx := t.Context()
	_, ls := landingStore(t, newStore, Seed{ID: "a", Title: "a", Priority: 2}, Seed{ID: "b", Title: "b", Priority: 2})
	ls.MoveBranchTip(ctx, landBranch, "", "c0")
	mustLand(t, ls.RecordLanding(ctx, loop.Landing{Branch: landBranch, Commit: "c1", Parent: "c0", TaskID: "a", Generation: 1}), "record c1")
	mustLand(t, ls.RecordLanding(ctx, loop.Landing{Branch: landBranch, Commit: "c2", Parent: "c1", TaskID: "b", Generation: 1}), "record c2")
	mustLand(t, ls.ConfirmLanding(ctx, landBranch, "c2"), "confirm c2")
	if tip, _, _ := ls.BranchTip(ctx, landBranch); tip != "c0" {
		t.Errorf("tip %q after confirming c2 first; want c0 (c2's parent is not the tip)", tip)
	}
	mustLand(t, ls.ConfirmLanding(ctx, landBranch, "c1"), "confirm c1")
	if tip, _, _ := ls.BranchTip(ctx, landBranch); tip != "c1" {
		t.Errorf("tip %q; want c1", tip)
	}
	mustLand(t, ls.ConfirmLanding(ctx, landBranch, "c2"), "confirm c2 again")
	if tip, _, _ := ls.BranchTip(ctx, landBranch); tip != "c2" {
		t.Errorf("tip %q after confirming c2 again; want c2", tip)
	}
}

func testLandingAcceptTip(t *testing.T, newStore StoreFactory) {
	ctx := t.Context()
	// p has children a and b; d waits for a; e waits for b; x is alone.
	seeds := []Seed{
		{ID: "p", Title: "p", Priority: 2},
		{ID: "a", Title: "a", Priority: 2, ParentID: "p"},
		{ID: "b", Title: "b", Priority: 2, ParentID: "p"},
		{ID: "d", Title: "d", Priority: 2, BlockedBy: []string{"a"}},
		{ID: "e", Title: "e", Priority: 2, BlockedBy: []string{"b"}},
		{ID: "x", Title: "x", Priority: 2},
	}
	s, ls := landingStore(t, newStore, seeds...)
	ls.MoveBranchTip(ctx, landBranch, "", "c0")
	agent := "agent-1"
	tip := "c0"
	for i, id := range []string{"a", "b", "x"} {
		task, err := s.Claim(ctx, loop.ClaimParams{TaskID: id, Agent: agent})
		mustLand(t, err, "claim "+id)
		c := "c" + string(rune('1'+i))
		mustLand(t, ls.RecordLanding(ctx, loop.Landing{Branch: landBranch, Commit: c, Parent: tip, TaskID: id, Generation: task.Generation}), "record")
		mustLand(t, ls.ConfirmLanding(ctx, landBranch, c), "confirm")
		mustLand(t, s.Complete(ctx, loop.MoveParams{TaskID: id, By: loop.Actor{Agent: agent, Generation: task.Generation}}), "complete "+id)
		tip = c
	}
	if got, _ := s.Get(ctx, "p"); got.Status != loop.StatusDone {
		t.Fatalf("parent p is %s after a and b; want done", got.Status)
	}
	// The branch lost c1 (a's) and c3 (x's). d, which waits for a, is
	// under way: it stays so.
	if _, err := s.Claim(ctx, loop.ClaimParams{TaskID: "d", Agent: agent}); err != nil {
		t.Fatalf("claim d: %v", err)
	}
	reopened, err := ls.AcceptTip(ctx, loop.AcceptTipParams{Branch: landBranch, Tip: "c9", Drop: []string{"c1", "c3", "unknown"},
		Reason: "its work is not on ralph/integration at c9", By: loop.Actor{Person: "user-alice"}})
	mustLand(t, err, "AcceptTip")
	if diff := cmp.Diff([]string{"a", "p", "x"}, reopened); diff != "" {
		t.Errorf("reopened (-want +got):\n%s", diff)
	}
	if tip, _, _ := ls.BranchTip(ctx, landBranch); tip != "c9" {
		t.Errorf("tip %q; want c9, accepted", tip)
	}
	got, _ := ls.Landings(ctx, loop.LandingQuery{Branch: landBranch})
	if diff := cmp.Diff([]loop.LandingState{loop.LandingDropped, loop.LandingLanded, loop.LandingDropped}, states(got)); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	for id, want := range map[string]loop.Status{"a": loop.StatusPending, "p": loop.StatusPending, "b": loop.StatusDone,
		"x": loop.StatusPending, "d": loop.StatusInProgress, "e": loop.StatusPending} {
		if got, _ := s.Get(ctx, id); got.Status != want {
			t.Errorf("%s is %s; want %s", id, got.Status, want)
		}
	}
	logs, _ := s.Logs(ctx, "a")
	last := logs[len(logs)-1]
	if last.Kind != loop.LogReopen || last.Message != "its work is not on ralph/integration at c9" || last.Actor != "user-alice" {
		t.Errorf("a's last entry %+v; want the reopen with the reason, by user-alice", last)
	}
	logs, _ = s.Logs(ctx, "p")
	if last := logs[len(logs)-1]; last.Kind != loop.LogReopen {
		t.Errorf("p's last entry %+v; want a reopen", last)
	}
	// e (blocker b done) is ready; a is ready again; d's blocker is not
	// done any more, so once released it is not ready.
	mustLand(t, s.Release(ctx, loop.MoveParams{TaskID: "d", By: loop.Actor{Agent: agent}}), "release d")
	ready, err := s.Ready(ctx, loop.Scope{}, 0)
	mustLand(t, err, "Ready")
	var ids []string
	for _, r := range ready {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	if diff := cmp.Diff([]string{"a", "e", "x"}, ids); diff != "" {
		t.Errorf("ready after the reopen (-want +got):\n%s", diff)
	}
	c, err := s.Counts(ctx, loop.Scope{})
	mustLand(t, err, "Counts")
	if c.Done != 1 || c.Pending != 5 {
		t.Errorf("counts %+v; want b done and five pending", c)
	}
}

// testLandingConcurrentTip: many processes move the tip from the same old
// one at once; exactly one wins.
func testLandingConcurrentTip(t *testing.T, newStore StoreFactory) {
	ctx := t.Context()
	_, ls := landingStore(t, newStore)
	ls.MoveBranchTip(ctx, landBranch, "", "c0")
	var wg sync.WaitGroup
	wins := make(chan string, 8)
	for i := range 8 {
		wg.Go(func() {
			want := "n" + string(rune('0'+i))
			got, err := ls.MoveBranchTip(ctx, landBranch, "c0", want)
			if err != nil {
				t.Error(err)
			}
			if got == want {
				wins <- want
			}
		})
	}
	wg.Wait()
	close(wins)
	var won []string
	for w := range wins {
		won = append(won, w)
	}
	tip, _, _ := ls.BranchTip(ctx, landBranch)
	if len(won) != 1 || tip != won[0] {
		t.Errorf("winners %v, tip %q; want exactly one", won, tip)
	}
}

func testLandingCancelled(t *testing.T, newStore StoreFactory) {
	_, ls := landingStore(t, newStore, Seed{ID: "a", Title: "a", Priority: 2})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := ls.RecordLanding(ctx, loop.Landing{Branch: landBranch, Commit: "c1", Parent: "c0", TaskID: "a"}); !errors.Is(err, context.Canceled) {
		t.Errorf("RecordLanding with a cancelled context = %v", err)
	}
	if _, err := ls.MoveBranchTip(ctx, landBranch, "", "c0"); !errors.Is(err, context.Canceled) {
		t.Errorf("MoveBranchTip with a cancelled context = %v", err)
	}
	got, err := ls.Landings(t.Context(), loop.LandingQuery{Branch: landBranch})
	if err != nil || len(got) != 0 {
		t.Errorf("after cancelled calls: %v, %v; want nothing recorded", got, err)
	}
	if _, ok, _ := ls.BranchTip(t.Context(), landBranch); ok {
		t.Error("a tip was recorded by a cancelled call")
	}
}
