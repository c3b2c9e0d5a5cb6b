package gittest

import (
	"errors"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/parallel"
)

// TestGit runs the contract of parallel.Git against the repositories
// newRepo makes, one fresh repository a subtest; with DiskRepos, the
// trust rules of ARCHITECTURE.md §7 too (see the package doc).
func TestGit(t *testing.T, newRepo NewRepo) {
	t.Helper()
	for _, c := range []struct {
		name string
		run  func(t *testing.T, newRepo NewRepo)
	}{
		{"Check", testCheck},
		{"HeadAndResolve", testHeadAndResolve},
		{"CreateRef", testCreateRef},
		{"SwapRef", testSwapRef},
		{"SwapRefsAndMarks", testSwapRefsAndMarks},
		{"IsAncestor", testIsAncestor},
		{"CommitsAndTrailers", testCommitsAndTrailers},
		{"Branches", testBranches},
		{"RefsAndDeleteRef", testRefsAndDeleteRef},
		{"Cherry", testCherry},
		{"RemoveWorktree", testRemoveWorktree},
		{"Worktree", testWorktree},
		{"Status", testStatus},
		{"Switch", testSwitch},
		{"Commit", testCommit},
		{"Rebase", testRebase},
		{"RebaseConflict", testRebaseConflict},
		{"MergeAndParents", testMergeAndParents},
		{"SetAsideAndRepair", testSetAsideAndRepair},
		{"Remote", testRemote},
		{"PushGuard", testPushGuard},
		{"TrustNoPlantedProgram", testTrustNoPlantedProgram},
		{"TrustExplicitGitDir", testTrustExplicitGitDir},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, newRepo) })
	}
}

// Refs and messages the subtests use.
const (
	main    = "refs/heads/main"
	trailer = "Ralph-Task"
)

var base = map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n"}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func diff(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

// with returns files changed by change ("" deletes).
func with(files, change map[string]string) map[string]string {
	out := maps.Clone(files)
	for p, c := range change {
		if c == "" {
			delete(out, p)
		} else {
			out[p] = c
		}
	}
	return out
}

// tree makes a worktree named name at commit.
func tree(t *testing.T, r Repo, name, commit string) string {
	t.Helper()
	dir := r.NewDir(t, name)
	must(t, r.Git().AddWorktree(t.Context(), dir, commit))
	return dir
}

// commitOn makes a commit with message on parent that changes files, in a
// worktree of its own, and returns it; no ref names it.
func commitOn(t *testing.T, r Repo, name, parent, message string, change map[string]string) string {
	t.Helper()
	dir := tree(t, r, name, parent)
	r.Write(t, dir, change)
	return r.CommitAll(t, dir, message)
}

func head(t *testing.T, r Repo) string {
	t.Helper()
	return resolve(t, r.Git(), "HEAD")
}

func resolve(t *testing.T, g parallel.Git, ref string) string {
	t.Helper()
	c, ok, err := g.Resolve(t.Context(), ref)
	must(t, err)
	if !ok {
		t.Fatalf("Resolve(%s): no such ref", ref)
	}
	return c
}

func testCheck(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	if err := r.Git().Check(t.Context()); err != nil {
		t.Errorf("Check = %v, want nil in a repository with a commit", err)
	}
}

func testHeadAndResolve(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	diff(t, "the files of HEAD", base, r.Files(t, h))
	if got := resolve(t, g, main); got != h {
		t.Errorf("Resolve(main) = %s, want HEAD's %s (main is checked out)", got, h)
	}
	if got := resolve(t, g, h); got != h {
		t.Errorf("Resolve(a commit) = %s, want itself", got)
	}
	if c, ok, err := g.Resolve(ctx, "refs/heads/nope"); err != nil || ok {
		t.Errorf("Resolve(missing) = %q, %v, %v; want ok false", c, ok, err)
	}
}

func testCreateRef(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	other := commitOn(t, r, "w", h, "other", map[string]string{"c.txt": "c\n"})
	const ref = "refs/heads/ralph/task/t-1"
	must(t, g.CreateRef(ctx, ref, h))
	if got := resolve(t, g, ref); got != h {
		t.Errorf("after CreateRef the ref is at %s, want %s", got, h)
	}
	if err := g.CreateRef(ctx, ref, other); !errors.Is(err, parallel.ErrRefExists) {
		t.Errorf("CreateRef of an existing ref = %v, want ErrRefExists", err)
	}
	if got := resolve(t, g, ref); got != h {
		t.Errorf("a refused CreateRef moved the ref to %s", got)
	}
}

