package loop_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// tipWorkspace is a fakeWorkspace that counts how often the loop put its
// tree at the tip (loop.TipTree).
type tipWorkspace struct {
	fakeWorkspace
	mu    sync.Mutex
	toTip int
}

func (w *tipWorkspace) ToTip(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.toTip++
	return nil
}

// TestBaselineStopsBeforeAnyAgent: a test gate that already fails on the
// starting tree stops the run with exit 3 before any session, its cause
// ErrBaselineFailed and its output sent in lines; the task is untouched.
func TestBaselineStopsBeforeAnyAgent(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	cfg.TestCmd = "echo first line; echo 'FAIL: test_login'; exit 1"
	var outputs []string
	cfg.Observer = loop.ObserverFunc(func(n loop.Note) {
		if n.Kind == loop.NoteNotice && n.Output != "" {
			outputs = append(outputs, n.Output)
		}
	})
	runner := looptest.NewFakeRunner(t).Always(agent(done, ""))
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != loop.OutcomeTestGateFailed || rep.ExitCode() != 3 || runner.Calls() != 0 || !errors.Is(rep.Cause, loop.ErrBaselineFailed) {
		t.Fatalf("outcome %s (exit %d) after %d sessions, cause %v; want test_gate_failed, 3, none, ErrBaselineFailed", rep.Outcome, rep.ExitCode(), runner.Calls(), rep.Cause)
	}
	if !strings.HasPrefix(rep.Message, "the test gate already fails on the starting tree") || !strings.Contains(rep.Message, loop.BaselineHint) {
		t.Errorf("message %q; want the baseline's failure and the hint", rep.Message)
	}
	if len(outputs) != 1 || outputs[0] != "first line\nFAIL: test_login" {
		t.Errorf("notice outputs %q; want the command's output in its lines", outputs)
	}
	if a, _ := store.Get(t.Context(), "a"); a.Status != loop.StatusPending || a.RetryCount != 0 {
		t.Errorf("a is %s with %d retries; want pending, untouched", a.Status, a.RetryCount)
	}
}

// TestBaselineOncePerBuild: the workers of one build (one Shared) run the
// baseline once, on the tip, in the first worker's tree, and that worker
// alone shows its output; a later worker takes its verdict.
func TestBaselineOncePerBuild(t *testing.T) {
	store := newStore(t, tasks("a")...)
	shared := loop.NewShared(nil)
	marks := filepath.Join(t.TempDir(), "ran")
	var shown []string // the workers that showed the output
	for _, w := range []string{"w1", "w2"} {
		cfg := testConfig(t)
		cfg.Worker, cfg.AgentID, cfg.Shared = w, "agent-0000000a-"+w, shared
		cfg.Observer = loop.ObserverFunc(func(n loop.Note) {
			if n.Kind == loop.NoteNotice && n.Output != "" {
				shown = append(shown, w)
			}
		})
		ws := &tipWorkspace{fakeWorkspace: fakeWorkspace{dir: cfg.Root}}
		cfg.Workspace = ws
		cfg.TestCmd = "echo x >> " + marks + "; echo FAIL: test_login; exit 1"
		runner := looptest.NewFakeRunner(t).Always(agent(done, ""))
		rep, err := loop.Run(t.Context(), cfg, store, runner)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != loop.OutcomeTestGateFailed || runner.Calls() != 0 {
			t.Errorf("%s: outcome %s after %d sessions; want test_gate_failed before any", w, rep.Outcome, runner.Calls())
		}
		if want := map[string]int{"w1": 1, "w2": 0}[w]; ws.toTip != want {
			t.Errorf("%s: tree put at the tip %d times, want %d", w, ws.toTip, want)
		}
	}
	if b, _ := os.ReadFile(marks); string(b) != "x\n" {
		t.Errorf("the baseline ran %q; want once for the build", b)
	}
	if len(shown) != 1 || shown[0] != "w1" {
		t.Errorf("the baseline's output was shown by %q; want once, by w1, which ran it", shown)
	}
}

