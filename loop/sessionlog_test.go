package loop_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

func TestSessionLog(t *testing.T) {
	clock := looptest.NewClock(time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC))
	store := looptest.NewMemStore(clock.Now)
	if err := store.Add(loop.Task{ID: "a", Title: "Add login", Priority: 2}, loop.Task{ID: "b", Title: "Add logout", Priority: 2}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Now = clock.Now
	cfg.Session = ""
	cfg.SessionLog = true
	cfg.RawLogs = true
	cfg.MaxRetries = 0
	session := func(text string, cost float64, turns int) func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		return func(context.Context, loop.RunRequest) (loop.RunResult, error) {
			clock.Advance(90 * time.Second)
			r := looptest.Result(text)
			r.CostUSD, r.Turns, r.Model = cost, turns, "claude-sonnet-4-5"
			return r, nil
		}
	}
	runner := looptest.NewFakeRunner(t).
		ThenFunc(session(done("a"), 0.0125, 7)).
		ThenFunc(session("no sigil here", 0.5, 3))
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Session != "session-20261122-080000" {
		t.Errorf("session %q", rep.Session)
	}
	data, err := os.ReadFile(loop.SessionLogPath(cfg.Root+"/.ralph/logs", rep.Session))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "session.log", string(data))
	if _, err := os.Stat(cfg.Root + "/.ralph/logs/session-20261122-080000"); err != nil {
		t.Errorf("raw log directory: %v", err)
	}
}

// The summary says what DESIGN §7 lists.
func TestSessionLogSummaryFields(t *testing.T) {
	var b strings.Builder
	l := loop.NewSessionLog(&b)
	l.Observe(loop.Note{Kind: loop.NoteSessionEnd, Report: &loop.Report{Outcome: loop.OutcomeBlocked, Message: "blocked: 2 tasks remain but none is ready", Iterations: 3, Successes: 1, Failures: 2, Duration: time.Minute}})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, line := range strings.Split(b.String(), "\n") {
		if k, _, ok := strings.Cut(line, ": "); ok && !strings.HasPrefix(line, "#") && k != "started" && k != "mode" {
			fields = append(fields, line)
		}
	}
	want := []string{"iterations: 3", "successes: 1", "failures: 2", "duration: 1m0s", "cost: $0.0000",
		"outcome: blocked", "exit reason: blocked: 2 tasks remain but none is ready", "exit code: 6"}
	if diff := cmp.Diff(want, fields); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

// Two runs started in the same second keep separate logs.
func TestSessionNamesDoNotCollide(t *testing.T) {
	clock := looptest.NewClock(time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC))
	cfg := testConfig(t)
	cfg.Now, cfg.Session, cfg.SessionLog, cfg.RawLogs = clock.Now, "", true, true
	var sessions []string
	for range 3 {
		rep, err := loop.Run(t.Context(), cfg, newStore(t), looptest.NewFakeRunner(t))
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, rep.Session)
	}
	want := []string{"session-20261122-080000", "session-20261122-080000-2", "session-20261122-080000-3"}
	if diff := cmp.Diff(want, sessions); diff != "" {
		t.Errorf("sessions (-want +got):\n%s", diff)
	}
}
