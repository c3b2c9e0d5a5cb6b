package loop_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
// (ARCHITECTURE.md §7); a runner that reports none gives the workspace none.
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

// checkedWorkspace is a workspace whose tree an agent replaced: its
// CheckTree says so once.
type checkedWorkspace struct {
	fakeWorkspace
	broken     bool
	integrated int
}

func (w *checkedWorkspace) CheckTree(context.Context) error {
	if w.broken {
		w.broken = false
		return &loop.IntegrationError{Reason: "w1 is not the worktree ralph made: it is a symbolic link"}
	}
	return nil
}

func (w *checkedWorkspace) Integrate(ctx context.Context, req loop.IntegrateRequest) (loop.IntegrateResult, error) {
	w.integrated++
	return w.fakeWorkspace.Integrate(ctx, req)
}

// TestTreeCheckedBeforeGates: a workspace that finds its tree replaced
// after the agent's session (loop.TreeChecker) makes the attempt task
// trouble before the test gate or the integration runs there; the next
// attempt goes on as usual.
func TestTreeCheckedBeforeGates(t *testing.T) {
	store := newStore(t, loop.Task{ID: "a"})
	cfg := testConfig(t)
	cfg.MaxIterations = 2
	marker := filepath.Join(t.TempDir(), "gate-ran")
	cfg.TestCmd = "echo x >> " + marker
	ws := &checkedWorkspace{fakeWorkspace: fakeWorkspace{dir: cfg.Root}, broken: true}
	cfg.Workspace = ws
	runner := looptest.NewFakeRunner(t).Always(agent(done, ""))
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(marker)
	// Twice: the baseline before the first session, and the second
	// attempt's gate (none for the first, whose tree was not its own).
	if got := strings.Count(string(b), "x"); got != 2 || ws.integrated != 1 {
		t.Errorf("gate ran %d times, %d integrations; want twice (the baseline, the second attempt) and once", got, ws.integrated)
	}
	logs, _ := store.Logs(t.Context(), "a")
	i := slices.IndexFunc(logs, func(e loop.LogEntry) bool { return e.Kind == loop.LogRetry })
	if i < 0 || !strings.Contains(logs[i].Message, "the worktree: w1 is not the worktree ralph made") {
		t.Errorf("a's history lacks the retry naming the tree: %+v", logs)
	}
	if got, _ := store.Get(t.Context(), "a"); got.Status != loop.StatusDone {
		t.Errorf("a is %s after its second attempt", got.Status)
	}
}
