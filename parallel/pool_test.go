package parallel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// settingStore is a MemStore that records plan settings.
type settingStore struct {
	*looptest.MemStore
	mu       sync.Mutex
	settings map[string]string
}

func newStore(t *testing.T, tasks ...loop.Task) *settingStore {
	t.Helper()
	s := &settingStore{MemStore: looptest.NewMemStore(nil), settings: map[string]string{}}
	if err := s.Add(tasks...); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *settingStore) PlanSetting(_ context.Context, key string) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.settings[key]
	return v, ok, nil
}

func (s *settingStore) RecordPlanSetting(_ context.Context, key, value string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.settings[key]; ok {
		return v, nil
	}
	s.settings[key] = value
	return value, nil
}

// testWorkspace is worker w1's workspace in dir over g, integrating into
// ralph/integration (on remote, if not ""), recording its landings in
// store.
func testWorkspace(g *fakeGit, store loop.LandingStore, dir, remote string) *workspace {
	return &workspace{git: g, dir: dir, worker: "w1", into: into, remote: remote, land: &sync.Mutex{},
		guard: &tipGuard{git: g, store: store, into: into, remote: remote}}
}

// landLocked is another ralph process (or machine) landing task id on
// g's integration branch, g.mu held: a commit of files on the tip,
// recorded in store before the branch moves and, with confirm, confirmed
// after. It returns the commit.
func landLocked(t *testing.T, g *fakeGit, store loop.LandingStore, id string, files map[string]string, confirm bool) string {
	t.Helper()
	tip := g.refs[into]
	c := g.commit(tip, fmt.Sprintf("Task %s\n\nRalph-Task: %s\nRalph-Generation: 1\n", id, id), files)
	if err := store.RecordLanding(t.Context(), loop.Landing{Branch: DefaultInto, Commit: c, Parent: tip, TaskID: id, Generation: 1}); err != nil {
		t.Error(err)
	}
	g.refs[into] = c
	if confirm {
		if err := store.ConfirmLanding(t.Context(), DefaultInto, c); err != nil {
			t.Error(err)
		}
	}
	return c
}

func task(id string, blockers ...string) loop.Task {
	return loop.Task{ID: id, Title: "Task " + id, Status: loop.StatusPending, Priority: 2, BlockedBy: blockers}
}

func envOf(req loop.RunRequest, key string) string {
	for _, e := range req.Env {
		if v, ok := strings.CutPrefix(e, key+"="); ok {
			return v
		}
	}
	return ""
}

// agent is a stand-in agent over the fake git: it runs work for the task
// in its tree and says the task is done.
func agent(g *fakeGit, work func(g *fakeGit, dir, id string) error) loop.Runner {
	return loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		if err := work(g, req.Dir, id); err != nil {
			return looptest.Result(fmt.Sprintf("<task-failed>%s</task-failed> %v", id, err)), nil
		}
		return looptest.Result("did " + id + " <task-done>" + id + "</task-done>"), nil
	})
}

func poolConfig(t *testing.T, g Git, workers int) Config {
	cfg := loop.DefaultConfig(t.TempDir())
	cfg.SessionLog, cfg.RawLogs = false, false
	cfg.MaxIterations = 100
	return Config{Loop: cfg, Workers: workers, Git: g}
}

const into = "refs/heads/" + DefaultInto

// landedOrder returns the task ids of the integration branch's trailers,
// oldest first.
func landedOrder(g *fakeGit) []string {
	var ids []string
	for _, msg := range g.log(into) {
		for line := range strings.Lines(msg) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), TrailerTask+": "); ok {
				ids = append(ids, v)
			}
		}
	}
	slices.Reverse(ids)
	return ids
}

