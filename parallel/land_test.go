package parallel

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// The policy of ARCHITECTURE.md §7.3 (only ralph moves the plan and the
// integration branch) over the fake git: landings recorded by ralph, the
// tip checked against them, the agent's HEAD, the worktree's identity.

// writeTask is an agent that writes <id>.txt, and ran lists the tasks it
// ran for.
func writeTask(g *fakeGit) (loop.Runner, func() []string) {
	var mu sync.Mutex
	var ran []string
	return agent(g, func(g *fakeGit, dir, id string) error {
			mu.Lock()
			ran = append(ran, id)
			mu.Unlock()
			g.write(dir, id+".txt", "work of "+id)
			return nil
		}), func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(ran)
		}
}

// forge puts a commit an agent made on the integration branch, as git
// update-ref would: files changed as given, the message's trailers and
// all, recorded nowhere.
func forge(g *fakeGit, msg string, change map[string]string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	tip := g.refs[into]
	files := maps.Clone(g.commits[tip].files)
	maps.Copy(files, change)
	c := g.commit(tip, msg, files)
	g.refs[into] = c
	return c
}

func mustRun(t *testing.T, cfg Config, store loop.TaskStore, run loop.Runner, want loop.Outcome) Report {
	t.Helper()
	rep, err := Run(t.Context(), cfg, store, run)
	if err != nil || rep.Outcome != want {
		t.Fatalf("Run = %v, %v (%s); want %v", rep.Outcome, err, rep.Message, want)
	}
	return rep
}

func status(t *testing.T, store loop.TaskStore, id string) loop.Status {
	t.Helper()
	tk, err := store.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return tk.Status
}

// TestLandingsAreRecorded: each task's commit on the branch is a landing
// the store recorded, landed, and the store's tip is the branch's.
func TestLandingsAreRecorded(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"), task("b", "a"))
	run, _ := writeTask(g)
	mustRun(t, poolConfig(t, g, 2), store, run, loop.OutcomeComplete)
	ls, err := store.Landings(t.Context(), loop.LandingQuery{Branch: DefaultInto})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range ls {
		if l.State != loop.LandingLanded || l.Generation != 1 || l.Completions != 0 {
			t.Errorf("landing %+v: want landed under claim 1", l)
		}
		got = append(got, l.TaskID+"@"+l.Commit)
	}
	tip := g.refs[into]
	a := g.commits[tip].parent
	if want := []string{"a@" + a, "b@" + tip}; !cmp.Equal(got, want) {
		t.Errorf("landings %v; want %v", got, want)
	}
	if rec, _, _ := store.BranchTip(t.Context(), DefaultInto); rec != tip {
		t.Errorf("recorded tip %s; want the branch's, %s", rec, tip)
	}
}

// TestForgedTrailerIsNotALanding is issue 20's item 6 over the fake: a
// commit with the trailer "Ralph-Task: b" put on the branch by someone
// other than ralph (git update-ref) does not make b done: the next build
// stops (exit 5) before any agent runs, naming the commit and b; with
// AcceptTip it goes on from that tip and b is worked as usual.
func TestForgedTrailerIsNotALanding(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"), task("b"))
	run, ran := writeTask(g)
	cfg := poolConfig(t, g, 1)
	cfg.Loop.MaxIterations = 1
	mustRun(t, cfg, store, run, loop.OutcomeLimitReached)
	forged := forge(g, "Task b\n\nRalph-Task: b\nRalph-Generation: 1\n", map[string]string{"b.txt": "forged"})

	rep := mustRun(t, poolConfig(t, g, 1), store, run, loop.OutcomeGitFailed)
	for _, want := range []string{short(forged), "Ralph-Task trailers name b", "run a build with Config.AcceptTip"} {
		if !strings.Contains(rep.Message, want) {
			t.Errorf("the stop does not say %q:\n%s", want, rep.Message)
		}
	}
	if st := status(t, store, "b"); st != loop.StatusPending {
		t.Errorf("b is %s; a forged trailer must not make it done", st)
	}
	if got := ran(); len(got) != 1 {
		t.Errorf("agents ran for %v after the forged commit; want none", got)
	}

	cfg = poolConfig(t, g, 1)
	cfg.AcceptTip = true
	rep = mustRun(t, cfg, store, run, loop.OutcomeComplete)
	if rep.AcceptedTip != forged || len(rep.Reopened) != 0 {
		t.Errorf("accepted %q, reopened %v; want the forged tip, nothing reopened (nothing was lost)", rep.AcceptedTip, rep.Reopened)
	}
	if got := ran(); !cmp.Equal(got, []string{"a", "b"}) {
		t.Errorf("agents ran for %v; want b worked after the accept", got)
	}
	if got := g.filesAt(into)["b.txt"]; got != "work of b" {
		t.Errorf("b.txt on the branch = %q; want b's own work", got)
	}
}

