package gittest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ralph-dev/ralph/parallel"
)

// hookNames are the hooks git runs for the commands a Git
// implementation may use: planted, none may run.
var hookNames = []string{
	"reference-transaction", "post-checkout", "pre-commit", "prepare-commit-msg",
	"commit-msg", "post-commit", "pre-rebase", "post-rewrite", "post-merge",
	"pre-push", "pre-auto-gc", "post-index-change", "fsmonitor-watchman",
}

// plantHooks writes every hook of hookNames in dir, each appending its
// name to marker.
func plantHooks(t *testing.T, dir, marker string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, h := range hookNames {
		script := "#!/bin/sh\necho " + h + " >> '" + marker + "'\n"
		if err := os.WriteFile(filepath.Join(dir, h), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// testTrustNoPlantedProgram: a Git on a real repository runs no program
// the repository's own configuration names, in any method (ARCHITECTURE.md §7).
// Each planting is first shown to run under plain git, so that the test
// shows something.
func testTrustNoPlantedProgram(t *testing.T, newRepo NewRepo) {
	for _, p := range []struct {
		name  string
		plant func(t *testing.T, root, marker string)
	}{
		{"hooks, fsmonitor, filters and drivers", func(t *testing.T, root, marker string) {
			plantHooks(t, filepath.Join(root, ".git", "hooks"), marker)
			ran := func(what, then string) string { return "echo " + what + " >> '" + marker + "'; " + then }
			for _, kv := range [][2]string{
				{"core.fsmonitor", ran("fsmonitor", "false")},
				{"filter.x.clean", ran("clean", "cat")},
				{"filter.x.smudge", ran("smudge", "cat")},
				{"diff.x.textconv", ran("textconv", "cat")},
				{"merge.x.driver", ran("merge", "false")},
			} {
				Run(t, root, "config", kv[0], kv[1])
			}
		}},
		{"core.hooksPath", func(t *testing.T, root, marker string) {
			hooks := filepath.Join(root, ".git", "planted-hooks")
			plantHooks(t, hooks, marker)
			Run(t, root, "config", "core.hooksPath", hooks)
		}},
	} {
		t.Run(p.name, func(t *testing.T) {
			// The attributes that send files through the filter and the
			// drivers are committed, as an agent's would be.
			origin := newRepo(t, with(base, map[string]string{".gitattributes": "* filter=x diff=x merge=x\n"}))
			d, ok := origin.Clone(t).(DiskRepo)
			if !ok {
				t.Skip("not a repository on disk: the trust rules are about real git")
			}
			marker := filepath.Join(t.TempDir(), "ran")
			p.plant(t, d.Root(), marker)
			Run(t, d.Root(), "update-ref", "refs/sanity", "HEAD")
			Run(t, d.Root(), "status", "--porcelain")
			if _, err := os.Stat(marker); err != nil {
				t.Fatalf("the planted programs did not run under plain git: the test shows nothing (%v)", err)
			}
			Run(t, d.Root(), "update-ref", "-d", "refs/sanity")
			if err := os.Remove(marker); err != nil {
				t.Fatal(err)
			}

			workout(t, d)
			if b, err := os.ReadFile(marker); err == nil {
				t.Errorf("planted programs ran during the seam's methods:\n%s", b)
			}
		})
	}
}

// workout calls every method of the seam on r, through the seam only (no
// plain git: it would run what is planted), requiring each to succeed.
func workout(t *testing.T, r Repo) {
	t.Helper()
	g, ctx := r.Git(), t.Context()
	must(t, g.Check(ctx))
	h := head(t, r)
	resolve(t, g, main)
	_, err := g.CheckedOut(ctx)
	must(t, err)
	_, err = g.Branches(ctx)
	must(t, err)

	dir := tree(t, r, "w", h)
	must(t, g.CheckWorktree(ctx, dir))
	_, _, err = g.HeadOf(ctx, dir)
	must(t, err)
	r.Write(t, dir, map[string]string{"a.txt": "task\n", "new.txt": "new\n"})
	_, err = g.Status(ctx, dir)
	must(t, err)
	c, _, err := g.Commit(ctx, dir, h, "task\n\nRalph-Task: t-1\n", nil)
	must(t, err)
	r.Write(t, dir, map[string]string{"more.txt": "more\n"})
	c2, _, err := g.Commit(ctx, dir, c, "more", nil)
	must(t, err)
	_, err = g.Trailers(ctx, h, c2, trailer)
	must(t, err)
	_, err = g.Commits(ctx, h, c2)
	must(t, err)
	_, err = g.IsAncestor(ctx, h, c2)
	must(t, err)

	const ref = "refs/heads/ralph/task/t-1"
	must(t, g.CreateRef(ctx, ref, c))
	must(t, g.SwapRef(ctx, ref, c2, c))
	const fence = "refs/ralph/claims/x/t-1"
	mark, err := g.Mark(ctx, "claim 1 of t-1\n")
	must(t, err)
	must(t, g.SetRef(ctx, fence, mark))
	must(t, g.SwapRefs(ctx, parallel.RefMove{Ref: ref, New: c, Old: c2}, parallel.RefMove{Ref: fence, New: c, Old: mark}))

	other := tree(t, r, "other", h)
	r.Write(t, other, map[string]string{"c.txt": "other\n"})
	onto, _, err := g.Commit(ctx, other, h, "other", nil)
	must(t, err)
	// Two commits: git rebase proper, not the one-commit merge.
	rebased, err := g.Rebase(ctx, dir, h, onto)
	must(t, err)

	// Two commits that clash with the rebased work on a.txt: git rebase
	// stops on the conflict (the merge driver never running) and aborts.
	clash := tree(t, r, "clash", h)
	r.Write(t, clash, map[string]string{"a.txt": "clash\n"})
	c1, _, err := g.Commit(ctx, clash, h, "clash", nil)
	must(t, err)
	r.Write(t, clash, map[string]string{"clash.txt": "clash\n"})
	_, _, err = g.Commit(ctx, clash, c1, "clash again", nil)
	must(t, err)
	var ce *parallel.ConflictError
	if _, err := g.Rebase(ctx, clash, h, rebased); !errors.As(err, &ce) {
		t.Errorf("Rebase of a clash = %v, want a *ConflictError", err)
	}
	must(t, g.Switch(ctx, clash, "refs/heads/ralph/task/t-2", rebased))

	// A clean merge (a base's new commits) and one that conflicts on a.txt,
	// whose merge driver the attributes name: git merge-tree stops on the
	// conflict without running it.
	side := tree(t, r, "side", h)
	r.Write(t, side, map[string]string{"side.txt": "side\n"})
	sideCommit, _, err := g.Commit(ctx, side, h, "side", nil)
	must(t, err)
	merged, err := g.Merge(ctx, rebased, sideCommit, "merge the base")
	must(t, err)
	_, err = g.Parents(ctx, merged)
	must(t, err)
	if _, err := g.Merge(ctx, rebased, c1, "merge a clash"); !errors.As(err, &ce) {
		t.Errorf("Merge of a clash = %v, want a *ConflictError", err)
	}

	r.BreakGitFile(t, other)
	must(t, g.RepairWorktree(ctx, other, r.NewDir(t, "repair-aside")))
	must(t, g.SetAside(ctx, other, r.NewDir(t, "aside")))
	must(t, g.AddWorktree(ctx, other, onto))

	must(t, g.CheckRemote(ctx, "origin"))
	_, _, err = g.Fetch(ctx, "origin", main)
	must(t, err)
	must(t, g.Push(ctx, parallel.PushParams{Remote: "origin", Ref: "refs/heads/ralph/integration", Commit: rebased, Mode: parallel.PushCreate}))
	must(t, g.Push(ctx, parallel.PushParams{Remote: "origin", Ref: fence, Commit: mark, Mode: parallel.PushReplace}))
	must(t, g.Push(ctx, parallel.PushParams{Remote: "origin", Ref: "refs/heads/ralph/integration", Commit: merged, Old: rebased,
		Guard: &parallel.RefMove{Ref: fence, New: merged, Old: mark}}))
	_, err = g.RemoteRefs(ctx, "origin", "refs/heads/ralph/")
	must(t, err)

	// What ralph clean asks.
	_, err = g.Cherry(ctx, onto, c2)
	must(t, err)
	_, err = g.Refs(ctx, "refs/ralph/claims/")
	must(t, err)
	must(t, g.DeleteRef(ctx, fence, c))
	must(t, g.RemoveWorktree(ctx, side))
}

// testTrustExplicitGitDir: a worktree whose .git the agent rewrote to
// name another repository is never worked through it: that repository
// is left as it was (its refs, HEAD, index, and hooks planted there
// never run), and what the seam reports of the worktree is its own.
func testTrustExplicitGitDir(t *testing.T, newRepo NewRepo) {
	r := newRepo(t, base)
	if _, ok := r.(DiskRepo); !ok {
		t.Skip("not a repository on disk: the trust rules are about real git")
	}
	g, ctx := r.Git(), t.Context()
	h := head(t, r)
	dir := tree(t, r, "w", h)

	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	Run(t, t.TempDir(), "init", "--quiet", "--initial-branch=main", elsewhere)
	if err := os.WriteFile(filepath.Join(elsewhere, "x.txt"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Run(t, elsewhere, "add", "--all")
	Run(t, elsewhere, "commit", "--quiet", "-m", "elsewhere")
	marker := filepath.Join(t.TempDir(), "ran")
	plantHooks(t, filepath.Join(elsewhere, ".git", "hooks"), marker)
	state := func() string {
		return Run(t, elsewhere, "for-each-ref") + "\n" + Run(t, elsewhere, "rev-parse", "HEAD") + "\n" +
			Run(t, elsewhere, "ls-files", "--stage") + "\n" + Run(t, elsewhere, "config", "--list", "--local")
	}
	before := state()
	if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: "+filepath.Join(elsewhere, ".git")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	var we *parallel.WorktreeError
	if err := g.CheckWorktree(ctx, dir); !errors.As(err, &we) || !we.GitFileOnly {
		t.Errorf("CheckWorktree of a tree whose .git names another repository = %v, want a *WorktreeError, GitFileOnly", err)
	}
	if _, at, err := g.HeadOf(ctx, dir); err == nil && at != h {
		t.Errorf("HeadOf followed the rewritten .git: %s, want the worktree's %s", at, h)
	}
	if st, err := g.Status(ctx, dir); err == nil && len(st) != 0 {
		t.Errorf("Status followed the rewritten .git: %q", st)
	}
	r.Write(t, dir, map[string]string{"work.txt": "w\n"})
	if c, changed, err := g.Commit(ctx, dir, h, "work", nil); err == nil {
		if !changed {
			t.Errorf("Commit through a rewritten .git: nothing changed")
		} else if files := r.Files(t, c); files["work.txt"] != "w\n" || files["x.txt"] != "" {
			t.Errorf("Commit followed the rewritten .git: files %v", files)
		}
	}
	if err := g.Switch(ctx, dir, "refs/heads/ralph/task/t-1", h); err == nil {
		if got := resolve(t, g, "refs/heads/ralph/task/t-1"); got != h {
			t.Errorf("Switch through a rewritten .git set the branch to %s", got)
		}
	}

	if after := state(); after != before {
		t.Errorf("the repository the rewritten .git names was changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("hooks of the repository the rewritten .git names ran:\n%s", b)
	}
	must(t, g.RepairWorktree(ctx, dir, r.NewDir(t, "aside")))
	must(t, g.CheckWorktree(ctx, dir))
}
