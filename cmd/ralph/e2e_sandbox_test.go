package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/claude/claudetest"
)

// The real agent CLIs inside ralph's sandbox (ARCHITECTURE.md §7): what a
// sandboxed agent may still do, and what it can no longer reach, with the
// pinned releases against their fake model APIs. bubblewrap is needed:
// without it these skip, saying so; under CI=true they fail.

// sandboxWork is the project's own script that a sandboxed agent runs as
// its one shell step in peek mode: it claims the next task through
// $RALPH_BIN (its broker: the plan is read-only in the sandbox), edits a
// file, runs the project's tests, uses git in its own checkout (status,
// add, commit, diff), and then reports through $RALPH_BIN: a follow-up
// task and done on t-1, failed on t-2, done on the rest. Kept in a file:
// Gemini CLI refuses shell commands that hold $(…).
const sandboxWork = `set -e
id=$("$RALPH_BIN" task claim)
echo "$id" >> log.txt
sh test.sh
git status --porcelain >> git.txt
git add log.txt
git -c user.name=Agent -c user.email=agent@example.com commit -q -m "work on $id"
git diff --stat HEAD~1 >> git.txt
case "$id" in
t-1) "$RALPH_BIN" task add "Follow up on t-1" -d "found while working on t-1" > /dev/null
     "$RALPH_BIN" task done "$id" --summary "did $id" ;;
t-2) "$RALPH_BIN" task fail "$id" --reason "t-2 cannot be done" ;;
*)   "$RALPH_BIN" task done "$id" --summary "did $id" ;;
esac
echo "worked on $id"
`