func TestPoolLandsEachTaskOnceInGraphOrder(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "project"})
	tasks := []loop.Task{task("a"), task("b"), task("c", "a"), task("d", "a", "b"), task("e", "d"), task("f")}
	store := newStore(t, tasks...)
	blockers := map[string][]string{}
	for _, tk := range tasks {
		blockers[tk.ID] = tk.BlockedBy
	}
	var missing []string
	var mu sync.Mutex
	run := agent(g, func(g *fakeGit, dir, id string) error {
		g.mu.Lock()
		files := g.trees[dir].files
		for _, b := range blockers[id] {
			if _, ok := files[b+".txt"]; !ok {
				mu.Lock()
				missing = append(missing, id+" lacks "+b)
				mu.Unlock()
			}
		}
		g.mu.Unlock()
		g.write(dir, id+".txt", "work of "+id)
		return nil
	})
	rep, err := Run(t.Context(), poolConfig(t, g, 3), store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s); want complete", rep.Outcome, err, rep.Message)
	}
	if len(missing) > 0 {
		t.Errorf("tasks began without their blockers' work: %v", missing)
	}
	order := landedOrder(g)
	if got, want := slices.Sorted(slices.Values(order)), []string{"a", "b", "c", "d", "e", "f"}; !cmp.Equal(got, want) {
		t.Fatalf("landed %v; want each task once: %v", order, want)
	}
	pos := func(id string) int { return slices.Index(order, id) }
	for id, bs := range blockers {
		for _, b := range bs {
			if pos(b) > pos(id) {
				t.Errorf("%s landed before its blocker %s: %v", id, b, order)
			}
		}
	}
	files := g.filesAt(into)
	for _, tk := range tasks {
		if files[tk.ID+".txt"] != "work of "+tk.ID {
			t.Errorf("integration branch lacks %s's work: %v", tk.ID, files)
		}
	}
	if g.filesAt("refs/heads/main")["a.txt"] != "" {
		t.Error("the user's branch was written")
	}
	if rep.Into != DefaultInto || len(rep.Workers) != 3 {
		t.Errorf("report: into %q, %d workers", rep.Into, len(rep.Workers))
	}
}

// TestPoolConflictIsALostRace: two tasks change the same file at once;
// one lands, the other conflicts, goes back to pending with the file in
// its reason — a race lost, no retry counted (loop.Config.MaxConflicts) —
// keeps its attempt, and lands on its next attempt from the new tip.
func TestPoolConflictIsALostRace(t *testing.T) {
	g := newFakeGit(map[string]string{"shared.txt": "v0"})
	store := newStore(t, task("x"), task("y"))
	meet := meeting(2)
	run := agent(g, func(g *fakeGit, dir, id string) error {
		meet(id) // both first attempts begin from the same tip
		g.write(dir, "shared.txt", "by "+id)
		return nil
	})
	rep, err := Run(t.Context(), poolConfig(t, g, 2), store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s); want complete", rep.Outcome, err, rep.Message)
	}
	order := landedOrder(g)
	if len(order) != 2 {
		t.Fatalf("landed %v; want x and y once each", order)
	}
	loser := order[1]
	tk, _ := store.Get(t.Context(), loser)
	if tk.RetryCount != 0 {
		t.Errorf("%s retry count %d; want 0 (a lost race is no retry)", loser, tk.RetryCount)
	}
	logs, _ := store.Logs(t.Context(), loser)
	i := slices.IndexFunc(logs, func(e loop.LogEntry) bool { return e.Kind == loop.LogRelease })
	if i < 0 || !strings.Contains(logs[i].Message, "integration conflict") || !strings.Contains(logs[i].Message, "shared.txt") {
		t.Errorf("release reason of %s does not name the conflict: %+v", loser, logs)
	}
	attempts := g.refsUnder("refs/heads/" + AttemptBranchPrefix + loser + "/")
	if len(attempts) != 1 {
		t.Errorf("attempt branches of %s: %v; want the failed attempt kept", loser, attempts)
	}
	if got := g.filesAt(into)["shared.txt"]; got != "by "+loser {
		t.Errorf("shared.txt = %q; want the retry's work on top", got)
	}
}

