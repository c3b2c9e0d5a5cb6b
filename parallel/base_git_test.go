package parallel

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// writer is a stand-in agent on real trees: it writes each task's file
// and, where files names one, that content too; seen records whether
// the tree held want when the task began.
func writer(files map[string]map[string]string, want string, seen map[string]bool) loop.Runner {
	return loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		if want != "" {
			_, err := os.Stat(filepath.Join(req.Dir, want))
			seen[id] = err == nil
		}
		os.WriteFile(filepath.Join(req.Dir, id+".txt"), []byte(id+"\n"), 0o644)
		for name, content := range files[id] {
			os.WriteFile(filepath.Join(req.Dir, name), []byte(content), 0o644)
		}
		return looptest.Result("<task-done>" + id + "</task-done>"), nil
	})
}

func quietConfig(root string) loop.Config {
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	return cfg
}

// TestBaseFollowed: a commit on main, the branch the integration branch
// was made from, after the first parallel build is in the next build's
// trees and on the integration branch, by a merge ralph made and
// recorded — the tasks landed before keep their commits (no rebase), and
// the tip check, at the start and the end of the next build, takes the
// merge as ralph's.
func TestBaseFollowed(t *testing.T) {
	root := gitRepo(t)
	store := newStore(t, task("a"))
	rep, err := Run(t.Context(), Config{Loop: quietConfig(root), Workers: 1}, store, writer(nil, "", nil))
	if err != nil || rep.Outcome != loop.OutcomeComplete || rep.Base != "main" {
		t.Fatalf("first build = %v, %v (%s), base %q", rep.Outcome, err, rep.Message, rep.Base)
	}
	if v, _, _ := store.PlanSetting(t.Context(), SettingBase); v != "main" {
		t.Errorf("recorded base = %q, want main", v)
	}
	landedA := gitOut(t, root, "rev-parse", DefaultInto)
	os.WriteFile(filepath.Join(root, "gate.sh"), []byte("exit 0\n"), 0o755)
	gitOut(t, root, "add", "gate.sh")
	gitOut(t, root, "commit", "-q", "-m", "the gate")
	mainTip := gitOut(t, root, "rev-parse", "main")

	store.Add(task("b"))
	seen := map[string]bool{}
	rep, err = Run(t.Context(), Config{Loop: quietConfig(root), Workers: 1}, store, writer(nil, "gate.sh", seen))
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("second build = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if !seen["b"] {
		t.Error("b's tree lacked gate.sh, committed on main after the first build")
	}
	merge := rep.BaseMerge
	if merge == "" {
		t.Fatal("Report.BaseMerge is empty")
	}
	if got := gitOut(t, root, "rev-parse", merge+"^1", merge+"^2"); got != landedA+"\n"+mainTip {
		t.Errorf("the merge's parents = %q, want the tip %s and main %s", got, landedA, mainTip)
	}
	if got := gitOut(t, root, "rev-parse", DefaultInto+"^1"); got != merge {
		t.Errorf("b landed on %s, not on the merge %s", got, merge)
	}
	if got := gitOut(t, root, "merge-base", "--is-ancestor", landedA, DefaultInto); got != "" {
		t.Error(got)
	}
	ls, _ := store.Landings(t.Context(), loop.LandingQuery{Branch: DefaultInto, Commit: merge})
	if len(ls) != 1 || ls[0].TaskID != BaseTask || ls[0].State != loop.LandingLanded || ls[0].Parent != landedA {
		t.Errorf("the merge's landing = %+v", ls)
	}
	// Nothing new on main: the next build merges nothing.
	rep, err = Run(t.Context(), Config{Loop: quietConfig(root), Workers: 1}, store, writer(nil, "", nil))
	if err != nil || rep.Outcome != loop.OutcomeComplete || rep.BaseMerge != "" {
		t.Errorf("third build = %v, %v (%s), merge %q", rep.Outcome, err, rep.Message, rep.BaseMerge)
	}
	// The base is the plan's: another is refused, before anything runs.
	gitOut(t, root, "branch", "other")
	var ie *IntoError
	_, err = Run(t.Context(), Config{Loop: quietConfig(root), Workers: 1, Base: "other"}, store, writer(nil, "", nil))
	if !errors.As(err, &ie) || ie.Reason != IntoBaseRecorded || ie.Recorded != "main" {
		t.Errorf("Base other on a plan that follows main: %v", err)
	}
}

