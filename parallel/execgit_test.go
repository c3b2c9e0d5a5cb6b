package parallel_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/parallel"
	"github.com/ralph-dev/ralph/parallel/gittest"
)

// TestMain runs git as on a machine with no configuration: no global or
// system config, no identity from the environment. What a test needs
// (an identity, hooks, odd settings) it sets in the repository it makes.
func TestMain(m *testing.M) {
	os.Exit(runHermetic(m))
}

func runHermetic(m *testing.M) int {
	dir, err := os.MkdirTemp("", "execgit-config")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "gitconfig")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	os.Setenv("GIT_CONFIG_GLOBAL", cfg)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	for _, k := range []string{
		"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE",
		"GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE",
		"EMAIL", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE",
	} {
		os.Unsetenv(k)
	}
	return m.Run()
}

// needGit skips without git (a failure under CI); gitT runs git by the
// test's own hand, with an identity.
var (
	needGit = gittest.NeedGit
	gitT    = gittest.Run
)

// newRepo makes a repository, in a directory whose path has spaces, with
// one commit of a.txt on branch main, and returns its working tree.
func newRepo(t *testing.T) string {
	t.Helper()
	needGit(t)
	dir := filepath.Join(t.TempDir(), "my repo")
	gitT(t, t.TempDir(), "init", "--quiet", "--initial-branch=main", dir)
	commitFiles(t, dir, "init", map[string]string{"a.txt": "a\n"})
	return dir
}

// commitFiles writes files (content "" deletes) in dir and commits them
// with message; it returns the new HEAD.
func commitFiles(t *testing.T, dir, message string, files map[string]string) string {
	t.Helper()
	writeFiles(t, dir, files)
	gitT(t, dir, "add", "--all")
	gitT(t, dir, "commit", "--quiet", "--allow-empty", "-m", message)
	return gitT(t, dir, "rev-parse", "HEAD")
}

// writeFiles writes files in dir, making directories; content "" deletes.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if content == "" {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// treeFiles returns the files of commit's tree and their contents.
func treeFiles(t *testing.T, dir, commit string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for name := range strings.Lines(gitT(t, dir, "ls-tree", "-r", "--name-only", "-z", commit)) {
		for n := range strings.SplitSeq(name, "\x00") {
			if n = strings.TrimSpace(n); n != "" {
				files[n] = gitT(t, dir, "show", commit+":"+n) + "\n"
			}
		}
	}
	return files
}

// diskFiles returns the files under dir, .git aside, and their contents.
func diskFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	return gittest.TreeFiles(t, dir)
}

func TestCheck(t *testing.T) {
	t.Parallel()
	needGit(t)
	repo := newRepo(t)
	if err := os.MkdirAll(filepath.Join(repo, "sub", "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	unborn := filepath.Join(t.TempDir(), "unborn")
	gitT(t, t.TempDir(), "init", "--quiet", unborn)
	bare := filepath.Join(t.TempDir(), "bare.git")
	gitT(t, t.TempDir(), "init", "--quiet", "--bare", bare)
	plain := t.TempDir()

	for _, tc := range []struct {
		name string
		root string
		want error
	}{
		{"repository", repo, nil},
		{"subdirectory", filepath.Join(repo, "sub", "dir"), nil},
		{"plain directory", plain, parallel.ErrNotRepository},
		{"missing directory", filepath.Join(plain, "nothere"), parallel.ErrNotRepository},
		{"git directory", filepath.Join(repo, ".git"), parallel.ErrNotRepository},
		{"bare repository", bare, parallel.ErrNotRepository},
		{"unborn HEAD", unborn, parallel.ErrNoCommit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := (&parallel.ExecGit{Root: tc.root}).Check(t.Context())
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("Check() = %v, want %v", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), tc.root) {
				t.Errorf("Check() = %q, does not name Root %s", err, tc.root)
			}
		})
	}

	t.Run("no git binary", func(t *testing.T) {
		t.Parallel()
		err := (&parallel.ExecGit{Root: repo, Bin: filepath.Join(plain, "no-git")}).Check(t.Context())
		if err == nil || errors.Is(err, parallel.ErrNotRepository) {
			t.Fatalf("Check() = %v, want an error starting git", err)
		}
	})
}

func TestHeadAndResolve(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	first := gitT(t, repo, "rev-parse", "HEAD")
	second := commitFiles(t, repo, "second", map[string]string{"b.txt": "b\n"})
	gitT(t, repo, "tag", "-a", "-m", "annotated", "v1", first)
	g := &parallel.ExecGit{Root: repo}
	ctx := t.Context()

	head, err := g.Head(ctx)
	if err != nil || head != second {
		t.Fatalf("Head() = %q, %v; want %s", head, err, second)
	}
	for _, tc := range []struct {
		ref    string
		want   string
		wantOK bool
	}{
		{"refs/heads/main", second, true},
		{"HEAD", second, true},
		{"refs/tags/v1", first, true}, // peeled to the commit
		{first, first, true},
		{"refs/heads/nothere", "", false},
		{"refs/heads/main:a.txt", "", false}, // a blob, not a commit
	} {
		got, ok, err := g.Resolve(ctx, tc.ref)
		if err != nil || got != tc.want || ok != tc.wantOK {
			t.Errorf("Resolve(%q) = %q, %v, %v; want %q, %v, nil", tc.ref, got, ok, err, tc.want, tc.wantOK)
		}
	}
	if _, _, err := g.Resolve(ctx, "--all"); err == nil {
		t.Error("Resolve(--all) succeeded, want an error for an option-like name")
	}
}