func TestPoolLostRaceIsRetried(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"))
	var once sync.Once
	g.beforeSwap = func(ref string) {
		if ref != into {
			return
		}
		once.Do(func() {
			// Another process lands a commit just before this one's swap.
			g.mu.Lock()
			defer g.mu.Unlock()
			landLocked(t, g, store, "zz", map[string]string{"README": "r", "other.txt": "elsewhere"}, true)
		})
	}
	run := agent(g, func(g *fakeGit, dir, id string) error { g.write(dir, "a.txt", "a"); return nil })
	rep, err := Run(t.Context(), poolConfig(t, g, 1), store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	files := g.filesAt(into)
	if files["a.txt"] != "a" || files["other.txt"] != "elsewhere" {
		t.Errorf("integration branch files %v; want both", files)
	}
	tk, _ := store.Get(t.Context(), "a")
	if tk.RetryCount != 0 || g.swaps[into] != 2 {
		t.Errorf("retry count %d, swaps %d; a lost race is retried, not trouble", tk.RetryCount, g.swaps[into])
	}
}

func TestPoolTaskAlreadyLandedIsDone(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"), task("b"))
	// A build adopted the branch at HEAD, landed a and was killed between
	// the branch moving and recording it: a's landing is recorded, not
	// confirmed, and a is not done.
	store.settings[SettingInto], store.settings[SettingIntoBase] = DefaultInto, g.head
	g.refs[into] = g.head
	store.MoveBranchTip(t.Context(), DefaultInto, "", g.head)
	landLocked(t, g, store, "a", map[string]string{"README": "r", "a.txt": "a"}, false)
	var ran []string
	var mu sync.Mutex
	run := agent(g, func(g *fakeGit, dir, id string) error {
		mu.Lock()
		ran = append(ran, id)
		mu.Unlock()
		g.write(dir, id+".txt", id)
		return nil
	})
	rep, err := Run(t.Context(), poolConfig(t, g, 2), store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if !cmp.Equal(ran, []string{"b"}) {
		t.Errorf("agents ran for %v; want only b (a's work had landed)", ran)
	}
	if got := landedOrder(g); !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("landed %v; want a once, then b", got)
	}
}

func TestPoolNothingChangedIsDoneWithoutCommit(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"))
	run := agent(g, func(*fakeGit, string, string) error { return nil })
	rep, err := Run(t.Context(), poolConfig(t, g, 1), store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if got := g.log(into); len(got) != 1 {
		t.Errorf("integration branch log %q; want no new commit", got)
	}
}

// TestIntegrateGateAfterReplay drives a workspace directly: the gate runs
// only when the tip moved, and its failure keeps the attempt and is an
// IntegrationError.
func TestIntegrateGateAfterReplay(t *testing.T) {
	ctx := t.Context()
	g := newFakeGit(map[string]string{"README": "r"})
	g.refs[into] = g.head
	store := looptest.NewMemStore(nil)
	ws := testWorkspace(g, store, "/w1", "")
	if err := g.AddWorktree(ctx, "/w1", g.head); err != nil {
		t.Fatal(err)
	}
	tk := loop.Task{ID: "a", Title: "A", Generation: 3}
	gateRuns := 0
	gate := func(context.Context) error { gateRuns++; return errors.New("FAIL: TestA") }

	// Tip not moved: no replay, no gate.
	if _, err := ws.Begin(ctx, tk, 0); err != nil {
		t.Fatal(err)
	}
	g.write("/w1", "a.txt", "a")
	res, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: tk, Summary: "did a", Gate: gate})
	if err != nil || res.Replayed || gateRuns != 0 {
		t.Fatalf("Integrate = %+v, %v, gate runs %d; want landed without a replay or gate", res, err, gateRuns)
	}
	if msg := g.commits[res.Commit].msg; !strings.Contains(msg, "Ralph-Task: a\nRalph-Generation: 3\n") {
		t.Errorf("commit message %q lacks the trailers", msg)
	}

	// Tip moved: replayed, gate run, its failure is task trouble.
	tb := loop.Task{ID: "b", Title: "B", Generation: 1}
	if _, err := ws.Begin(ctx, tb, 0); err != nil {
		t.Fatal(err)
	}
	g.write("/w1", "b.txt", "b")
	g.mu.Lock()
	landLocked(t, g, store, "m", map[string]string{"README": "r", "a.txt": "a", "m.txt": "m"}, true)
	g.mu.Unlock()
	_, err = ws.Integrate(ctx, loop.IntegrateRequest{Task: tb, Gate: gate})
	var ie *loop.IntegrationError
	if !errors.As(err, &ie) || !strings.Contains(ie.Reason, "FAIL: TestA") || gateRuns != 1 {
		t.Fatalf("Integrate = %v (gate runs %d); want an IntegrationError with the test output", err, gateRuns)
	}
	if ie.Attempt != AttemptBranchPrefix+"b/1" {
		t.Errorf("attempt kept on %q", ie.Attempt)
	}
	if _, ok := g.filesAt(into)["b.txt"]; ok {
		t.Error("b's work landed although its gate failed")
	}

	// A stale claim: nothing lands.
	if _, err := ws.Begin(ctx, tb, 0); err != nil {
		t.Fatal(err)
	}
	g.write("/w1", "b.txt", "b2")
	stale := func(context.Context) error { return loop.ErrStaleClaim }
	if _, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: tb, Current: stale}); !errors.Is(err, loop.ErrStaleClaim) {
		t.Fatalf("Integrate with a stale claim = %v; want ErrStaleClaim", err)
	}
	if _, ok := g.filesAt(into)["b.txt"]; ok {
		t.Error("a stale claim's work landed")
	}
}