func testSwapRef(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	next := commitOn(t, r, "w", h, "next", map[string]string{"c.txt": "c\n"})
	const ref = "refs/heads/ralph/integration"
	must(t, g.CreateRef(ctx, ref, h))
	must(t, g.SwapRef(ctx, ref, next, h))
	if got := resolve(t, g, ref); got != next {
		t.Errorf("after SwapRef the ref is at %s, want %s", got, next)
	}
	if err := g.SwapRef(ctx, ref, h, h); !errors.Is(err, parallel.ErrRefMoved) {
		t.Errorf("SwapRef from a stale old = %v, want ErrRefMoved", err)
	}
	if got := resolve(t, g, ref); got != next {
		t.Errorf("a refused SwapRef moved the ref to %s", got)
	}
	if err := g.SwapRef(ctx, "refs/heads/ralph/none", next, h); !errors.Is(err, parallel.ErrRefMoved) {
		t.Errorf("SwapRef of a missing ref = %v, want ErrRefMoved", err)
	}
	if _, ok, _ := g.Resolve(ctx, "refs/heads/ralph/none"); ok {
		t.Errorf("a refused SwapRef made the missing ref")
	}
}

func testIsAncestor(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	child := commitOn(t, r, "w1", h, "child", map[string]string{"c.txt": "c\n"})
	side := commitOn(t, r, "w2", h, "side", map[string]string{"d.txt": "d\n"})
	for _, c := range []struct {
		name string
		a, b string
		want bool
	}{
		{"parent of child", h, child, true},
		{"child of parent", child, h, false},
		{"itself", child, child, true},
		{"sibling", side, child, false},
	} {
		got, err := g.IsAncestor(ctx, c.a, c.b)
		must(t, err)
		if got != c.want {
			t.Errorf("IsAncestor, %s = %v, want %v", c.name, got, c.want)
		}
	}
}

func testCommitsAndTrailers(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	c0 := head(t, r)
	w := tree(t, r, "w", c0)
	r.Write(t, w, map[string]string{"c.txt": "1\n"})
	c1 := r.CommitAll(t, w, "one\n\nRalph-Task: t-1\n")
	r.Write(t, w, map[string]string{"c.txt": "2\n"})
	c2 := r.CommitAll(t, w, "two\n\nRalph-Task: t-2\nRalph-Generation: 3\nRalph-Task: t-3\n")
	r.Write(t, w, map[string]string{"c.txt": "3\n"})
	// Only the message's last paragraph holds trailers.
	c3 := r.CommitAll(t, w, "three\n\nRalph-Task: t-9\n\nnot a trailer block\n")
	side := commitOn(t, r, "side", c1, "side\n\nRalph-Task: t-side\n", map[string]string{"d.txt": "d\n"})

	for _, c := range []struct {
		name      string
		base, tip string
		commits   []string
		trailers  []string
	}{
		{"from an ancestor", c0, c3, []string{c3, c2, c1}, []string{"t-2", "t-3", "t-1"}},
		{"from the root", "", c2, []string{c2, c1, c0}, []string{"t-2", "t-3", "t-1"}},
		{"nothing between", c2, c2, nil, nil},
		{"from a side branch", side, c3, []string{c3, c2}, []string{"t-2", "t-3"}},
		{"a side branch from the tip", c3, side, []string{side}, []string{"t-side"}},
	} {
		got, err := g.Commits(ctx, c.base, c.tip)
		must(t, err)
		diff(t, "Commits, "+c.name, c.commits, got)
		vals, err := g.Trailers(ctx, c.base, c.tip, trailer)
		must(t, err)
		diff(t, "Trailers, "+c.name, c.trailers, vals)
	}
}

func testBranches(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	next := commitOn(t, r, "w", h, "next", map[string]string{"c.txt": "c\n"})
	must(t, g.CreateRef(ctx, "refs/heads/ralph/task/t-1", next))
	must(t, g.CreateRef(ctx, "refs/ralph/not-a-branch", next))
	got, err := g.Branches(ctx)
	must(t, err)
	diff(t, "Branches", map[string]string{main: h, "refs/heads/ralph/task/t-1": next}, got)
}

