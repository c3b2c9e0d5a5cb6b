package loop_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// TestTaskCheckPasses: a task whose check passes in the tree the agent
// left is done at the first attempt, and the verifier still judges it
// after the check.
func TestTaskCheckPasses(t *testing.T) {
	cfg := testConfig(t)
	cfg.Verify = true
	store := newStore(t, loop.Task{ID: "a", Check: "test -f a.txt"})
	runner := looptest.NewFakeRunner(t).Always(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		if isVerifier(req) {
			return looptest.Result("<verify-pass/>"), nil
		}
		return writer(cfg.Root)(ctx, req)
	})
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != loop.OutcomeComplete || runner.Calls() != 2 {
		t.Fatalf("outcome %s after %d sessions (want complete after the agent's and the verifier's): %s", rep.Outcome, runner.Calls(), rep.Message)
	}
	if p := runner.Requests()[0].Prompt; !strings.Contains(p, "## The task's check\n") || !strings.Contains(p, "```sh\ntest -f a.txt\n```") {
		t.Errorf("the build prompt does not show the task's check:\n%s", p)
	}
}

// TestNoCheckNoSection: a task without a check gets no check section.
func TestNoCheckNoSection(t *testing.T) {
	cfg := testConfig(t)
	store := newStore(t, loop.Task{ID: "a", Description: "Do it."})
	runner := looptest.NewFakeRunner(t).Always(agent(done, ""))
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	if p := runner.Requests()[0].Prompt; strings.Contains(p, "check") || !strings.Contains(p, "Do it.\n\n## How to finish") {
		t.Errorf("a task without a check: prompt\n%s", p)
	}
}

// TestTaskCheckFailureRetries: a failing check is task trouble: the claim
// goes back for a retry (counted), the verifier is not asked, and the next
// prompt shows the end of the check's output — where a failure is — even
// when the output is long.
func TestTaskCheckFailureRetries(t *testing.T) {
	cfg := testConfig(t)
	cfg.Verify = true
	marker := filepath.Join(cfg.Root, "failed-once")
	// 3,000 bytes of noise, then the line that says what failed.
	check := "if [ -e " + marker + " ]; then exit 0; fi; touch " + marker +
		"; echo 'START '\"OF OUTPUT\"; i=0; while [ $i -lt 100 ]; do echo 'ok   some/package   0.01s (cached)'; i=$((i+1)); done; echo 'FAIL: TestParse (want 3, got 4)'; exit 1"
	store := newStore(t, loop.Task{ID: "a", Check: check})
	var mu sync.Mutex
	verifiers := 0
	runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		if isVerifier(req) {
			mu.Lock()
			verifiers++
			mu.Unlock()
			return looptest.Result("<verify-pass/>"), nil
		}
		return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
	})
	obs := &recorder{}
	cfg.Observer = obs
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != loop.OutcomeComplete || runner.Calls() != 3 || verifiers != 1 {
		t.Fatalf("outcome %s after %d sessions, %d of them verifiers (want complete after 2 attempts, 1 verification): %s",
			rep.Outcome, runner.Calls(), verifiers, rep.Message)
	}
	task, err := store.Get(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if task.RetryCount != 1 {
		t.Errorf("RetryCount = %d, want 1: a failed check counts as a retry", task.RetryCount)
	}
	second := ""
	for _, req := range runner.Requests() {
		if !isVerifier(req) {
			second = req.Prompt // the last working session's
		}
	}
	for _, s := range []string{"This is retry 1", "the task's check failed", "FAIL: TestParse (want 3, got 4)"} {
		if !strings.Contains(second, s) {
			t.Errorf("second prompt lacks %q:\n%s", s, second)
		}
	}
	if strings.Contains(second, "START OF OUTPUT") {
		t.Errorf("the retry reason kept the start of a long output rather than its end:\n%s", second)
	}
	var ends []loop.IterationStatus
	for _, n := range obs.kind(loop.NoteIterationEnd) {
		ends = append(ends, n.Status)
	}
	if len(ends) != 2 || ends[0] != loop.IterCheckFailed || ends[1] != loop.IterDone {
		t.Errorf("iterations ended %v, want [check_failed done]", ends)
	}
}

