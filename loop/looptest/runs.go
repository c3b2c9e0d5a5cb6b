package looptest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
)

// TestRunRecorder runs the conformance subtests of loop.RunRecorder
// against stores from newStore, which must implement it. Beyond
// loop.RunRecorder's doc the suite expects the store's clock (the now
// given to newStore) to stamp StartedAt and EndedAt, to the microsecond.
func TestRunRecorder(t *testing.T, newStore StoreFactory) {
	t.Helper()
	tests := []struct {
		name string
		run  func(*testing.T, StoreFactory)
	}{
		{"BeginEnd", testRunBeginEnd},
		{"EndTwice", testRunEndTwice},
		{"NoSuchRun", testRunNoSuch},
		{"BadKindAndEnd", testRunBadInput},
		{"DeadHolder", testRunDeadHolder},
		{"CancelledContext", testRunCancelled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, newStore) })
	}
}

func runRecorder(t *testing.T, newStore StoreFactory) (loop.RunRecorder, *Clock) {
	t.Helper()
	clock := NewClock(suiteStart)
	s := newStore(t, nil, clock.Now)
	rr, ok := s.(loop.RunRecorder)
	if !ok {
		t.Fatalf("%T does not implement loop.RunRecorder", s)
	}
	return rr, clock
}

func mustBegin(t *testing.T, rr loop.RunRecorder, r loop.RunRecord) int64 {
	t.Helper()
	id, err := rr.BeginRun(t.Context(), r)
	if err != nil {
		t.Fatalf("BeginRun(%v): %v", r.Kind, err)
	}
	return id
}

func mustRuns(t *testing.T, rr loop.RunRecorder, n int) []loop.RunRecord {
	t.Helper()
	runs, err := rr.Runs(t.Context(), n)
	if err != nil {
		t.Fatalf("Runs(%d): %v", n, err)
	}
	return runs
}

func intp(n int) *int { return &n }