func TestPoolIntoRecordedAndCheckedOutRefused(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"))
	run := agent(g, func(g *fakeGit, dir, id string) error { g.write(dir, "a.txt", "a"); return nil })
	cfg := poolConfig(t, g, 1)
	cfg.Into = "team/int"
	if rep, err := Run(t.Context(), cfg, store, run); err != nil || rep.Outcome != loop.OutcomeComplete || rep.Into != "team/int" {
		t.Fatalf("first build = %v, %v, into %q", rep.Outcome, err, rep.Into)
	}
	cfg.Into = "other"
	rep, err := Run(t.Context(), cfg, store, run)
	if !errors.Is(err, ErrInto) || rep.Outcome != loop.OutcomeError || !strings.Contains(rep.Message, "team/int") {
		t.Errorf("build with another --into = %v, %v (%s); want refused naming team/int", rep.Outcome, err, rep.Message)
	}
	wantIntoError(t, err, IntoError{Reason: IntoRecorded, Branch: "other", Recorded: "team/int"})
	store2 := newStore(t, task("a"))
	cfg.Into = "main"
	rep, err = Run(t.Context(), cfg, store2, run)
	if !errors.Is(err, ErrInto) || !strings.Contains(rep.Message, "checked out") {
		t.Errorf("--into a checked-out branch = %v, %v (%s); want refused", rep.Outcome, err, rep.Message)
	}
	wantIntoError(t, err, IntoError{Reason: IntoCheckedOut, Branch: "main"})
	cfg.Into = "bad..name"
	if rep, err = Run(t.Context(), cfg, store2, run); !errors.Is(err, loop.ErrConfig) {
		t.Errorf("--into bad..name = %v, %v; want a config error", rep.Outcome, err)
	}
	wantIntoError(t, err, IntoError{Reason: IntoNotBranchName, Branch: "bad..name"})
}

// wantIntoError checks that err is an *IntoError equal to want, that it
// wraps ErrInto or loop.ErrConfig as its reason says, and that its
// message speaks of Config.Into, not of a flag.
func wantIntoError(t *testing.T, err error, want IntoError) {
	t.Helper()
	var ie *IntoError
	if !errors.As(err, &ie) {
		t.Errorf("error %v is not an *IntoError", err)
		return
	}
	if *ie != want {
		t.Errorf("IntoError = %+v; want %+v", *ie, want)
	}
	config := want.Reason == IntoNotBranchName || want.Reason == IntoOwnBranch
	if errors.Is(err, loop.ErrConfig) != config || errors.Is(err, ErrInto) == config {
		t.Errorf("%v: Is(loop.ErrConfig) = %v, Is(ErrInto) = %v; want %v, %v", err, errors.Is(err, loop.ErrConfig), errors.Is(err, ErrInto), config, !config)
	}
	if msg := err.Error(); strings.Contains(msg, "--") {
		t.Errorf("message %q names a flag", msg)
	}
}

