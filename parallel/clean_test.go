package parallel

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// cleanRepo is a fake repository as builds leave it: on the integration
// branch ralph/integration, task a landed (rebased: its commit copied
// onto a newer tip), task b failed (its branch and attempt hold work that
// never landed), task c is in progress, task d's branch holds nothing;
// the trees w1 (clean, on the branch's tip), w2 (a change), w3 (HEAD on
// no branch), w4 (a build holds it) and w5 (a crashed build's attempt
// at b).
func cleanRepo(t *testing.T) (*fakeGit, CleanConfig, func() []string) {
	t.Helper()
	g := newFakeGit(map[string]string{"f": "0"})
	base := g.head
	other := g.commit(base, "other", map[string]string{"f": "0", "o": "1"})
	taskA := g.commit(base, "a", map[string]string{"f": "0", "a": "1"})
	landed := g.commit(other, "a\n\nRalph-Task: a", map[string]string{"f": "0", "o": "1", "a": "1"})
	taskB := g.commit(base, "b", map[string]string{"f": "0", "b": "1"})
	taskB2 := g.commit(taskB, "b2", map[string]string{"f": "0", "b": "2"})
	taskC := g.commit(base, "c", map[string]string{"f": "0", "c": "1"})
	stray := g.commit(landed, "stray", map[string]string{"f": "9", "o": "1", "a": "1"})
	g.refs["refs/heads/ralph/integration"] = landed
	g.refs["refs/heads/ralph/task/a"] = taskA
	g.refs["refs/heads/ralph/attempt/a/1"] = taskA
	g.refs["refs/heads/ralph/task/b"] = taskB2
	g.refs["refs/heads/ralph/attempt/b/1"] = taskB
	g.refs["refs/heads/ralph/task/c"] = taskC
	g.refs["refs/heads/ralph/task/d"] = base
	g.refs["refs/heads/feature"] = taskC // not ralph's: never looked at
	fence := "refs/ralph/claims/ralph%2Fintegration/"
	g.refs[fence+"a"], g.refs[fence+"b"], g.refs[fence+"c"] = landed, taskB, taskC
	g.refs["refs/ralph/claims/other/a"] = taskA // another integration branch's

	root := t.TempDir()
	dir := filepath.Join(root, ".ralph", "worktrees")
	for i, at := range []string{landed, landed, stray, landed, landed} {
		name := filepath.Join(dir, fmt.Sprintf("w%d", i+1))
		if err := os.MkdirAll(name, 0o755); err != nil {
			t.Fatal(err)
		}
		g.trees[name] = &fakeTree{head: at, files: maps.Clone(g.commits[at].files)}
	}
	g.trees[filepath.Join(dir, "w2")].files["new"] = "x"
	if err := os.WriteFile(filepath.Join(dir, "w5.task"), []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	lock, ok, err := takeTree(root, dir, "w4")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	t.Cleanup(func() { lock.Close() })
	cfg := CleanConfig{Root: root, Git: g, Into: "ralph/integration", InProgress: map[string]bool{"c": true}}
	state := func() []string {
		out := g.refsUnder("refs/")
		for d := range g.trees {
			out = append(out, d)
		}
		slices.Sort(out)
		return out
	}
	return g, cfg, state
}

func lines(rep CleanReport) string {
	var b strings.Builder
	for _, it := range rep.Items {
		name := it.Name
		if it.What == "worktree" {
			name = filepath.Base(name)
		}
		if it.Removed {
			fmt.Fprintf(&b, "remove %s %s\n", it.What, name)
		} else {
			fmt.Fprintf(&b, "keep %s %s: %s\n", it.What, name, it.Reason)
		}
	}
	return b.String()
}

func TestCleanRemovesWhatLandedAndKeepsTheRest(t *testing.T) {
	g, cfg, state := cleanRepo(t)
	before := state()
	cfg.DryRun = true
	dry, err := Clean(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := state(); !slices.Equal(got, before) {
		t.Fatalf("a dry run changed the repository:\n%v\n%v", before, got)
	}
	const want = `remove worktree w1
keep worktree w2: 1 uncommitted path
keep worktree w3: its HEAD ` + "%s" + ` is on no branch
keep worktree w4: a build is using it
keep worktree w5: an attempt at task b was under way in it when its build stopped (the next build keeps its work)
remove branch ralph/attempt/a/1
keep branch ralph/attempt/b/1: 1 commit not on ralph/integration
remove branch ralph/task/a
keep branch ralph/task/b: 2 commits not on ralph/integration
keep branch ralph/task/c: its task is in progress
remove branch ralph/task/d
remove fence refs/ralph/claims/ralph%%2Fintegration/a
remove fence refs/ralph/claims/ralph%%2Fintegration/b
keep fence refs/ralph/claims/ralph%%2Fintegration/c: its task is in progress
`
	w3 := g.trees[filepath.Join(cfg.Root, ".ralph", "worktrees", "w3")].head
	if got, want := lines(dry), fmt.Sprintf(want, short(w3)); got != want {
		t.Fatalf("dry run:\n%s\nwant:\n%s", got, want)
	}
	if dry.Removed() != 6 {
		t.Errorf("dry run removes %d, want 6", dry.Removed())
	}

	cfg.DryRun = false
	rep, err := Clean(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if lines(rep) != lines(dry) {
		t.Fatalf("clean:\n%s\nthe dry run said:\n%s", lines(rep), lines(dry))
	}
	for _, gone := range []string{"refs/heads/ralph/task/a", "refs/heads/ralph/attempt/a/1", "refs/heads/ralph/task/d",
		"refs/ralph/claims/ralph%2Fintegration/a", "refs/ralph/claims/ralph%2Fintegration/b"} {
		if _, ok := g.refs[gone]; ok {
			t.Errorf("%s is still there", gone)
		}
	}
	for _, kept := range []string{"refs/heads/ralph/task/b", "refs/heads/ralph/attempt/b/1", "refs/heads/ralph/task/c",
		"refs/heads/feature", "refs/heads/ralph/integration", "refs/ralph/claims/ralph%2Fintegration/c", "refs/ralph/claims/other/a"} {
		if _, ok := g.refs[kept]; !ok {
			t.Errorf("%s was removed", kept)
		}
	}
	if _, ok := g.trees[filepath.Join(cfg.Root, ".ralph", "worktrees", "w1")]; ok {
		t.Error("w1 is still there")
	}
	if len(g.trees) != 4 {
		t.Errorf("%d trees left, want 4", len(g.trees))
	}

	again, err := Clean(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if again.Removed() != 0 {
		t.Errorf("a second clean removed:\n%s", lines(again))
	}
}

// A branch that moves between the look and the removal is kept: the
// deletion is a compare-and-swap from the commit Clean read.
func TestCleanKeepsABranchThatMoved(t *testing.T) {
	g, cfg, _ := cleanRepo(t)
	moved := g.commit(g.head, "new work", map[string]string{"f": "0", "n": "1"})
	moving := &movingGit{fakeGit: g, ref: "refs/heads/ralph/task/d", to: moved}
	cfg.Git = moving
	rep, err := Clean(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(lines(rep), "keep branch ralph/task/d: it moved while ralph clean looked at it") {
		t.Fatalf("got:\n%s", lines(rep))
	}
	if g.refs["refs/heads/ralph/task/d"] != moved {
		t.Error("the moved branch was removed")
	}
}

// movingGit moves ref to another commit right before it is deleted.
type movingGit struct {
	*fakeGit
	ref, to string
}

func (m *movingGit) DeleteRef(ctx context.Context, ref, old string) error {
	if ref == m.ref {
		m.mu.Lock()
		m.refs[ref] = m.to
		m.mu.Unlock()
	}
	return m.fakeGit.DeleteRef(ctx, ref, old)
}

func TestCleanNeedsTheIntegrationBranch(t *testing.T) {
	_, cfg, _ := cleanRepo(t)
	cfg.Into = ""
	if _, err := Clean(t.Context(), cfg); err == nil {
		t.Fatal("no error without an integration branch")
	}
}