func testWorktree(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	dir := tree(t, r, "w", h)
	must(t, g.CheckWorktree(ctx, dir))
	branch, commit, err := g.HeadOf(ctx, dir)
	must(t, err)
	if branch != "" || commit != h {
		t.Errorf("HeadOf a new worktree = %q, %s; want detached at %s", branch, commit, h)
	}
	diff(t, "a new worktree's files", base, r.TreeFiles(t, dir))
	if err := g.AddWorktree(ctx, dir, h); err == nil {
		t.Errorf("AddWorktree where a worktree is succeeded")
	}
	out, err := g.CheckedOut(ctx)
	must(t, err)
	diff(t, "CheckedOut (the main tree's branch; worktrees are detached)", []string{main}, out)
	gone := r.NewDir(t, "never made")
	var we *parallel.WorktreeError
	if err := g.CheckWorktree(ctx, gone); !errors.As(err, &we) || !we.Gone {
		t.Errorf("CheckWorktree of a directory never made = %v, want a *WorktreeError, Gone", err)
	}
}

func testStatus(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	dir := tree(t, r, "w", head(t, r))
	got, err := g.Status(ctx, dir)
	must(t, err)
	diff(t, "Status of a clean tree", []string(nil), got)
	r.Write(t, dir, map[string]string{"a.txt": "changed\n", "dir/b.txt": "", "new/c.txt": "c\n"})
	got, err = g.Status(ctx, dir)
	must(t, err)
	slices.Sort(got)
	diff(t, "Status", []string{"a.txt", "dir/b.txt", "new/c.txt"}, got)
}

func testSwitch(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	next := commitOn(t, r, "other", h, "next", map[string]string{"c.txt": "c\n", "a.txt": ""})
	dir := tree(t, r, "w", h)
	r.Write(t, dir, map[string]string{"a.txt": "dirty\n", "untracked.txt": "u\n"})
	const ref = "refs/heads/ralph/task/t-1"
	must(t, g.Switch(ctx, dir, ref, next))
	branch, commit, err := g.HeadOf(ctx, dir)
	must(t, err)
	if branch != "" || commit != next {
		t.Errorf("HeadOf after Switch = %q, %s; want detached at %s", branch, commit, next)
	}
	if got := resolve(t, g, ref); got != next {
		t.Errorf("after Switch the branch is at %s, want %s", got, next)
	}
	diff(t, "the tree after Switch (tracked files reset, untracked removed)", r.Files(t, next), r.TreeFiles(t, dir))
	// Again, to a branch that exists: it moves.
	must(t, g.Switch(ctx, dir, ref, h))
	if got := resolve(t, g, ref); got != h {
		t.Errorf("Switch to an existing branch left it at %s, want %s", got, h)
	}
	if err := g.Switch(ctx, dir, main, next); err == nil {
		t.Errorf("Switch to the branch the main tree has checked out succeeded")
	}
	if got := resolve(t, g, main); got != h {
		t.Errorf("a refused Switch moved main to %s", got)
	}
}

