package parallel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// gitMachines makes a bare repository with one commit and n clones of it
// ("machines", each with the remote origin and an identity of its own),
// and returns the bare repository and the clones.
func gitMachines(t *testing.T, n int) (string, []string) {
	t.Helper()
	seed := gitRepo(t)
	bare := filepath.Join(t.TempDir(), "shared.git")
	gitOut(t, seed, "clone", "-q", "--bare", seed, bare)
	var clones []string
	for i := range n {
		dir := filepath.Join(t.TempDir(), fmt.Sprintf("machine%d", i+1))
		gitOut(t, seed, "clone", "-q", bare, dir)
		gitOut(t, dir, "config", "user.email", fmt.Sprintf("m%d@example.com", i+1))
		gitOut(t, dir, "config", "user.name", fmt.Sprintf("Machine %d", i+1))
		clones = append(clones, dir)
	}
	return bare, clones
}

// startBranch makes the integration branch on the bare repository, at
// its main, as an earlier build would have.
func startBranch(t *testing.T, bare string) {
	t.Helper()
	gitOut(t, bare, "update-ref", into, "refs/heads/main")
}

// remoteConfig is a pool configuration for the clone dir, integrating
// through its remote origin.
func remoteConfig(dir string, workers int) Config {
	cfg := loop.DefaultConfig(dir)
	cfg.SessionLog, cfg.RawLogs = false, false
	cfg.MaxIterations = 100
	return Config{Loop: cfg, Workers: workers, Remote: "origin"}
}

// landedOn returns the Ralph-Task trailers of branch in repo, oldest
// first.
func landedOn(t *testing.T, repo, branch string) []string {
	t.Helper()
	ids := strings.Fields(gitOut(t, repo, "log", "--format=%(trailers:key=Ralph-Task,valueonly)", branch))
	slices.Reverse(ids)
	return ids
}

// pushWatch is a Git whose pushes a test sees: before runs before each,
// after with each one's outcome.
type pushWatch struct {
	Git
	before func(p PushParams)
	after  func(p PushParams, err error)
}

func (g *pushWatch) Push(ctx context.Context, p PushParams) error {
	if g.before != nil {
		g.before(p)
	}
	err := g.Git.Push(ctx, p)
	if g.after != nil {
		g.after(p, err)
	}
	return err
}

// TestPoolRemoteMachines is ARCHITECTURE.md §5's --remote on real repositories:
// three clones of one bare repository ("machines") build one plan at
// once, two workers each, against one store. Every task's commit is on
// the remote's integration branch exactly once, in an order the graph
// allows; every task began from a tip with its blockers' work, whichever
// machine landed them; each task's branch is on the remote; each clone's
// own integration branch is on the way to the remote's.
func TestPoolRemoteMachines(t *testing.T) {
	bare, clones := gitMachines(t, 3)
	tasks := []loop.Task{task("a"), task("b"), task("c", "a"), task("d", "a", "b"), task("e", "d"), task("f"),
		task("g", "c", "e"), task("h", "f")}
	store := newStore(t, tasks...)
	blockers := map[string][]string{}
	for _, tk := range tasks {
		blockers[tk.ID] = tk.BlockedBy
	}
	var mu sync.Mutex
	var problems []string
	ran := map[string][]string{}
	var wg sync.WaitGroup
	reps := make([]Report, len(clones))
	errs := make([]error, len(clones))
	for k, dir := range clones {
		run := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
			id := envOf(req, "RALPH_TASK_ID")
			mu.Lock()
			ran[id] = append(ran[id], filepath.Base(dir))
			if !strings.HasPrefix(req.Dir, dir+string(filepath.Separator)) {
				problems = append(problems, id+" worked in "+req.Dir+", outside its machine "+dir)
			}
			for _, b := range blockers[id] {
				if _, err := os.Stat(filepath.Join(req.Dir, b+".txt")); err != nil {
					problems = append(problems, id+" began without "+b+"'s work on "+filepath.Base(dir))
				}
			}
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			os.WriteFile(filepath.Join(req.Dir, id+".txt"), []byte(id+"\n"), 0o644)
			return looptest.Result("<task-done>" + id + "</task-done>"), nil
		})
		wg.Go(func() { reps[k], errs[k] = Run(t.Context(), remoteConfig(dir, 2), store, run) })
	}
	wg.Wait()
	for k := range clones {
		if errs[k] != nil || reps[k].Outcome != loop.OutcomeComplete {
			t.Fatalf("machine %d: Run = %v, %v (%s)", k+1, reps[k].Outcome, errs[k], reps[k].Message)
		}
	}
	if len(problems) > 0 {
		t.Errorf("problems: %v", problems)
	}
	landed := landedOn(t, bare, DefaultInto)
	if got := slices.Sorted(slices.Values(landed)); !slices.Equal(got, []string{"a", "b", "c", "d", "e", "f", "g", "h"}) {
		t.Fatalf("landed on the remote %v; want each task once", landed)
	}
	for id, bs := range blockers {
		for _, b := range bs {
			if slices.Index(landed, b) > slices.Index(landed, id) {
				t.Errorf("%s landed before its blocker %s: %v", id, b, landed)
			}
		}
		if len(ran[id]) != 1 {
			t.Errorf("task %s's agent ran %v; want once", id, ran[id])
		}
		c := gitOut(t, bare, "rev-parse", "refs/heads/"+TaskBranchPrefix+id)
		if msg := gitOut(t, bare, "log", "-1", "--format=%B", c); !strings.Contains(msg, TrailerTask+": "+id+"\n") {
			t.Errorf("the remote's %s%s is not the commit that landed it: %q", TaskBranchPrefix, id, msg)
		}
		gitOut(t, bare, "merge-base", "--is-ancestor", c, DefaultInto)
	}
	tip := gitOut(t, bare, "rev-parse", DefaultInto)
	for _, dir := range clones {
		local := gitOut(t, dir, "rev-parse", DefaultInto)
		gitOut(t, bare, "merge-base", "--is-ancestor", local, tip)
		if st := gitOut(t, dir, "status", "--porcelain"); st != "" {
			t.Errorf("%s's working tree changed: %q", dir, st)
		}
	}
}