// TestRewoundBranchStops: a branch rewound between builds (git branch -f
// ralph/integration ralph/integration~1) stops the next build (exit 5)
// naming the task whose work is missing, rather than building on it;
// AcceptTip sends that task back to pending, logged, and it is worked
// again.
func TestRewoundBranchStops(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"), task("b", "a"), task("c", "b"))
	run, ran := writeTask(g)
	cfg := poolConfig(t, g, 1)
	cfg.Loop.MaxIterations = 2
	mustRun(t, cfg, store, run, loop.OutcomeLimitReached)
	g.mu.Lock()
	g.refs[into] = g.commits[g.refs[into]].parent // b's landing dropped off
	g.mu.Unlock()

	rep := mustRun(t, poolConfig(t, g, 1), store, run, loop.OutcomeGitFailed)
	if !strings.Contains(rep.Message, "the work of b is missing") || !strings.Contains(rep.Message, "run a build with Config.AcceptTip") {
		t.Errorf("the stop does not name b and the way on:\n%s", rep.Message)
	}
	if got := ran(); len(got) != 2 {
		t.Errorf("agents ran for %v; want nothing after the rewind", got)
	}

	cfg = poolConfig(t, g, 1)
	cfg.AcceptTip = true
	cfg.AcceptedBy = loop.Actor{Person: "user-alice"}
	cfg.Words = Words{AcceptTip: "ralph build --accept-tip"} // the log says it in the caller's words
	rep = mustRun(t, cfg, store, run, loop.OutcomeComplete)
	if !cmp.Equal(rep.Reopened, []string{"b"}) {
		t.Errorf("reopened %v; want b", rep.Reopened)
	}
	logs, _ := store.Logs(t.Context(), "b")
	if i := slices.IndexFunc(logs, func(e loop.LogEntry) bool { return e.Kind == loop.LogReopen }); i < 0 || logs[i].Actor != "user-alice" ||
		!strings.Contains(logs[i].Message, "which ralph build --accept-tip accepted") {
		t.Errorf("b's history has no reopen by user-alice: %+v", logs)
	}
	if got := ran(); !cmp.Equal(got, []string{"a", "b", "b", "c"}) {
		t.Errorf("agents ran for %v; want b again, then c", got)
	}
	files := g.filesAt(into)
	for _, id := range []string{"a", "b", "c"} {
		if files[id+".txt"] != "work of "+id {
			t.Errorf("the branch lacks %s's work: %v", id, files)
		}
	}
}