func testRunBeginEnd(t *testing.T, newStore StoreFactory) {
	rr, clock := runRecorder(t, newStore)
	h := loop.Holder{Host: "host-a", PID: 4242, Start: 77}
	// The caller's times, outcome and end fields are the store's to set;
	// its version is kept.
	const version = "v1.2.3 (commit 0123456789abcdef0123456789abcdef01234567, modified, go1.26.0)"
	b := mustBegin(t, rr, loop.RunRecord{ID: 99, Kind: loop.RunKindBuild, Holder: h, StartedAt: suiteStart.Add(-time.Hour),
		Outcome: loop.OutcomeComplete, ExitCode: intp(0), Done: 5, Version: version})
	clock.Advance(time.Minute)
	p := mustBegin(t, rr, loop.RunRecord{Kind: loop.RunKindPlan, Holder: h})
	if p <= b {
		t.Fatalf("ids %d then %d: want increasing", b, p)
	}
	clock.Advance(time.Minute)
	end := loop.RunEnd{Outcome: loop.OutcomeTestGateFailed, ExitCode: 3, Done: 2, Failed: 1, Remaining: 4,
		CostUSD: 0.25, Agents: 3, AgentNames: []string{"claude", "codex"}, IntegrationTip: "0123456789abcdef0123456789abcdef01234567"}
	if err := rr.EndRun(t.Context(), b, end); err != nil {
		t.Fatalf("EndRun: %v", err)
	}
	want := []loop.RunRecord{
		{ID: p, Kind: loop.RunKindPlan, Holder: h, StartedAt: suiteStart.Add(time.Minute), Outcome: loop.RunRunning},
		{ID: b, Kind: loop.RunKindBuild, Holder: h, StartedAt: suiteStart, EndedAt: suiteStart.Add(2 * time.Minute),
			Outcome: loop.OutcomeTestGateFailed, ExitCode: intp(3), Done: 2, Failed: 1, Remaining: 4, CostUSD: 0.25, Agents: 3,
			AgentNames: []string{"claude", "codex"}, IntegrationTip: end.IntegrationTip, Version: version},
	}
	if diff := cmp.Diff(want, mustRuns(t, rr, 0)); diff != "" {
		t.Errorf("Runs(0) (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[:1], mustRuns(t, rr, 1)); diff != "" {
		t.Errorf("Runs(1) (-want +got):\n%s", diff)
	}
	if got := mustRuns(t, rr, 0)[0]; !got.Running() || got.Settled().Outcome != loop.RunRunning {
		t.Errorf("a run whose holder runs on another host = %v, settled %v; want running", got.Outcome, got.Settled().Outcome)
	}
}

func testRunEndTwice(t *testing.T, newStore StoreFactory) {
	rr, clock := runRecorder(t, newStore)
	id := mustBegin(t, rr, loop.RunRecord{Kind: loop.RunKindPrompt, Holder: loop.ThisProcess()})
	first := loop.RunEnd{Outcome: loop.OutcomeCancelled, ExitCode: 130, Agents: 1, CostUSD: 0.5}
	if err := rr.EndRun(t.Context(), id, first); err != nil {
		t.Fatalf("EndRun: %v", err)
	}
	clock.Advance(time.Minute)
	if err := rr.EndRun(t.Context(), id, loop.RunEnd{Outcome: loop.OutcomeComplete}); err != nil {
		t.Fatalf("EndRun again: %v", err)
	}
	got := mustRuns(t, rr, 0)
	if len(got) != 1 || got[0].Outcome != loop.OutcomeCancelled || got[0].ExitCode == nil || *got[0].ExitCode != 130 ||
		!got[0].EndedAt.Equal(suiteStart) || got[0].CostUSD != 0.5 {
		t.Errorf("after a second end: %+v; want the first end kept", got)
	}
}

func testRunNoSuch(t *testing.T, newStore StoreFactory) {
	rr, _ := runRecorder(t, newStore)
	if runs := mustRuns(t, rr, 20); len(runs) != 0 {
		t.Errorf("Runs of a new store = %v; want none", runs)
	}
	err := rr.EndRun(t.Context(), 12345, loop.RunEnd{Outcome: loop.OutcomeComplete})
	if !errors.Is(err, loop.ErrNoRun) {
		t.Errorf("EndRun of no run = %v; want ErrNoRun", err)
	}
}

func testRunBadInput(t *testing.T, newStore StoreFactory) {
	rr, _ := runRecorder(t, newStore)
	if _, err := rr.BeginRun(t.Context(), loop.RunRecord{Kind: "serve"}); err == nil {
		t.Error("BeginRun of kind serve: no error")
	}
	id := mustBegin(t, rr, loop.RunRecord{Kind: loop.RunKindBuild})
	for _, o := range []loop.Outcome{"", loop.RunRunning, loop.RunDied} {
		if err := rr.EndRun(t.Context(), id, loop.RunEnd{Outcome: o}); err == nil {
			t.Errorf("EndRun with outcome %q: no error", o)
		}
	}
	if got := mustRuns(t, rr, 0); len(got) != 1 || !got[0].Running() {
		t.Errorf("after refused ends: %+v; want one run, running", got)
	}
}

func testRunDeadHolder(t *testing.T, newStore StoreFactory) {
	me := loop.ThisProcess()
	if me.Liveness() != loop.HolderAlive {
		t.Skip("this system cannot tell whether a process runs")
	}
	rr, _ := runRecorder(t, newStore)
	// The pid ran, with another start time: a reused pid is a dead holder.
	dead := me
	dead.Start++
	d := mustBegin(t, rr, loop.RunRecord{Kind: loop.RunKindBuild, Holder: dead})
	a := mustBegin(t, rr, loop.RunRecord{Kind: loop.RunKindBuild, Holder: me})
	runs := mustRuns(t, rr, 0)
	if len(runs) != 2 || runs[0].ID != a || runs[1].ID != d {
		t.Fatalf("Runs = %+v; want runs %d, %d", runs, a, d)
	}
	if got := runs[0].Settled(); got.Outcome != loop.RunRunning {
		t.Errorf("run of a live holder settles as %q; want running", got.Outcome)
	}
	if got := runs[1].Settled(); got.Outcome != loop.RunDied || got.ExitCode != nil || !got.EndedAt.IsZero() {
		t.Errorf("run of a dead holder settles as %q (exit %v, ended %v); want died, no exit code, no end", got.Outcome, got.ExitCode, got.EndedAt)
	}
	if runs[1].Holder != dead {
		t.Errorf("holder stored as %v; want %v", runs[1].Holder, dead)
	}
}

func testRunCancelled(t *testing.T, newStore StoreFactory) {
	rr, _ := runRecorder(t, newStore)
	id := mustBegin(t, rr, loop.RunRecord{Kind: loop.RunKindBuild})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := rr.BeginRun(ctx, loop.RunRecord{Kind: loop.RunKindBuild}); !errors.Is(err, context.Canceled) {
		t.Errorf("BeginRun, cancelled: %v", err)
	}
	if err := rr.EndRun(ctx, id, loop.RunEnd{Outcome: loop.OutcomeComplete}); !errors.Is(err, context.Canceled) {
		t.Errorf("EndRun, cancelled: %v", err)
	}
	if _, err := rr.Runs(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Runs, cancelled: %v", err)
	}
	if got := mustRuns(t, rr, 0); len(got) != 1 || !got[0].Running() {
		t.Errorf("after cancelled calls: %+v; want one run, running", got)
	}
}