// TestIntoErrorMessages: every reason's message names the branches it
// refuses in the library's words (Config.Into), and wraps its sentinel.
func TestIntoErrorMessages(t *testing.T) {
	for _, tc := range []struct {
		err  IntoError
		want string
	}{
		{IntoError{Reason: IntoNotBranchName, Branch: "a..b"}, `loop: invalid configuration: Config.Into "a..b" is not a branch name git takes`},
		{IntoError{Reason: IntoOwnBranch, Branch: "ralph"}, `loop: invalid configuration: Config.Into "ralph": ralph, ralph/task/… and ralph/attempt/… are ralph's own branches`},
		{IntoError{Reason: IntoRecorded, Branch: "b", Recorded: "a"}, "parallel: integration branch: this plan integrates into a (recorded by its first parallel build); Config.Into b refused"},
		{IntoError{Reason: IntoRecordedJustNow, Branch: "b", Recorded: "a"}, "parallel: integration branch: another build recorded a for this plan just now; Config.Into b refused"},
		{IntoError{Reason: IntoCheckedOut, Branch: "main"}, "parallel: integration branch: main is checked out in a worktree; ralph never writes a checked-out branch (set Config.Into to another, or switch that worktree away)"},
		{IntoError{Reason: IntoDiverged, Branch: "int", Remote: "origin"}, "parallel: integration branch: int here and int on origin each have commits the other has not; merge them into one (git pull origin int with int checked out, then git push origin int) and build again"},
	} {
		e := tc.err
		if got := e.Error(); got != tc.want {
			t.Errorf("%+v.Error() =\n%s\nwant\n%s", e, got, tc.want)
		}
		wantIntoError(t, &e, e)
	}
}

// TestPoolRefusesCommitAndPeek: a commit gate or peek mode is refused
// with its sentinel, a loop.ErrConfig, in the library's words.
func TestPoolRefusesCommitAndPeek(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"))
	run := agent(g, func(g *fakeGit, dir, id string) error { return nil })
	for _, tc := range []struct {
		set  func(*loop.Config)
		want error
	}{
		{func(c *loop.Config) { c.Commit = true }, ErrCommitWithWorkers},
		{func(c *loop.Config) { c.ClaimMode = loop.ClaimAgent }, ErrPeekWithWorkers},
	} {
		cfg := poolConfig(t, g, 1)
		tc.set(&cfg.Loop)
		rep, err := Run(t.Context(), cfg, store, run)
		if !errors.Is(err, tc.want) || !errors.Is(err, loop.ErrConfig) || rep.Outcome != loop.OutcomeError {
			t.Errorf("Run = %v, %v; want %v, a loop.ErrConfig", rep.Outcome, err, tc.want)
		}
		if strings.Contains(rep.Message, "--") || !strings.Contains(rep.Message, "Config.Loop.") {
			t.Errorf("message %q: want the library's words (Config.Loop.…), no flag", rep.Message)
		}
	}
}

func TestPoolSharesTheIterationBudget(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	var tasks []loop.Task
	for i := range 10 {
		tasks = append(tasks, task(fmt.Sprintf("t%02d", i)))
	}
	store := newStore(t, tasks...)
	run := agent(g, func(g *fakeGit, dir, id string) error { g.write(dir, id, id); return nil })
	cfg := poolConfig(t, g, 4)
	cfg.Loop.MaxIterations = 3
	rep, err := Run(t.Context(), cfg, store, run)
	if err != nil || rep.Outcome != loop.OutcomeLimitReached {
		t.Fatalf("Run = %v, %v (%s); want the iteration limit", rep.Outcome, err, rep.Message)
	}
	c, _ := store.Counts(t.Context(), loop.Scope{})
	if rep.Iterations != 3 || c.Done != 3 || c.InProgress != 0 {
		t.Errorf("iterations %d, done %d, in progress %d; want 3, 3, 0", rep.Iterations, c.Done, c.InProgress)
	}
}

func TestPoolFirstStopEndsEveryWorker(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	var tasks []loop.Task
	for i := range 8 {
		tasks = append(tasks, task(fmt.Sprintf("t%d", i)))
	}
	store := newStore(t, tasks...)
	run := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		if id == "t0" {
			return looptest.Result("<promise>FAILURE</promise>"), nil
		}
		g.write(req.Dir, id, id)
		return looptest.Result("<task-done>" + id + "</task-done>"), nil
	})
	rep, err := Run(t.Context(), poolConfig(t, g, 2), store, run)
	if err != nil || rep.Outcome != loop.OutcomeFailure {
		t.Fatalf("Run = %v, %v (%s); want the FAILURE stop", rep.Outcome, err, rep.Message)
	}
	c, _ := store.Counts(t.Context(), loop.Scope{})
	if c.InProgress != 0 || c.Pending == 0 {
		t.Errorf("counts %+v; want nothing in progress and work left (no new claims after the stop)", c)
	}
}

