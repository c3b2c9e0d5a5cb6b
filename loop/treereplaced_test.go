package loop_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// TestVerifierReplacingTheTreeIsNotWrittenThrough: a verifier that moves
// the tree away and puts a link to another checkout (the user's, here
// "victim") in its place had the guard compare and restore through the
// link: the victim's files were overwritten with the tree's and its own
// files deleted. Now nothing is written through the link, and the pass
// is void.
func TestVerifierReplacingTheTreeIsNotWrittenThrough(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	cfg.MaxRetries = 1
	seed(t, cfg.Root)
	commitAll(t, cfg.Root)
	victim := filepath.Join(t.TempDir(), "victim")
	writeFile(t, victim, "a.txt", "the user's own a.txt\n")
	writeFile(t, victim, "mine.txt", "the user's work\n")
	moved := cfg.Root + ".moved"
	cfg.Verify, cfg.MaxIterations = true, 1
	runner := looptest.NewFakeRunner(t).ThenFunc(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		writeFile(t, cfg.Root, "work.go", "package work\n")
		return looptest.Result(done("a")), nil
	}).ThenFunc(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		must(t, os.Rename(cfg.Root, moved))
		must(t, os.Symlink(victim, cfg.Root))
		return looptest.Result("<verify-pass/>"), nil
	})
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	// Put the tree back for the test's own clean-up.
	os.Remove(cfg.Root)
	os.Rename(moved, cfg.Root)
	if err != nil {
		t.Logf("Run: %v", err)
	}
	if got := readOr(filepath.Join(victim, "a.txt")); got != "the user's own a.txt\n" {
		t.Errorf("victim/a.txt = %q: written through the link", got)
	}
	if got := readOr(filepath.Join(victim, "mine.txt")); got != "the user's work\n" {
		t.Errorf("victim/mine.txt = %q: removed through the link", got)
	}
	if entries, _ := os.ReadDir(victim); len(entries) != 2 {
		t.Errorf("victim holds %d entries, want its 2 files only", len(entries))
	}
	if rep.Outcome == loop.OutcomeComplete {
		t.Errorf("outcome %s: the pass of a verifier that replaced the tree counted", rep.Outcome)
	}
	logs := verifyLogs(t, store, "a")
	if len(logs) != 1 || !strings.Contains(logs[0], "replaced") {
		t.Errorf("verify log entries %q; want one naming the replaced tree", logs)
	}
}

// TestVerifierReplacingADirectoryIsNotWrittenThrough: a directory of the
// tree replaced by a link to another checkout is put back as a
// directory; nothing is written into, or removed from, what the link
// names.
func TestVerifierReplacingADirectoryIsNotWrittenThrough(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	cfg.MaxRetries = 1
	seed(t, cfg.Root)
	commitAll(t, cfg.Root)
	victim := filepath.Join(t.TempDir(), "victim")
	writeFile(t, victim, "c.go", "the user's own c.go\n")
	writeFile(t, victim, "mine.txt", "the user's work\n")
	v := runVerify(t, t.Context(), cfg, store, func(root string) {
		must(t, os.RemoveAll(filepath.Join(root, "b")))
		must(t, os.Symlink(victim, filepath.Join(root, "b")))
	}, looptest.Result("<verify-pass/>"), nil)
	if got := readOr(filepath.Join(victim, "c.go")); got != "the user's own c.go\n" {
		t.Errorf("victim/c.go = %q: written through the link", got)
	}
	if got := readOr(filepath.Join(victim, "mine.txt")); got != "the user's work\n" {
		t.Errorf("victim/mine.txt = %q: removed through the link", got)
	}
	if fi, err := os.Lstat(filepath.Join(cfg.Root, "b")); err != nil || !fi.IsDir() {
		t.Errorf("b is not a directory again: %v", err)
	}
	if v.rep.Outcome == loop.OutcomeComplete {
		t.Errorf("outcome %s: the pass counted", v.rep.Outcome)
	}
}