// TestDeletedBranch: a branch deleted while HEAD lacks its work stops the
// build, naming the tasks; deleted after HEAD took it all (a merged pull
// request), it is made again from HEAD and the build goes on; AcceptTip
// makes it again from HEAD whatever HEAD lacks.
func TestDeletedBranch(t *testing.T) {
	setup := func(t *testing.T) (*fakeGit, *settingStore, loop.Runner, func() []string) {
		g := newFakeGit(map[string]string{"README": "r"})
		store := newStore(t, task("a"), task("b"), task("c"))
		run, ran := writeTask(g)
		cfg := poolConfig(t, g, 1)
		cfg.Loop.MaxIterations = 2
		mustRun(t, cfg, store, run, loop.OutcomeLimitReached)
		return g, store, run, ran
	}
	t.Run("work lost", func(t *testing.T) {
		g, store, run, ran := setup(t)
		delete(g.refs, into)
		rep := mustRun(t, poolConfig(t, g, 1), store, run, loop.OutcomeGitFailed)
		if !strings.Contains(rep.Message, "was deleted") || !strings.Contains(rep.Message, "the work of a, b is missing") {
			t.Errorf("the stop does not say what was lost:\n%s", rep.Message)
		}
		if _, ok := g.refs[into]; ok || len(ran()) != 2 {
			t.Errorf("the branch was made again, or agents ran (%v)", ran())
		}
		cfg := poolConfig(t, g, 1)
		cfg.AcceptTip = true
		rep = mustRun(t, cfg, store, run, loop.OutcomeComplete)
		if !cmp.Equal(rep.Reopened, []string{"a", "b"}) || rep.AcceptedTip != g.head {
			t.Errorf("accepted %s, reopened %v; want HEAD, a and b", rep.AcceptedTip, rep.Reopened)
		}
	})
	t.Run("merged, then deleted", func(t *testing.T) {
		g, store, run, ran := setup(t)
		g.mu.Lock()
		g.head = g.refs[into] // git merge --ff-only ralph/integration on main
		g.refs["refs/heads/main"] = g.head
		delete(g.refs, into) // git branch -d ralph/integration
		g.mu.Unlock()
		mustRun(t, poolConfig(t, g, 1), store, run, loop.OutcomeComplete)
		if got := ran(); !cmp.Equal(got, []string{"a", "b", "c"}) {
			t.Errorf("agents ran for %v; want c only after the merge", got)
		}
		if files := g.filesAt(into); files["a.txt"] == "" || files["c.txt"] == "" {
			t.Errorf("the branch made again from HEAD lacks work: %v", files)
		}
	})
}

// TestBranchMovedDuringRun: the branch rewound while an agent works:
// the integration finds it, the run stops (exit 5) naming the missing
// task, and nothing lands on the rewound tip; rewound after the last
// landing, the run does not end complete.
func TestBranchMovedDuringRun(t *testing.T) {
	t.Run("while an agent works", func(t *testing.T) {
		g := newFakeGit(map[string]string{"README": "r"})
		store := newStore(t, task("a"), task("b", "a"))
		run := agent(g, func(g *fakeGit, dir, id string) error {
			if id == "b" {
				g.mu.Lock()
				g.refs[into] = g.commits[g.refs[into]].parent // git branch -f … ~1
				g.mu.Unlock()
			}
			g.write(dir, id+".txt", id)
			return nil
		})
		rep := mustRun(t, poolConfig(t, g, 1), store, run, loop.OutcomeGitFailed)
		if !strings.Contains(rep.Message, "the work of a is missing") {
			t.Errorf("the stop does not name a:\n%s", rep.Message)
		}
		if _, ok := g.filesAt(into)["b.txt"]; ok {
			t.Error("b landed on the rewound branch")
		}
		if st := status(t, store, "b"); st == loop.StatusDone {
			t.Error("b is done")
		}
	})
	t.Run("after the last landing", func(t *testing.T) {
		g := newFakeGit(map[string]string{"README": "r"})
		base := newStore(t, task("a"), task("b"))
		store := &completeHook{settingStore: base, after: func(id string) {
			if id == "b" {
				g.mu.Lock()
				delete(g.refs, into)
				g.mu.Unlock()
			}
		}}
		run, _ := writeTask(g)
		rep := mustRun(t, poolConfig(t, g, 1), store, run, loop.OutcomeGitFailed)
		if !strings.Contains(rep.Message, "was deleted") {
			t.Errorf("the run's end does not say the branch went:\n%s", rep.Message)
		}
	})
}

// completeHook runs after after each Complete.
type completeHook struct {
	*settingStore
	after func(id string)
}

func (s *completeHook) Complete(ctx context.Context, p loop.MoveParams) error {
	err := s.settingStore.Complete(ctx, p)
	if err == nil {
		s.after(p.TaskID)
	}
	return err
}