func TestCreateRef(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	head := gitT(t, repo, "rev-parse", "HEAD")
	g := &parallel.ExecGit{Root: repo}
	ctx := t.Context()

	const ref = "refs/heads/ralph/integration/plan"
	if err := g.CreateRef(ctx, ref, head); err != nil {
		t.Fatalf("CreateRef() = %v", err)
	}
	if got := gitT(t, repo, "rev-parse", ref); got != head {
		t.Fatalf("%s = %s, want %s", ref, got, head)
	}
	second := commitFiles(t, repo, "second", map[string]string{"b.txt": "b\n"})
	if err := g.CreateRef(ctx, ref, second); !errors.Is(err, parallel.ErrRefExists) {
		t.Fatalf("CreateRef() again = %v, want ErrRefExists", err)
	}
	if got := gitT(t, repo, "rev-parse", ref); got != head {
		t.Fatalf("%s = %s after a failed CreateRef, want %s", ref, got, head)
	}
	missing := strings.Repeat("1", len(head))
	err := g.CreateRef(ctx, "refs/heads/other", missing)
	if err == nil || errors.Is(err, parallel.ErrRefExists) {
		t.Fatalf("CreateRef(missing object) = %v, want another error", err)
	}
}

func TestSwapRef(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	c1 := gitT(t, repo, "rev-parse", "HEAD")
	c2 := commitFiles(t, repo, "2", map[string]string{"b.txt": "b\n"})
	c3 := commitFiles(t, repo, "3", map[string]string{"c.txt": "c\n"})
	g := &parallel.ExecGit{Root: repo}

	for _, tc := range []struct {
		name      string
		at        string // "" leaves the ref missing
		new, old  string
		want      error // nil, ErrRefMoved, or errOther
		wantAfter string
	}{
		{"moves", c1, c2, c1, nil, c2},
		{"moved already", c3, c2, c1, parallel.ErrRefMoved, c3},
		{"missing ref", "", c2, c1, parallel.ErrRefMoved, ""},
		{"new not an object", c1, strings.Repeat("1", len(c1)), c1, errOther, c1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := "refs/heads/swap/" + strings.ReplaceAll(tc.name, " ", "-")
			if tc.at != "" {
				gitT(t, repo, "update-ref", ref, tc.at)
			}
			err := g.SwapRef(t.Context(), ref, tc.new, tc.old)
			switch tc.want {
			case nil:
				if err != nil {
					t.Fatalf("SwapRef() = %v", err)
				}
			case errOther:
				if err == nil || errors.Is(err, parallel.ErrRefMoved) {
					t.Fatalf("SwapRef() = %v, want an error other than ErrRefMoved", err)
				}
			default:
				if !errors.Is(err, tc.want) {
					t.Fatalf("SwapRef() = %v, want %v", err, tc.want)
				}
			}
			got, _, err := g.Resolve(t.Context(), ref)
			if err != nil || got != tc.wantAfter {
				t.Fatalf("after SwapRef, %s = %q, %v; want %q", ref, got, err, tc.wantAfter)
			}
		})
	}
}

var errOther = errors.New("another error")

