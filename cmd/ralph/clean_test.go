package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCleanAfterAWorkersBuild: after a --workers build in which t-1
// landed and t-2 failed its attempts (the test gate refuses its work,
// which stays on an attempt branch; its task branch is back at the tip,
// holding nothing), ralph clean --dry-run removes nothing and lists;
// ralph clean removes the task branches, the worker's tree (clean, no
// build holds it) and every fence (no task is in progress), and keeps
// t-2's attempt, listed with the commit it holds; a second clean finds
// nothing more, and the next build finishes the plan.
func TestCleanAfterAWorkersBuild(t *testing.T) {
	p := newLandProject(t, "")
	agent, _ := fakeAgentPath(t, work)
	code, out := p.build(agent, "--test-cmd", "test ! -f t-2.txt", "--max-retries", "1")
	if code == 0 {
		t.Fatalf("the build passed t-2's gate:\n%s", out)
	}
	refs := func() string {
		return p.git("for-each-ref", "--format=%(refname)", "refs/heads/ralph/", "refs/ralph/") + "\n"
	}
	before := refs()
	for _, want := range []string{"refs/heads/ralph/task/t-1", "refs/heads/ralph/task/t-2", "refs/heads/ralph/attempt/t-2/1",
		"refs/ralph/claims/ralph%2Fintegration/t-1", "refs/ralph/claims/ralph%2Fintegration/t-2"} {
		if !strings.Contains(before, want+"\n") {
			t.Fatalf("the build left no %s (the case is meant to make it):\n%s", want, before)
		}
	}

	// Each attempt's commit is kept on an attempt branch unless one holds
	// it already: one or two, as the two attempts' commits differ (their
	// time) or not.
	attempts := strings.Fields(p.git("for-each-ref", "--format=%(refname:short)", "refs/heads/ralph/attempt/"))
	kept := ""
	for _, a := range attempts {
		kept += "kept branch " + a + ": 1 commit not on ralph/integration\n"
	}

	code, dry, errs := p.ralph("clean", "--dry-run")
	if code != 0 {
		t.Fatalf("ralph clean --dry-run: exit %d\n%s%s", code, dry, errs)
	}
	if got := refs(); got != before {
		t.Fatalf("a dry run changed the refs:\n%s\nwere:\n%s", got, before)
	}
	for _, want := range []string{"would remove branch ralph/task/t-1\n", "would remove branch ralph/task/t-2\n",
		"would remove worktree .ralph/worktrees/w1\n",
		"would remove fence refs/ralph/claims/ralph%2Fintegration/t-1\n", "would remove fence refs/ralph/claims/ralph%2Fintegration/t-2\n",
		kept, "(dry run: nothing removed)\n"} {
		if !strings.Contains(dry, want) {
			t.Errorf("the dry run does not say %q:\n%s", want, dry)
		}
	}

	code, cleaned, errs := p.ralph("clean")
	if code != 0 {
		t.Fatalf("ralph clean: exit %d\n%s%s", code, cleaned, errs)
	}
	if want := strings.ReplaceAll(strings.ReplaceAll(dry, "would remove", "removed"), " (dry run: nothing removed)", ""); cleaned != want {
		t.Errorf("ralph clean said:\n%s\nwant what the dry run said:\n%s", cleaned, want)
	}
	after := refs()
	for _, gone := range []string{"refs/heads/ralph/task/", "refs/ralph/claims/"} {
		if strings.Contains(after, gone) {
			t.Errorf("%s is still there:\n%s", gone, after)
		}
	}
	for _, kept := range []string{"refs/heads/ralph/integration\n", "refs/heads/ralph/attempt/t-2/1\n"} {
		if !strings.Contains(after, kept) {
			t.Errorf("%s was removed:\n%s", kept, after)
		}
	}

	if trees := p.git("worktree", "list", "--porcelain"); strings.Contains(trees, "worktrees/w1") {
		t.Errorf("the tree w1 is still a worktree:\n%s", trees)
	}
	if _, err := os.Stat(filepath.Join(p.dir, ".ralph", "worktrees", "w1")); !os.IsNotExist(err) {
		t.Errorf("the tree w1 is still there: %v", err)
	}

	code, again, errs := p.ralph("clean")
	if want := kept + fmt.Sprintf("clean: removed 0, kept %d\n", len(attempts)); code != 0 || again != want {
		t.Errorf("a second ralph clean: exit %d\n%s%s\nwant:\n%s", code, again, errs, want)
	}

	// The next build makes its tree again and finishes the plan.
	if code, out := p.build(agent); code != 0 || p.status("t-3") != "done" {
		t.Errorf("the build after ralph clean: exit %d, t-3 %s\n%s", code, p.status("t-3"), out)
	}
}

// TestCleanOutsideAGitRepository: exit 1, saying so.
func TestCleanOutsideAGitRepository(t *testing.T) {
	p := newBareProject(t, gitIdentity)
	if code, _, errs := p.ralph("init"); code != 0 {
		t.Fatalf("ralph init: %s", errs)
	}
	code, out, errs := p.ralph("clean")
	if code != 1 || !strings.Contains(errs, "not in a git repository") {
		t.Errorf("ralph clean outside a repository: exit %d\n%s%s", code, out, errs)
	}
}
