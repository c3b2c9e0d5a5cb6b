package loop_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// Config.Verifier runs the verifier sessions and only those (another agent
// checks the work); the raw logs are named after each session's agent, and
// the receipts keep the agent and where the cost came from.
func TestVerifierOfAnotherAgent(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	cfg.Verify = true
	cfg.RawLogs = true
	cfg.Session = "s"
	cfg.SessionLog = true
	cfg.Agent, cfg.VerifierAgent = "claude", "codex"
	work := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		r := looptest.Result(done(envOf(req, "RALPH_TASK_ID")))
		r.Agent, r.CostUSD = "claude", 0.5
		return r, nil
	})
	verifier := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		r := looptest.Result("<verify-pass/>")
		r.Agent, r.CostUSD, r.CostSource = "codex", 0.01, loop.CostEstimated
		return r, nil
	})
	cfg.Verifier = verifier
	rep, err := loop.Run(t.Context(), cfg, store, work)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("outcome %s, want complete", rep.Outcome)
	}
	wr, vr := work.Requests(), verifier.Requests()
	if len(wr) != 1 || len(vr) != 1 || isVerifier(wr[0]) || !isVerifier(vr[0]) {
		t.Fatalf("work sessions %d, verifier sessions %d: want one of each, each on its runner", len(wr), len(vr))
	}
	logs := []string{filepath.Base(wr[0].LogPath), filepath.Base(vr[0].LogPath)}
	if diff := cmp.Diff([]string{"iter-1.ndjson", "iter-1-verify-codex.ndjson"}, logs); diff != "" {
		t.Errorf("raw logs (-want +got):\n%s", diff)
	}
	type receipt struct {
		Mode, Agent string
		Source      loop.CostSource
		Cost        float64
	}
	var got []receipt
	for _, r := range rep.Receipts {
		got = append(got, receipt{r.Mode, r.Agent, r.CostSource, r.CostUSD})
	}
	want := []receipt{{"build", "claude", "", 0.5}, {"verify", "codex", loop.CostEstimated, 0.01}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("receipts (-want +got):\n%s", diff)
	}
	if rep.CostUSD != 0.51 {
		t.Errorf("cost %v, want 0.51: estimates count", rep.CostUSD)
	}
	data, err := os.ReadFile(loop.SessionLogPath(cfg.Root+"/.ralph/logs", rep.Session))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"verifier: pass (codex, model ", ", $0.0100 (estimated))\n", "\nagent: claude\n", "\ncost: $0.5100 (estimated)\n"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("session log lacks %q:\n%s", want, data)
		}
	}
}

// A work agent other than Claude Code names its raw logs.
func TestRawLogNamesAgent(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	cfg.RawLogs = true
	cfg.Agent = "gemini"
	runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
	})
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	if got := filepath.Base(runner.Requests()[0].LogPath); got != "iter-1-gemini.ndjson" {
		t.Errorf("raw log %s, want iter-1-gemini.ndjson", got)
	}
}

// Under a budget, a session whose cost is unknown is said once: the budget
// cannot count it.
func TestUnknownCostUnderBudget(t *testing.T) {
	store := newStore(t, tasks("a", "b")...)
	cfg := testConfig(t)
	cfg.MaxCost = 1
	rec := &recorder{}
	cfg.Observer = rec
	runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		r := looptest.Result(done(envOf(req, "RALPH_TASK_ID")))
		r.Agent, r.Model, r.CostSource = "opencode", "local/qwen", loop.CostUnknown
		return r, nil
	})
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, n := range rec.kind(loop.NoteNotice) {
		if strings.Contains(n.Message, "no price is known") {
			said = append(said, n.Message)
			// What the notice is about, for a program to word it with
			// its own name for MaxCost.
			if n.Unpriced == nil || n.Unpriced.Agent != "opencode" || n.Unpriced.Model != "local/qwen" {
				t.Errorf("notice's Unpriced = %+v, want the session's receipt", n.Unpriced)
			}
		}
	}
	want := []string{`opencode reported no cost and no price is known for model "local/qwen": MaxCost cannot count its sessions`}
	if diff := cmp.Diff(want, said); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
}
