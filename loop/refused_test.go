package loop_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// TestRefusedStopsAtOnce: an agent that refuses to run as it is set up
// (ClassRefused: Claude Code skipping permissions as root outside a
// sandbox) would refuse every retry the same way, so the run stops at once
// with exit 4, in every mode, the runner's words in the message and
// nothing held.
func TestRefusedStopsAtOnce(t *testing.T) {
	const why = "Claude Code refuses to skip permissions as root outside a sandbox: run with --sandbox"
	refused := looptest.ErrorResult(loop.ClassRefused, why)
	for _, mode := range []string{"build", "peek", "plan"} {
		t.Run(mode, func(t *testing.T) {
			store := newStore(t, tasks("a", "b")...)
			cfg := testConfig(t)
			run := loop.Run
			switch mode {
			case "peek":
				cfg = peekConfig(t)
			case "plan":
				cfg = planConfig(t)
				run = loop.Plan
			}
			cfg.MaxRetries = 3
			runner := looptest.NewFakeRunner(t).Always(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
				return refused, nil
			})
			rep, err := run(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outcome != loop.OutcomeAgentFailed || rep.ExitCode() != 4 {
				t.Errorf("outcome %s (exit %d), want agent_failed (4)", rep.Outcome, rep.ExitCode())
			}
			if runner.Calls() != 1 {
				t.Errorf("%d sessions, want 1: a refusal is not retried", runner.Calls())
			}
			if !strings.Contains(rep.Message, "refused to run: "+why) {
				t.Errorf("message %q does not give the runner's words", rep.Message)
			}
			if mode != "plan" {
				for id, st := range statuses(t, store) {
					if st != loop.StatusPending {
						t.Errorf("task %s is %s, want pending", id, st)
					}
				}
			}
		})
	}
}
