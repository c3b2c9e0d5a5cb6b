package loop_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// recorder is an Observer keeping every note.
type recorder struct {
	mu    sync.Mutex
	notes []loop.Note
}

func (r *recorder) Observe(n loop.Note) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, n)
}

func (r *recorder) kind(k loop.NoteKind) []loop.Note {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []loop.Note
	for _, n := range r.notes {
		if n.Kind == k {
			out = append(out, n)
		}
	}
	return out
}

func TestUsageLimit(t *testing.T) {
	start := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC) // synctest's epoch is 2000; times below are offsets
	_ = start
	tests := []struct {
		name     string
		policy   loop.UsageLimitPolicy
		maxWait  time.Duration
		resetIn  time.Duration // 0: unknown reset time
		wantWait time.Duration // 0: no wait
		want     loop.Outcome
		runs     int
	}{
		{name: "waits until the reset and goes on", policy: loop.UsageLimitWait, resetIn: 42 * time.Minute,
			wantWait: 42 * time.Minute, want: loop.OutcomeComplete, runs: 2},
		{name: "unknown reset waits five minutes", policy: loop.UsageLimitWait,
			wantWait: 5 * time.Minute, want: loop.OutcomeComplete, runs: 2},
		{name: "a reset in the past waits one second", policy: loop.UsageLimitWait, resetIn: -time.Hour,
			wantWait: time.Second, want: loop.OutcomeComplete, runs: 2},
		{name: "stop policy exits 10", policy: loop.UsageLimitStop, resetIn: 42 * time.Minute,
			want: loop.OutcomeUsageLimit, runs: 1},
		{name: "a reset beyond max wait ends the run as stop would", policy: loop.UsageLimitWait, maxWait: time.Hour,
			resetIn: 2 * time.Hour, want: loop.OutcomeUsageLimit, runs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newStore(t, tasks("a")...)
				cfg := testConfig(t)
				cfg.OnUsageLimit = tt.policy
				cfg.MaxWait = tt.maxWait
				cfg.MaxIterations = 1 // a wait must not use up the only iteration
				cfg.RawLogs = true
				rec := &recorder{}
				cfg.Observer = rec
				var reset time.Time
				if tt.resetIn != 0 {
					reset = time.Now().Add(tt.resetIn)
				}
				runner := looptest.NewFakeRunner(t, looptest.UsageLimited(reset))
				if tt.runs > 1 {
					runner.Then(looptest.Result(done("a")))
				}
				began := time.Now()
				rep, err := loop.Run(t.Context(), cfg, store, runner)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Outcome != tt.want || runner.Calls() != tt.runs {
					t.Errorf("outcome %s after %d runs, want %s after %d (%s)", rep.Outcome, runner.Calls(), tt.want, tt.runs, rep.Message)
				}
				waits := rec.kind(loop.NoteWait)
				if tt.wantWait == 0 {
					if len(waits) != 0 {
						t.Errorf("waited %v, want no wait", waits[0].Wait)
					}
				} else {
					if len(waits) != 1 || waits[0].Wait != tt.wantWait {
						t.Fatalf("waits = %+v, want one of %v", waits, tt.wantWait)
					}
					if slept := time.Since(began); slept != tt.wantWait {
						t.Errorf("slept %v, want %v", slept, tt.wantWait)
					}
					if rep.Iterations != 1 {
						t.Errorf("iterations = %d, want 1 (a wait is not an iteration)", rep.Iterations)
					}
					// The attempt after the wait goes to the same raw log,
					// which the runner appends to.
					reqs := runner.Requests()
					if want := filepath.Join(cfg.Root, ".ralph", "logs", "session-test", "iter-1.ndjson"); reqs[0].LogPath != want || reqs[1].LogPath != want {
						t.Errorf("raw logs %q and %q, want both %q", reqs[0].LogPath, reqs[1].LogPath, want)
					}
				}
				if tt.want == loop.OutcomeUsageLimit {
					want := "usage limit reached; resets at " + reset.Format(time.RFC3339)
					if rep.Message != want || !rep.ResetsAt.Equal(reset) {
						t.Errorf("message %q resets %v, want %q", rep.Message, rep.ResetsAt, want)
					}
					if rep.ExitCode() != 10 {
						t.Errorf("exit %d, want 10", rep.ExitCode())
					}
				}
				task, _ := store.Get(t.Context(), "a")
				if task.RetryCount != 0 {
					t.Errorf("retry count %d: a usage limit is not a retry", task.RetryCount)
				}
				noneInProgress(t, store)
			})
		})
	}
}