// TestPoolRemoteLostPushRace: two machines integrate at once from one
// tip; the second push is held back until the first has landed, so the
// remote refuses it (it does not fast-forward). That is a lost race: the
// second machine fetches, replays onto the new tip and pushes again; both
// tasks land, neither counts a retry.
func TestPoolRemoteLostPushRace(t *testing.T) {
	bare, clones := gitMachines(t, 2)
	startBranch(t, bare)
	store := newStore(t, task("a"), task("b"))
	meet := meeting(2)
	run := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		meet(id) // each machine has one of them, from the same tip
		os.WriteFile(filepath.Join(req.Dir, id+".txt"), []byte(id+"\n"), 0o644)
		return looptest.Result("<task-done>" + id + "</task-done>"), nil
	})
	first := make(chan struct{})
	var firstOnce sync.Once
	var mu sync.Mutex
	var second []error // the outcomes of machine 2's pushes of the branch
	g1 := &pushWatch{Git: &ExecGit{Root: clones[0]}, after: func(p PushParams, err error) {
		if p.Ref == into && err == nil {
			firstOnce.Do(func() { close(first) })
		}
	}}
	g2 := &pushWatch{Git: &ExecGit{Root: clones[1]},
		before: func(p PushParams) {
			if p.Ref != into {
				return
			}
			select {
			case <-first:
			case <-time.After(30 * time.Second):
				t.Error("machine 1 never landed its task")
			}
		},
		after: func(p PushParams, err error) {
			if p.Ref == into {
				mu.Lock()
				second = append(second, err)
				mu.Unlock()
			}
		}}
	var wg sync.WaitGroup
	reps := make([]Report, 2)
	errs := make([]error, 2)
	for k, g := range []Git{g1, g2} {
		cfg := remoteConfig(clones[k], 1)
		cfg.Git = g
		wg.Go(func() { reps[k], errs[k] = Run(t.Context(), cfg, store, run) })
	}
	wg.Wait()
	for k := range reps {
		if errs[k] != nil || reps[k].Outcome != loop.OutcomeComplete {
			t.Fatalf("machine %d: Run = %v, %v (%s)", k+1, reps[k].Outcome, errs[k], reps[k].Message)
		}
	}
	if len(second) != 2 || !errors.Is(second[0], ErrRefMoved) || second[1] != nil {
		t.Errorf("machine 2's pushes of the branch: %v; want a refused one (ErrRefMoved), then one that landed", second)
	}
	if got := slices.Sorted(slices.Values(landedOn(t, bare, DefaultInto))); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("landed on the remote %v; want a and b once each", got)
	}
	for _, id := range []string{"a", "b"} {
		if tk, _ := store.Get(t.Context(), id); tk.Status != loop.StatusDone || tk.RetryCount != 0 {
			t.Errorf("%s is %s after %d retries; want done after none (a lost race is not trouble)", id, tk.Status, tk.RetryCount)
		}
	}
	files := gitOut(t, bare, "ls-tree", "-r", "--name-only", DefaultInto)
	if !strings.Contains(files, "a.txt") || !strings.Contains(files, "b.txt") {
		t.Errorf("the remote's branch holds %q; want both machines' work", files)
	}
}