// TestBaseConflict: a commit on main that conflicts with landed work
// stops the next build before any agent (exit 5's outcome) with the
// commands that resolve it; the person's resolving merge, made as they
// say, is the branch's tip at the build after, which then runs.
func TestBaseConflict(t *testing.T) {
	root := gitRepo(t)
	store := newStore(t, task("a"))
	files := map[string]map[string]string{"a": {"shared.txt": "by a\n"}}
	if rep, err := Run(t.Context(), Config{Loop: quietConfig(root), Workers: 1}, store, writer(files, "", nil)); err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("first build = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	os.WriteFile(filepath.Join(root, "shared.txt"), []byte("by main\n"), 0o644)
	gitOut(t, root, "commit", "-q", "-am", "main's own")
	store.Add(task("b"))
	tip := gitOut(t, root, "rev-parse", DefaultInto)
	ran := map[string]bool{}
	rep, err := Run(t.Context(), Config{Loop: quietConfig(root), Workers: 1}, store, writer(nil, "", ran))
	if err != nil || rep.Outcome != loop.OutcomeGitFailed {
		t.Fatalf("build after the conflicting commit = %v, %v (%s); want %v", rep.Outcome, err, rep.Message, loop.OutcomeGitFailed)
	}
	for _, want := range []string{"conflict in shared.txt", "git worktree add ../ralph-merge ralph/integration && cd ../ralph-merge && git merge main",
		"git worktree remove ../ralph-merge"} {
		if !strings.Contains(rep.Message, want) {
			t.Errorf("message lacks %q:\n%s", want, rep.Message)
		}
	}
	if len(ran) > 0 || gitOut(t, root, "rev-parse", DefaultInto) != tip {
		t.Errorf("agents ran (%v) or the branch moved", ran)
	}

	// The person does what the message says.
	gitOut(t, root, "worktree", "add", "-q", MergeDir, "ralph/integration")
	merge := filepath.Join(root, MergeDir)
	_ = runGit(merge, "merge", "main") // stops on the conflict
	os.WriteFile(filepath.Join(merge, "shared.txt"), []byte("by a and main\n"), 0o644)
	gitOut(t, merge, "commit", "-q", "-am", "merge main")
	resolved := gitOut(t, merge, "rev-parse", "HEAD")
	gitOut(t, root, "worktree", "remove", MergeDir)

	rep, err = Run(t.Context(), Config{Loop: quietConfig(root), Workers: 1}, store, writer(nil, "", ran))
	if err != nil || rep.Outcome != loop.OutcomeComplete || rep.BaseMerge != "" {
		t.Fatalf("build after the person's merge = %v, %v (%s), merge %q", rep.Outcome, err, rep.Message, rep.BaseMerge)
	}
	if got := gitOut(t, root, "rev-parse", DefaultInto+"^1"); got != resolved {
		t.Errorf("b landed on %s, not on the person's merge %s", got, resolved)
	}
	if got := gitOut(t, root, "show", DefaultInto+":shared.txt"); got != "by a and main" {
		t.Errorf("shared.txt = %q", got)
	}
}

// runGit runs git in dir, its failure (a merge that stops on a conflict)
// returned.
func runGit(dir string, args ...string) error {
	return exec.Command("git", append([]string{"-C", dir}, args...)...).Run()
}

// notices is a loop.Observer that keeps the notices it is sent.
type notices struct {
	mu   sync.Mutex
	msgs []string
}

func (n *notices) Observe(note loop.Note) {
	if note.Kind == loop.NoteNotice {
		n.mu.Lock()
		n.msgs = append(n.msgs, note.Message)
		n.mu.Unlock()
	}
}

// TestPoolRemakesBrokenTree is issue 22's item 8: a worker's tree whose
// .git was overwritten (or worse) between two builds is repaired or made
// again by the second build, which then works in it, with a notice that
// says so — never a stop with exit 5.
func TestPoolRemakesBrokenTree(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, root, tree string)
		want   string
	}{
		{"overwritten", func(t *testing.T, root, tree string) {
			os.WriteFile(filepath.Join(tree, ".git"), []byte("gitdir: /nonexistent\n"), 0o644)
		}, "its .git was repaired"},
		{"not a gitdir file", func(t *testing.T, root, tree string) {
			os.WriteFile(filepath.Join(tree, ".git"), []byte("junk\n"), 0o644)
		}, "its .git was repaired"},
		{"a repository of its own", func(t *testing.T, root, tree string) {
			os.Remove(filepath.Join(tree, ".git"))
			gitOut(t, tree, "init", "-q")
		}, "its .git was repaired"},
		// The place a repair puts the broken .git is a file: the tree is
		// repaired all the same, its .git put beside it.
		{"aside taken by a file", func(t *testing.T, root, tree string) {
			os.WriteFile(filepath.Join(tree, ".git"), []byte("junk\n"), 0o644)
			os.WriteFile(tree+".aside", []byte("not a directory\n"), 0o644)
		}, ".aside-"},
		// The repository no longer keeps the tree (its record pruned
		// once .git was gone): the tree is set aside and made again.
		{"pruned", func(t *testing.T, root, tree string) {
			os.Remove(filepath.Join(tree, ".git"))
			gitOut(t, root, "worktree", "prune")
		}, "the worktree was made again"},
		// Locked (git worktree lock) and gone: made again all the same
		// (a tree that is not there is made, as on first use, without a
		// notice).
		{"locked and removed", func(t *testing.T, root, tree string) {
			gitOut(t, root, "worktree", "lock", tree)
			os.RemoveAll(tree)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := gitRepo(t)
			store := newStore(t, task("a"))
			if rep, err := Run(t.Context(), Config{Loop: quietConfig(root), Workers: 1}, store, writer(nil, "", nil)); err != nil || rep.Outcome != loop.OutcomeComplete {
				t.Fatalf("first build = %v, %v (%s)", rep.Outcome, err, rep.Message)
			}
			tree := filepath.Join(root, ".ralph", "worktrees", "w1")
			tc.break_(t, root, tree)
			store.Add(task("b"))
			cfg := quietConfig(root)
			seen := &notices{}
			cfg.Observer = seen
			rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 1}, store, writer(nil, "", nil))
			if err != nil || rep.Outcome != loop.OutcomeComplete {
				t.Fatalf("second build = %v, %v (%s)", rep.Outcome, err, rep.Message)
			}
			if got := gitOut(t, root, "show", DefaultInto+":b.txt"); got != "b" {
				t.Errorf("b's work on the branch: %q", got)
			}
			if tc.want == "" {
				return
			}
			if len(seen.msgs) == 0 || !strings.Contains(seen.msgs[0], "w1's tree, as the build found it") || !strings.Contains(seen.msgs[0], tc.want) {
				t.Errorf("notices = %q; want the tree's, saying %q", seen.msgs, tc.want)
			}
		})
	}
}