func TestUsageLimitWaitIsCancellable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newStore(t, tasks("a")...)
		cfg := testConfig(t)
		ctx, cancel := context.WithCancel(t.Context())
		cfg.Observer = loop.ObserverFunc(func(n loop.Note) {
			if n.Kind == loop.NoteWait {
				time.AfterFunc(time.Minute, cancel)
			}
		})
		runner := looptest.NewFakeRunner(t, looptest.UsageLimited(time.Now().Add(time.Hour)))
		began := time.Now()
		rep, err := loop.Run(ctx, cfg, store, runner)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != loop.OutcomeCancelled || rep.ExitCode() != 130 {
			t.Errorf("outcome %s, want cancelled", rep.Outcome)
		}
		if d := time.Since(began); d != time.Minute {
			t.Errorf("the wait lasted %v, want 1m (cancelled)", d)
		}
		noneInProgress(t, store)
	})
}

func TestLeaseRenewedWhileAgentWorks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newStore(t, tasks("a")...)
		cfg := testConfig(t)
		cfg.Lease = 3 * time.Minute
		// Without renewal the 3-minute lease would lapse during the
		// 10-minute session and the store would take the task back.
		runner := looptest.NewFakeRunner(nil).ThenStep(looptest.Step{Delay: 10 * time.Minute, Result: looptest.Result(done("a"))})
		rep, err := loop.Run(t.Context(), cfg, store, runner)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != loop.OutcomeComplete {
			t.Errorf("outcome %s (%s), want complete", rep.Outcome, rep.Message)
		}
		logs, _ := store.Logs(t.Context(), "a")
		for _, e := range logs {
			if e.Kind == loop.LogLeaseExpired {
				t.Errorf("lease expired during the session: %+v", e)
			}
		}
	})
}

// Every return path leaves nothing in_progress.
func TestNeverLeavesTaskInProgress(t *testing.T) {
	tests := []struct {
		name     string
		step     func(cancel context.CancelFunc) looptest.Step
		observer func(n loop.Note)
		want     loop.Outcome
		wantErr  bool
	}{
		{
			name: "cancel while the agent works",
			step: func(cancel context.CancelFunc) looptest.Step {
				return looptest.Step{Func: func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
					cancel()
					<-ctx.Done()
					return looptest.Cancelled(), nil
				}}
			},
			want: loop.OutcomeCancelled,
		},
		{
			name: "agent timeout",
			step: func(context.CancelFunc) looptest.Step {
				return looptest.Step{Result: looptest.ErrorResult(loop.ClassTimeout, "")}
			},
			want: loop.OutcomeAgentFailed,
		},
		{
			name: "runner cannot start the agent",
			step: func(context.CancelFunc) looptest.Step {
				return looptest.Step{Err: loop.ErrAgentNotFound}
			},
			want: loop.OutcomeError, wantErr: true,
		},
		{
			name: "observer panics in the loop's goroutine",
			step: func(context.CancelFunc) looptest.Step {
				return looptest.Step{Result: looptest.Result(done("a"))}
			},
			observer: func(n loop.Note) {
				if n.Kind == loop.NoteIterationStart {
					panic("observer bug")
				}
			},
			want: loop.OutcomeError, wantErr: true,
		},
		{
			name: "observer panics on an agent event",
			step: func(context.CancelFunc) looptest.Step {
				return looptest.Step{Events: []loop.Event{{Kind: loop.EventText, Text: "hi"}}, Hang: true}
			},
			observer: func(n loop.Note) {
				if n.Kind == loop.NoteAgentEvent {
					panic("observer bug")
				}
			},
			want: loop.OutcomeError, wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tasks("a")...)
			cfg := testConfig(t)
			cfg.MaxRetries = 0
			if tt.observer != nil {
				cfg.Observer = loop.ObserverFunc(tt.observer)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			runner := looptest.NewFakeRunner(t).ThenStep(tt.step(cancel))
			rep, err := loop.Run(ctx, cfg, store, runner)
			if (err != nil) != tt.wantErr || rep.Outcome != tt.want {
				t.Errorf("outcome %s, err %v; want %s, error %v", rep.Outcome, err, tt.want, tt.wantErr)
			}
			if tt.observer != nil {
				var pe *loop.ObserverPanicError
				if !errors.As(err, &pe) || pe.Value != "observer bug" {
					t.Errorf("err = %v, want an ObserverPanicError", err)
				}
			}
			noneInProgress(t, store)
			logs, _ := store.Logs(t.Context(), "a")
			if last := logs[len(logs)-1]; last.Kind != loop.LogRelease {
				t.Errorf("last log entry %+v, want a release", last)
			}
		})
	}
}