func TestPoolCancelReleasesEveryClaim(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"), task("b"), task("c"))
	ctx, cancel := context.WithCancel(t.Context())
	var started sync.WaitGroup
	started.Add(2)
	run := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		started.Done()
		<-ctx.Done()
		return looptest.Cancelled(), nil
	})
	go func() { started.Wait(); cancel() }()
	rep, err := Run(ctx, poolConfig(t, g, 2), store, run)
	if err != nil || rep.Outcome != loop.OutcomeCancelled {
		t.Fatalf("Run = %v, %v (%s); want cancelled", rep.Outcome, err, rep.Message)
	}
	if c, _ := store.Counts(t.Context(), loop.Scope{}); c.InProgress != 0 {
		t.Errorf("%d tasks left in progress", c.InProgress)
	}
}

func TestRefName(t *testing.T) {
	for id, want := range map[string]string{
		"t-1":            "t-1",
		"fix bug/3":      "fix%20bug%2F3",
		"a..b.lock":      "a%2E%2Eb%2Elock",
		"100%":           "100%25",
		"ünï":            "%C3%BCn%C3%AF",
		"-lead~1^2:x?*[": "-lead%7E1%5E2%3Ax%3F%2A%5B",
	} {
		got := RefName(id)
		if got != want {
			t.Errorf("RefName(%q) = %q; want %q", id, got, want)
		}
		if back, err := decodeRefName(got); err != nil || back != id {
			t.Errorf("decode(%q) = %q, %v; want %q", got, back, err, id)
		}
	}
}

// TestPoolUsageLimitPausesEveryWorker: one worker's session hits a usage
// limit; every worker waits for the reset before its next claim.
func TestPoolUsageLimitPausesEveryWorker(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"), task("b"), task("c"), task("d"))
	reset := time.Now().Add(time.Hour)
	w2waited := make(chan struct{})
	obs := &notes{w2waited: w2waited}
	var mu sync.Mutex
	limited := false
	meet := meeting(2)
	run := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		w := envOf(req, "RALPH_WORKER")
		meet(w) // both workers are in a session at once
		mu.Lock()
		first := !limited && w == "w1"
		if first {
			limited = true
		}
		mu.Unlock()
		if first {
			return looptest.UsageLimited(reset), nil
		}
		if w == "w1" {
			// w1 works on only once w2 has met the pause, so that the plan
			// is not done before w2 asks for more.
			select {
			case <-w2waited:
			case <-time.After(10 * time.Second):
			}
		}
		id := envOf(req, "RALPH_TASK_ID")
		g.write(req.Dir, id, id)
		return looptest.Result("<task-done>" + id + "</task-done>"), nil
	})
	cfg := poolConfig(t, g, 2)
	var waits []string
	cfg.Loop.Sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d.Round(time.Hour).String())
		return nil
	}
	cfg.Loop.Observer = obs
	rep, err := Run(t.Context(), cfg, store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if !cmp.Equal(waits, []string{"1h0m0s", "1h0m0s"}) {
		t.Errorf("waits %v; want one an hour long for each worker", waits)
	}
	if !obs.has(loop.NoteWait, "w2", "usage limit reached by another worker") {
		t.Errorf("w2 did not say it waits for w1's usage limit: %v", obs.all())
	}
}

// TestPoolSharesTheCostBudget: --max-cost counts every worker's sessions.
func TestPoolSharesTheCostBudget(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	var tasks []loop.Task
	for i := range 10 {
		tasks = append(tasks, task(fmt.Sprintf("t%d", i)))
	}
	store := newStore(t, tasks...)
	run := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		g.write(req.Dir, id, id)
		res := looptest.Result("<task-done>" + id + "</task-done>")
		res.CostUSD = 1
		return res, nil
	})
	cfg := poolConfig(t, g, 3)
	cfg.Loop.MaxCost = 2.5
	rep, err := Run(t.Context(), cfg, store, run)
	if err != nil || rep.Outcome != loop.OutcomeBudgetExhausted {
		t.Fatalf("Run = %v, %v (%s); want the budget exhausted", rep.Outcome, err, rep.Message)
	}
	// At most the budget's 3 sessions, plus one under way in each other
	// worker when the budget ran out.
	if rep.CostUSD < 3 || rep.CostUSD > 5 {
		t.Errorf("spent $%v over all workers; want 3 to 5 sessions", rep.CostUSD)
	}
}

