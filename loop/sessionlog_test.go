package loop_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// The summary says what the session log promises: iterations, successes,
// failures, duration, exit reason and exit code.
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

// Runs started in the same second keep separate logs whose names stay in
// the session-YYYYMMDD-HHMMSS pattern: a taken name moves to the next free
// second, and no run overwrites another's log.
func TestSessionNamesDoNotCollide(t *testing.T) {
	start := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name                string
		sessionLog, rawLogs bool
		// advance is how far the clock moves before each run.
		advance []time.Duration
		want    []string
	}{
		{
			name: "session log and raw logs", sessionLog: true, rawLogs: true,
			advance: []time.Duration{0, 0, 0},
			want:    []string{"session-20261122-080000", "session-20261122-080001", "session-20261122-080002"},
		},
		{
			// The second run took 08:00:01, so the third, started then,
			// takes 08:00:02; the fourth, at 08:00:03, its own second.
			name: "a later run skips a second taken early", sessionLog: true, rawLogs: true,
			advance: []time.Duration{0, 0, time.Second, 2 * time.Second},
			want:    []string{"session-20261122-080000", "session-20261122-080001", "session-20261122-080002", "session-20261122-080003"},
		},
		{
			name: "session log only", sessionLog: true,
			advance: []time.Duration{0, 0},
			want:    []string{"session-20261122-080000", "session-20261122-080001"},
		},
		{
			name: "raw logs only", rawLogs: true,
			advance: []time.Duration{0, 0},
			want:    []string{"session-20261122-080000", "session-20261122-080001"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := looptest.NewClock(start)
			cfg := testConfig(t)
			cfg.Now, cfg.Session, cfg.SessionLog, cfg.RawLogs = clock.Now, "", tt.sessionLog, tt.rawLogs
			cfg.LogDir = filepath.Join(cfg.Root, ".ralph", "logs")
			var sessions []string
			for i, d := range tt.advance {
				clock.Advance(d)
				runner := looptest.NewFakeRunner(t).ThenFunc(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
					if req.LogPath != "" {
						if err := os.MkdirAll(filepath.Dir(req.LogPath), 0o755); err != nil {
							return loop.RunResult{}, err
						}
						if err := os.WriteFile(req.LogPath, []byte("{}\n"), 0o644); err != nil {
							return loop.RunResult{}, err
						}
					}
					return loop.RunResult{Text: done("a"), Class: loop.ClassSuccess}, nil
				})
				rep, err := loop.Run(t.Context(), cfg, newStore(t, loop.Task{ID: "a"}), runner)
				if err != nil {
					t.Fatal(err)
				}
				sessions = append(sessions, rep.Session)
				if tt.sessionLog {
					// Mark each log: a later run must not overwrite it.
					f, err := os.OpenFile(loop.SessionLogPath(cfg.LogDir, rep.Session), os.O_WRONLY|os.O_APPEND, 0)
					if err != nil {
						t.Fatal(err)
					}
					fmt.Fprintf(f, "run %d\n", i)
					f.Close()
				}
			}
			if diff := cmp.Diff(tt.want, sessions); diff != "" {
				t.Errorf("sessions (-want +got):\n%s", diff)
			}
			for i, name := range sessions {
				if tt.sessionLog {
					b, err := os.ReadFile(loop.SessionLogPath(cfg.LogDir, name))
					if err != nil {
						t.Fatal(err)
					}
					if want := fmt.Sprintf("run %d\n", i); !strings.HasSuffix(string(b), want) || strings.Count(string(b), "# ralph session") != 1 {
						t.Errorf("%s was overwritten or shared:\n%s", name, b)
					}
				}
				if tt.rawLogs {
					if _, err := os.Stat(filepath.Join(cfg.LogDir, name, "iter-1.ndjson")); err != nil {
						t.Errorf("raw log of %s: %v", name, err)
					}
				}
			}
		})
	}
}

// Runs started at once, in the same second, never get the same name.
func TestSessionNamesConcurrent(t *testing.T) {
	clock := looptest.NewClock(time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC))
	cfg := testConfig(t)
	cfg.Now, cfg.Session, cfg.SessionLog, cfg.RawLogs = clock.Now, "", true, true
	const runs = 6
	names := make(chan string, runs)
	var wg sync.WaitGroup
	for range runs {
		wg.Go(func() {
			rep, err := loop.Run(t.Context(), cfg, newStore(t), looptest.NewFakeRunner(t))
			if err != nil {
				t.Error(err)
			}
			names <- rep.Session
		})
	}
	wg.Wait()
	close(names)
	var got []string
	for n := range names {
		got = append(got, n)
	}
	slices.Sort(got)
	var want []string
	for i := range runs {
		want = append(want, fmt.Sprintf("session-20261122-08000%d", i))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sessions (-want +got):\n%s", diff)
	}
}