// TestBaseFollowedOnRemote: with a remote, the base is the remote's
// branch, fetched: a commit another clone pushed to origin's main after
// the first build is merged into origin's integration branch by the next
// build of this clone, whose own main never had it.
func TestBaseFollowedOnRemote(t *testing.T) {
	bare, clones := gitMachines(t, 2)
	here, there := clones[0], clones[1]
	store := newStore(t, task("a"))
	if rep, err := Run(t.Context(), remoteConfig(here, 1), store, writer(nil, "", nil)); err != nil || rep.Outcome != loop.OutcomeComplete || rep.Base != "main" {
		t.Fatalf("first build = %v, %v (%s), base %q", rep.Outcome, err, rep.Message, rep.Base)
	}
	os.WriteFile(filepath.Join(there, "gate.sh"), []byte("exit 0\n"), 0o755)
	gitOut(t, there, "add", "gate.sh")
	gitOut(t, there, "commit", "-q", "-m", "the gate")
	gitOut(t, there, "push", "-q", "origin", "main")
	pushed := gitOut(t, there, "rev-parse", "HEAD")

	store.Add(task("b"))
	seen := map[string]bool{}
	rep, err := Run(t.Context(), remoteConfig(here, 1), store, writer(nil, "gate.sh", seen))
	if err != nil || rep.Outcome != loop.OutcomeComplete || rep.BaseMerge == "" {
		t.Fatalf("second build = %v, %v (%s), merge %q", rep.Outcome, err, rep.Message, rep.BaseMerge)
	}
	if !seen["b"] {
		t.Error("b's tree lacked gate.sh, pushed to origin's main after the first build")
	}
	if got := gitOut(t, bare, "rev-parse", rep.BaseMerge+"^2"); got != pushed {
		t.Errorf("the merge's second parent = %s, want origin's main %s", got, pushed)
	}
	if got := gitOut(t, bare, "rev-parse", into+"^1"); got != rep.BaseMerge {
		t.Errorf("origin's branch: b landed on %s, not on the merge %s", got, rep.BaseMerge)
	}
	if gitOut(t, here, "rev-parse", "main") == pushed {
		t.Error("this clone's own main moved")
	}
}