// TestSwapRefConcurrent races swaps from one old value: exactly one wins.
func TestSwapRefConcurrent(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	base := gitT(t, repo, "rev-parse", "HEAD")
	const racers = 4
	var news []string
	for i := range racers {
		news = append(news, commitFiles(t, repo, fmt.Sprint("racer ", i), map[string]string{"r.txt": fmt.Sprint(i, "\n")}))
	}
	g := &parallel.ExecGit{Root: repo}
	for round := range 3 {
		ref := fmt.Sprint("refs/heads/race/", round)
		gitT(t, repo, "update-ref", ref, base)
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() { errs[i] = g.SwapRef(t.Context(), ref, news[i], base) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: racers %d and %d both won", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, parallel.ErrRefMoved):
				t.Fatalf("round %d: racer %d: %v, want ErrRefMoved", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody won: %v", round, errs)
		}
		if got := gitT(t, repo, "rev-parse", ref); got != news[winner] {
			t.Fatalf("round %d: %s = %s, want the winner's %s", round, ref, got, news[winner])
		}
	}
}

func TestIsAncestor(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	c1 := gitT(t, repo, "rev-parse", "HEAD")
	c2 := commitFiles(t, repo, "2", map[string]string{"b.txt": "b\n"})
	gitT(t, repo, "checkout", "--quiet", "--orphan", "other")
	c3 := commitFiles(t, repo, "unrelated", map[string]string{"z.txt": "z\n"})
	g := &parallel.ExecGit{Root: repo}
	for _, tc := range []struct {
		name string
		a, b string
		want bool
	}{
		{"parent", c1, c2, true},
		{"itself", c2, c2, true},
		{"child", c2, c1, false},
		{"unrelated", c1, c3, false},
		{"ref names", "refs/heads/main", c2, true},
	} {
		got, err := g.IsAncestor(t.Context(), tc.a, tc.b)
		if err != nil || got != tc.want {
			t.Errorf("%s: IsAncestor() = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	if _, err := g.IsAncestor(t.Context(), strings.Repeat("1", len(c1)), c2); err == nil {
		t.Error("IsAncestor(missing object) succeeded, want an error")
	}
}

func TestTrailers(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	for _, msg := range []string{
		"one\n\nRalph-Task: a",
		"no trailer\n\nRalph-Task: in the body\nis not a trailer block.",
		"three\n\nbody\n\nRalph-Task: b\nralph-task: c\nOther: x",
		"four\n\nSigned-off-by: Someone <s@example.com>\nRalph-Task: d\n  folded",
		"Ralph-Task: a subject is not a trailer",
	} {
		gitT(t, repo, "commit", "--quiet", "--allow-empty", "--cleanup=verbatim", "-m", msg)
	}
	g := &parallel.ExecGit{Root: repo}
	got, err := g.Trailers(t.Context(), "", "HEAD", "Ralph-Task")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"d folded", "b", "c", "a"}, got); diff != "" {
		t.Errorf("Trailers() (-want +got):\n%s", diff)
	}
	got, err = g.Trailers(t.Context(), "", "HEAD~5", "Ralph-Task")
	if err != nil || got != nil {
		t.Errorf("Trailers(before any) = %q, %v; want none", got, err)
	}
	got, err = g.Trailers(t.Context(), gitT(t, repo, "rev-parse", "HEAD~2"), "HEAD", "Ralph-Task")
	if diff := cmp.Diff([]string{"d folded"}, got); err != nil || diff != "" {
		t.Errorf("Trailers(HEAD~2..HEAD) = %v (-want +got):\n%s", err, diff)
	}
	if _, err := g.Trailers(t.Context(), "", "refs/heads/nothere", "Ralph-Task"); err == nil {
		t.Error("Trailers(missing tip) succeeded, want an error")
	}
}

// newWorktree adds a worktree to repo with ExecGit, detached at HEAD, in
// a directory whose path has spaces.
func newWorktree(t *testing.T, repo string) (g *parallel.ExecGit, dir string) {
	t.Helper()
	g = &parallel.ExecGit{Root: repo}
	dir = filepath.Join(t.TempDir(), "work tree")
	if err := g.AddWorktree(t.Context(), dir, gitT(t, repo, "rev-parse", "HEAD")); err != nil {
		t.Fatalf("AddWorktree() = %v", err)
	}
	return g, dir
}

func TestAddWorktree(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	first := gitT(t, repo, "rev-parse", "HEAD")
	commitFiles(t, repo, "2", map[string]string{"b.txt": "b\n"})
	g := &parallel.ExecGit{Root: repo}
	dir := filepath.Join(t.TempDir(), "w")
	if err := g.AddWorktree(t.Context(), dir, first); err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, dir, "rev-parse", "HEAD"); got != first {
		t.Errorf("worktree HEAD = %s, want %s", got, first)
	}
	if b, err := exec.Command("git", "-C", dir, "symbolic-ref", "-q", "HEAD").Output(); err == nil {
		t.Errorf("worktree HEAD is on %s, want detached", b)
	}
	if diff := cmp.Diff(map[string]string{"a.txt": "a\n"}, diskFiles(t, dir)); diff != "" {
		t.Errorf("worktree files (-want +got):\n%s", diff)
	}
	if err := g.AddWorktree(t.Context(), dir, first); err == nil {
		t.Error("AddWorktree(existing dir) succeeded, want an error")
	}
}

func TestCheckedOut(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	g, dir := newWorktree(t, repo)
	got, err := g.CheckedOut(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"refs/heads/main"}, got); diff != "" {
		t.Errorf("CheckedOut() with a detached worktree (-want +got):\n%s", diff)
	}
	gitT(t, dir, "checkout", "--quiet", "-b", "ralph/task/1")
	got, err = g.CheckedOut(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"refs/heads/main", "refs/heads/ralph/task/1"}, got); diff != "" {
		t.Errorf("CheckedOut() (-want +got):\n%s", diff)
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	commitFiles(t, repo, "more", map[string]string{
		".gitignore": ".env\n", "b.txt": "b\n", "old name.txt": "old\n", "gone.txt": "g\n",
	})
	g := &parallel.ExecGit{Root: repo}
	got, err := g.Status(t.Context(), repo)
	if err != nil || got != nil {
		t.Fatalf("Status(clean) = %q, %v; want nil", got, err)
	}
	writeFiles(t, repo, map[string]string{
		"a.txt":             "changed\n",
		"gone.txt":          "",
		"new/deep/file.txt": "untracked\n",
		"ünï code.txt":      "u\n",
		".env":              "SECRET=1\n",
		"staged.txt":        "s\n",
	})
	gitT(t, repo, "add", "staged.txt")
	gitT(t, repo, "mv", "old name.txt", "new name.txt")
	got, err = g.Status(t.Context(), repo)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{"a.txt", "gone.txt", "new name.txt", "new/deep/file.txt", "old name.txt", "staged.txt", "ünï code.txt"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Status() (-want +got):\n%s", diff)
	}
}