type panicStore struct {
	*looptest.MemStore
}

func (panicStore) SetVerification(context.Context, string, string) error { panic("store bug") }

func TestPanicInStoreReleasesThenPanics(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	cfg.Verify = true
	runner := looptest.NewFakeRunner(t).Always(agent(done, "<verify-pass/>"))
	defer func() {
		if v := recover(); v != "store bug" {
			t.Errorf("recovered %v, want the store's panic", v)
		}
		noneInProgress(t, store)
	}()
	loop.Run(t.Context(), cfg, panicStore{store}, runner)
	t.Error("Run returned; want a panic")
}

func TestPromptOverride(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		wantErr string
		prompt  string
	}{
		{name: "override is used", text: "Do {{.Task.ID}} now ({{.Iteration}}).", prompt: "Do a now (1)."},
		{name: "unknown top-level variable", text: "Do {{.Taks.ID}}", wantErr: "unknown variable .Taks"},
		{name: "unknown nested variable", text: "Do {{.Task.Name}}", wantErr: "unknown variable .Task.Name"},
		{name: "unknown variable inside with", text: "{{with .Parent}}{{.Nme}}{{end}}", wantErr: "unknown variable .Nme"},
		{name: "unknown variable inside range", text: "{{range .Blockers}}{{.Summry}}{{end}}", wantErr: "unknown variable .Summry"},
		{name: "dollar reaches the root", text: "{{range .Skills}}{{$.Task.ID}}:{{.Name}}{{end}}{{$.Task.ID}}", prompt: "a"},
		{name: "parse error names the file", text: "{{.Task.ID", wantErr: "build.md"},
		{name: "with over dollar", text: "{{with $.Task}}{{.Titel}}{{end}}", wantErr: "unknown variable .Titel"},
		{name: "with over dot", text: "{{with .}}{{.Task.ID}}{{end}}", prompt: "a"},
		{name: "a variable's fields are not checked", text: "{{$t := .Task}}{{$t.ID}}", prompt: "a"},
		{name: "a field of a non-struct", text: "{{.Iteration.Foo}}", wantErr: "unknown variable .Iteration.Foo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tasks("a")...)
			cfg := testConfig(t)
			cfg.SessionLog, cfg.RawLogs = true, true
			writeFile(t, cfg.Root, ".ralph/prompts/build.md", tt.text)
			runner := looptest.NewFakeRunner(nil).Always(agent(done, ""))
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, loop.ErrPrompt) {
					t.Fatalf("err = %v, want ErrPrompt naming %q", err, tt.wantErr)
				}
				if rep.ExitCode() != 1 || runner.Calls() != 0 || statuses(t, store)["a"] != loop.StatusPending {
					t.Errorf("a bad override changed something: exit %d, %d runs", rep.ExitCode(), runner.Calls())
				}
				if _, err := os.Stat(cfg.Root + "/.ralph/logs"); !os.IsNotExist(err) {
					t.Errorf("a bad override left logs behind: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := runner.Requests()[0].Prompt; got != tt.prompt {
				t.Errorf("prompt %q, want %q", got, tt.prompt)
			}
		})
	}
}