// TestRecordedLandingNotOnTheBranch: a landing recorded by a run that
// stopped before the branch moved (or lost its race) never landed: the
// task is worked, and lands once.
func TestRecordedLandingNotOnTheBranch(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	store := newStore(t, task("a"), task("z"))
	run, ran := writeTask(g)
	cfg := poolConfig(t, g, 1)
	cfg.Loop.MaxIterations = 1
	mustRun(t, cfg, store, run, loop.OutcomeLimitReached) // a lands
	g.mu.Lock()
	tip := g.refs[into]
	never := g.commit(g.commits[tip].parent, "Task z\n\nRalph-Task: z\n", map[string]string{"README": "r", "z.txt": "never"})
	g.mu.Unlock()
	if err := store.RecordLanding(t.Context(), loop.Landing{Branch: DefaultInto, Commit: never, Parent: g.commits[tip].parent, TaskID: "z", Generation: 1}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, poolConfig(t, g, 1), store, run, loop.OutcomeComplete)
	if got := ran(); !cmp.Equal(got, []string{"a", "z"}) {
		t.Errorf("agents ran for %v; want z worked", got)
	}
	ls, _ := store.Landings(t.Context(), loop.LandingQuery{Branch: DefaultInto, TaskID: "z"})
	if len(ls) != 2 || ls[0].State != loop.LandingVoid || ls[1].State != loop.LandingLanded {
		t.Errorf("z's landings %+v; want the first void, the second landed", ls)
	}
}

// beginAt readies w1 at the branch's tip for task id and returns the tip.
func beginAt(t *testing.T, ws *workspace, g *fakeGit, id string) (loop.Task, string) {
	t.Helper()
	tk := loop.Task{ID: id, Title: "Task " + id, Generation: 1}
	if landed, err := ws.Begin(t.Context(), tk, 0); err != nil || landed {
		t.Fatalf("Begin(%s) = %v, %v", id, landed, err)
	}
	return tk, g.refs[into]
}

// headSetup is a workspace whose branch holds a's work (a.txt, shared.txt
// changed) on top of the initial commit.
func headSetup(t *testing.T) (*fakeGit, *workspace, string) {
	t.Helper()
	g := newFakeGit(map[string]string{"README": "r", "shared.txt": "v0"})
	g.refs[into] = g.head
	ws := testWorkspace(g, looptest.NewMemStore(nil), "/w1", "")
	if err := g.AddWorktree(t.Context(), "/w1", g.head); err != nil {
		t.Fatal(err)
	}
	tk, _ := beginAt(t, ws, g, "a")
	g.write("/w1", "a.txt", "a")
	g.write("/w1", "shared.txt", "by a")
	if _, err := ws.Integrate(t.Context(), loop.IntegrateRequest{Task: tk}); err != nil {
		t.Fatal(err)
	}
	return g, ws, g.head
}

