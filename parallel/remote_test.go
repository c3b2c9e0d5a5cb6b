package parallel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// remoteLanded returns the task ids of the trailers on the remote's
// integration branch, oldest first.
func remoteLanded(remote *fakeGit) []string { return landedOrder(remote) }

// TestRemoteMachinesLandEachTaskOnce: two machines (clones of one remote)
// build one plan at once, two workers each: every task lands once on the
// remote's integration branch, after its blockers, and begins from a tip
// that holds their work, wherever they landed; each task's branch is on
// the remote at its landed commit, and each machine's local branch ends
// where the remote's is.
func TestRemoteMachinesLandEachTaskOnce(t *testing.T) {
	remote := newFakeGit(map[string]string{"README": "project"})
	machines := []*fakeGit{remote.clone(), remote.clone()}
	tasks := []loop.Task{task("a"), task("b"), task("c", "a"), task("d", "a", "b"), task("e", "d"), task("f"), task("g", "c", "e")}
	store := newStore(t, tasks...)
	blockers := map[string][]string{}
	for _, tk := range tasks {
		blockers[tk.ID] = tk.BlockedBy
	}
	var mu sync.Mutex
	var missing []string
	ranOn := map[string][]int{}
	var wg sync.WaitGroup
	reps := make([]Report, len(machines))
	errs := make([]error, len(machines))
	for k, g := range machines {
		run := agent(g, func(g *fakeGit, dir, id string) error {
			g.mu.Lock()
			files := maps.Clone(g.trees[dir].files)
			g.mu.Unlock()
			mu.Lock()
			ranOn[id] = append(ranOn[id], k)
			for _, b := range blockers[id] {
				if _, ok := files[b+".txt"]; !ok {
					missing = append(missing, fmt.Sprintf("%s on machine %d lacks %s", id, k, b))
				}
			}
			mu.Unlock()
			g.write(dir, id+".txt", "work of "+id)
			return nil
		})
		cfg := poolConfig(t, g, 2)
		cfg.Remote = "origin"
		wg.Go(func() { reps[k], errs[k] = Run(t.Context(), cfg, store, run) })
	}
	wg.Wait()
	for k := range machines {
		if errs[k] != nil || reps[k].Outcome != loop.OutcomeComplete || reps[k].Remote != "origin" {
			t.Fatalf("machine %d: Run = %v, %v (%s), remote %q", k, reps[k].Outcome, errs[k], reps[k].Message, reps[k].Remote)
		}
	}
	if len(missing) > 0 {
		t.Errorf("tasks began without their blockers' work: %v", missing)
	}
	order := remoteLanded(remote)
	if got, want := slices.Sorted(slices.Values(order)), []string{"a", "b", "c", "d", "e", "f", "g"}; !cmp.Equal(got, want) {
		t.Fatalf("landed on the remote %v; want each task once", order)
	}
	for id, bs := range blockers {
		for _, b := range bs {
			if slices.Index(order, b) > slices.Index(order, id) {
				t.Errorf("%s landed before its blocker %s: %v", id, b, order)
			}
		}
		if len(ranOn[id]) != 1 {
			t.Errorf("task %s's agent ran on machines %v; want once", id, ranOn[id])
		}
	}
	tip := remote.refs[into]
	for _, tk := range tasks {
		c := remote.refs[heads+TaskBranchPrefix+tk.ID]
		if c == "" || !remote.reaches(tip, c) || !strings.Contains(remote.commits[c].msg, TrailerTask+": "+tk.ID+"\n") {
			t.Errorf("the remote's %s%s is %q; want the commit that landed it", TaskBranchPrefix, tk.ID, c)
		}
	}
	// The local branch of the machine that ended last is the remote's;
	// the other's is on the way to it.
	for k, g := range machines {
		if local := g.refs[into]; !remote.reaches(tip, local) {
			t.Errorf("machine %d's %s is %s, not on the remote's", k, DefaultInto, local)
		}
	}
	if machines[0].refs[into] != tip && machines[1].refs[into] != tip {
		t.Error("no machine's local branch ended at the remote's tip")
	}
}

