package loop_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
	"github.com/ralph-dev/ralph/safefile"
)

// gatedRunner reports each task done; its first session waits until
// release is closed, after saying on started that it runs.
type gatedRunner struct {
	started, release chan struct{}
	once             sync.Once
	mu               sync.Mutex
	sessions         []string
}

func newGatedRunner() *gatedRunner {
	return &gatedRunner{started: make(chan struct{}), release: make(chan struct{})}
}

func (g *gatedRunner) Run(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
	id := envOf(req, "RALPH_TASK_ID")
	g.mu.Lock()
	g.sessions = append(g.sessions, id)
	g.mu.Unlock()
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.started)
		select {
		case <-g.release:
		case <-ctx.Done():
			return loop.RunResult{}, ctx.Err()
		}
	}
	if isVerifier(req) {
		return looptest.Result("<verify-pass/>"), nil
	}
	return looptest.Result(done(id)), nil
}

func (g *gatedRunner) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sessions)
}

// noAgent is the runner of a run that must not start an agent.
func noAgent(t *testing.T) loop.Runner {
	return loop.RunnerFunc(func(context.Context, loop.RunRequest) (loop.RunResult, error) {
		t.Error("a refused run started an agent")
		return loop.RunResult{}, errors.New("refused run")
	})
}

// wantBusy checks that a run was refused because the tree is held:
// OutcomeError (exit 1), a *TreeBusyError naming holder.
func wantBusy(t *testing.T, what string, rep loop.Report, err error, writing bool, holder string) {
	t.Helper()
	var busy *loop.TreeBusyError
	if !errors.As(err, &busy) || !errors.Is(err, loop.ErrTreeBusy) {
		t.Fatalf("%s: err %v (outcome %s); want a *TreeBusyError", what, err, rep.Outcome)
	}
	if rep.Outcome != loop.OutcomeError || rep.ExitCode() != 1 || rep.Message != err.Error() {
		t.Errorf("%s: outcome %s, exit %d, message %q; want error, exit 1, the error's message", what, rep.Outcome, rep.ExitCode(), rep.Message)
	}
	if busy.Writing != writing {
		t.Errorf("%s: Writing %v, want %v", what, busy.Writing, writing)
	}
	if len(busy.Holders) != 1 || busy.Holders[0].AgentID != holder || busy.Holders[0].Holder != loop.ThisProcess() || busy.Holders[0].Started.IsZero() {
		t.Fatalf("%s: holders %+v; want %s of this process, with its start", what, busy.Holders, holder)
	}
	if pid := fmt.Sprintf("pid %d", os.Getpid()); !strings.Contains(err.Error(), pid) || !strings.Contains(err.Error(), holder) {
		t.Errorf("%s: message %q does not name %s, %s", what, err, pid, holder)
	}
}

// A build that verifies holds its working tree alone (ARCHITECTURE.md
// §3.4): while its agent works, every other run in that tree — plain,
// verifying, committing, prompt mode — is refused at once, before any
// agent, naming it; a worker's run (a tree of its own) is not. Once it
// ends, the tree is free again.
func TestWritingBuildHoldsTree(t *testing.T) {
	store := newStore(t, tasks("a", "b")...)
	cfg := testConfig(t)
	cfg.Verify = true
	cfg.AgentID = "agent-0000000a"
	gate := newGatedRunner()
	var rep loop.Report
	var err error
	var wg sync.WaitGroup
	wg.Go(func() { rep, err = loop.Run(t.Context(), cfg, store, gate) })
	<-gate.started

	other := func(mut func(*loop.Config)) loop.Config {
		c := testConfig(t)
		c.Root, c.AgentID = cfg.Root, "agent-0000000b"
		if mut != nil {
			mut(&c)
		}
		return c
	}
	for _, tc := range []struct {
		name    string
		mut     func(*loop.Config)
		writing bool
	}{
		{"plain", nil, false},
		{"verify", func(c *loop.Config) { c.Verify = true }, true},
		{"commit", func(c *loop.Config) { c.Commit = true }, true},
		{"peek", func(c *loop.Config) { c.ClaimMode = loop.ClaimAgent }, false},
	} {
		r, e := loop.Run(t.Context(), other(tc.mut), store, noAgent(t))
		wantBusy(t, tc.name, r, e, tc.writing, cfg.AgentID)
	}
	r, e := loop.RunPrompt(t.Context(), other(nil), loop.PromptParams{Text: "hello"}, noAgent(t))
	wantBusy(t, "prompt", r, e, false, cfg.AgentID)
	// The refused runs wrote no log.
	if logs, _ := os.ReadDir(filepath.Join(cfg.Root, ".ralph", "logs")); len(logs) != 0 {
		t.Errorf("logs after refused runs: %v", logs)
	}

	// A worker works in its own tree: no lock.
	wc := other(func(c *loop.Config) {
		c.Verify, c.Scope, c.MaxIterations = true, loop.Scope{TaskID: "b"}, 1
		c.Workspace = &fakeWorkspace{dir: t.TempDir()}
	})
	worker := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		if isVerifier(req) {
			return looptest.Result("<verify-pass/>"), nil
		}
		return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
	})
	if r, e := loop.Run(t.Context(), wc, store, worker); e != nil || r.Outcome != loop.OutcomeComplete {
		t.Errorf("worker's run: %s (%q), err %v; want complete", r.Outcome, r.Message, e)
	}

	close(gate.release)
	wg.Wait()
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("holder: %s (%q), err %v; want complete", rep.Outcome, rep.Message, err)
	}
	if n := gate.count(); n != 2 {
		t.Errorf("holder's sessions %d, want 2 (task a and its verifier)", n)
	}
	// Free again: a verifying build starts.
	if err := store.Add(loop.Task{ID: "c", Title: "c", Priority: 2}); err != nil {
		t.Fatal(err)
	}
	if r, e := loop.Run(t.Context(), other(func(c *loop.Config) { c.Verify = true }), store, worker); e != nil || r.Outcome != loop.OutcomeComplete {
		t.Errorf("a build after the holder ended: %s (%q), err %v; want complete", r.Outcome, r.Message, e)
	}
}

