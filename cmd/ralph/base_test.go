package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkersFollowBase is issue 22's "done when" for the integration
// branch's base, through the binary: a commit on main after the first
// parallel build is in the next build's tree and on ralph/integration; a
// conflicting one stops the build with exit 5 and the commands that
// resolve it, and after the person runs them the build after goes on.
func TestWorkersFollowBase(t *testing.T) {
	needTools(t, "git")
	p := &workersProject{t: t, bin: ralphBinary(t), dir: t.TempDir(), marks: t.TempDir()}
	p.env = append(os.Environ(), "RALPH_AGENT_ID=", "RALPH_HOLDER=", "RALPH_DIR=",
		"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com")
	os.WriteFile(filepath.Join(p.dir, "notes.txt"), []byte("notes\n"), 0o644)
	p.git("init", "-q", "-b", "main")
	if code, _, errs := p.ralph("init"); code != 0 {
		t.Fatalf("ralph init: %s", errs)
	}
	p.git("add", "notes.txt")
	p.git("commit", "-q", "-m", "the project")
	// Each task writes notes.txt; it says whether its tree has gate.sh.
	agent := filepath.Join(p.marks, "agent.sh")
	os.WriteFile(agent, []byte(`#!/bin/sh
cat >/dev/null
id=$RALPH_TASK_ID
[ -f gate.sh ] && echo "$id" >> `+shQuote(filepath.Join(p.marks, "gate"))+`
echo "by $id" > notes.txt
printf '{"type":"system","subtype":"init","session_id":"s-%s","model":"stand-in"}\n' "$id"
printf '{"type":"result","subtype":"success","is_error":false,"result":"<task-done>%s</task-done>","session_id":"s-%s","num_turns":1,"total_cost_usd":0.01}\n' "$id" "$id"
`), 0o755)
	build := func(want int, id string) string {
		t.Helper()
		if code, _, errs := p.ralph("task", "add", "Task "+id, "--id", id); code != 0 {
			t.Fatalf("task add %s: %s", id, errs)
		}
		code, out, errs := p.ralph("build", "--workers", "1", "--claude", agent)
		if code != want {
			t.Fatalf("build of %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", id, code, want, out, errs)
		}
		return errs
	}
	build(0, "t1")

	os.WriteFile(filepath.Join(p.dir, "gate.sh"), []byte("exit 0\n"), 0o755)
	p.git("add", "gate.sh")
	p.git("commit", "-q", "-m", "the gate")
	build(0, "t2")
	if got, _ := os.ReadFile(filepath.Join(p.marks, "gate")); string(got) != "t2\n" {
		t.Errorf("tasks whose tree had gate.sh: %q, want t2", got)
	}
	if files := p.git("ls-tree", "--name-only", "ralph/integration"); !strings.Contains(files, "gate.sh") {
		t.Errorf("ralph/integration lacks gate.sh: %s", files)
	}
	if merges := p.git("log", "--merges", "--format=%s", "ralph/integration"); merges != "Merge main into ralph/integration" {
		t.Errorf("merges on ralph/integration: %q", merges)
	}

	os.WriteFile(filepath.Join(p.dir, "notes.txt"), []byte("by main\n"), 0o644)
	p.git("commit", "-q", "-am", "main's notes")
	tip := p.git("rev-parse", "ralph/integration")
	errs := build(5, "t3")
	for _, want := range []string{"conflict in notes.txt", "git worktree add ../ralph-merge ralph/integration && cd ../ralph-merge && git merge main",
		"git worktree remove ../ralph-merge"} {
		if !strings.Contains(errs, want) {
			t.Errorf("the stop lacks %q:\n%s", want, errs)
		}
	}
	if now := p.git("rev-parse", "ralph/integration"); now != tip {
		t.Errorf("ralph/integration moved from %s to %s", tip, now)
	}

	// The person runs the commands the stop gave.
	merge := filepath.Join(p.dir, "..", "ralph-merge")
	p.git("worktree", "add", "-q", "../ralph-merge", "ralph/integration")
	cmd := exec.Command("git", "-C", merge, "merge", "main")
	cmd.Env = p.env
	cmd.Run() // stops on the conflict
	os.WriteFile(filepath.Join(merge, "notes.txt"), []byte("by main and the tasks\n"), 0o644)
	p.git("-C", merge, "commit", "-q", "-am", "merge main")
	p.git("worktree", "remove", "../ralph-merge")
	if code, out, errs := p.ralph("build", "--claude", agent); code != 0 {
		t.Fatalf("build after the person's merge: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if landed := p.landed("ralph/integration"); strings.Join(landed, " ") != "t1 t2 t3" {
		t.Errorf("landed %v, want t1 t2 t3", landed)
	}
}