func testCommit(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	dir := tree(t, r, "w", h)

	c, changed, err := g.Commit(ctx, dir, h, "nothing", nil)
	must(t, err)
	if changed || c != h {
		t.Errorf("Commit of a clean tree = %s, %v; want base %s, false", c, changed, h)
	}

	// The agent commits once and leaves more uncommitted, a file never
	// to be committed among it.
	r.Write(t, dir, map[string]string{"a.txt": "agent\n"})
	r.CommitAll(t, dir, "the agent's own")
	r.Write(t, dir, map[string]string{"dir/b.txt": "", "new.txt": "n\n", "secret.env": "s\n"})
	c, changed, err = g.Commit(ctx, dir, h, "t-1\n\nRalph-Task: t-1\n", []string{"secret.env"})
	must(t, err)
	if !changed {
		t.Fatalf("Commit of a changed tree: changed false")
	}
	diff(t, "the commit's files", map[string]string{"a.txt": "agent\n", "new.txt": "n\n"}, r.Files(t, c))
	commits, err := g.Commits(ctx, h, c)
	must(t, err)
	diff(t, "Commits(base, commit): one commit on base", []string{c}, commits)
	vals, err := g.Trailers(ctx, h, c, trailer)
	must(t, err)
	diff(t, "the commit's trailers", []string{"t-1"}, vals)
	branch, at, err := g.HeadOf(ctx, dir)
	must(t, err)
	if branch != "" || at != c {
		t.Errorf("HeadOf after Commit = %q, %s; want detached at %s", branch, at, c)
	}
	if tf := r.TreeFiles(t, dir); tf["secret.env"] != "s\n" {
		t.Errorf("Commit took the excepted file from the tree: %v", tf)
	}

	// Only the excepted file differs: nothing to commit.
	again, changed, err := g.Commit(ctx, dir, c, "again", []string{"secret.env"})
	must(t, err)
	if changed || again != c {
		t.Errorf("Commit with only excepted changes = %s, %v; want %s, false", again, changed, c)
	}
}

// rebaseSetup: a worktree whose HEAD is one commit (Commit's) on base
// changing task, and onto, base's child changing other.
func rebaseSetup(t *testing.T, r Repo, task, other map[string]string) (dir, base, head, onto string) {
	t.Helper()
	g, ctx := r.Git(), t.Context()
	base = resolve(t, g, main)
	onto = commitOn(t, r, "other", base, "other", other)
	dir = tree(t, r, "w", base)
	r.Write(t, dir, task)
	head, changed, err := g.Commit(ctx, dir, base, "task\n\nRalph-Task: t-1\n", nil)
	must(t, err)
	if !changed {
		t.Fatal("the task's commit: nothing changed")
	}
	return dir, base, head, onto
}

func testRebase(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	task, other := map[string]string{"a.txt": "task\n"}, map[string]string{"c.txt": "other\n"}
	dir, b, h, onto := rebaseSetup(t, r, task, other)

	same, err := g.Rebase(ctx, dir, b, b)
	must(t, err)
	if same != h {
		t.Errorf("Rebase onto base itself = %s, want HEAD %s", same, h)
	}

	got, err := g.Rebase(ctx, dir, b, onto)
	must(t, err)
	commits, err := g.Commits(ctx, onto, got)
	must(t, err)
	diff(t, "Commits(onto, rebased)", []string{got}, commits)
	diff(t, "the rebased commit's files", with(with(base, task), other), r.Files(t, got))
	vals, err := g.Trailers(ctx, onto, got, trailer)
	must(t, err)
	diff(t, "the rebased commit's trailers (its message kept)", []string{"t-1"}, vals)
	if _, at, err := g.HeadOf(ctx, dir); err != nil || at != got {
		t.Errorf("HeadOf after Rebase = %s, %v; want %s", at, err, got)
	}
	diff(t, "the tree after Rebase", r.Files(t, got), r.TreeFiles(t, dir))

	// Two commits base..HEAD are replayed one by one.
	r.Write(t, dir, map[string]string{"d.txt": "d\n"})
	two := r.CommitAll(t, dir, "second")
	onto2 := commitOn(t, r, "other2", onto, "other2", map[string]string{"e.txt": "e\n"})
	got2, err := g.Rebase(ctx, dir, onto, onto2)
	must(t, err)
	commits, err = g.Commits(ctx, onto2, got2)
	must(t, err)
	if len(commits) != 2 {
		t.Errorf("rebasing two commits made %d", len(commits))
	}
	diff(t, "the files after rebasing two commits", with(r.Files(t, two), map[string]string{"e.txt": "e\n"}), r.Files(t, got2))
}

func testRebaseConflict(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	dir, b, h, onto := rebaseSetup(t, r,
		map[string]string{"a.txt": "task\n", "c.txt": "task's c\n"},
		map[string]string{"a.txt": "other\n", "d.txt": "d\n"})
	before := r.TreeFiles(t, dir)
	_, err := g.Rebase(ctx, dir, b, onto)
	var ce *parallel.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("Rebase of a conflicting change = %v, want a *ConflictError", err)
	}
	diff(t, "ConflictError.Paths", []string{"a.txt"}, ce.Paths)
	if _, at, err := g.HeadOf(ctx, dir); err != nil || at != h {
		t.Errorf("HeadOf after a conflict = %s, %v; want %s, as it was", at, err, h)
	}
	diff(t, "the tree after a conflict (as it was)", before, r.TreeFiles(t, dir))
	st, err := g.Status(ctx, dir)
	must(t, err)
	diff(t, "Status after a conflict", []string(nil), st)
}