func TestSwitch(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	c1 := commitFiles(t, repo, "ignore", map[string]string{".gitignore": ".env\nnode_modules/\n", "b.txt": "b\n"})
	c2 := commitFiles(t, repo, "more", map[string]string{"b.txt": "b2\n", "c.txt": "c\n"})
	g, dir := newWorktree(t, repo)
	ctx := t.Context()

	// An agent's leftovers: edits, staged and untracked files, a repository
	// of its own, and ignored files that must stay.
	writeFiles(t, dir, map[string]string{
		"a.txt":                   "edited\n",
		"c.txt":                   "",
		"staged.txt":              "s\n",
		"untracked/deep/file.txt": "u\n",
		".env":                    "SECRET=1\n",
		"node_modules/x/index.js": "x\n",
	})
	gitT(t, dir, "add", "staged.txt")
	gitT(t, filepath.Join(dir, "untracked"), "init", "--quiet", "nested")
	commitFiles(t, filepath.Join(dir, "untracked", "nested"), "nested", map[string]string{"n.txt": "n\n"})

	const ref = "refs/heads/ralph/task/t1"
	if err := g.Switch(ctx, dir, ref, c1); err != nil {
		t.Fatalf("Switch() from detached = %v", err)
	}
	// A repository the agent made inside the tree stays: its files are in
	// no commit (Commit refuses it, and the workspace moves it aside).
	want := map[string]string{
		".gitignore": ".env\nnode_modules/\n", "a.txt": "a\n", "b.txt": "b\n",
		".env": "SECRET=1\n", "node_modules/x/index.js": "x\n", "untracked/nested/n.txt": "n\n",
	}
	if diff := cmp.Diff(want, diskFiles(t, dir)); diff != "" {
		t.Errorf("files after Switch (-want +got):\n%s", diff)
	}
	if br, head, err := g.HeadOf(ctx, dir); err != nil || br != "" || head != c1 || gitT(t, repo, "rev-parse", ref) != c1 {
		t.Errorf("after Switch: HEAD on %q at %s (%v), %s at %s; want detached at %s, the branch there too", br, head, err, ref, gitT(t, repo, "rev-parse", ref), c1)
	}
	if got, err := g.Status(ctx, dir); err != nil || !cmp.Equal(got, []string{"untracked/nested/"}) {
		t.Errorf("Status() after Switch = %q, %v; want only the nested repository", got, err)
	}
	if _, _, err := g.Commit(ctx, dir, c1, "x\n", nil); !errors.As(err, new(*parallel.NestedRepoError)) {
		t.Errorf("Commit() with a repository in the tree = %v; want a *NestedRepoError", err)
	}

	// The same branch name again, at another commit, from a dirty tree.
	writeFiles(t, dir, map[string]string{"b.txt": "dirty\n"})
	gitT(t, dir, "commit", "--quiet", "-am", "agent's commit")
	if err := g.Switch(ctx, dir, ref, c2); err != nil {
		t.Fatalf("Switch() to the same branch = %v", err)
	}
	want["b.txt"], want["c.txt"] = "b2\n", "c\n"
	if diff := cmp.Diff(want, diskFiles(t, dir)); diff != "" {
		t.Errorf("files after the second Switch (-want +got):\n%s", diff)
	}
	if got := gitT(t, repo, "rev-parse", ref); got != c2 {
		t.Errorf("%s = %s, want %s", ref, got, c2)
	}

	for _, tc := range []struct{ name, ref string }{
		{"not a branch", "refs/tags/t"},
		{"checked out elsewhere", "refs/heads/main"},
		{"missing commit", ref},
	} {
		commit := c1
		if tc.name == "missing commit" {
			commit = strings.Repeat("1", len(c1))
		}
		if err := g.Switch(ctx, dir, tc.ref, commit); err == nil {
			t.Errorf("Switch(%s) succeeded, want an error", tc.name)
		}
	}
}

// TestSwitchForgetsStoppedOperations: an agent's rebase, cherry-pick or
// git am stopped on a conflict is gone after Switch, so that neither the
// next agent nor Rebase finds one in progress.
func TestSwitchForgetsStoppedOperations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string // what the agent ran, in the worktree on branch agent
	}{
		{"rebase", []string{"rebase", "main"}},
		{"cherry-pick", []string{"cherry-pick", "side~1", "side"}},
		{"am", []string{"am", "--3way", "patch"}},
		{"revert", []string{"revert", "--no-edit", "main~1", "main"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo := newRepo(t)
			base := gitT(t, repo, "rev-parse", "HEAD")
			gitT(t, repo, "checkout", "--quiet", "-b", "side")
			commitFiles(t, repo, "side 1", map[string]string{"a.txt": "side\n"})
			commitFiles(t, repo, "side 2", map[string]string{"b.txt": "side\n"})
			gitT(t, repo, "checkout", "--quiet", "main")
			commitFiles(t, repo, "main 1", map[string]string{"a.txt": "main\n"})
			commitFiles(t, repo, "main 2", map[string]string{"a.txt": "main again\n"})
			g, dir := newWorktree(t, repo)
			gitT(t, dir, "checkout", "--quiet", "-B", "agent", "side")
			if tc.name == "cherry-pick" || tc.name == "revert" {
				gitT(t, dir, "reset", "--quiet", "--hard", "main~1")
			}
			if tc.name == "am" {
				writeFiles(t, dir, map[string]string{"patch": gitT(t, dir, "format-patch", "--stdout", "main~1..main") + "\n"})
			}
			cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=A", "-c", "user.email=a@example.com"}, tc.args...)...)
			if out, err := cmd.CombinedOutput(); err == nil {
				t.Fatalf("git %s succeeded, want it stopped on a conflict:\n%s", tc.args, out)
			}
			if err := g.Switch(t.Context(), dir, taskRef, base); err != nil {
				t.Fatalf("Switch() = %v", err)
			}
			assertUntouched(t, g, dir, base, taskRef)
			for _, p := range []string{"sequencer", "CHERRY_PICK_HEAD", "REVERT_HEAD", "MERGE_HEAD"} {
				if _, err := os.Stat(gitT(t, dir, "rev-parse", "--git-path", p)); err == nil {
					t.Errorf("%s is still there", p)
				}
			}
			if st := gitT(t, dir, "status"); strings.Contains(st, "progress") {
				t.Errorf("git status after Switch:\n%s", st)
			}
		})
	}
}

// commitCase is a worktree state an agent leaves, and the commit Commit
// should make of it.
type commitCase struct {
	name   string
	agent  func(t *testing.T, dir string) // what the agent did in the worktree
	except []string
	want   map[string]string // the commit's files; nil: no commit
}