// TestBaseOtherMergeRefused: a merge into the integration branch of
// something that is not its base is no merge of the base: the tip check
// stops the build, as for any commit ralph did not make.
func TestBaseOtherMergeRefused(t *testing.T) {
	root := gitRepo(t)
	store := newStore(t, task("a"))
	if rep, err := Run(t.Context(), Config{Loop: quietConfig(root), Workers: 1}, store, writer(nil, "", nil)); err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("first build = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	gitOut(t, root, "checkout", "-q", "-b", "side")
	os.WriteFile(filepath.Join(root, "side.txt"), []byte("side\n"), 0o644)
	gitOut(t, root, "add", "side.txt")
	gitOut(t, root, "commit", "-q", "-m", "side")
	gitOut(t, root, "checkout", "-q", "main")
	gitOut(t, root, "worktree", "add", "-q", MergeDir, DefaultInto)
	merge := filepath.Join(root, MergeDir)
	gitOut(t, merge, "merge", "-q", "--no-edit", "side")
	gitOut(t, root, "worktree", "remove", MergeDir)
	store.Add(task("b"))
	rep, err := Run(t.Context(), Config{Loop: quietConfig(root), Workers: 1}, store, writer(nil, "", nil))
	if err != nil || rep.Outcome != loop.OutcomeGitFailed || !strings.Contains(rep.Message, "not where ralph last put it") {
		t.Errorf("build after a merge of side = %v, %v (%s); want a stop on the tip", rep.Outcome, err, rep.Message)
	}
}

// TestBaseGone: a base that no longer exists merges nothing; the build
// goes on, and a notice says so.
func TestBaseGone(t *testing.T) {
	root := gitRepo(t)
	gitOut(t, root, "checkout", "-q", "-b", "feature")
	store := newStore(t, task("a"))
	if rep, err := Run(t.Context(), Config{Loop: quietConfig(root), Workers: 1}, store, writer(nil, "", nil)); err != nil || rep.Outcome != loop.OutcomeComplete || rep.Base != "feature" {
		t.Fatalf("first build = %v, %v (%s), base %q", rep.Outcome, err, rep.Message, rep.Base)
	}
	gitOut(t, root, "checkout", "-q", "main")
	gitOut(t, root, "branch", "-q", "-D", "feature")
	store.Add(task("b"))
	cfg := quietConfig(root)
	seen := &notices{}
	cfg.Observer = seen
	rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 1}, store, writer(nil, "", nil))
	if err != nil || rep.Outcome != loop.OutcomeComplete || rep.BaseMerge != "" {
		t.Fatalf("build after the base went = %v, %v (%s), merge %q", rep.Outcome, err, rep.Message, rep.BaseMerge)
	}
	if len(seen.msgs) == 0 || !strings.Contains(seen.msgs[0], "follows feature, which is not there") {
		t.Errorf("notices = %q", seen.msgs)
	}
}