// notes is an Observer that keeps the notes. w2waited, if not nil, is
// closed when w2 says it waits for a usage limit.
type notes struct {
	mu       sync.Mutex
	ns       []loop.Note
	w2waited chan struct{}
}

func (o *notes) Observe(n loop.Note) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ns = append(o.ns, n)
	if n.Kind == loop.NoteWait && n.Worker == "w2" && o.w2waited != nil {
		close(o.w2waited)
		o.w2waited = nil
	}
}

func (o *notes) has(kind loop.NoteKind, worker, words string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.ContainsFunc(o.ns, func(n loop.Note) bool {
		return n.Kind == kind && n.Worker == worker && strings.Contains(n.Message, words)
	})
}

func (o *notes) all() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, n := range o.ns {
		out = append(out, fmt.Sprintf("%s %s %s", n.Worker, n.Kind, n.Message))
	}
	return out
}

// TestPoolAnotherPlansTrailersDoNotCount: a new plan adopts a branch that
// an earlier plan of the repository used, with the same task ids: the
// earlier plan's trailers are not this plan's work.
func TestPoolAnotherPlansTrailersDoNotCount(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	g.refs[into] = g.commit(g.head, "old plan's a\n\nRalph-Task: a\n", map[string]string{"README": "r", "old.txt": "a"})
	store := newStore(t, task("a"))
	ran := 0
	run := agent(g, func(g *fakeGit, dir, id string) error { ran++; g.write(dir, "a.txt", "new"); return nil })
	rep, err := Run(t.Context(), poolConfig(t, g, 1), store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete || ran != 1 {
		t.Fatalf("Run = %v, %v (%s), %d agent sessions; want a worked once", rep.Outcome, err, rep.Message, ran)
	}
	if got := landedOrder(g); !cmp.Equal(got, []string{"a", "a"}) {
		t.Errorf("trailers %v; want the old plan's a, then this plan's", got)
	}
}

// TestPoolStopWakesAWaitingWorker: a worker waiting an hour for a usage
// limit's reset ends at once when another worker's stop ends the run.
func TestPoolStopWakesAWaitingWorker(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"), task("b"), task("c"))
	limited := make(chan struct{})
	var once sync.Once
	meet := meeting(2)
	run := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		w := envOf(req, "RALPH_WORKER")
		meet(w)
		if w == "w1" {
			once.Do(func() { close(limited) })
			return looptest.UsageLimited(time.Now().Add(time.Hour)), nil
		}
		<-limited
		time.Sleep(50 * time.Millisecond) // w1 is in its wait by now, most likely
		return looptest.Result("<promise>FAILURE</promise>"), nil
	})
	done := make(chan struct{})
	var rep Report
	var err error
	go func() {
		defer close(done)
		rep, err = Run(t.Context(), poolConfig(t, g, 2), store, run) // the real clock and sleep
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the run did not end: the waiting worker slept on")
	}
	if err != nil || rep.Outcome != loop.OutcomeFailure {
		t.Fatalf("Run = %v, %v (%s); want the FAILURE stop", rep.Outcome, err, rep.Message)
	}
	if c, _ := store.Counts(t.Context(), loop.Scope{}); c.InProgress != 0 {
		t.Errorf("%d tasks left in progress", c.InProgress)
	}
}

func TestPoolOnceRunsOneIteration(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"), task("b"), task("c"), task("d"))
	run := agent(g, func(g *fakeGit, dir, id string) error { g.write(dir, id, id); return nil })
	cfg := poolConfig(t, g, 2)
	cfg.Loop.Once = true
	rep, err := Run(t.Context(), cfg, store, run)
	if err != nil || rep.Iterations != 1 {
		t.Fatalf("Run = %v, %v, %d iterations; want one in all", rep.Outcome, err, rep.Iterations)
	}
}