// TestE2EAgentSandboxWork: each real CLI, sandboxed, in peek mode, claims,
// completes, fails and adds tasks through $RALPH_BIN, edits, runs the
// tests and uses git status/add/commit/diff in its tree; its commits stay
// in its own checkout; the plan records every move as the agent's.
func TestE2EAgentSandboxWork(t *testing.T) {
	needBwrap(t)
	forEachAgent(t, func(t *testing.T, kit agentKit) {
		env := kit.serve(t, func(n int, last, user string) cliStep {
			if n == 0 {
				return cliStep{shell: "sh work.sh"}
			}
			return cliStep{text: "Worked and reported through ralph task."}
		})
		e := newProject(t, env)
		for name, content := range map[string]string{
			"work.sh":    sandboxWork,
			"test.sh":    "test -s log.txt && echo 'tests pass'\n",
			".gitignore": ".ralph/\n",
		} {
			if err := os.WriteFile(filepath.Join(e.dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		commitProject(t, e.dir)
		head := gitTrim(t, e.dir, "rev-parse", "HEAD")
		e.ok("task", "add", "First")
		e.ok("task", "add", "Second")
		e.ok("task", "add", "Third")

		r := e.run("build", "--agent-cli", kit.name, "--use-api-key", "--claim", "agent", "--sandbox", "--max-iterations", "8")
		if r.code != 8 {
			t.Fatalf("build --sandbox --claim agent: exit %d, want 8 (complete, t-2 failed)\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		want := map[string]string{"t-1": "done", "t-2": "failed", "t-3": "done", "t-4": "done"}
		got := map[string]string{}
		var agent string
		for id := range want {
			task := e.show(id)
			got[id] = task.Status
			for _, l := range task.Logs {
				if l.Kind != "claim" && l.Kind != "done" && l.Kind != "fail" {
					continue
				}
				if agent == "" {
					agent = l.Actor
				}
				if l.Actor != agent || !strings.HasPrefix(agent, "agent-") {
					t.Errorf("%s: %s by %q, want by the agent (%s)", id, l.Kind, l.Actor, agent)
				}
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("statuses (-want +got):\n%s", diff)
		}
		if title := e.show("t-4").Title; title != "Follow up on t-1" {
			t.Errorf("t-4 is %q, want the agent's follow-up", title)
		}
		if lines := strings.Fields(e.read("log.txt")); len(lines) != 4 {
			t.Errorf("log.txt: %q, want the four tasks the agent claimed", lines)
		}
		gitLog := e.read("git.txt")
		for _, w := range []string{"?? log.txt", "log.txt | 1 +"} {
			if !strings.Contains(gitLog, w) {
				t.Errorf("git in the sandbox: %q missing from\n%s", w, gitLog)
			}
		}
		// The agent's commits stayed in its own checkout.
		if got := gitTrim(t, e.dir, "rev-parse", "HEAD"); got != head {
			t.Errorf("HEAD moved from %s to %s", head, got)
		}
		if log := gitTrim(t, e.dir, "log", "--all", "--format=%s"); strings.Contains(log, "work on") {
			t.Errorf("the agent's commits reached the repository:\n%s", log)
		}
	})
}

// TestE2ESandboxCommitHook: the real Claude Code, sandboxed, plants a
// pre-commit and a post-commit hook, a repository hooksPath and a
// core.fsmonitor with its Bash tool; ralph's --commit then commits the
// work without running any of them, and the repository's own git
// directory is as it was.
func TestE2ESandboxCommitHook(t *testing.T) {
	needBwrap(t)
	marker := filepath.Join(t.TempDir(), "hook-ran")
	hook := "#!/bin/sh\necho ran >> " + marker + "\n"
	plant := `printf '%s' '` + hook + `' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; ` +
		`cp .git/hooks/pre-commit .git/hooks/post-commit; ` +
		`mkdir -p .githooks && cp .git/hooks/pre-commit .githooks/pre-commit && git config core.hooksPath .githooks; ` +
		`git config core.fsmonitor "$PWD/.githooks/pre-commit"; ` +
		`echo work > work.txt; git status --porcelain`
	api := claudetest.NewAPI(t, func(r claudetest.Request) claudetest.Reply {
		if r.ToolResults() == 0 {
			return claudetest.Bash(plant)
		}
		return claudetest.Text("Planted and worked.\n<task-done>t-1</task-done>")
	})
	e := newProject(t, append(api.Env(t.TempDir()), "RALPH_CLAUDE="+claudetest.Binary(t),
		"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com"))
	if err := os.WriteFile(filepath.Join(e.dir, ".gitignore"), []byte(".ralph/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	commitProject(t, e.dir)
	hooksBefore := dirNames(t, filepath.Join(e.dir, ".git", "hooks"))
	configBefore := e.read(".git/config")
	e.ok("task", "add", "Do it")

	r := e.run("build", "--use-api-key", "--sandbox", "--commit", "--once")
	if r.code != 0 {
		t.Fatalf("build --sandbox --commit: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if b, err := os.ReadFile(marker); err == nil {
		t.Errorf("a planted hook ran:\n%s", b)
	}
	if got := dirNames(t, filepath.Join(e.dir, ".git", "hooks")); !cmp.Equal(hooksBefore, got) {
		t.Errorf(".git/hooks changed: %v, was %v", got, hooksBefore)
	}
	if got := e.read(".git/config"); got != configBefore {
		t.Errorf(".git/config changed:\n%s\nwas:\n%s", got, configBefore)
	}
	if msg := gitTrim(t, e.dir, "log", "-1", "--format=%s"); msg != "build: iteration 1 - Do it" {
		t.Errorf("the last commit is %q, want ralph's", msg)
	}
	if files := gitTrim(t, e.dir, "show", "--name-only", "--format=", "HEAD"); !strings.Contains(files, "work.txt") || !strings.Contains(files, ".githooks/pre-commit") {
		// .githooks/pre-commit, the last the payload wrote before its
		// git config calls: the payload ran, in the agent's own checkout.
		t.Errorf("ralph's commit holds %q, want the agent's work.txt and .githooks/pre-commit", files)
	}
	if got := e.show("t-1").Status; got != "done" {
		t.Errorf("t-1 is %s", got)
	}
}

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// gitTrim is gitOut, trimmed.
func gitTrim(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return strings.TrimSpace(gitOut(t, dir, args...))
}