func testSetAsideAndRepair(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	dir := tree(t, r, "w", h)
	r.Write(t, dir, map[string]string{"work.txt": "kept\n"})

	// Only .git broken: repaired in place, the work kept.
	r.BreakGitFile(t, dir)
	var we *parallel.WorktreeError
	if err := g.CheckWorktree(ctx, dir); !errors.As(err, &we) || !we.GitFileOnly {
		t.Fatalf("CheckWorktree with a broken .git = %v, want a *WorktreeError, GitFileOnly", err)
	}
	must(t, g.RepairWorktree(ctx, dir, r.NewDir(t, "repair-aside")))
	must(t, g.CheckWorktree(ctx, dir))
	if _, at, err := g.HeadOf(ctx, dir); err != nil || at != h {
		t.Errorf("HeadOf a repaired worktree = %s, %v; want %s", at, err, h)
	}
	if got := r.TreeFiles(t, dir)["work.txt"]; got != "kept\n" {
		t.Errorf("the repaired tree lost its work: work.txt = %q", got)
	}

	// Set aside whole, then made again.
	aside := r.NewDir(t, "aside")
	must(t, g.SetAside(ctx, dir, aside))
	if err := g.CheckWorktree(ctx, dir); !errors.As(err, &we) || !we.Gone {
		t.Errorf("CheckWorktree after SetAside = %v, want a *WorktreeError, Gone", err)
	}
	if got := r.TreeFiles(t, aside)["work.txt"]; got != "kept\n" {
		t.Errorf("SetAside did not move the tree whole: work.txt = %q", got)
	}
	must(t, g.AddWorktree(ctx, dir, h))
	must(t, g.CheckWorktree(ctx, dir))
	diff(t, "the tree made again", base, r.TreeFiles(t, dir))
}

func testRemote(t *testing.T, newRepo NewRepo) {
	origin := newRepo(t, base)
	oh := head(t, origin)
	r := origin.Clone(t)
	g, ctx := r.Git(), t.Context()

	must(t, g.CheckRemote(ctx, "origin"))
	if err := g.CheckRemote(ctx, "nope"); !errors.Is(err, parallel.ErrNoRemote) {
		t.Errorf("CheckRemote(nope) = %v, want ErrNoRemote", err)
	}
	c, ok, err := g.Fetch(ctx, "origin", main)
	must(t, err)
	if !ok || c != oh {
		t.Errorf("Fetch(main) = %s, %v; want %s", c, ok, oh)
	}
	if got := resolve(t, g, "refs/remotes/origin/main"); got != oh {
		t.Errorf("after Fetch the tracking ref is at %s, want %s", got, oh)
	}
	if c, ok, err := g.Fetch(ctx, "origin", "refs/heads/nope"); err != nil || ok {
		t.Errorf("Fetch of a missing branch = %s, %v, %v; want ok false", c, ok, err)
	}

	const ref = "refs/heads/ralph/integration"
	one := commitOn(t, r, "w1", oh, "one", map[string]string{"c.txt": "1\n"})
	two := commitOn(t, r, "w2", one, "two", map[string]string{"c.txt": "2\n"})
	side := commitOn(t, r, "w3", oh, "side", map[string]string{"d.txt": "d\n"})

	must(t, g.Push(ctx, parallel.PushParams{Remote: "origin", Ref: ref, Commit: one, Mode: parallel.PushCreate}))
	must(t, g.Push(ctx, parallel.PushParams{Remote: "origin", Ref: ref, Commit: one, Mode: parallel.PushCreate}))
	if err := g.Push(ctx, parallel.PushParams{Remote: "origin", Ref: ref, Commit: side, Mode: parallel.PushCreate}); !errors.Is(err, parallel.ErrRefExists) {
		t.Errorf("PushCreate onto an existing ref = %v, want ErrRefExists", err)
	}
	must(t, g.Push(ctx, parallel.PushParams{Remote: "origin", Ref: ref, Commit: two, Old: one}))
	if err := g.Push(ctx, parallel.PushParams{Remote: "origin", Ref: ref, Commit: side, Old: one}); !errors.Is(err, parallel.ErrRefMoved) {
		t.Errorf("PushFastForward of a commit off the remote's line = %v, want ErrRefMoved", err)
	}
	refs, err := g.RemoteRefs(ctx, "origin", "refs/heads/ralph/")
	must(t, err)
	diff(t, "RemoteRefs", map[string]string{ref: two}, refs)
	if got := resolve(t, origin.Git(), ref); got != two {
		t.Errorf("the remote's own ref is at %s, want %s", got, two)
	}
	c, ok, err = g.Fetch(ctx, "origin", ref)
	must(t, err)
	if !ok || c != two {
		t.Errorf("Fetch(%s) = %s, %v; want %s", ref, c, ok, two)
	}
	diff(t, "the fetched commit's files", r.Files(t, two), origin.Files(t, two))
}