// TestTaskCheckFailsTheTaskAfterItsRetries: a check that never passes
// fails the task after 1+MaxRetries attempts, as a failed verification
// does.
func TestTaskCheckFailsTheTaskAfterItsRetries(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxRetries = 1
	store := newStore(t, loop.Task{ID: "a", Check: "echo 'no such file: parser.go' >&2; exit 2"})
	runner := looptest.NewFakeRunner(t).Always(agent(done, ""))
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	task, err := store.Get(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != loop.StatusFailed || runner.Calls() != 2 {
		t.Fatalf("task %s after %d attempts, want failed after 2", task.Status, runner.Calls())
	}
	logs, err := store.Logs(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if last := logs[len(logs)-1]; last.Kind != loop.LogFail || !strings.Contains(last.Message, "no such file: parser.go") {
		t.Errorf("last history entry %s %q, want the fail with the check's output", last.Kind, last.Message)
	}
}

// TestTaskCheckRunsInTheWorkspace: with workers the check runs in the
// worker's tree, through Config.Commands (where the test gate runs: in the
// sandbox under --sandbox), and a task without a check runs none.
func TestTaskCheckRunsInTheWorkspace(t *testing.T) {
	cfg := testConfig(t)
	tree := t.TempDir()
	cfg.Workspace = &fakeWorkspace{dir: tree}
	var mu sync.Mutex
	var got []loop.CommandRequest
	cfg.Commands = loop.CommandFunc(func(_ context.Context, req loop.CommandRequest) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, req)
		return "", nil
	})
	store := newStore(t, loop.Task{ID: "a", Check: "make check-a"}, loop.Task{ID: "b"})
	runner := looptest.NewFakeRunner(t).Always(agent(done, ""))
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Message)
	}
	if len(got) != 1 || got[0].Command != "make check-a" || got[0].Dir != tree {
		t.Fatalf("commands run: %+v, want make check-a once, in %s", got, tree)
	}
}

// TestAgentChecksAnnounced: a build lists, when it starts, the checks
// agents wrote on the tasks it may run — not a person's, not those of
// tasks already finished.
func TestAgentChecksAnnounced(t *testing.T) {
	cfg := testConfig(t)
	store := newStore(t,
		loop.Task{ID: "a", Check: "go test ./parser/...", CheckBy: "agent-1a2b3c4d"},
		loop.Task{ID: "b", Check: "make lint"},
		loop.Task{ID: "c", Check: "rm -rf build", CheckBy: "agent-1a2b3c4d", Status: loop.StatusDone},
		loop.Task{ID: "d"},
	)
	obs := &recorder{}
	cfg.Observer = obs
	cfg.MaxIterations = 1
	if err := os.WriteFile(filepath.Join(cfg.Root, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Commands = loop.CommandFunc(func(context.Context, loop.CommandRequest) (string, error) { return "", nil })
	runner := looptest.NewFakeRunner(t).Always(agent(done, ""))
	if _, err := loop.Run(t.Context(), cfg, store, runner); err != nil {
		t.Fatal(err)
	}
	var said []loop.Note
	for _, n := range obs.kind(loop.NoteNotice) {
		if strings.Contains(n.Message, "checks that agents wrote") {
			said = append(said, n)
		}
	}
	if len(said) != 1 {
		t.Fatalf("notices about agents' checks: %+v, want one", said)
	}
	if !strings.Contains(said[0].Message, "a: go test ./parser/...  (written by agent agent-1a2b3c4d)") ||
		strings.Contains(said[0].Message, "make lint") || strings.Contains(said[0].Message, "rm -rf build") {
		t.Errorf("notice %q: want task a's check alone", said[0].Message)
	}
	// The list is the notice's Output, one check a line: a view prints
	// it as lines (the CLI folded it onto one line, "; "-joined).
	if want := "a: go test ./parser/...  (written by agent agent-1a2b3c4d)"; said[0].Output != want {
		t.Errorf("notice's Output %q, want %q", said[0].Output, want)
	}
}