// Plain builds share the tree (many loops on one plan), and a writing
// build does not start beside them: it is refused, naming one that runs.
func TestPlainBuildsShareTree(t *testing.T) {
	store := newStore(t, tasks("a", "b")...)
	cfg := testConfig(t)
	cfg.AgentID = "agent-0000000a"
	gate := newGatedRunner()
	var rep loop.Report
	var err error
	var wg sync.WaitGroup
	wg.Go(func() { rep, err = loop.Run(t.Context(), cfg, store, gate) })
	<-gate.started

	second := testConfig(t)
	second.Root, second.AgentID, second.MaxIterations = cfg.Root, "agent-0000000b", 1
	r, e := loop.Run(t.Context(), second, store, looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
	}))
	if e != nil || r.Iterations != 1 {
		t.Errorf("a second plain build beside the first: %s (%q), err %v; want it to work", r.Outcome, r.Message, e)
	}
	writer := testConfig(t)
	writer.Root, writer.AgentID, writer.Commit = cfg.Root, "agent-0000000c", true
	r, e = loop.Run(t.Context(), writer, store, noAgent(t))
	wantBusy(t, "commit", r, e, true, cfg.AgentID)
	// Prompt (and plan) mode with Commit commit the tree too.
	r, e = loop.RunPrompt(t.Context(), writer, loop.PromptParams{Text: "hello"}, noAgent(t))
	wantBusy(t, "prompt with commit", r, e, true, cfg.AgentID)

	close(gate.release)
	wg.Wait()
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("first build: %s (%q), err %v; want complete", rep.Outcome, rep.Message, err)
	}
}

// Two slow verifying builds started together: exactly one runs, the
// other is refused before any agent — the first agent to run waits until
// the other build has returned, so both are in the tree at once — and the
// one that runs does all the work.
func TestTwoVerifyingBuilds(t *testing.T) {
	for range 5 {
		store := newStore(t, tasks("a", "b")...)
		root := t.TempDir()
		var reps [2]loop.Report
		var errs [2]error
		var runners [2]*looptest.FakeRunner
		start, returned := make(chan struct{}), make(chan struct{})
		var once sync.Once
		var wg sync.WaitGroup
		for i := range 2 {
			cfg := testConfig(t)
			cfg.Root, cfg.Verify, cfg.AgentID = root, true, fmt.Sprintf("agent-0000000%d", i)
			runners[i] = looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
				select {
				case <-returned:
				case <-time.After(10 * time.Second):
					t.Error("the other build neither ran nor was refused")
				}
				if isVerifier(req) {
					return looptest.Result("<verify-pass/>"), nil
				}
				return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
			})
			wg.Go(func() {
				<-start
				reps[i], errs[i] = loop.Run(t.Context(), cfg, store, runners[i])
				once.Do(func() { close(returned) })
			})
		}
		close(start)
		wg.Wait()
		ran := -1
		for i := range 2 {
			switch {
			case errors.Is(errs[i], loop.ErrTreeBusy):
				if n := len(runners[i].Requests()); n != 0 {
					t.Errorf("refused build %d ran %d sessions", i, n)
				}
			case errs[i] == nil && reps[i].Outcome == loop.OutcomeComplete && ran < 0:
				ran = i
			default:
				t.Errorf("build %d: %s (%q), err %v; want one complete, one refused", i, reps[i].Outcome, reps[i].Message, errs[i])
			}
		}
		if ran < 0 {
			t.Fatal("no build ran")
		}
		if n := len(runners[ran].Requests()); n != 4 {
			t.Errorf("the build that ran had %d sessions, want 4 (two tasks, two verifiers)", n)
		}
		c, _ := store.Counts(t.Context(), loop.Scope{})
		if c.Done != 2 {
			t.Errorf("counts %+v, want both tasks done", c)
		}
	}
}

