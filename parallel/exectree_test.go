package parallel_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
	"github.com/ralph-dev/ralph/parallel"
	"github.com/ralph-dev/ralph/safefile"
)

func TestCommits(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	first := gitT(t, repo, "rev-parse", "HEAD")
	second := commitFiles(t, repo, "2", map[string]string{"b.txt": "b\n"})
	third := commitFiles(t, repo, "3", map[string]string{"c.txt": "c\n"})
	g := &parallel.ExecGit{Root: repo}
	for _, tc := range []struct {
		base, tip string
		want      []string
	}{
		{first, third, []string{third, second}},
		{"", second, []string{second, first}},
		{third, first, nil},
	} {
		got, err := g.Commits(t.Context(), tc.base, tc.tip)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Commits(%.7s, %.7s) (-want +got):\n%s", tc.base, tc.tip, diff)
		}
	}
}

// TestCheckWorktree: what CheckWorktree calls ralph's worktree and what
// not, following no link — an agent's tree replaced by a link to the main
// checkout, its .git rewritten to name the main repository, a repository
// of its own, a FIFO, the repository's record of it spoiled — and which
// of them only need their .git repaired. It agrees with the git ralph
// runs there: a tree it accepts is one git works in, and one it would set
// aside is one git refuses.
func TestCheckWorktree(t *testing.T) {
	record := func(t *testing.T, repo string) string {
		t.Helper()
		admins, _ := filepath.Glob(filepath.Join(repo, ".git", "worktrees", "*"))
		if len(admins) != 1 {
			t.Fatalf("worktree records %v, want one", admins)
		}
		return admins[0]
	}
	t.Parallel()
	for _, tc := range []struct {
		name        string
		spoil       func(t *testing.T, repo, dir string)
		want        string // a word of the problem; "" none
		gitFileOnly bool
	}{
		{"the worktree", func(*testing.T, string, string) {}, "", false},
		{"a link to the main checkout", func(t *testing.T, repo, dir string) {
			os.RemoveAll(dir)
			os.Symlink(repo, dir)
		}, "symbolic link", false},
		{"gone", func(t *testing.T, repo, dir string) { os.RemoveAll(dir) }, "gone", false},
		{"a plain directory where the worktree was", func(t *testing.T, repo, dir string) {
			os.RemoveAll(dir)
			os.Mkdir(dir, 0o755)
		}, ".git is gone", true},
		{"a directory the repository keeps no worktree at", func(t *testing.T, repo, dir string) {
			os.RemoveAll(dir)
			gitT(t, repo, "worktree", "prune")
			os.Mkdir(dir, 0o755)
		}, "keeps no worktree there", false},
		{".git names the main repository", func(t *testing.T, repo, dir string) {
			os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: "+filepath.Join(repo, ".git")+"\n"), 0o644)
		}, "names", true},
		{".git is a link", func(t *testing.T, repo, dir string) {
			os.Remove(filepath.Join(dir, ".git"))
			os.Symlink(filepath.Join(repo, ".git"), filepath.Join(dir, ".git"))
		}, "symbolic link", true},
		{".git is a repository", func(t *testing.T, repo, dir string) {
			os.Remove(filepath.Join(dir, ".git"))
			gitT(t, dir, "init", "-q")
		}, "repository of its own", true},
		{".git is gone", func(t *testing.T, repo, dir string) { os.Remove(filepath.Join(dir, ".git")) }, ".git is gone", true},
		{".git is a FIFO", func(t *testing.T, repo, dir string) {
			os.Remove(filepath.Join(dir, ".git"))
			if err := mkfifo(filepath.Join(dir, ".git")); err != nil {
				t.Skip("mkfifo:", err)
			}
		}, "not a file", true},
		{"the repository's record of it has no HEAD", func(t *testing.T, repo, dir string) {
			os.Remove(filepath.Join(record(t, repo), "HEAD"))
		}, "keeps no worktree there", false},
		{"the repository's record of it is a link", func(t *testing.T, repo, dir string) {
			admin := record(t, repo)
			moved := filepath.Join(t.TempDir(), "record")
			if err := os.Rename(admin, moved); err != nil {
				t.Fatal(err)
			}
			os.Symlink(moved, admin)
		}, "keeps no worktree there", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo := newRepo(t)
			g, dir := newWorktree(t, repo)
			tc.spoil(t, repo, dir)
			err := g.CheckWorktree(t.Context(), dir)
			var we *parallel.WorktreeError
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckWorktree = %v; want nil", err)
			case tc.want == "":
				if _, err := g.Status(t.Context(), dir); err != nil {
					t.Errorf("git in a tree CheckWorktree accepts: %v", err)
				}
				return
			case !errors.As(err, &we):
				t.Fatalf("CheckWorktree = %v; want a *WorktreeError", err)
			case !strings.Contains(we.Problem, tc.want) || we.GitFileOnly != tc.gitFileOnly:
				t.Errorf("CheckWorktree = %q (.git only %v); want %q (%v)", we.Problem, we.GitFileOnly, tc.want, tc.gitFileOnly)
			}
			if !we.GitFileOnly {
				if _, err := g.Status(t.Context(), dir); err == nil {
					t.Errorf("git ran in a tree CheckWorktree sets aside")
				}
			}
		})
	}
}