func TestEmbeddedPromptsLoad(t *testing.T) {
	for _, name := range loop.PromptNames() {
		p, err := loop.LoadPrompt(t.TempDir(), name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Source != loop.SourceEmbedded {
			t.Errorf("%s: source %q", name, p.Source)
		}
		// Every embedded template renders with an almost empty context.
		if _, err := p.Render(loop.PromptData{}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	want := []string{"build", "verify", "peek", "plan", "prompt",
		"system-build", "system-verify", "system-peek", "system-plan", "system-prompt"}
	if diff := cmp.Diff(want, loop.PromptNames()); diff != "" {
		t.Error(diff)
	}
}

func TestAgentEventsReachObserver(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	rec := &recorder{}
	cfg.Observer = rec
	events := []loop.Event{{Kind: loop.EventInit, Model: "sonnet"}, {Kind: loop.EventToolUse, Tool: "Bash", Input: "go test ./..."}}
	runner := looptest.NewFakeRunner(t).ThenStep(looptest.Step{Events: events, Result: looptest.Result(done("a"))})
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	var got []loop.Event
	for _, n := range rec.kind(loop.NoteAgentEvent) {
		if n.Iteration != 1 {
			t.Errorf("agent event under iteration %d", n.Iteration)
		}
		got = append(got, n.AgentEvent)
	}
	if diff := cmp.Diff(events, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if n := len(rec.kind(loop.NoteReceipt)); n != 1 {
		t.Errorf("%d receipts observed, want 1", n)
	}
}

// The session log is written in full even when the user's observer panics.
func TestSessionLogSurvivesObserverPanic(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	cfg.SessionLog = true
	cfg.Observer = loop.ObserverFunc(func(n loop.Note) {
		if n.Kind == loop.NoteIterationStart {
			panic("observer bug")
		}
	})
	runner := looptest.NewFakeRunner(nil).Always(agent(done, ""))
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err == nil {
		t.Fatal("want an error")
	}
	data, err := os.ReadFile(loop.SessionLogPath(cfg.Root+"/.ralph/logs", rep.Session))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "exit code: 1") || !strings.Contains(string(data), "observer panicked: observer bug") {
		t.Errorf("session log lacks the summary:\n%s", data)
	}
}

func TestPeekModeRenewsTheAgentsClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newStore(t, tasks("a")...)
		cfg := testConfig(t)
		cfg.ClaimMode = loop.ClaimAgent
		cfg.Lease = 3 * time.Minute
		runner := looptest.NewFakeRunner(t).ThenFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
			task, err := store.Claim(ctx, loop.ClaimParams{Agent: envOf(req, "RALPH_AGENT_ID"), Lease: 3 * time.Minute})
			if err != nil {
				return loop.RunResult{}, err
			}
			time.Sleep(10 * time.Minute) // synctest: fake time
			if err := store.Complete(ctx, loop.MoveParams{TaskID: task.ID, Message: "ok"}); err != nil {
				return loop.RunResult{}, err
			}
			return looptest.Result("done"), nil
		})
		rep, err := loop.Run(t.Context(), cfg, store, runner)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != loop.OutcomeComplete {
			t.Errorf("outcome %s (%s), want complete", rep.Outcome, rep.Message)
		}
		logs, _ := store.Logs(t.Context(), "a")
		for _, e := range logs {
			if e.Kind == loop.LogLeaseExpired {
				t.Errorf("lease expired during the session: %+v", e)
			}
		}
	})
}

func TestMultiObserver(t *testing.T) {
	var got []string
	obs := loop.MultiObserver(
		loop.ObserverFunc(func(n loop.Note) { got = append(got, "first:"+n.Message) }),
		nil,
		loop.ObserverFunc(func(n loop.Note) { got = append(got, "second:"+n.Message) }),
	)
	obs.Observe(loop.Note{Kind: loop.NoteNotice, Message: "hi"})
	if diff := cmp.Diff([]string{"first:hi", "second:hi"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// failingRenewals is a store whose lease renewals fail, as a briefly
// locked store's do.
type failingRenewals struct{ *looptest.MemStore }

func (failingRenewals) RenewLease(context.Context, string, string, time.Duration) error {
	return errors.New("database is locked")
}

// A renewal that fails is a notice naming the iteration that claimed the
// task, and the goroutine that renews reads nothing the loop writes as
// it goes (issue 21: it read the iteration number while the next
// iteration began, which go test -race reported). Real time, a 300 ms
// lease: renewals every 100 ms, failing through three sessions of 150 ms.
func TestFailedRenewalsRace(t *testing.T) {
	store := failingRenewals{newStore(t, tasks("a", "b", "c")...)}
	cfg := testConfig(t)
	cfg.Lease = 300 * time.Millisecond
	var mu sync.Mutex
	iters := map[string]int{} // task → the iteration of its failed renewals
	cfg.Observer = loop.ObserverFunc(func(n loop.Note) {
		if n.Kind == loop.NoteNotice && strings.Contains(n.Message, "could not renew the lease on ") {
			id, _, _ := strings.Cut(strings.TrimPrefix(n.Message, "could not renew the lease on "), ":")
			mu.Lock()
			iters[id] = n.Iteration
			mu.Unlock()
		}
	})
	var steps []looptest.Step
	for range 3 {
		steps = append(steps, looptest.Step{Func: func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
			active, err := store.Active(ctx, loop.Scope{})
			if err != nil || len(active) != 1 {
				return loop.RunResult{}, fmt.Errorf("active: %v, %v", active, err)
			}
			time.Sleep(150 * time.Millisecond)
			return looptest.Result(done(active[0].ID)), nil
		}})
	}
	runner := looptest.NewFakeRunner(t).ThenStep(steps...)
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(iters) == 0 {
		t.Fatal("no notice of a failed renewal")
	}
	for id, n := range iters {
		if want := int(id[0]-'a') + 1; n != want {
			t.Errorf("the failed renewal of %s was told in iteration %d, want %d", id, n, want)
		}
	}
}