func TestCommit(t *testing.T) {
	t.Parallel()
	baseFiles := map[string]string{
		".gitignore":   ".env\nbuild/\n",
		"a.txt":        "a\n",
		"old name.txt": "old\n",
		"gone.txt":     "gone\n",
		"config.local": "base's\n",
	}
	with := func(changes map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range baseFiles {
			m[k] = v
		}
		for k, v := range changes {
			if v == "" {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	for _, tc := range []commitCase{
		{
			name: "edits, untracked, deletion, rename",
			agent: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{
					"a.txt": "edited\n", "gone.txt": "", "new/file.txt": "new\n",
					".env": "SECRET\n", "build/out.bin": "bin\n",
				})
				if err := os.Rename(filepath.Join(dir, "old name.txt"), filepath.Join(dir, "new name.txt")); err != nil {
					t.Fatal(err)
				}
			},
			want: with(map[string]string{
				"a.txt": "edited\n", "gone.txt": "", "new/file.txt": "new\n",
				"old name.txt": "", "new name.txt": "old\n",
			}),
		},
		{
			name: "agent's commits folded",
			agent: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{"a.txt": "one\n"})
				gitT(t, dir, "commit", "--quiet", "-am", "agent 1")
				writeFiles(t, dir, map[string]string{"b.txt": "two\n"})
				gitT(t, dir, "add", "b.txt")
				gitT(t, dir, "commit", "--quiet", "-m", "agent 2")
				writeFiles(t, dir, map[string]string{"c.txt": "staged\n", "d.txt": "untracked\n"})
				gitT(t, dir, "add", "c.txt")
			},
			want: with(map[string]string{"a.txt": "one\n", "b.txt": "two\n", "c.txt": "staged\n", "d.txt": "untracked\n"}),
		},
		{
			name: "except paths",
			agent: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{
					"secrets/key.pem": "KEY\n", "config.local": "agent's\n", "a.txt": "edited\n",
					"committed.local": "by the agent\n",
				})
				gitT(t, dir, "add", "committed.local")
				gitT(t, dir, "commit", "--quiet", "-m", "agent commits an except path")
			},
			except: []string{"secrets", "config.local", "committed.local", "not/there"},
			want:   with(map[string]string{"a.txt": "edited\n"}),
		},
		{
			name:  "no change",
			agent: func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{".env": "ignored\n"}) },
		},
		{
			name: "commits undone",
			agent: func(t *testing.T, dir string) {
				writeFiles(t, dir, map[string]string{"a.txt": "one\n"})
				gitT(t, dir, "commit", "--quiet", "-am", "agent 1")
				writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
				gitT(t, dir, "commit", "--quiet", "-am", "agent 2")
			},
		},
		{
			name:   "only except paths changed",
			agent:  func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{"config.local": "agent's\n"}) },
			except: []string{"config.local"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo := newRepo(t)
			base := commitFiles(t, repo, "base", baseFiles)
			g, dir := newWorktree(t, repo)
			const ref = "refs/heads/ralph/task/1"
			if err := g.Switch(t.Context(), dir, ref, base); err != nil {
				t.Fatal(err)
			}
			tc.agent(t, dir)

			const msg = "Do the thing\n\nRalph-Task: t-1\n"
			got, changed, err := g.Commit(t.Context(), dir, base, msg, tc.except)
			if err != nil {
				t.Fatalf("Commit() = %v", err)
			}
			head := gitT(t, dir, "rev-parse", "HEAD")
			if got != head || gitT(t, dir, "rev-parse", ref) != base {
				t.Errorf("Commit() = %s; HEAD must be at it, is at %s; %s must stay at %s (the caller moves it), is at %s", got, head, ref, base, gitT(t, dir, "rev-parse", ref))
			}
			if tc.want == nil {
				if changed || got != base {
					t.Errorf("Commit() = %s, %v; want base %s, false", got, changed, base)
				}
				return
			}
			if !changed {
				t.Fatalf("Commit() changed false, want a commit")
			}
			if parents := gitT(t, dir, "rev-parse", got+"^@"); parents != base {
				t.Errorf("commit's parents = %q, want base %s", parents, base)
			}
			if diff := cmp.Diff(tc.want, treeFiles(t, dir, got)); diff != "" {
				t.Errorf("committed files (-want +got):\n%s", diff)
			}
			if m := gitT(t, dir, "log", "-1", "--format=%B", got); m+"\n" != msg {
				t.Errorf("message %q, want %q", m, msg)
			}
			if got, err := g.Status(t.Context(), dir); err != nil || !allIn(got, tc.except) {
				t.Errorf("Status() after Commit = %q, %v; want at most the except paths", got, err)
			}
		})
	}
}

// allIn reports whether each path is one of dirs or under one.
func allIn(paths, dirs []string) bool {
	for _, p := range paths {
		if !slices.ContainsFunc(dirs, func(d string) bool { return p == d || strings.HasPrefix(p, d+"/") }) {
			return false
		}
	}
	return true
}

