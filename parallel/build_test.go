package parallel

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// doneIn is an agent that writes <id>.txt in its directory, says the task
// is done and records where it worked.
func doneIn(dirs map[string]string) loop.Runner {
	return loop.RunnerFunc(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		dirs[id] = req.Dir
		os.WriteFile(filepath.Join(req.Dir, id+".txt"), []byte(id+"\n"), 0o644)
		return looptest.Result("<task-done>" + id + "</task-done>"), nil
	})
}

// TestBuildPlanWithIntegrationBranch: through the library alone, a build
// that asks for no workers of a plan that records an integration branch is
// built in a worktree and lands on that branch, as ralph build does; a
// plan without one runs one loop in the checkout.
func TestBuildPlanWithIntegrationBranch(t *testing.T) {
	root := gitRepo(t)
	head := gitOut(t, root, "rev-parse", "HEAD")
	store := newStore(t, task("a"))
	if _, err := store.RecordPlanSetting(t.Context(), SettingInto, DefaultInto); err != nil {
		t.Fatal(err)
	}
	if n := Workers(t.Context(), store, 0); n != 1 {
		t.Fatalf("Workers(plan with a branch, 0) = %d; want 1", n)
	}
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	dirs := map[string]string{}
	rep, err := Build(t.Context(), Config{Loop: cfg}, store, doneIn(dirs))
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Build = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if rep.Into != DefaultInto || len(rep.Workers) != 1 {
		t.Errorf("Build: Into %q, %d workers; want %s, 1", rep.Into, len(rep.Workers), DefaultInto)
	}
	if !strings.HasPrefix(dirs["a"], filepath.Join(root, ".ralph", "worktrees")+"/") {
		t.Errorf("the agent worked in %s, not in a worktree", dirs["a"])
	}
	if got := gitOut(t, root, "show", DefaultInto+":a.txt"); got != "a" {
		t.Errorf("a.txt on %s = %q", DefaultInto, got)
	}
	if gitOut(t, root, "rev-parse", "HEAD") != head {
		t.Error("the user's branch moved")
	}
}

// TestBuildPlanWithoutIntegrationBranch: no workers asked and no branch
// recorded is one loop in the checkout; a worktree-only field then is a
// configuration error, before any agent runs.
func TestBuildPlanWithoutIntegrationBranch(t *testing.T) {
	root := t.TempDir()
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false

	store := newStore(t, task("a"))
	dirs := map[string]string{}
	rep, err := Build(t.Context(), Config{Loop: cfg}, store, doneIn(dirs))
	if err != nil || rep.Outcome != loop.OutcomeComplete || rep.Into != "" {
		t.Fatalf("Build = %v, %v, into %q (%s)", rep.Outcome, err, rep.Into, rep.Message)
	}
	if dirs["a"] != root {
		t.Errorf("the agent worked in %s; want the checkout %s", dirs["a"], root)
	}

	for _, c := range []Config{{Into: "x"}, {Setup: "true"}, {Remote: "origin"}, {AcceptTip: true}} {
		c.Loop = cfg
		store := newStore(t, task("a"))
		rep, err := Build(t.Context(), c, store, doneIn(map[string]string{}))
		if !errors.Is(err, ErrNoWorktrees) || !errors.Is(err, loop.ErrConfig) || rep.Outcome != loop.OutcomeError {
			t.Errorf("Build(%+v) = %v, %v; want ErrNoWorktrees", c, rep.Outcome, err)
		}
		if got, _ := store.Get(t.Context(), "a"); got.Status != loop.StatusPending {
			t.Errorf("Build(%+v) moved a to %s", c, got.Status)
		}
	}
}

// TestCheckLoop: peek mode and Commit do not go with workers, peek mode
// named first; Run refuses them with the same errors.
func TestCheckLoop(t *testing.T) {
	for _, tc := range []struct {
		lc   loop.Config
		want error
	}{
		{loop.Config{}, nil},
		{loop.Config{Commit: true}, ErrCommitWithWorkers},
		{loop.Config{ClaimMode: loop.ClaimAgent}, ErrPeekWithWorkers},
		{loop.Config{ClaimMode: loop.ClaimAgent, Commit: true}, ErrPeekWithWorkers},
	} {
		if err := CheckLoop(tc.lc); err != tc.want {
			t.Errorf("CheckLoop(commit %v, claim %q) = %v; want %v", tc.lc.Commit, tc.lc.ClaimMode, err, tc.want)
		}
	}
}

// TestWordsRemote: a remote that cannot be used stops the build before
// anything runs, named as Config's field, or in the caller's Words.
func TestWordsRemote(t *testing.T) {
	root := gitRepo(t)
	for _, tc := range []struct {
		words Words
		want  string
	}{
		{Words{}, `Config.Remote: `},
		{Words{Remote: "--remote"}, `--remote: `},
	} {
		cfg := loop.DefaultConfig(root)
		cfg.SessionLog, cfg.RawLogs = false, false
		rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 1, Remote: "upstream", Words: tc.words}, newStore(t, task("a")), doneIn(map[string]string{}))
		if err != nil || rep.Outcome != loop.OutcomeGitFailed || !strings.HasPrefix(rep.Message, tc.want) || !strings.Contains(rep.Message, `"upstream"`) {
			t.Errorf("Run with remote upstream, words %+v = %v, %v, %q; want exit 5, %q…", tc.words, rep.Outcome, err, rep.Message, tc.want)
		}
	}
}