// A record left by a build that ended does not hold the tree: the lock
// is the kernel's and went with its process.
func TestTreeLockRecordOfEndedBuild(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1)")
	}
	gone := loop.Holder{Host: loop.HostID(), PID: cmd.Process.Pid, Start: 1}
	cfg := testConfig(t)
	rec := fmt.Sprintf(`{"writing":true,"started":"2026-01-02T03:04:05Z","agent":"agent-dead","holder":%q}`+"\n", gone.String())
	// A record an agent forged, with escape sequences: never shown.
	rec += fmt.Sprintf(`{"writing":true,"agent":"\u001b[2J","holder":%q}`+"\n", loop.ThisProcess().String())
	if err := safefile.MkdirAll(cfg.Root, ".ralph", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Root, ".ralph", "tree.lock"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Verify = true
	rep, err := loop.Run(t.Context(), cfg, newStore(t), noAgent(t))
	if err != nil || rep.Outcome != loop.OutcomeNoPlan {
		t.Fatalf("%s (%q), err %v; want no plan: the tree is free", rep.Outcome, rep.Message, err)
	}
	data, _ := os.ReadFile(filepath.Join(cfg.Root, ".ralph", "tree.lock"))
	if strings.Contains(string(data), "agent-dead") || !strings.Contains(string(data), cfg.AgentID) {
		t.Errorf("tree.lock after the run: %q; want this run's record only", data)
	}
}

// The lock file is opened without following a link an agent planted
// (ARCHITECTURE.md §7.2): the run stops with an error, the link's target
// untouched.
func TestTreeLockLinkRefused(t *testing.T) {
	cfg := testConfig(t)
	target := filepath.Join(t.TempDir(), "secret")
	writeFile(t, filepath.Dir(target), "secret", "keep\n")
	if err := os.MkdirAll(filepath.Join(cfg.Root, ".ralph"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(cfg.Root, ".ralph", "tree.lock")); err != nil {
		t.Fatal(err)
	}
	rep, err := loop.Run(t.Context(), cfg, newStore(t, tasks("a")...), noAgent(t))
	if !errors.Is(err, safefile.ErrLink) || rep.Outcome != loop.OutcomeError {
		t.Fatalf("%s, err %v; want an error refusing the link", rep.Outcome, err)
	}
	if data, _ := os.ReadFile(target); string(data) != "keep\n" {
		t.Errorf("the link's target now holds %q", data)
	}
}

// Six plain builds started together in one tree all run (none is refused
// while another takes the free tree an instant alone): each session waits
// until all six hold a task.
func TestSixPlainBuildsStartTogether(t *testing.T) {
	const n = 6
	for range 5 {
		store := newStore(t, tasks("a", "b", "c", "d", "e", "f")...)
		root := t.TempDir()
		var started sync.WaitGroup
		started.Add(n)
		all := make(chan struct{})
		go func() { started.Wait(); close(all) }()
		runner := loop.RunnerFunc(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
			started.Done()
			select {
			case <-all:
			case <-time.After(10 * time.Second):
				t.Error("not all six builds ran")
			}
			return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
		})
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			cfg := testConfig(t)
			cfg.Root, cfg.MaxIterations, cfg.AgentID = root, 1, fmt.Sprintf("agent-0000000%d", i)
			wg.Go(func() {
				<-start
				if rep, err := loop.Run(t.Context(), cfg, store, runner); err != nil || rep.ExitCode() != 0 {
					t.Errorf("build %d: %s (%q), err %v; want exit 0", i, rep.Outcome, rep.Message, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}
	}
}