// TestRemoteLostPushIsRetried: another machine lands just before this
// one's push; the push only fast-forwards, so it is refused: a lost race,
// fetched, replayed and pushed again, not trouble.
func TestRemoteLostPushIsRetried(t *testing.T) {
	remote := newFakeGit(map[string]string{"README": "r"})
	remote.refs[into] = remote.head
	g := remote.clone()
	store := newStore(t, task("a"))
	var once sync.Once
	g.beforePush = func(p PushParams) {
		if p.Ref != into {
			return
		}
		once.Do(func() {
			remote.mu.Lock()
			defer remote.mu.Unlock()
			files := maps.Clone(remote.commits[remote.refs[into]].files)
			files["other.txt"] = "elsewhere"
			landLocked(t, remote, store, "zz", files, true)
		})
	}
	run := agent(g, func(g *fakeGit, dir, id string) error { g.write(dir, "a.txt", "a"); return nil })
	cfg := poolConfig(t, g, 1)
	cfg.Remote = "origin"
	rep, err := Run(t.Context(), cfg, store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	files := remote.filesAt(into)
	if files["a.txt"] != "a" || files["other.txt"] != "elsewhere" {
		t.Errorf("the remote's integration branch has %v; want both machines' work", files)
	}
	tk, _ := store.Get(t.Context(), "a")
	if tk.RetryCount != 0 || g.pushes[into] != 2 {
		t.Errorf("retry count %d, pushes of the branch %d; want 0 and 2: a lost race is retried, not trouble", tk.RetryCount, g.pushes[into])
	}
	if g.refs[into] != remote.refs[into] {
		t.Error("the local integration branch did not follow the remote's")
	}
}

// TestRemoteStaleHolderDoesNotPush drives a workspace: the claim is
// current at the first push, which loses a race; by the second it has
// ended (the holder was partitioned past its lease and the task taken up
// elsewhere): nothing more is pushed, and the work is kept, on the
// remote too, as an attempt branch.
func TestRemoteStaleHolderDoesNotPush(t *testing.T) {
	ctx := t.Context()
	remote := newFakeGit(map[string]string{"README": "r"})
	remote.refs[into] = remote.head
	g := remote.clone()
	if _, _, err := g.Fetch(ctx, "origin", into); err != nil {
		t.Fatal(err)
	}
	store := looptest.NewMemStore(nil)
	ws := testWorkspace(g, store, "/w1", "origin")
	if err := g.AddWorktree(ctx, "/w1", g.head); err != nil {
		t.Fatal(err)
	}
	tk := loop.Task{ID: "a", Title: "A", Generation: 1}
	if _, err := ws.Begin(ctx, tk, 0); err != nil {
		t.Fatal(err)
	}
	g.write("/w1", "a.txt", "a")
	current := true
	g.beforePush = func(p PushParams) {
		if p.Ref == into && current {
			current = false // lost from here on
			remote.mu.Lock()
			landLocked(t, remote, store, "o", map[string]string{"README": "r", "o.txt": "o"}, true)
			remote.mu.Unlock()
		}
	}
	checks := 0
	claim := func(context.Context) error {
		checks++
		if !current {
			return fmt.Errorf("%w: task a is held by machine-2 (claim 2)", loop.ErrStaleClaim)
		}
		return nil
	}
	_, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: tk, Current: claim})
	if !errors.Is(err, loop.ErrStaleClaim) {
		t.Fatalf("Integrate = %v; want ErrStaleClaim", err)
	}
	if g.pushes[into] != 1 || checks != 2 {
		t.Errorf("%d pushes of the branch after %d claim checks; want 1 after 1, and none after the second", g.pushes[into], checks)
	}
	if _, ok := remote.filesAt(into)["a.txt"]; ok {
		t.Error("a stale holder's work landed on the remote")
	}
	// The next attempt in the tree keeps the stale one's work, here and
	// on the remote.
	if _, err := ws.Begin(ctx, loop.Task{ID: "b", Generation: 1}, 0); err != nil {
		t.Fatal(err)
	}
	kept := remote.refs[heads+AttemptBranchPrefix+"a/1"]
	if kept == "" || remote.commits[kept].files["a.txt"] != "a" || g.refs[heads+AttemptBranchPrefix+"a/1"] != kept {
		t.Errorf("the stale attempt is not kept on ralph/attempt/a/1 here and on the remote (remote %q, local %q)", kept, g.refs[heads+AttemptBranchPrefix+"a/1"])
	}
}