// TestAgentHeadMoved is the agent's git reset, checkout and commit in its
// tree (ARCHITECTURE.md §7): work lands as the agent's own changes or is task
// trouble, never as a revert of a's landed work.
func TestAgentHeadMoved(t *testing.T) {
	ctx := t.Context()
	t.Run("reset back, own change", func(t *testing.T) {
		g, ws, first := headSetup(t)
		tk, _ := beginAt(t, ws, g, "b")
		g.reset("/w1", first) // git reset --hard HEAD~1
		g.write("/w1", "b.txt", "b")
		res, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: tk})
		if err != nil || res.Commit == "" {
			t.Fatalf("Integrate = %+v, %v", res, err)
		}
		files := g.filesAt(into)
		if files["a.txt"] != "a" || files["shared.txt"] != "by a" || files["b.txt"] != "b" {
			t.Errorf("branch files %v; want a's work kept and b's added", files)
		}
	})
	t.Run("reset back, nothing of its own", func(t *testing.T) {
		g, ws, first := headSetup(t)
		tk, tip := beginAt(t, ws, g, "b")
		g.reset("/w1", first)
		res, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: tk})
		if err != nil || res.Commit != "" || g.refs[into] != tip {
			t.Fatalf("Integrate = %+v, %v; want done without a commit, the branch where it was", res, err)
		}
	})
	t.Run("reset back, change conflicts with the work since", func(t *testing.T) {
		g, ws, first := headSetup(t)
		tk, tip := beginAt(t, ws, g, "b")
		g.reset("/w1", first)
		g.write("/w1", "shared.txt", "by b")
		_, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: tk})
		var ie *loop.IntegrationError
		if !errors.As(err, &ie) || !strings.Contains(ie.Reason, "git reset") || !strings.Contains(ie.Reason, "shared.txt") || ie.Attempt == "" {
			t.Fatalf("Integrate = %v; want task trouble naming the reset and the file, the work kept", err)
		}
		if g.refs[into] != tip {
			t.Error("the branch moved")
		}
	})
	t.Run("checkout elsewhere", func(t *testing.T) {
		g, ws, _ := headSetup(t)
		g.mu.Lock()
		other := g.commit("", "unrelated\n", map[string]string{"x": "y"})
		g.mu.Unlock()
		tk, tip := beginAt(t, ws, g, "b")
		g.reset("/w1", other)
		g.write("/w1", "b.txt", "b")
		_, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: tk})
		var ie *loop.IntegrationError
		if !errors.As(err, &ie) || !strings.Contains(ie.Reason, "git checkout") || ie.Attempt == "" {
			t.Fatalf("Integrate = %v; want task trouble naming what the agent did, the work kept", err)
		}
		kept := g.refs[heads+ie.Attempt]
		if g.commits[kept].files["b.txt"] != "b" || g.refs[into] != tip {
			t.Errorf("kept %v; branch moved: %v", g.commits[kept].files, g.refs[into] != tip)
		}
	})
	t.Run("commits on top", func(t *testing.T) {
		g, ws, _ := headSetup(t)
		tk, _ := beginAt(t, ws, g, "b")
		g.write("/w1", "b.txt", "b")
		g.commitIn("/w1", "agent's commit\n")
		g.write("/w1", "b2.txt", "b2")
		res, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: tk})
		if err != nil || res.Commit == "" {
			t.Fatalf("Integrate = %+v, %v", res, err)
		}
		files := g.filesAt(into)
		if files["a.txt"] != "a" || files["b.txt"] != "b" || files["b2.txt"] != "b2" {
			t.Errorf("branch files %v; want all of it", files)
		}
	})
	t.Run("a sandboxed agent's reset, reported by its runner", func(t *testing.T) {
		g, ws, first := headSetup(t)
		tk, tip := beginAt(t, ws, g, "b")
		// The tree's own HEAD is ralph's (the agent had a private
		// checkout); its files are what the agent's reset left, plus its
		// change.
		g.mu.Lock()
		g.trees["/w1"].files = maps.Clone(g.commits[first].files)
		g.mu.Unlock()
		g.write("/w1", "b.txt", "b")
		co := &loop.Checkout{Start: tip, End: first}
		res, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: tk, Checkout: co})
		if err != nil || res.Commit == "" {
			t.Fatalf("Integrate = %+v, %v", res, err)
		}
		if files := g.filesAt(into); files["a.txt"] != "a" || files["b.txt"] != "b" {
			t.Errorf("branch files %v; want a's work kept and b's added", files)
		}
	})
	t.Run("a sandboxed agent that only added commits", func(t *testing.T) {
		g, ws, _ := headSetup(t)
		tk, tip := beginAt(t, ws, g, "b")
		g.write("/w1", "b.txt", "b")
		co := &loop.Checkout{Start: tip, End: "0123456789abcdef0123456789abcdef01234567", Descends: true}
		res, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: tk, Checkout: co})
		if err != nil || res.Commit == "" || g.filesAt(into)["b.txt"] != "b" {
			t.Fatalf("Integrate = %+v, %v", res, err)
		}
	})
}