// TestRepairWorktree: a tree whose .git an agent replaced by its own
// repository is mended in place: the repository moved aside whole, the
// .git file written again, the tree's files untouched.
func TestRepairWorktree(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	g, dir := newWorktree(t, repo)
	writeFiles(t, dir, map[string]string{"b.txt": "b\n"})
	os.Remove(filepath.Join(dir, ".git"))
	gitT(t, dir, "init", "-q")
	gitT(t, dir, "add", "b.txt")
	gitT(t, dir, "commit", "-q", "-m", "the agent's own history")
	aside := filepath.Join(dir+".aside", "1")
	if err := g.RepairWorktree(t.Context(), dir, aside); err != nil {
		t.Fatal(err)
	}
	if err := g.CheckWorktree(t.Context(), dir); err != nil {
		t.Fatalf("after the repair: %v", err)
	}
	if got := gitT(t, filepath.Join(aside), "--git-dir=.git", "log", "--format=%s"); got != "the agent's own history" {
		t.Errorf("the agent's repository set aside has %q", got)
	}
	if got := gitT(t, dir, "status", "--porcelain"); got != "?? b.txt" {
		t.Errorf("the repaired tree's status %q; want b.txt untracked", got)
	}
}

// TestSetAsideAndMakeAgain: a link planted where a worktree was is moved
// aside, not followed — what it points to is untouched — and the worktree
// is made again at the same path.
func TestSetAsideAndMakeAgain(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	g, dir := newWorktree(t, repo)
	writeFiles(t, repo, map[string]string{"user.txt": "the user's edit\n"})
	os.RemoveAll(dir)
	if err := os.Symlink(repo, dir); err != nil {
		t.Fatal(err)
	}
	aside := filepath.Join(dir+".aside", "1")
	if err := g.SetAside(t.Context(), dir, aside); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(aside); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("set aside: %v, %v; want the link itself", fi, err)
	}
	if err := g.AddWorktree(t.Context(), dir, gitT(t, repo, "rev-parse", "HEAD")); err != nil {
		t.Fatalf("AddWorktree again: %v", err)
	}
	if err := g.CheckWorktree(t.Context(), dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(repo, "user.txt")); string(b) != "the user's edit\n" {
		t.Errorf("the user's file is %q", b)
	}
	if got := gitT(t, repo, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Errorf("the user's HEAD is %s", got)
	}
	if err := g.SetAside(t.Context(), filepath.Join(t.TempDir(), "none"), aside+"x"); err != nil {
		t.Errorf("SetAside of nothing = %v", err)
	}
}

// TestSetAsideFollowsNoLink: an agent plants a link at <tree>.aside, the
// directory ralph sets a broken tree (or its .git) aside in, pointing
// outside. SetAside and RepairWorktree refuse it (safefile.ErrLink),
// moving nothing: nothing lands where the link points, the tree or its
// .git stay where they were.
func TestSetAsideFollowsNoLink(t *testing.T) {
	t.Parallel()
	for _, repair := range []bool{false, true} {
		t.Run(map[bool]string{false: "SetAside", true: "RepairWorktree"}[repair], func(t *testing.T) {
			t.Parallel()
			repo := newRepo(t)
			g, dir := newWorktree(t, repo)
			outside := t.TempDir()
			if err := os.Symlink(outside, dir+".aside"); err != nil {
				t.Fatal(err)
			}
			aside := filepath.Join(dir+".aside", "1")
			var err error
			if repair {
				err = g.RepairWorktree(t.Context(), dir, aside)
			} else {
				err = g.SetAside(t.Context(), dir, aside)
			}
			if !errors.Is(err, safefile.ErrLink) {
				t.Errorf("through a link at %s.aside: %v; want a refused link", filepath.Base(dir), err)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Errorf("written where the link points: %v", entries)
			}
			if err := g.CheckWorktree(t.Context(), dir); err != nil {
				t.Errorf("the tree after the refusal: %v", err)
			}
		})
	}
}

// TestWorkspaceAgentResetOnGit: over a real repository, an agent that
// runs git reset --hard HEAD~1 in its tree and adds a file lands that
// file; the previous task's work stays on the branch.
func TestWorkspaceAgentResetOnGit(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	ctx := t.Context()
	g := &parallel.ExecGit{Root: repo}
	const integ = "refs/heads/ralph/integration"
	if err := g.CreateRef(ctx, integ, gitT(t, repo, "rev-parse", "HEAD")); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "w1")
	if err := g.AddWorktree(ctx, dir, gitT(t, repo, "rev-parse", "HEAD")); err != nil {
		t.Fatal(err)
	}
	ws := parallel.NewWorkspace(g, looptest.NewMemStore(nil), dir, "w1", integ)
	land := func(id string, work func()) loop.IntegrateResult {
		t.Helper()
		tk := loop.Task{ID: id, Title: "Task " + id, Generation: 1}
		if landed, err := ws.Begin(ctx, tk, 0); err != nil || landed {
			t.Fatal(landed, err)
		}
		work()
		res, err := ws.Integrate(ctx, loop.IntegrateRequest{Task: tk})
		if err != nil {
			t.Fatalf("Integrate(%s) = %v", id, err)
		}
		return res
	}
	land("a", func() { writeFiles(t, dir, map[string]string{"a.txt": "changed by a\n", "new.txt": "a\n"}) })
	res := land("b", func() {
		gitT(t, dir, "reset", "-q", "--hard", "HEAD~1")
		writeFiles(t, dir, map[string]string{"b.txt": "b\n"})
	})
	if res.Commit == "" {
		t.Fatal("b's own change did not land")
	}
	want := map[string]string{"a.txt": "changed by a\n", "new.txt": "a\n", "b.txt": "b\n"}
	if diff := cmp.Diff(want, treeFiles(t, repo, integ)); diff != "" {
		t.Errorf("the branch after b (-want +got):\n%s", diff)
	}
}