func TestCommitIdentityAndHooks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		config map[string]string
		want   string
	}{
		{"no identity configured", nil, "ralph <ralph@localhost>"},
		{"user's identity", map[string]string{"user.name": "Ann", "user.email": "ann@example.com"}, "Ann <ann@example.com>"},
		{"email only", map[string]string{"user.email": "ann@example.com"}, "ralph <ann@example.com>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo := newRepo(t)
			base := gitT(t, repo, "rev-parse", "HEAD")
			for k, v := range tc.config {
				gitT(t, repo, "config", k, v)
			}
			// Hooks that would refuse or hang, and signing that would
			// ask for a key.
			gitT(t, repo, "config", "commit.gpgSign", "true")
			writeFiles(t, repo, map[string]string{
				".git/hooks/pre-commit": "#!/bin/sh\necho no >&2\nexit 1\n",
				".git/hooks/commit-msg": "#!/bin/sh\nexit 1\n",
			})
			for _, h := range []string{"pre-commit", "commit-msg"} {
				if err := os.Chmod(filepath.Join(repo, ".git", "hooks", h), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			g := &parallel.ExecGit{Root: repo}
			writeFiles(t, repo, map[string]string{"b.txt": "b\n"})
			got, changed, err := g.Commit(t.Context(), repo, base, "b\n", nil)
			if err != nil || !changed {
				t.Fatalf("Commit() = %s, %v, %v", got, changed, err)
			}
			author := gitT(t, repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", got)
			if author != tc.want+"|"+tc.want {
				t.Errorf("author|committer = %q, want %q for both", author, tc.want)
			}
		})
	}
}

// oldGit writes a git that, like git before 2.38, has no merge-tree
// --write-tree, so that Rebase takes the git rebase way for everything.
func oldGit(t *testing.T) string {
	t.Helper()
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip(err)
	}
	bin := filepath.Join(t.TempDir(), "old git")
	script := "#!/bin/sh\nfor a; do [ \"$a\" = merge-tree ] && { echo \"usage: git merge-tree <branch1> <branch2>\" >&2; exit 129; }; done\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// rebaseSetup is a repository with base (shared.txt and a.txt), onto (a
// commit on base, or beside it, changing other) and a worktree on branch
// ralph/task/1 with commits of task on base.
type rebaseSetup struct {
	g                *parallel.ExecGit
	dir              string
	base, onto, head string
}

const taskRef = "refs/heads/ralph/task/1"

func newRebaseSetup(t *testing.T, bin string, sideways bool, other map[string]string, task ...map[string]string) rebaseSetup {
	t.Helper()
	repo := newRepo(t)
	var s rebaseSetup
	s.base = commitFiles(t, repo, "base", map[string]string{"shared.txt": "one\ntwo\nthree\n"})
	if sideways {
		gitT(t, repo, "checkout", "--quiet", "-B", "side", "HEAD~1")
	}
	s.onto = commitFiles(t, repo, "moved on", other)
	gitT(t, repo, "checkout", "--quiet", "main")
	s.g = &parallel.ExecGit{Root: repo, Bin: bin}
	s.dir = filepath.Join(t.TempDir(), "work tree")
	if err := s.g.AddWorktree(t.Context(), s.dir, s.base); err != nil {
		t.Fatal(err)
	}
	if err := s.g.Switch(t.Context(), s.dir, taskRef, s.base); err != nil {
		t.Fatal(err)
	}
	s.head = s.base
	for i, files := range task {
		writeFiles(t, s.dir, files)
		gitT(t, s.dir, "add", "--all")
		gitT(t, s.dir, "commit", "--quiet", "--allow-empty", "--date=2001-02-03T04:05:06+07:00",
			"-m", fmt.Sprintf("task %d\n\nRalph-Task: 1", i))
		s.head = gitT(t, s.dir, "rev-parse", "HEAD")
	}
	// Settings that would stop, widen or sign a rebase.
	gitT(t, repo, "config", "core.editor", "false")
	gitT(t, repo, "config", "rebase.autoStash", "true")
	gitT(t, repo, "config", "commit.gpgSign", "true")
	writeFiles(t, repo, map[string]string{".git/hooks/pre-rebase": "#!/bin/sh\nexit 1\n"})
	if err := os.Chmod(filepath.Join(repo, ".git", "hooks", "pre-rebase"), 0o755); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRebase(t *testing.T) {
	t.Parallel()
	needGit(t)
	shared := func(s string) map[string]string { return map[string]string{"shared.txt": s} }
	for _, tc := range []struct {
		name         string
		sideways     bool // onto is not a descendant of base
		other        map[string]string
		task         []map[string]string
		want         map[string]string // the result's files
		wantCommits  int               // commits from onto to the result
		wantConflict []string
	}{
		{
			name:  "one commit",
			other: map[string]string{"other.txt": "other\n", "shared.txt": "zero\none\ntwo\nthree\n"},
			task:  []map[string]string{{"task.txt": "task\n", "shared.txt": "one\ntwo\nthree\nfour\n"}},
			want: map[string]string{
				"a.txt": "a\n", "other.txt": "other\n", "task.txt": "task\n",
				"shared.txt": "zero\none\ntwo\nthree\nfour\n",
			},
			wantCommits: 1,
		},
		{
			name:        "two commits",
			other:       map[string]string{"other.txt": "other\n"},
			task:        []map[string]string{{"t1.txt": "1\n"}, {"t2.txt": "2\n", "a.txt": ""}},
			want:        map[string]string{"other.txt": "other\n", "t1.txt": "1\n", "t2.txt": "2\n", "shared.txt": "one\ntwo\nthree\n"},
			wantCommits: 2,
		},
		{
			name:        "base not an ancestor of onto",
			sideways:    true,
			other:       map[string]string{"other.txt": "other\n"},
			task:        []map[string]string{{"task.txt": "task\n"}},
			want:        map[string]string{"a.txt": "a\n", "other.txt": "other\n", "task.txt": "task\n"},
			wantCommits: 1,
		},
		{
			name:  "made empty",
			other: map[string]string{"same.txt": "same\n"},
			task:  []map[string]string{{"same.txt": "same\n"}},
			want:  map[string]string{"a.txt": "a\n", "same.txt": "same\n", "shared.txt": "one\ntwo\nthree\n"},
		},
		{
			name:         "conflict",
			other:        shared("one\nTWO by other\nthree\n"),
			task:         []map[string]string{{"shared.txt": "one\nTWO by task\nthree\n", "task.txt": "t\n"}},
			wantConflict: []string{"shared.txt"},
		},
		{
			name:         "conflict in the second commit",
			other:        shared("one\nTWO by other\nthree\n"),
			task:         []map[string]string{{"task.txt": "t\n"}, {"shared.txt": "one\nTWO by task\nthree\n"}},
			wantConflict: []string{"shared.txt"},
		},
	} {
		for _, mode := range []string{"git", "git before 2.38"} {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				bin := ""
				if mode != "git" {
					bin = oldGit(t)
				}
				s := newRebaseSetup(t, bin, tc.sideways, tc.other, tc.task...)
				got, err := s.g.Rebase(t.Context(), s.dir, s.base, s.onto)
				if tc.wantConflict != nil {
					var ce *parallel.ConflictError
					if !errors.As(err, &ce) {
						t.Fatalf("Rebase() = %v, want a *ConflictError", err)
					}
					if diff := cmp.Diff(tc.wantConflict, ce.Paths); diff != "" {
						t.Errorf("conflict paths (-want +got):\n%s", diff)
					}
					assertUntouched(t, s.g, s.dir, s.head, taskRef)
					return
				}
				if err != nil {
					t.Fatalf("Rebase() = %v", err)
				}
				if head := gitT(t, s.dir, "rev-parse", "HEAD"); got != head {
					t.Errorf("Rebase() = %s, HEAD at %s", got, head)
				}
				assertUntouched(t, s.g, s.dir, got, taskRef)
				if diff := cmp.Diff(tc.want, treeFiles(t, s.dir, got)); diff != "" {
					t.Errorf("rebased files (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.want, diskFiles(t, s.dir)); diff != "" {
					t.Errorf("files in the worktree (-want +got):\n%s", diff)
				}
				log := gitT(t, s.dir, "log", "--format=%an <%ae> %ad|%cn|%B", "--date=iso-strict", s.onto+".."+got)
				if n := strings.Count(log, "Test <test@example.com> 2001-02-03T04:05:06+07:00|ralph|task "); n != tc.wantCommits {
					t.Errorf("log onto..result:\n%s\nwant %d commits with author, date, message kept, ralph committing", log, tc.wantCommits)
				}
				if parents := gitT(t, s.dir, "rev-list", "--count", got, "^"+s.onto); parents != fmt.Sprint(tc.wantCommits) {
					t.Errorf("%s commits from onto to the result, want %d", parents, tc.wantCommits)
				}
			})
		}
	}

	t.Run("base is onto", func(t *testing.T) {
		t.Parallel()
		s := newRebaseSetup(t, "", false, map[string]string{"other.txt": "o\n"}, map[string]string{"task.txt": "task\n"})
		got, err := s.g.Rebase(t.Context(), s.dir, s.base, s.base)
		if err != nil || got != s.head {
			t.Errorf("Rebase(base, base) = %s, %v; want HEAD %s", got, err, s.head)
		}
	})

	t.Run("missing onto", func(t *testing.T) {
		t.Parallel()
		s := newRebaseSetup(t, "", false, map[string]string{"other.txt": "o\n"}, map[string]string{"task.txt": "task\n"})
		_, err := s.g.Rebase(t.Context(), s.dir, s.base, "refs/heads/nothere")
		if err == nil || !strings.Contains(err.Error(), "git -C ") || !strings.Contains(err.Error(), "refs/heads/nothere") {
			t.Fatalf("Rebase(missing onto) = %v, want an error naming the git command", err)
		}
		assertUntouched(t, s.g, s.dir, s.head, taskRef)
	})
}

// TestRebaseDirty: what is not committed stays when the rebase does not
// touch it; otherwise Rebase fails and changes nothing.
func TestRebaseDirty(t *testing.T) {
	t.Parallel()
	needGit(t)
	for _, tc := range []struct {
		name    string
		task    []map[string]string
		dirt    map[string]string
		wantErr bool
	}{
		{"untouched edit kept", []map[string]string{{"task.txt": "task\n"}}, map[string]string{"task.txt": "edit\n", "new.txt": "n\n"}, false},
		{"untracked file in the way", []map[string]string{{"task.txt": "task\n"}}, map[string]string{"other.txt": "mine\n"}, true},
		{"edit to a file onto changes", []map[string]string{{"task.txt": "task\n"}}, map[string]string{"shared.txt": "edit\n"}, true},
		{"several commits, any edit", []map[string]string{{"t1.txt": "1\n"}, {"task.txt": "task\n"}}, map[string]string{"task.txt": "edit\n"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newRebaseSetup(t, "", false, map[string]string{"other.txt": "other\n", "shared.txt": "changed\n"}, tc.task...)
			writeFiles(t, s.dir, tc.dirt)
			_, err := s.g.Rebase(t.Context(), s.dir, s.base, s.onto)
			var ce *parallel.ConflictError
			if errors.As(err, &ce) || (err != nil) != tc.wantErr {
				t.Fatalf("Rebase() = %v, want error %v and no conflict", err, tc.wantErr)
			}
			for name, content := range tc.dirt {
				if b, _ := os.ReadFile(filepath.Join(s.dir, name)); string(b) != content {
					t.Errorf("%s = %q, want %q as left", name, b, content)
				}
			}
			if tc.wantErr {
				if got := gitT(t, s.dir, "rev-parse", "HEAD"); got != s.head {
					t.Errorf("HEAD moved to %s, want %s", got, s.head)
				}
				for _, p := range []string{"rebase-merge", "rebase-apply"} {
					if _, err := os.Stat(gitT(t, s.dir, "rev-parse", "--git-path", p)); err == nil {
						t.Errorf("%s is still there: a rebase is in progress", p)
					}
				}
			}
		})
	}
}

// assertUntouched checks that dir is clean, on ref at head, and not in
// the middle of a rebase.
func assertUntouched(t *testing.T, g *parallel.ExecGit, dir, head, ref string) {
	t.Helper()
	if got := gitT(t, dir, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD at %s, want %s as before", got, head)
	}
	if br, _, err := g.HeadOf(t.Context(), dir); err != nil || br != "" {
		t.Errorf("HEAD on %q (%v); want it detached as before (%s is the caller's to move)", br, err, ref)
	}
	if st, err := g.Status(t.Context(), dir); err != nil || st != nil {
		t.Errorf("Status() = %q, %v; want clean", st, err)
	}
	for _, p := range []string{"rebase-merge", "rebase-apply"} {
		if _, err := os.Stat(gitT(t, dir, "rev-parse", "--git-path", p)); err == nil {
			t.Errorf("%s is still there: a rebase is in progress", p)
		}
	}
}

// TestIntegrationFlow is a task's way through a worktree: Switch, the
// agent's work, Commit, Rebase onto a tip that moved, SwapRef.
func TestIntegrationFlow(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	g := &parallel.ExecGit{Root: repo}
	ctx := t.Context()
	if err := g.Check(ctx); err != nil {
		t.Fatal(err)
	}
	start, err := g.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const integ = "refs/heads/ralph/integration/p"
	if err := g.CreateRef(ctx, integ, start); err != nil {
		t.Fatal(err)
	}
	dirs := make([]string, 2)
	for i := range dirs {
		dirs[i] = filepath.Join(t.TempDir(), fmt.Sprint("worker ", i))
		if err := g.AddWorktree(ctx, dirs[i], start); err != nil {
			t.Fatal(err)
		}
	}
	// Both workers start from the same tip; the first integrates, the
	// second must rebase onto its work.
	heads := make([]string, 2)
	for i, dir := range dirs {
		ref := fmt.Sprint("refs/heads/ralph/task/", i)
		if err := g.Switch(ctx, dir, ref, start); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, dir, map[string]string{fmt.Sprint("f", i, ".txt"): "work\n"})
		c, changed, err := g.Commit(ctx, dir, start, fmt.Sprint("task ", i, "\n\nRalph-Task: ", i), nil)
		if err != nil || !changed {
			t.Fatalf("worker %d: Commit() = %v, %v", i, changed, err)
		}
		heads[i] = c
	}
	if err := g.SwapRef(ctx, integ, heads[0], start); err != nil {
		t.Fatal(err)
	}
	if err := g.SwapRef(ctx, integ, heads[1], start); !errors.Is(err, parallel.ErrRefMoved) {
		t.Fatalf("second SwapRef() = %v, want ErrRefMoved", err)
	}
	tip, _, err := g.Resolve(ctx, integ)
	if err != nil {
		t.Fatal(err)
	}
	rebased, err := g.Rebase(ctx, dirs[1], start, tip)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.SwapRef(ctx, integ, rebased, tip); err != nil {
		t.Fatal(err)
	}
	ts, err := g.Trailers(ctx, "", integ, "Ralph-Task")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"1", "0"}, ts); diff != "" {
		t.Errorf("Trailers() (-want +got):\n%s", diff)
	}
	if ok, err := g.IsAncestor(ctx, heads[0], rebased); err != nil || !ok {
		t.Errorf("IsAncestor(first, integrated) = %v, %v; want true", ok, err)
	}
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	g := &parallel.ExecGit{Root: repo}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := g.Head(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Head(cancelled) = %v, want context.Canceled", err)
	}
}

