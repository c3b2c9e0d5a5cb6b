package parallel

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

// writeTxt is a stand-in agent that writes <id>.txt in its tree.
func writeTxt() loop.Runner {
	return loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		if err := os.WriteFile(filepath.Join(req.Dir, id+".txt"), []byte(id+"\n"), 0o644); err != nil {
			return loop.RunResult{}, err
		}
		return looptest.Result("<task-done>" + id + "</task-done>"), nil
	})
}

// asideOf returns the one directory ralph set w1's tree aside in, under
// w1.aside, and fails unless it is a real directory.
func asideOf(t *testing.T, wt string) string {
	t.Helper()
	top := filepath.Join(wt, "w1.aside")
	if fi, err := os.Lstat(top); err != nil || !fi.IsDir() {
		t.Fatalf("%s: %v, %v; want a real directory", top, fi, err)
	}
	entries, err := os.ReadDir(top)
	if err != nil || len(entries) != 1 {
		t.Fatalf("%s holds %v, %v; want one set-aside tree", top, entries, err)
	}
	return filepath.Join(top, entries[0].Name())
}

// TestPoolTreeSetAsideIsTold: a worker's tree that a build finds replaced
// by a link (here, with a link planted at <tree>.aside as well, pointing
// outside) is set aside — the link moved, not followed, the planted
// .aside link removed, nothing written where either points — and the
// person is told where it went, in a notice naming the path.
func TestPoolTreeSetAsideIsTold(t *testing.T) {
	root := gitRepo(t)
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	store := newStore(t, task("a"), task("b"))
	if rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 1, Setup: ""}, newStore(t, task("first")), writeTxt()); err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("first Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	wt := filepath.Join(root, ".ralph", "worktrees")
	tree := filepath.Join(wt, "w1")
	away, outside := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(away, "agent.txt"), []byte("the agent's\n"), 0o644)
	if err := os.RemoveAll(tree); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(away, tree); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, tree+".aside"); err != nil {
		t.Fatal(err)
	}
	obs := &notes{}
	cfg.Observer = obs
	rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 1}, store, writeTxt())
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	aside := asideOf(t, wt)
	if to, err := os.Readlink(aside); err != nil || to != away {
		t.Errorf("set aside: %q, %v; want the link to %s itself", to, err, away)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("written through the planted .aside link: %v", entries)
	}
	if entries, _ := os.ReadDir(away); len(entries) != 1 {
		t.Errorf("where the tree's link pointed: %v; want agent.txt alone", entries)
	}
	if !obs.has(loop.NoteNotice, "w1", aside) {
		t.Errorf("no notice of w1 naming %s: %q", aside, obs.all())
	}
}

// TestPoolTreeLinkedToMainCheckout: between two attempts (a process the
// agent left behind), w1's tree is replaced by a link to the project's own
// checkout. The next attempt finds it so before git runs there: the link
// is set aside, the worktree made again, the person told where it went,
// and the user's checkout — its HEAD, its branch, its uncommitted edit and
// untracked file, the plan — is untouched; both tasks land.
func TestPoolTreeLinkedToMainCheckout(t *testing.T) {
	root := gitRepo(t)
	os.WriteFile(filepath.Join(root, "shared.txt"), []byte("the user's edit\n"), 0o644)
	os.WriteFile(filepath.Join(root, "untracked.txt"), []byte("the user's\n"), 0o644)
	head := gitOut(t, root, "rev-parse", "HEAD")
	status := gitOut(t, root, "status", "--porcelain")
	tree := filepath.Join(root, ".ralph", "worktrees", "w1")
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	var once sync.Once
	obs := &notes{}
	cfg.Observer = loop.ObserverFunc(func(n loop.Note) {
		obs.Observe(n)
		if n.Kind == loop.NoteNotice && strings.HasPrefix(n.Message, "task a landed") {
			once.Do(func() {
				if err := os.RemoveAll(tree); err != nil {
					t.Error(err)
				}
				if err := os.Symlink(root, tree); err != nil {
					t.Error(err)
				}
			})
		}
	})
	store := newStore(t, task("a"), task("b", "a"))
	rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 1}, store, writeTxt())
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	aside := asideOf(t, filepath.Dir(tree))
	if to, err := os.Readlink(aside); err != nil || to != root {
		t.Errorf("set aside: %q, %v; want the link to the checkout itself", to, err)
	}
	if !obs.has(loop.NoteNotice, "w1", "before task b began") || !obs.has(loop.NoteNotice, "w1", aside) {
		t.Errorf("no notice of w1 naming %s before task b: %q", aside, obs.all())
	}
	if got := gitOut(t, root, "rev-parse", "HEAD"); got != head {
		t.Errorf("the user's HEAD moved to %s", got)
	}
	if got := gitOut(t, root, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Errorf("the user's checkout is on %s", got)
	}
	if got := gitOut(t, root, "status", "--porcelain"); got != status {
		t.Errorf("the user's tree: %q; want %q", got, status)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "shared.txt")); string(b) != "the user's edit\n" {
		t.Errorf("the user's edit is %q", b)
	}
	files := gitOut(t, root, "ls-tree", "-r", "--name-only", DefaultInto)
	if !strings.Contains(files, "a.txt") || !strings.Contains(files, "b.txt") || strings.Contains(files, "untracked.txt") {
		t.Errorf("the integration branch holds %q", files)
	}
}