// TestRemoteTaskLandedElsewhereIsDone: another machine landed a task and
// died before recording it; this machine's local branch has never seen
// it. Its landing, recorded in the shared store and found on the remote's
// branch, is what counts: the task is done without an agent, and not
// applied again.
func TestRemoteTaskLandedElsewhereIsDone(t *testing.T) {
	remote := newFakeGit(map[string]string{"README": "r"})
	g := remote.clone()
	store := newStore(t, task("a"), task("b"))
	store.settings[SettingInto], store.settings[SettingIntoBase] = DefaultInto, remote.head
	g.refs[into] = g.head // this machine's branch, from an earlier build
	remote.refs[into] = remote.head
	store.MoveBranchTip(t.Context(), DefaultInto, "", remote.head)
	landLocked(t, remote, store, "a", map[string]string{"README": "r", "a.txt": "a"}, false)
	var ran []string
	run := agent(g, func(g *fakeGit, dir, id string) error {
		ran = append(ran, id)
		g.write(dir, id+".txt", id)
		return nil
	})
	cfg := poolConfig(t, g, 1)
	cfg.Remote = "origin"
	rep, err := Run(t.Context(), cfg, store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if !cmp.Equal(ran, []string{"b"}) {
		t.Errorf("agents ran for %v; want only b (a landed on another machine)", ran)
	}
	if got := remoteLanded(remote); !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("landed on the remote %v; want a once, then b", got)
	}
}

// TestRemoteAdoptsTheBranch: how a build with a remote finds the plan's
// integration branch there — made from HEAD, or from the local branch;
// a local branch ahead (work landed without the remote) published, one
// behind brought up to date; branches that diverged refused; an unknown
// remote refused before anything runs, as a git failure (exit 5).
func TestRemoteAdoptsTheBranch(t *testing.T) {
	run := func(g *fakeGit, remote string) (Report, error) {
		t.Helper()
		cfg := poolConfig(t, g, 1)
		cfg.Remote = remote
		return Run(t.Context(), cfg, newStore(t), agent(g, func(*fakeGit, string, string) error { return nil }))
	}
	ahead := func(g *fakeGit, from, name string) string {
		g.mu.Lock()
		defer g.mu.Unlock()
		files := maps.Clone(g.commits[from].files)
		files[name] = name
		return g.commit(from, name+"\n", files)
	}

	t.Run("made on the remote from HEAD", func(t *testing.T) {
		remote := newFakeGit(map[string]string{"README": "r"})
		g := remote.clone()
		if rep, err := run(g, "origin"); err != nil || rep.Outcome != loop.OutcomeNoPlan {
			t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
		}
		if remote.refs[into] != g.head || g.refs[into] != g.head {
			t.Errorf("remote's branch %q, local %q; want both at HEAD %s", remote.refs[into], g.refs[into], g.head)
		}
	})
	t.Run("local branch ahead is published", func(t *testing.T) {
		remote := newFakeGit(map[string]string{"README": "r"})
		remote.refs[into] = remote.head
		g := remote.clone()
		g.refs[into] = ahead(g, g.head, "landed-here.txt")
		if rep, err := run(g, "origin"); err != nil || rep.Outcome != loop.OutcomeNoPlan {
			t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
		}
		if remote.refs[into] != g.refs[into] {
			t.Errorf("the remote's branch is %s; want the local one's %s", remote.refs[into], g.refs[into])
		}
	})
	t.Run("local branch behind follows", func(t *testing.T) {
		remote := newFakeGit(map[string]string{"README": "r"})
		remote.refs[into] = ahead(remote, remote.head, "landed-there.txt")
		g := remote.clone()
		g.refs[into] = g.head
		if rep, err := run(g, "origin"); err != nil || rep.Outcome != loop.OutcomeNoPlan {
			t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
		}
		if g.refs[into] != remote.refs[into] {
			t.Errorf("the local branch is %s; want the remote's %s", g.refs[into], remote.refs[into])
		}
	})
	t.Run("diverged", func(t *testing.T) {
		remote := newFakeGit(map[string]string{"README": "r"})
		remote.refs[into] = ahead(remote, remote.head, "there.txt")
		g := remote.clone()
		g.refs[into] = ahead(g, g.head, "here.txt")
		rep, err := run(g, "origin")
		if !errors.Is(err, ErrInto) || !strings.Contains(rep.Message, "each have commits the other has not") {
			t.Fatalf("Run = %v, %v (%s); want refused", rep.Outcome, err, rep.Message)
		}
		wantIntoError(t, err, IntoError{Reason: IntoDiverged, Branch: DefaultInto, Remote: "origin"})
	})
	t.Run("unknown remote", func(t *testing.T) {
		remote := newFakeGit(map[string]string{"README": "r"})
		g := remote.clone()
		rep, err := run(g, "upstream")
		if err != nil || rep.Outcome != loop.OutcomeGitFailed || rep.ExitCode() != 5 || !strings.Contains(rep.Message, "upstream") {
			t.Fatalf("Run = %v (exit %d), %v (%s); want a git failure naming the remote", rep.Outcome, rep.ExitCode(), err, rep.Message)
		}
		if _, ok := remote.refs[into]; ok {
			t.Error("a refused build made the branch on the remote")
		}
	})
}