// testMergeAndParents: Merge makes a merge commit of two lines, parents
// in order, moving no ref; a conflict makes nothing and names the files.
func testMergeAndParents(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	ours := commitOn(t, r, "ours", h, "ours", map[string]string{"a.txt": "ours\n"})
	theirs := commitOn(t, r, "theirs", h, "theirs", map[string]string{"c.txt": "c\n", "dir/b.txt": ""})
	refs, err := g.Branches(ctx)
	must(t, err)
	m, err := g.Merge(ctx, ours, theirs, "Merge theirs")
	must(t, err)
	diff(t, "the merge's files", with(base, map[string]string{"a.txt": "ours\n", "c.txt": "c\n", "dir/b.txt": ""}), r.Files(t, m))
	ps, err := g.Parents(ctx, m)
	must(t, err)
	diff(t, "Parents of the merge", []string{ours, theirs}, ps)
	ps, err = g.Parents(ctx, ours)
	must(t, err)
	diff(t, "Parents of a commit", []string{h}, ps)
	for _, c := range []string{ours, theirs} {
		if in, err := g.IsAncestor(ctx, c, m); err != nil || !in {
			t.Errorf("IsAncestor(%s, the merge) = %v, %v; want true", c, in, err)
		}
	}
	cs, err := g.Commits(ctx, ours, m)
	must(t, err)
	diff(t, "Commits(ours, the merge), sorted", slices.Sorted(slices.Values([]string{m, theirs})), slices.Sorted(slices.Values(cs)))
	after, err := g.Branches(ctx)
	must(t, err)
	diff(t, "the branches after a merge (no ref moves)", refs, after)

	other := commitOn(t, r, "other", h, "other", map[string]string{"a.txt": "other\n"})
	_, err = g.Merge(ctx, ours, other, "Merge other")
	var ce *parallel.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("Merge of a conflicting line = %v, want a *ConflictError", err)
	}
	diff(t, "ConflictError.Paths", []string{"a.txt"}, ce.Paths)
}