// TestEnvironment checks that GIT_DIR and friends from a surrounding git
// do not send commands to another repository.
func TestEnvironment(t *testing.T) {
	needGit(t)
	repo := newRepo(t)
	other := newRepo(t)
	commitFiles(t, other, "other", map[string]string{"o.txt": "o\n"})
	t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
	t.Setenv("GIT_WORK_TREE", other)
	t.Setenv("GIT_INDEX_FILE", filepath.Join(other, ".git", "index"))
	head, err := (&parallel.ExecGit{Root: repo}).Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("GIT_DIR")
	os.Unsetenv("GIT_WORK_TREE")
	os.Unsetenv("GIT_INDEX_FILE")
	if want := gitT(t, repo, "rev-parse", "HEAD"); head != want {
		t.Errorf("Head() = %s, the other repository's; want %s", head, want)
	}
}

func TestHeadOf(t *testing.T) {
	t.Parallel()
	repo := newRepo(t)
	g, dir := newWorktree(t, repo)
	ctx := t.Context()
	head := gitT(t, repo, "rev-parse", "HEAD")
	if br, c, err := g.HeadOf(ctx, dir); err != nil || br != "" || c != head {
		t.Fatalf("HeadOf(detached) = %q, %q, %v; want \"\", %s", br, c, err, head)
	}
	gitT(t, dir, "checkout", "--quiet", "-b", "ralph/task/t-1")
	if br, c, err := g.HeadOf(ctx, dir); err != nil || br != "refs/heads/ralph/task/t-1" || c != head {
		t.Fatalf("HeadOf(on a branch) = %q, %q, %v", br, c, err)
	}
	if _, _, err := g.HeadOf(ctx, filepath.Join(t.TempDir(), "nowhere")); err == nil {
		t.Fatal("HeadOf(not a worktree) = nil error")
	}
}