// TestWorktreeNotRalphs: a worker directory that is not the worktree ralph
// made — replaced by a link, its .git rewritten — is found before ralph
// runs git there: the attempt is task trouble, the directory set aside
// whole (or its .git repaired), the worktree made again, nothing landed.
func TestWorktreeNotRalphs(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name        string
		gitFileOnly bool
	}{{"a link to the main checkout", false}, {"its .git rewritten", true}} {
		t.Run(tc.name, func(t *testing.T) {
			g, ws, _ := headSetup(t)
			tk, tip := beginAt(t, ws, g, "b")
			g.write("/w1", "b.txt", "b")
			g.breakTree("/w1", tc.name, tc.gitFileOnly)
			_, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: tk})
			var ie *loop.IntegrationError
			if !errors.As(err, &ie) || !strings.Contains(ie.Reason, "not the worktree ralph made") || !strings.Contains(ie.Reason, tc.name) {
				t.Fatalf("Integrate = %v; want task trouble saying what is wrong", err)
			}
			if g.refs[into] != tip {
				t.Error("the branch moved")
			}
			if len(g.aside) != 1 {
				t.Errorf("set aside %v; want one", g.aside)
			}
			if err := g.CheckWorktree(ctx, "/w1"); err != nil {
				t.Errorf("after: %v; want the worktree made again", err)
			}
			if tc.gitFileOnly && (ie.Attempt == "" || g.commits[g.refs[heads+ie.Attempt]].files["b.txt"] != "b") {
				t.Errorf("the repaired tree's work is not kept: %q", ie.Attempt)
			}
			// The next attempt begins in the made-again tree.
			tk, _ = beginAt(t, ws, g, "b")
			g.write("/w1", "b.txt", "b2")
			if res, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: tk}); err != nil || g.filesAt(into)["b.txt"] != "b2" {
				t.Fatalf("the next attempt: %+v, %v", res, err)
			}
		})
	}
}

// TestBranchesMovedAreReported: an agent that moves the user's branch and
// deletes another (it runs as the user without a sandbox) is not undone
// or followed by ralph, which writes neither, and says so at the end.
func TestBranchesMovedAreReported(t *testing.T) {
	g := newFakeGit(map[string]string{"README": "r"})
	g.refs["refs/heads/feature"] = g.head
	store := newStore(t, task("a"))
	var moved string
	run := agent(g, func(g *fakeGit, dir, id string) error {
		g.mu.Lock()
		moved = g.commit(g.head, "the agent's\n", map[string]string{"evil": "x"})
		g.refs["refs/heads/main"] = moved
		delete(g.refs, "refs/heads/feature")
		g.mu.Unlock()
		g.write(dir, "a.txt", "a")
		return nil
	})
	cfg := poolConfig(t, g, 1)
	cfg.Words.Sandbox = "--sandbox" // the caller's words
	rep := mustRun(t, cfg, store, run, loop.OutcomeComplete)
	all := strings.Join(rep.Warnings, "\n")
	for _, want := range []string{"branch main moved during the run", "branch feature was deleted", "ralph did not do that",
		"without --sandbox an agent runs as you and can write any branch (--sandbox keeps the repository's refs out of its reach)"} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings lack %q:\n%s", want, all)
		}
	}
	if g.refs["refs/heads/main"] != moved || g.filesAt(into)["a.txt"] != "a" {
		t.Error("ralph moved main, or a did not land")
	}
	if _, ok := g.filesAt(into)["evil"]; ok {
		t.Error("the agent's commit on main reached the integration branch")
	}
}

// TestTipErrorSays: what the stop says, for a moved, a deleted and a
// remote branch: the commit, what is missing, and the one step that goes
// on.
func TestTipErrorSays(t *testing.T) {
	const tip, last = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	for _, tc := range []struct {
		name string
		err  TipError
		want []string
	}{
		{"moved", TipError{Branch: "ralph/integration", Tip: tip, Expected: last, Foreign: []string{tip}, Forged: []string{"t-2"}, Missing: []string{"t-3"}},
			[]string{"is at 111111111111, not where ralph last put it (222222222222)", "commits ralph did not make are on it: 111111111111",
				"trailers name t-2", "the work of t-3 is missing", "To accept 111111111111 as the branch's tip (t-3 back to pending), run a build with Config.AcceptTip",
				"git update-ref refs/heads/ralph/integration " + last}},
		{"deleted", TipError{Branch: "ralph/integration", Expected: last, Missing: []string{"t-1", "t-2"}},
			[]string{"was deleted (ralph last put it at 222222222222)", "the work of t-1, t-2 is missing", "making the branch again from HEAD (t-1, t-2 back to pending)",
				"run a build with Config.AcceptTip", "git branch ralph/integration " + last}},
		{"on a remote, in the caller's words", TipError{Branch: "ralph/integration", Remote: "origin", Tip: tip, Expected: last, Accept: "ralph build --accept-tip"},
			[]string{"ralph/integration on origin is at 111111111111", "To accept 111111111111 as the branch's tip, run ralph build --accept-tip; ", "put it back on origin at " + last}},
	} {
		got := tc.err.Error()
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
	}
}