// TestPoolRefusesBeforeRecording: a build refused for any reason records
// no integration branch with the plan (a later build may choose another);
// ralph's own branch names are refused as --into.
func TestPoolRefusesBeforeRecording(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"))
	run := agent(g, func(g *fakeGit, dir, id string) error { return nil })
	cfg := poolConfig(t, g, 1)
	cfg.Into = "typo/branch"
	cfg.Loop.Strategy = "no-such-strategy"
	if _, err := Run(t.Context(), cfg, store, run); !errors.Is(err, loop.ErrConfig) {
		t.Fatalf("Run with a bad strategy = %v; want a config error", err)
	}
	for _, name := range []string{"ralph", "ralph/task/x", "ralph/attempt/x/1", "HEAD"} {
		cfg := poolConfig(t, g, 1)
		cfg.Into = name
		_, err := Run(t.Context(), cfg, store, run)
		if !errors.Is(err, loop.ErrConfig) {
			t.Errorf("--into %s = %v; want refused", name, err)
		}
		reason := IntoOwnBranch
		if name == "HEAD" {
			reason = IntoNotBranchName
		}
		wantIntoError(t, err, IntoError{Reason: reason, Branch: name})
	}
	if v, ok, _ := store.PlanSetting(t.Context(), SettingInto); ok {
		t.Errorf("integration branch %q recorded by refused builds", v)
	}
	if _, ok := g.refs["refs/heads/typo/branch"]; ok {
		t.Error("a refused build made its --into branch")
	}
}

// meeting returns a function whose first call with each key waits until
// n keys have called it: n sessions under way at once. Later calls with a
// key return at once.
func meeting(n int) func(key string) {
	var all sync.WaitGroup
	all.Add(n)
	var seen sync.Map
	return func(key string) {
		if _, again := seen.LoadOrStore(key, true); !again {
			all.Done()
			all.Wait()
		}
	}
}

// TestPoolResetTaskIsWorkedAgain: a task reset after its work landed (its
// history records the landing as done) is worked again, and lands a second
// commit; one whose landing was never recorded is not.
func TestPoolResetTaskIsWorkedAgain(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"))
	ran := 0
	run := agent(g, func(g *fakeGit, dir, id string) error {
		ran++
		g.write(dir, "a.txt", fmt.Sprint("version ", ran))
		return nil
	})
	if rep, err := Run(t.Context(), poolConfig(t, g, 1), store, run); err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("first build: %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	// The plan as `ralph task reset a` leaves it: pending, its history
	// saying it was done once.
	again := newStore(t, task("a"))
	again.settings = store.settings
	if err := again.AddLog(t.Context(), "a", loop.LogDone, "did a"); err != nil {
		t.Fatal(err)
	}
	if err := again.AddLog(t.Context(), "a", loop.LogReset, "reset"); err != nil {
		t.Fatal(err)
	}
	if rep, err := Run(t.Context(), poolConfig(t, g, 1), again, run); err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("build after the reset: %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if ran != 2 || g.filesAt(into)["a.txt"] != "version 2" {
		t.Errorf("%d agent sessions, a.txt %q; want the reset task worked again", ran, g.filesAt(into)["a.txt"])
	}
	if got := landedOrder(g); !cmp.Equal(got, []string{"a", "a"}) {
		t.Errorf("landed %v; want a twice", got)
	}
}

// TestLimitSaysWhatRemains: a build that ends at the iteration limit says
// how many tasks remain, not only how many iterations ran.
func TestLimitSaysWhatRemains(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"), task("b"), task("c"))
	cfg := poolConfig(t, g, 1)
	cfg.Loop.MaxIterations = 1
	rep, err := Run(t.Context(), cfg, store, agent(g, func(g *fakeGit, dir, id string) error {
		g.write(dir, id+".txt", id)
		return nil
	}))
	if err != nil || rep.Outcome != loop.OutcomeLimitReached {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if !strings.HasSuffix(rep.Message, "; 2 tasks remain") {
		t.Errorf("the end says %q; want it to end with the 2 tasks that remain", rep.Message)
	}
}
