package loop_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// newPool is a pool of fake agents named by names, each with its script.
func newPool(t *testing.T, maxCost float64, names []string, runners ...*looptest.FakeRunner) *loop.Pool {
	t.Helper()
	var agents []loop.PoolAgent
	for i, name := range names {
		agents = append(agents, loop.PoolAgent{Name: name, Runner: runners[i]})
	}
	p, err := loop.NewPool(maxCost, agents...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// receiptAgents lists agent:exit reason of the report's receipts.
func receiptAgents(rep loop.Report) []string {
	var got []string
	for _, rc := range rep.Receipts {
		got = append(got, rc.Agent+":"+rc.ExitReason)
	}
	return got
}

// notices lists the messages of rec's notices.
func notices(rec *recorder) []string {
	var got []string
	for _, n := range rec.kind(loop.NoteNotice) {
		got = append(got, n.Message)
	}
	return got
}

func costing(usd float64, text string) loop.RunResult {
	r := looptest.Result(text)
	r.CostUSD = usd
	return r
}

// TestPoolUsageLimit: the first agent's usage limit moves the run to the
// next agent at once — no wait, no iteration counted, no retry used —
// and the first comes back when its limit resets; every agent out is a
// wait until the earliest reset, or, under the stop policy, the end
// (exit 10) naming that reset.
func TestPoolUsageLimit(t *testing.T) {
	t.Run("goes on with the next agent", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := newStore(t, tasks("a", "b")...)
			cfg := testConfig(t)
			cfg.RawLogs = true
			rec := &recorder{}
			cfg.Observer = rec
			reset := time.Now().Add(2 * time.Hour)
			claude := looptest.NewFakeRunner(t, looptest.UsageLimited(reset))
			codex := looptest.NewFakeRunner(t, looptest.Result(done("a")), looptest.Result(done("b")))
			rep, err := loop.Run(t.Context(), cfg, store, newPool(t, 0, []string{"claude", "codex"}, claude, codex))
			if err != nil || rep.Outcome != loop.OutcomeComplete {
				t.Fatalf("outcome %s, %v (%s)", rep.Outcome, err, rep.Message)
			}
			if diff := cmp.Diff([]string{"claude:usage_limit", "codex:success", "codex:success"}, receiptAgents(rep)); diff != "" {
				t.Errorf("receipts (-want +got):\n%s", diff)
			}
			if rep.Iterations != 2 {
				t.Errorf("iterations = %d, want 2 (the usage limit is not one)", rep.Iterations)
			}
			if waits := rec.kind(loop.NoteWait); len(waits) != 0 {
				t.Errorf("waited %v with another agent in", waits[0].Wait)
			}
			want := "claude hit its usage limit (resets at " + reset.Format(time.RFC3339) + "); going on with codex"
			if got := notices(rec); !cmp.Equal(got, []string{want}) {
				t.Errorf("notices %q, want %q", got, want)
			}
			// The same iteration's two sessions have a raw log each.
			logs := []string{claude.Requests()[0].LogPath, codex.Requests()[0].LogPath}
			if !strings.HasSuffix(logs[0], "/iter-1.ndjson") || !strings.HasSuffix(logs[1], "/iter-1-codex.ndjson") {
				t.Errorf("raw logs %q, want iter-1.ndjson and iter-1-codex.ndjson", logs)
			}
			a, _ := store.Get(t.Context(), "a")
			if a.RetryCount != 0 {
				t.Errorf("a's retry count is %d: a usage limit is not a retry", a.RetryCount)
			}
			history, _ := store.Logs(t.Context(), "a")
			if !slices.ContainsFunc(history, func(l loop.LogEntry) bool { return l.Message == "usage limit: going on with codex" }) {
				t.Errorf("a's history does not say the run went on with codex: %+v", history)
			}
			noneInProgress(t, store)
		})
	})
	t.Run("the first agent comes back at its reset", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := newStore(t, tasks("a", "b", "c")...)
			cfg := testConfig(t)
			claude := looptest.NewFakeRunner(t, looptest.UsageLimited(time.Now().Add(10*time.Minute)), looptest.Result(done("b")), looptest.Result(done("c")))
			codex := looptest.NewFakeRunner(t).ThenStep(looptest.Step{Delay: 11 * time.Minute, Result: looptest.Result(done("a"))})
			rep, err := loop.Run(t.Context(), cfg, store, newPool(t, 0, []string{"claude", "codex"}, claude, codex))
			if err != nil || rep.Outcome != loop.OutcomeComplete {
				t.Fatalf("outcome %s, %v (%s)", rep.Outcome, err, rep.Message)
			}
			want := []string{"claude:usage_limit", "codex:success", "claude:success", "claude:success"}
			if diff := cmp.Diff(want, receiptAgents(rep)); diff != "" {
				t.Errorf("receipts (-want +got):\n%s", diff)
			}
		})
	})
	for _, policy := range []loop.UsageLimitPolicy{loop.UsageLimitWait, loop.UsageLimitStop} {
		t.Run("every agent out: "+string(policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newStore(t, tasks("a")...)
				cfg := testConfig(t)
				cfg.OnUsageLimit = policy
				rec := &recorder{}
				cfg.Observer = rec
				claudeReset, codexReset := time.Now().Add(40*time.Minute), time.Now().Add(20*time.Minute)
				claude := looptest.NewFakeRunner(t, looptest.UsageLimited(claudeReset))
				codex := looptest.NewFakeRunner(t, looptest.UsageLimited(codexReset))
				if policy == loop.UsageLimitWait {
					codex.Then(looptest.Result(done("a")))
				}
				began := time.Now()
				rep, err := loop.Run(t.Context(), cfg, store, newPool(t, 0, []string{"claude", "codex"}, claude, codex))
				if err != nil {
					t.Fatal(err)
				}
				if policy == loop.UsageLimitStop {
					want := "usage limit reached; resets at " + codexReset.Format(time.RFC3339)
					if rep.Outcome != loop.OutcomeUsageLimit || rep.ExitCode() != 10 || rep.Message != want {
						t.Errorf("outcome %s exit %d %q, want usage_limit 10 %q", rep.Outcome, rep.ExitCode(), rep.Message, want)
					}
					noneInProgress(t, store)
					return
				}
				if rep.Outcome != loop.OutcomeComplete {
					t.Fatalf("outcome %s (%s)", rep.Outcome, rep.Message)
				}
				waits := rec.kind(loop.NoteWait)
				if len(waits) != 1 || waits[0].Wait != 20*time.Minute || time.Since(began) != 20*time.Minute {
					t.Errorf("waits %+v after %v, want one of 20m, the earliest reset", waits, time.Since(began))
				}
				want := []string{"claude:usage_limit", "codex:usage_limit", "codex:success"}
				if diff := cmp.Diff(want, receiptAgents(rep)); diff != "" {
					t.Errorf("receipts (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// TestPoolAuth: an agent that is not logged in is out for the run, the
// next one goes on; with none left, the run ends as a lone agent's would
// (exit 4, ErrNotLoggedIn).
func TestPoolAuth(t *testing.T) {
	refused := looptest.ErrorResult(loop.ClassAuth, "Invalid API key · Please run /login")
	t.Run("goes on with the next agent", func(t *testing.T) {
		store := newStore(t, tasks("a", "b")...)
		cfg := testConfig(t)
		cfg.MaxRetries = 0 // an auth failure with another agent in is no agent trouble
		rec := &recorder{}
		cfg.Observer = rec
		claude := looptest.NewFakeRunner(t, refused)
		codex := looptest.NewFakeRunner(t, looptest.Result(done("a")), looptest.Result(done("b")))
		rep, err := loop.Run(t.Context(), cfg, store, newPool(t, 0, []string{"claude", "codex"}, claude, codex))
		if err != nil || rep.Outcome != loop.OutcomeComplete {
			t.Fatalf("outcome %s, %v (%s)", rep.Outcome, err, rep.Message)
		}
		if diff := cmp.Diff([]string{"claude:auth", "codex:success", "codex:success"}, receiptAgents(rep)); diff != "" {
			t.Errorf("receipts (-want +got):\n%s", diff)
		}
		want := "claude is not logged in, or its credentials were refused; going on with codex"
		if got := notices(rec); !cmp.Equal(got, []string{want}) {
			t.Errorf("notices %q, want %q", got, want)
		}
	})
	t.Run("none left", func(t *testing.T) {
		store := newStore(t, tasks("a")...)
		cfg := testConfig(t)
		claude := looptest.NewFakeRunner(t, refused)
		codex := looptest.NewFakeRunner(t, refused)
		rep, err := loop.Run(t.Context(), cfg, store, newPool(t, 0, []string{"claude", "codex"}, claude, codex))
		if err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != loop.OutcomeAgentFailed || rep.ExitCode() != 4 || !errors.Is(rep.Cause, loop.ErrNotLoggedIn) {
			t.Errorf("outcome %s exit %d cause %v, want agent_failed 4 ErrNotLoggedIn (%s)", rep.Outcome, rep.ExitCode(), rep.Cause, rep.Message)
		}
		for _, name := range []string{"claude", "codex"} {
			if !strings.Contains(rep.Message, name+" is not logged in") {
				t.Errorf("message %q does not name %s", rep.Message, name)
			}
		}
		if a, _ := store.Get(t.Context(), "a"); a.Status != loop.StatusPending || a.RetryCount != 0 {
			t.Errorf("a is %s after %d retries, want pending, none", a.Status, a.RetryCount)
		}
	})
}

// TestPoolCostCap: an agent whose sessions have cost the cap is out for
// the run, the next goes on; every agent at its cap ends the run as the
// cost budget does (exit 9).
func TestPoolCostCap(t *testing.T) {
	t.Run("goes on with the next agent", func(t *testing.T) {
		store := newStore(t, tasks("a", "b", "c")...)
		cfg := testConfig(t)
		rec := &recorder{}
		cfg.Observer = rec
		claude := looptest.NewFakeRunner(t, costing(0.6, done("a")), costing(0.6, done("b")))
		codex := looptest.NewFakeRunner(t, costing(0.6, done("c")))
		rep, err := loop.Run(t.Context(), cfg, store, newPool(t, 1, []string{"claude", "codex"}, claude, codex))
		if err != nil || rep.Outcome != loop.OutcomeComplete {
			t.Fatalf("outcome %s, %v (%s)", rep.Outcome, err, rep.Message)
		}
		if diff := cmp.Diff([]string{"claude:success", "claude:success", "codex:success"}, receiptAgents(rep)); diff != "" {
			t.Errorf("receipts (-want +got):\n%s", diff)
		}
		want := "claude reached its cost cap ($1.2000 of $1.0000); going on with codex"
		if got := notices(rec); !cmp.Equal(got, []string{want}) {
			t.Errorf("notices %q, want %q", got, want)
		}
	})
	t.Run("every agent at its cap", func(t *testing.T) {
		store := newStore(t, tasks("a", "b", "c")...)
		cfg := testConfig(t)
		claude := looptest.NewFakeRunner(t, costing(1, done("a")))
		codex := looptest.NewFakeRunner(t, costing(1.5, done("b")))
		rep, err := loop.Run(t.Context(), cfg, store, newPool(t, 1, []string{"claude", "codex"}, claude, codex))
		if err != nil {
			t.Fatal(err)
		}
		want := "cost budget exhausted: every agent reached its cost cap (claude spent $1.0000 of $1.0000; codex spent $1.5000 of $1.0000)"
		if rep.Outcome != loop.OutcomeBudgetExhausted || rep.ExitCode() != 9 || rep.Message != want {
			t.Errorf("outcome %s exit %d %q, want budget_exhausted 9 %q", rep.Outcome, rep.ExitCode(), rep.Message, want)
		}
		if c, _ := store.Get(t.Context(), "c"); c.Status != loop.StatusPending {
			t.Errorf("c is %s, want pending: nothing ran it", c.Status)
		}
	})
}

// TestPoolVerifier: with a pool and no Config.Verifier, the verifier is
// another agent than the one that did the work, and the same one when no
// other is in.
func TestPoolVerifier(t *testing.T) {
	for _, tt := range []struct {
		name   string
		codex  []loop.RunResult
		want   []string
		claude []loop.RunResult
	}{
		{name: "another agent verifies",
			claude: []loop.RunResult{looptest.Result(done("a"))},
			codex:  []loop.RunResult{looptest.Result("Right. <verify-pass/>")},
			want:   []string{"claude:build", "codex:verify"}},
		{name: "the only agent in verifies its own work",
			claude: []loop.RunResult{looptest.Result(done("a")), looptest.Result("Right. <verify-pass/>")},
			codex:  []loop.RunResult{looptest.ErrorResult(loop.ClassAuth, "not logged in")},
			want:   []string{"codex:build", "claude:build", "claude:verify"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tasks("a")...)
			cfg := testConfig(t)
			gitRepo(t, cfg.Root)
			cfg.Verify = true
			names := []string{"claude", "codex"}
			if tt.name != "another agent verifies" {
				names = []string{"codex", "claude"}
			}
			claude, codex := looptest.NewFakeRunner(t, tt.claude...), looptest.NewFakeRunner(t, tt.codex...)
			runners := []*looptest.FakeRunner{claude, codex}
			if names[0] == "codex" {
				runners = []*looptest.FakeRunner{codex, claude}
			}
			rep, err := loop.Run(t.Context(), cfg, store, newPool(t, 0, names, runners...))
			if err != nil || rep.Outcome != loop.OutcomeComplete {
				t.Fatalf("outcome %s, %v (%s)", rep.Outcome, err, rep.Message)
			}
			var got []string
			for _, rc := range rep.Receipts {
				got = append(got, rc.Agent+":"+rc.Mode)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("receipts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNewPool: a pool needs agents, each named once, with a runner, and a
// cap that is not negative.
func TestNewPool(t *testing.T) {
	r := looptest.NewFakeRunner(t)
	for _, tt := range []struct {
		name    string
		maxCost float64
		agents  []loop.PoolAgent
		want    string
	}{
		{"no agent", 0, nil, "a pool needs an agent"},
		{"no name", 0, []loop.PoolAgent{{Runner: r}}, "agent 1 of the pool has no name"},
		{"no runner", 0, []loop.PoolAgent{{Name: "claude"}}, "agent claude of the pool has no runner"},
		{"twice", 0, []loop.PoolAgent{{"claude", r}, {"claude", r}}, "agent claude is in the pool twice"},
		{"negative cap", -1, []loop.PoolAgent{{"claude", r}}, "below zero"},
	} {
		_, err := loop.NewPool(tt.maxCost, tt.agents...)
		if !errors.Is(err, loop.ErrConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want ErrConfig saying %q", tt.name, err, tt.want)
		}
	}
}

// TestPoolRun: a Pool used as a plain Runner runs on the first agent in,
// books its usage limit, and says ErrPoolOut when none is in.
func TestPoolRun(t *testing.T) {
	claude := looptest.NewFakeRunner(t, looptest.UsageLimited(time.Now().Add(time.Hour)))
	codex := looptest.NewFakeRunner(t, looptest.ErrorResult(loop.ClassAuth, "not logged in"))
	p := newPool(t, 0, []string{"claude", "codex"}, claude, codex)
	for _, want := range []string{"claude", "codex"} {
		res, err := p.Run(t.Context(), loop.RunRequest{})
		if err != nil || res.Agent != want {
			t.Fatalf("Run: agent %q, %v; want %s", res.Agent, err, want)
		}
	}
	if _, err := p.Run(t.Context(), loop.RunRequest{}); !errors.Is(err, loop.ErrPoolOut) {
		t.Errorf("Run with every agent out: %v, want ErrPoolOut", err)
	}
	if diff := cmp.Diff([]string{"claude", "codex"}, p.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
}