// testSwapRefsAndMarks: SwapRefs moves all its refs or none; SetRef sets
// a ref whatever it named; a Mark is one commit of no files for one text,
// the same in a clone, which a ref outside refs/heads may name.
func testSwapRefsAndMarks(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	next := commitOn(t, r, "w", h, "next", map[string]string{"c.txt": "c\n"})
	const branch, fence = "refs/heads/ralph/integration", "refs/ralph/claims/ralph%2Fintegration/t-1"
	mark, err := g.Mark(ctx, "ralph: claim 1 of task t-1\n")
	must(t, err)
	if again, err := g.Mark(ctx, "ralph: claim 1 of task t-1\n"); err != nil || again != mark {
		t.Errorf("Mark of the same text again = %s, %v; want %s", again, err, mark)
	}
	other, err := g.Mark(ctx, "ralph: claim 2 of task t-1\n")
	must(t, err)
	if other == mark {
		t.Error("two texts, one mark")
	}
	diff(t, "a mark's files", map[string]string{}, r.Files(t, mark))
	must(t, g.SetRef(ctx, fence, mark))
	must(t, g.CreateRef(ctx, branch, h))

	// The fence moved: neither ref moves.
	if err := g.SwapRefs(ctx, parallel.RefMove{Ref: branch, New: next, Old: h}, parallel.RefMove{Ref: fence, New: next, Old: other}); !errors.Is(err, parallel.ErrRefMoved) {
		t.Errorf("SwapRefs with one ref not at its old = %v, want ErrRefMoved", err)
	}
	if got := resolve(t, g, branch); got != h {
		t.Errorf("a refused SwapRefs moved the branch to %s", got)
	}
	must(t, g.SwapRefs(ctx, parallel.RefMove{Ref: branch, New: next, Old: h}, parallel.RefMove{Ref: fence, New: next, Old: mark}))
	if b, f := resolve(t, g, branch), resolve(t, g, fence); b != next || f != next {
		t.Errorf("after SwapRefs the refs are at %s and %s, want both at %s", b, f, next)
	}
	must(t, g.SetRef(ctx, fence, other))
	if got := resolve(t, g, fence); got != other {
		t.Errorf("after SetRef the ref is at %s, want %s", got, other)
	}

	c := r.Clone(t)
	if m, err := c.Git().Mark(ctx, "ralph: claim 1 of task t-1\n"); err != nil || m != mark {
		t.Errorf("Mark in a clone = %s, %v; want the same commit, %s", m, err, mark)
	}
}

// testPushGuard: a ref of ralph's own is made, replaced, and replaced
// only from what it names (PushReplace); a push with a guard moves the
// branch and the guard together, or neither.
func testPushGuard(t *testing.T, newRepo NewRepo) {
	origin := newRepo(t, base)
	oh := head(t, origin)
	r := origin.Clone(t)
	g, ctx := r.Git(), t.Context()
	const branch, fence = "refs/heads/ralph/integration", "refs/ralph/claims/ralph%2Fintegration/t-1"
	one, err := g.Mark(ctx, "claim 1\n")
	must(t, err)
	two, err := g.Mark(ctx, "claim 2\n")
	must(t, err)
	push := func(p parallel.PushParams) error {
		p.Remote = "origin"
		return g.Push(ctx, p)
	}
	at := func(ref string) string {
		t.Helper()
		refs, err := g.RemoteRefs(ctx, "origin", ref)
		must(t, err)
		return refs[ref]
	}
	if err := push(parallel.PushParams{Ref: fence, Commit: one}); err == nil {
		t.Error("a fast-forward push to a ref outside refs/heads went through")
	}
	must(t, push(parallel.PushParams{Ref: fence, Commit: one, Mode: parallel.PushCreate}))
	must(t, push(parallel.PushParams{Ref: fence, Commit: two, Mode: parallel.PushReplace}))
	if err := push(parallel.PushParams{Ref: fence, Commit: one, Mode: parallel.PushReplace, Old: one}); !errors.Is(err, parallel.ErrRefMoved) {
		t.Errorf("PushReplace from an old the ref has left = %v, want ErrRefMoved", err)
	}
	must(t, push(parallel.PushParams{Ref: fence, Commit: one, Mode: parallel.PushReplace, Old: two}))
	if got := at(fence); got != one {
		t.Errorf("the remote's fence is at %s, want %s", got, one)
	}

	must(t, push(parallel.PushParams{Ref: branch, Commit: oh, Mode: parallel.PushCreate}))
	next := commitOn(t, r, "w1", oh, "next", map[string]string{"c.txt": "1\n"})
	stale := parallel.RefMove{Ref: fence, New: next, Old: two}
	if err := push(parallel.PushParams{Ref: branch, Commit: next, Old: oh, Guard: &stale}); !errors.Is(err, parallel.ErrRefMoved) {
		t.Errorf("a push whose guard is not at its old = %v, want ErrRefMoved", err)
	}
	if b, f := at(branch), at(fence); b != oh || f != one {
		t.Errorf("a refused guarded push left the branch at %s and the guard at %s; want %s and %s", b, f, oh, one)
	}
	held := parallel.RefMove{Ref: fence, New: next, Old: one}
	must(t, push(parallel.PushParams{Ref: branch, Commit: next, Old: oh, Guard: &held}))
	if b, f := at(branch), at(fence); b != next || f != next {
		t.Errorf("after a guarded push the branch is at %s and the guard at %s; want both at %s", b, f, next)
	}
}

