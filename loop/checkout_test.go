package loop_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// requestWorkspace lands every attempt and keeps the requests.
type requestWorkspace struct {
	fakeWorkspace
	got []loop.IntegrateRequest
}

func (w *requestWorkspace) Integrate(ctx context.Context, req loop.IntegrateRequest) (loop.IntegrateResult, error) {
	w.got = append(w.got, req)
	return w.fakeWorkspace.Integrate(ctx, req)
}

// TestIntegrateGetsTheAgentsCheckout: how the agent's private checkout
// moved in its session (RunResult.Checkout) reaches the workspace with
// the attempt's work, so that a reset is never landed as a revert
// (DESIGN §13); a runner that reports none gives the workspace none.
func TestIntegrateGetsTheAgentsCheckout(t *testing.T) {
	moved := &loop.Checkout{Start: "aaaa", End: "bbbb", Descends: false}
	for _, co := range []*loop.Checkout{moved, nil} {
		store := newStore(t, loop.Task{ID: "a"})
		cfg := testConfig(t)
		cfg.MaxIterations = 1
		ws := &requestWorkspace{fakeWorkspace: fakeWorkspace{dir: cfg.Root}}
		cfg.Workspace = ws
		runner := looptest.NewFakeRunner(t).Always(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
			res := looptest.Result("did it <task-done>a</task-done>")
			res.Checkout = co
			return res, nil
		})
		if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
			t.Fatal(err)
		}
		if len(ws.got) != 1 {
			t.Fatalf("%d integrations; want 1", len(ws.got))
		}
		if diff := cmp.Diff(co, ws.got[0].Checkout); diff != "" {
			t.Errorf("IntegrateRequest.Checkout (-want +got):\n%s", diff)
		}
	}
}