// TestPoolRemoteStaleHolder: machine 1 is cut off past its lease while
// its agent works; the task is taken up elsewhere (its claim generation
// moves on). Machine 1 never pushes the branch; its work is kept on an
// attempt branch, on the remote too. The task lands once, from the claim
// that holds it.
func TestPoolRemoteStaleHolder(t *testing.T) {
	bare, clones := gitMachines(t, 2)
	startBranch(t, bare)
	store := newStore(t, task("a"))
	ops := loop.Actor{Person: "ops", Force: true}
	cutOff := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		os.WriteFile(filepath.Join(req.Dir, "a.txt"), []byte("by machine 1\n"), 0o644)
		// Meanwhile the lease ran out and machine 2 took the task.
		if err := store.Release(ctx, loop.MoveParams{TaskID: "a", Message: "lease expired", By: ops}); err != nil {
			return loop.RunResult{}, err
		}
		if _, err := store.Claim(ctx, loop.ClaimParams{TaskID: "a", Agent: "machine-2"}); err != nil {
			return loop.RunResult{}, err
		}
		return looptest.Result("<task-done>a</task-done>"), nil
	})
	pushed := 0
	g1 := &pushWatch{Git: &ExecGit{Root: clones[0]}, before: func(p PushParams) {
		if p.Ref == into {
			pushed++
		}
	}}
	cfg := remoteConfig(clones[0], 1)
	cfg.Git = g1
	cfg.Loop.MaxIterations = 1
	rep, err := Run(t.Context(), cfg, store, cutOff)
	if err != nil || rep.Outcome != loop.OutcomeLimitReached {
		t.Fatalf("machine 1: Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if pushed != 0 {
		t.Errorf("machine 1 pushed the integration branch %d times after its claim ended; want never", pushed)
	}
	if got := landedOn(t, bare, DefaultInto); len(got) != 0 {
		t.Errorf("landed on the remote %v; want nothing from the stale holder", got)
	}
	if got := gitOut(t, bare, "show", "refs/heads/"+AttemptBranchPrefix+"a/1:a.txt"); got != "by machine 1" {
		t.Errorf("the stale holder's work on the remote's ralph/attempt/a/1: %q", got)
	}

	// Machine 2's claim gives way (its loop gave up); machine 2 builds.
	if err := store.Release(t.Context(), loop.MoveParams{TaskID: "a", Message: "machine 2 starts over", By: ops}); err != nil {
		t.Fatal(err)
	}
	run2 := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		os.WriteFile(filepath.Join(req.Dir, "a.txt"), []byte("by machine 2\n"), 0o644)
		return looptest.Result("<task-done>a</task-done>"), nil
	})
	if rep, err := Run(t.Context(), remoteConfig(clones[1], 1), store, run2); err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("machine 2: Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if got := landedOn(t, bare, DefaultInto); !slices.Equal(got, []string{"a"}) {
		t.Errorf("landed on the remote %v; want a once", got)
	}
	if got := gitOut(t, bare, "show", DefaultInto+":a.txt"); got != "by machine 2" {
		t.Errorf("a.txt on the remote's branch is %q; want machine 2's", got)
	}
	if msg := gitOut(t, bare, "log", "-1", "--format=%B", DefaultInto); !strings.Contains(msg, TrailerGeneration+": 3") {
		t.Errorf("the landing's trailers %q; want the current claim's generation, 3", msg)
	}
}