// TestFinalCmd: the final command runs when the plan is complete; a
// failure adds "Make the final check pass" with the end of its output and
// the run goes on; it passing ends the run complete; failing after
// MaxFinalRounds added tasks stops it with exit 3.
func TestFinalCmd(t *testing.T) {
	t.Run("a failure adds a task, which makes it pass", func(t *testing.T) {
		store := newStore(t, tasks("a")...)
		cfg := testConfig(t)
		// Fails until two sessions ran; its output's end says why.
		cfg.FinalCmd = `seq 1 2000; n=$(ls done-* 2>/dev/null | wc -l); [ "$n" -ge 2 ] || { echo "FAIL: only $n"; exit 1; }`
		runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
			id := envOf(req, "RALPH_TASK_ID")
			writeFile(t, cfg.Root, "done-"+id, id)
			return looptest.Result(done(id)), nil
		})
		rep, err := loop.Run(t.Context(), cfg, store, runner)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != loop.OutcomeComplete || runner.Calls() != 2 {
			t.Fatalf("outcome %s after %d sessions (%s); want complete after 2", rep.Outcome, runner.Calls(), rep.Message)
		}
		var all []loop.Task
		if err := store.ListTasks(t.Context(), loop.ListQuery{}, func(t loop.Task) error { all = append(all, t); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(all) != 2 || all[1].Title != loop.FinalTaskTitle || all[1].Status != loop.StatusDone {
			t.Fatalf("tasks %+v; want a and a done final task", all)
		}
		if d := all[1].Description; !strings.Contains(d, "FAIL: only 1") || strings.Contains(d, "\n1\n2\n3\n") {
			t.Errorf("final task's description keeps the start or loses the end:\n%s", d)
		}
		if all[1].Check != cfg.FinalCmd || all[1].CheckBy != "" {
			t.Errorf("final task's check %q by %q; want the final command, by ralph", all[1].Check, all[1].CheckBy)
		}
	})
	t.Run("it fails past its rounds: exit 3", func(t *testing.T) {
		store := newStore(t, tasks("a")...)
		cfg := testConfig(t)
		// Fails as the final check and passes as the added task's check,
		// turn about: each round's task is done, and the plan never
		// passes its final check.
		counter := filepath.Join(t.TempDir(), "count")
		cfg.FinalCmd = `n=$(cat ` + counter + ` 2>/dev/null || echo 0); echo $((n+1)) > ` + counter + `; echo "round $n"; [ $((n % 2)) = 1 ]`
		runner := looptest.NewFakeRunner(t).Always(agent(done, ""))
		rep, err := loop.Run(t.Context(), cfg, store, runner)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != loop.OutcomeTestGateFailed || rep.ExitCode() != 3 || runner.Calls() != 1+loop.MaxFinalRounds {
			t.Errorf("outcome %s (exit %d) after %d sessions (%s); want test_gate_failed, 3, after %d", rep.Outcome, rep.ExitCode(), runner.Calls(), rep.Message, 1+loop.MaxFinalRounds)
		}
		if !strings.Contains(rep.Message, "the final check failed") {
			t.Errorf("message %q; want the final check named", rep.Message)
		}
	})
	t.Run("its task's check is the final command", func(t *testing.T) {
		store := newStore(t, tasks("a")...)
		cfg := testConfig(t)
		cfg.FinalCmd = "echo never; exit 1"
		runner := looptest.NewFakeRunner(t).Always(agent(done, ""))
		rep, err := loop.Run(t.Context(), cfg, store, runner)
		if err != nil {
			t.Fatal(err)
		}
		// The added task cannot pass its check: it fails after its
		// retries, and the plan ends complete with a failure.
		if rep.Outcome != loop.OutcomeCompleteWithFailures || runner.Calls() != 2+cfg.MaxRetries {
			t.Errorf("outcome %s after %d sessions (%s); want complete_with_failures after %d", rep.Outcome, runner.Calls(), rep.Message, 2+cfg.MaxRetries)
		}
	})
	t.Run("a complete plan at the start is checked", func(t *testing.T) {
		store := newStore(t, loop.Task{ID: "a", Status: loop.StatusDone})
		cfg := testConfig(t)
		marks := filepath.Join(t.TempDir(), "ran")
		cfg.FinalCmd = "echo x >> " + marks
		rep, err := loop.Run(t.Context(), cfg, store, looptest.NewFakeRunner(t))
		if err != nil || rep.Outcome != loop.OutcomeComplete {
			t.Fatalf("outcome %s (%s), %v", rep.Outcome, rep.Message, err)
		}
		if b, _ := os.ReadFile(marks); string(b) != "x\n" {
			t.Errorf("the final command ran %q; want once", b)
		}
	})
	t.Run("not in plan mode", func(t *testing.T) {
		cfg := loop.PlanConfig(t.TempDir())
		cfg.FinalCmd = "true"
		if err := loop.CheckConfig(cfg); !errors.Is(err, loop.ErrConfig) {
			t.Errorf("CheckConfig: %v; want ErrConfig", err)
		}
	})
}