func testRefsAndDeleteRef(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	next := commitOn(t, r, "w", h, "next", map[string]string{"c.txt": "c\n"})
	const a, b, other = "refs/ralph/claims/x/a", "refs/ralph/claims/x/b", "refs/ralph/claims/xy/a"
	must(t, g.SetRef(ctx, a, h))
	must(t, g.SetRef(ctx, b, next))
	must(t, g.SetRef(ctx, other, h))
	got, err := g.Refs(ctx, "refs/ralph/claims/x/")
	must(t, err)
	diff(t, "Refs under refs/ralph/claims/x/", map[string]string{a: h, b: next}, got)
	got, err = g.Refs(ctx, "refs/ralph/none/")
	must(t, err)
	if len(got) != 0 {
		t.Errorf("Refs of an empty prefix = %v", got)
	}

	if err := g.DeleteRef(ctx, a, next); !errors.Is(err, parallel.ErrRefMoved) {
		t.Errorf("DeleteRef from a stale old = %v, want ErrRefMoved", err)
	}
	if got := resolve(t, g, a); got != h {
		t.Errorf("a refused DeleteRef moved the ref to %s", got)
	}
	must(t, g.DeleteRef(ctx, a, h))
	if _, ok, _ := g.Resolve(ctx, a); ok {
		t.Errorf("DeleteRef left the ref")
	}
	if err := g.DeleteRef(ctx, a, h); !errors.Is(err, parallel.ErrRefMoved) {
		t.Errorf("DeleteRef of a missing ref = %v, want ErrRefMoved", err)
	}
	const branch = "refs/heads/ralph/task/t"
	must(t, g.CreateRef(ctx, branch, next))
	must(t, g.DeleteRef(ctx, branch, next))
	branches, err := g.Branches(ctx)
	must(t, err)
	if _, ok := branches[branch]; ok {
		t.Errorf("DeleteRef left the branch")
	}
}

// testCherry: a commit whose change the upstream made too (a landing
// rebased it) counts as landed; one it did not make is listed.
func testCherry(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	onto := commitOn(t, r, "onto", h, "other", map[string]string{"o.txt": "o\n"})
	task := commitOn(t, r, "task", h, "task", map[string]string{"c.txt": "c\n"})
	more := commitOn(t, r, "more", task, "more", map[string]string{"d.txt": "d\n"})
	landed := commitOn(t, r, "landed", onto, "task, rebased", map[string]string{"c.txt": "c\n"})

	left, err := g.Cherry(ctx, landed, task)
	must(t, err)
	if len(left) != 0 {
		t.Errorf("Cherry of a landed commit = %v, want none", left)
	}
	left, err = g.Cherry(ctx, landed, more)
	must(t, err)
	diff(t, "Cherry of a branch with one commit landed", []string{more}, left)
	left, err = g.Cherry(ctx, h, more)
	must(t, err)
	diff(t, "Cherry of a branch with nothing landed", slices.Sorted(slices.Values([]string{more, task})), slices.Sorted(slices.Values(left)))
	left, err = g.Cherry(ctx, landed, h)
	must(t, err)
	if len(left) != 0 {
		t.Errorf("Cherry of an ancestor = %v, want none", left)
	}
}

// testRemoveWorktree: a clean tree goes; one with changes is refused and
// stays.
func testRemoveWorktree(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	clean := tree(t, r, "clean", h)
	dirty := tree(t, r, "dirty", h)
	r.Write(t, dirty, map[string]string{"new.txt": "new\n"})
	if err := g.RemoveWorktree(ctx, dirty); err == nil {
		t.Errorf("RemoveWorktree of a tree with changes succeeded")
	}
	must(t, g.CheckWorktree(ctx, dirty))
	must(t, g.RemoveWorktree(ctx, clean))
	var we *parallel.WorktreeError
	if err := g.CheckWorktree(ctx, clean); !errors.As(err, &we) || !we.Gone {
		t.Errorf("CheckWorktree of a removed tree = %v, want a *WorktreeError, Gone", err)
	}
	if _, ok := r.(DiskRepo); ok {
		if _, err := os.Stat(clean); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the removed tree's directory: %v, want gone", err)
		}
	}
}
