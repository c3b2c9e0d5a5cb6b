package loop_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// gitRepo makes root a git repository with one commit and an identity.
func gitRepo(t *testing.T, root string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed") // the commit gate needs git itself
	}
	git(t, root, "init", "-q")
	git(t, root, "config", "user.email", "ralph@example.com")
	git(t, root, "config", "user.name", "ralph test")
	writeFile(t, root, "README", "hello\n")
	git(t, root, "add", "README")
	git(t, root, "commit", "-q", "-m", "init")
}

// userHook installs a hook as a user does for all their repositories (a
// global core.hooksPath, with GIT_CONFIG_GLOBAL pointing at a file of
// the test's own): the user's hooks run, the repository's do not.
func userHook(t *testing.T, name, body string) {
	t.Helper()
	dir := t.TempDir()
	hooks := filepath.Join(dir, "hooks")
	writeFile(t, hooks, name, "#!/bin/sh\n"+body+"\n")
	if err := os.Chmod(filepath.Join(hooks, name), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "gitconfig", "[core]\n\thooksPath = "+hooks+"\n")
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(dir, "gitconfig"))
}

func git(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// writer is an agent that writes a file named after its task, and a file
// under .ralph, then reports done.
func writer(root string) func(context.Context, loop.RunRequest) (loop.RunResult, error) {
	return func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		if err := os.WriteFile(filepath.Join(root, id+".txt"), []byte(id), 0o644); err != nil {
			return loop.RunResult{}, err
		}
		if err := os.MkdirAll(filepath.Join(root, ".ralph"), 0o755); err != nil {
			return loop.RunResult{}, err
		}
		if err := os.WriteFile(filepath.Join(root, ".ralph", "scratch"), []byte(id), 0o644); err != nil {
			return loop.RunResult{}, err
		}
		return looptest.Result(done(id)), nil
	}
}

// scratcher is an agent that writes under .ralph only, then reports done.
func scratcher(root string) func(context.Context, loop.RunRequest) (loop.RunResult, error) {
	return func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		if err := os.MkdirAll(filepath.Join(root, ".ralph", "logs"), 0o755); err != nil {
			return loop.RunResult{}, err
		}
		if err := os.WriteFile(filepath.Join(root, ".ralph", "logs", id+".log"), []byte(id), 0o644); err != nil {
			return loop.RunResult{}, err
		}
		return looptest.Result(done(id)), nil
	}
}

func TestCommitGate(t *testing.T) {
	store := newStore(t, loop.Task{ID: "a", Title: "Add login"}, loop.Task{ID: "b", Title: "Add  logout"})
	cfg := testConfig(t)
	gitRepo(t, cfg.Root)
	cfg.Commit = true
	runner := looptest.NewFakeRunner(t).Always(writer(cfg.Root))
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("outcome %s: %s", rep.Outcome, rep.Message)
	}
	log := strings.Split(strings.TrimSpace(git(t, cfg.Root, "log", "--format=%s")), "\n")
	if diff := cmp.Diff([]string{"build: iteration 2 - Add logout", "build: iteration 1 - Add login", "init"}, log); diff != "" {
		t.Errorf("commits (-want +got):\n%s", diff)
	}
	files := git(t, cfg.Root, "ls-files")
	if strings.Contains(files, ".ralph") {
		t.Errorf(".ralph was committed:\n%s", files)
	}
}

// ignoreRalph writes .gitignore (when gitignore is not empty) and
// .git/info/exclude (when exclude is not empty) in the repository at root,
// creates .ralph/ as a project has it, and commits the .gitignore ("ignore").
func ignoreRalph(t *testing.T, root, gitignore, exclude string) {
	t.Helper()
	writeFile(t, root, ".ralph/progress.db", "db")
	if gitignore != "" {
		writeFile(t, root, ".gitignore", gitignore)
		git(t, root, "add", "-f", ".gitignore")
	}
	if exclude != "" {
		writeFile(t, root, ".git/info/exclude", exclude)
	}
	git(t, root, "commit", "-q", "--allow-empty", "-m", "ignore")
}

// committed lists the files commit rev changed, relative to the top of
// the repository, in git's order.
func committed(t *testing.T, root, rev string) []string {
	t.Helper()
	out := git(t, root, "diff-tree", "-z", "--no-commit-id", "--name-only", "-r", rev)
	return strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
}

// The commit gate works whether or not git ignores .ralph/ (.ralph/ is never
// committed), however the ignore rule is spelt, and never
// commits .ralph/.
func TestCommitGateIgnoredRalph(t *testing.T) {
	tests := []struct {
		name      string
		gitignore string
		exclude   string // .git/info/exclude
		tracked   bool   // .ralph/scratch was committed before .ralph/ was ignored
		status    string // git status --porcelain afterwards
	}{
		{name: "no .gitignore", status: "?? .ralph/\n"},
		{name: ".gitignore without .ralph", gitignore: "*.log\n", status: "?? .ralph/\n"},
		{name: ".ralph", gitignore: ".ralph\n"},
		{name: ".ralph/", gitignore: "*.log\n.ralph/\n"},
		{name: "/.ralph/", gitignore: "/.ralph/\n"},
		{name: "**/.ralph/", gitignore: "**/.ralph/\n"},
		{name: "a wider pattern", gitignore: ".*\n"},
		{name: "its contents only", gitignore: ".ralph/*\n"},
		{name: "info/exclude", exclude: ".ralph/\n"},
		{name: "tracked before it was ignored", gitignore: ".ralph/\n", tracked: true, status: " M .ralph/scratch\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tasks("a", "b")...)
			cfg := testConfig(t)
			gitRepo(t, cfg.Root)
			if tt.tracked {
				writeFile(t, cfg.Root, ".ralph/scratch", "old")
				git(t, cfg.Root, "add", "-f", ".ralph/scratch")
			}
			ignoreRalph(t, cfg.Root, tt.gitignore, tt.exclude)
			cfg.Commit = true
			runner := looptest.NewFakeRunner(t).Always(writer(cfg.Root))
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outcome != loop.OutcomeComplete || runner.Calls() != 2 {
				t.Fatalf("outcome %s after %d runs: %s", rep.Outcome, runner.Calls(), rep.Message)
			}
			log := strings.Split(strings.TrimSpace(git(t, cfg.Root, "log", "--format=%s")), "\n")
			if diff := cmp.Diff([]string{"build: iteration 2 - Task b", "build: iteration 1 - Task a", "ignore", "init"}, log); diff != "" {
				t.Errorf("commits (-want +got):\n%s", diff)
			}
			got := [][]string{committed(t, cfg.Root, "HEAD~1"), committed(t, cfg.Root, "HEAD")}
			if diff := cmp.Diff([][]string{{"a.txt"}, {"b.txt"}}, got); diff != "" {
				t.Errorf("files committed by iterations 1 and 2 (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.status, git(t, cfg.Root, "status", "--porcelain")); diff != "" {
				t.Errorf("git status --porcelain (-want +got):\n%s", diff)
			}
			if tt.tracked {
				if got := git(t, cfg.Root, "show", "HEAD:.ralph/scratch"); got != "old" {
					t.Errorf("the tracked .ralph/scratch was committed: %q", got)
				}
			}
		})
	}
}

// The commit gate stages untracked files by name: names that look like
// pathspecs or options are taken as names, more files than one `git add`
// is given are staged in several, and a project in a subdirectory of the
// repository commits what changed under it only.
func TestCommitGateStagesByName(t *testing.T) {
	var many []string
	for i := range 1500 { // about 120 KB of names
		many = append(many, fmt.Sprintf("gen/%s-%04d.txt", strings.Repeat("x", 64), i))
	}
	tests := []struct {
		name   string
		sub    string // the project root, relative to the repository's
		files  []string
		status string // git status --porcelain afterwards, from the repository's top
	}{
		{name: "names that look like pathspecs", files: []string{"-dash", ":(top)x", ":colon", "[x].txt", "a*b.txt", "with space", "\u00fcn\u00ef.txt"}},
		{name: "more names than one git add is given", files: many},
		{name: "a project in a subdirectory", sub: "proj", files: []string{"a.txt", "deep/b.txt"}, status: "?? outside.txt\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tasks("a")...)
			cfg := testConfig(t)
			repo := cfg.Root
			gitRepo(t, repo)
			cfg.Root = filepath.Join(repo, tt.sub)
			writeFile(t, repo, ".gitignore", ".ralph/\n")
			git(t, repo, "add", ".gitignore")
			git(t, repo, "commit", "-q", "-m", "ignore")
			writeFile(t, cfg.Root, ".ralph/progress.db", "db")
			if tt.sub != "" {
				writeFile(t, repo, "outside.txt", "not the project's")
			}
			cfg.Commit = true
			runner := looptest.NewFakeRunner(t).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
				for _, f := range tt.files {
					writeFile(t, cfg.Root, f, f)
				}
				return looptest.Result(done(envOf(req, "RALPH_TASK_ID"))), nil
			})
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outcome != loop.OutcomeComplete {
				t.Fatalf("outcome %s: %s", rep.Outcome, rep.Message)
			}
			var want []string
			for _, f := range tt.files {
				want = append(want, path.Join(tt.sub, f))
			}
			slices.Sort(want)
			if diff := cmp.Diff(want, committed(t, repo, "HEAD")); diff != "" {
				t.Errorf("files committed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.status, git(t, repo, "status", "--porcelain")); diff != "" {
				t.Errorf("git status --porcelain (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGateTrouble(t *testing.T) {
	tests := []struct {
		name    string
		repo    bool
		commit  bool
		testCmd string
		agents  string // AGENTS.md content
		work    bool   // the agent writes a file
		scratch bool   // the agent writes under .ralph/ only
		setup   func(t *testing.T, root string)
		want    loop.Outcome
		runs    int
		msg     string
	}{
		// The gates pass on the starting tree (the baseline) and fail once
		// the agent wrote a.txt.
		{name: "failing tests stop with 3 after 1+MaxRetries", testCmd: "if [ -e a.txt ]; then echo boom >&2; exit 1; fi", work: true,
			want: loop.OutcomeTestGateFailed, runs: 2, msg: "boom"},
		{name: "the AGENTS.md test command is used", agents: "# Agents\n\n## Tests\n\n```sh\n$ test ! -e a.txt || exit 3\n```\n", work: true,
			want: loop.OutcomeTestGateFailed, runs: 2, msg: "exit 3"},
		{name: "a gate failing on the starting tree stops before any agent", testCmd: "echo boom >&2; exit 1", work: true,
			want: loop.OutcomeTestGateFailed, runs: 0, msg: "already fails on the starting tree"},
		{name: "passing tests complete", testCmd: "true", work: true, want: loop.OutcomeComplete, runs: 1},
		{name: "nothing changed is gate trouble, exit 5", repo: true, commit: true,
			want: loop.OutcomeGitFailed, runs: 2, msg: "changed nothing"},
		{name: "writing only under an ignored .ralph/ is nothing changed", repo: true, commit: true, scratch: true,
			setup: func(t *testing.T, root string) { ignoreRalph(t, root, ".ralph/\n", "") },
			want:  loop.OutcomeGitFailed, runs: 2, msg: "changed nothing"},
		{name: "writing only under .ralph/ is nothing changed", repo: true, commit: true, scratch: true,
			want: loop.OutcomeGitFailed, runs: 2, msg: "changed nothing"},
		{name: "a failing git add is reported with .ralph/ ignored", repo: true, commit: true, work: true,
			setup: func(t *testing.T, root string) {
				ignoreRalph(t, root, ".ralph/\n", "")
				writeFile(t, root, ".git/index.lock", "")
			},
			want: loop.OutcomeGitFailed, runs: 2, msg: "git gate failed: staging"},
		{name: "a refused commit is reported with .ralph/ ignored", repo: true, commit: true, work: true,
			setup: func(t *testing.T, root string) {
				ignoreRalph(t, root, ".ralph/\n", "")
				userHook(t, "pre-commit", "echo no commits today >&2\nexit 1")
			},
			want: loop.OutcomeGitFailed, runs: 2, msg: "git gate failed: git commit"},
		{name: "commit outside a git repo stops before the first iteration", commit: true,
			want: loop.OutcomeGitFailed, runs: 0, msg: "needs a git repository"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := newStore(t, tasks("a")...)
			cfg := testConfig(t)
			if tt.repo {
				gitRepo(t, cfg.Root)
			}
			cfg.Commit, cfg.TestCmd, cfg.MaxRetries = tt.commit, tt.testCmd, 1
			if tt.setup != nil {
				tt.setup(t, cfg.Root)
			}
			if tt.agents != "" {
				writeFile(t, cfg.Root, "AGENTS.md", tt.agents)
			}
			runner := looptest.NewFakeRunner(nil).Always(agent(done, ""))
			switch {
			case tt.work:
				runner = looptest.NewFakeRunner(nil).Always(writer(cfg.Root))
			case tt.scratch:
				runner = looptest.NewFakeRunner(nil).Always(scratcher(cfg.Root))
			}
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outcome != tt.want || runner.Calls() != tt.runs || !strings.Contains(rep.Message, tt.msg) {
				t.Errorf("outcome %s after %d runs (%q); want %s after %d with %q", rep.Outcome, runner.Calls(), rep.Message, tt.want, tt.runs, tt.msg)
			}
			if notGit := !tt.repo && tt.commit; notGit != errors.Is(rep.Cause, loop.ErrNotGitRepo) {
				t.Errorf("report's cause %v; want ErrNotGitRepo in it: %v", rep.Cause, notGit)
			}
			if baseline := tt.runs == 0 && tt.want == loop.OutcomeTestGateFailed; baseline != errors.Is(rep.Cause, loop.ErrBaselineFailed) {
				t.Errorf("report's cause %v; want ErrBaselineFailed in it: %v", rep.Cause, baseline)
			}
			task, _ := store.Get(t.Context(), "a")
			wantStatus := loop.StatusPending
			if tt.want == loop.OutcomeComplete {
				wantStatus = loop.StatusDone
			}
			if task.Status != wantStatus || task.RetryCount != 0 {
				t.Errorf("task %s retries %d; want %s, 0 (gate trouble is not the task's)", task.Status, task.RetryCount, wantStatus)
			}
		})
	}
}

func TestTestCommandFromAgents(t *testing.T) {
	tests := []struct {
		name, agents, want string
	}{
		{"none", "# Agents\nBe nice.\n", ""},
		{"test line", "# Agents\n- test: `go test ./...`\n", "go test ./..."},
		{"test command line", "Test command: make check\n", "make check"},
		{"fenced block under a Test heading", "## Style\n```\ngofmt\n```\n## Testing\nRun:\n```bash\n$ go vet ./...\ngo test ./...\n```\n",
			"go vet ./... && go test ./..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeFile(t, root, "AGENTS.md", tt.agents)
			got, err := loop.TestCommandFromAgents(root)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if got, err := loop.TestCommandFromAgents(t.TempDir()); got != "" || err != nil {
		t.Errorf("no AGENTS.md: %q, %v", got, err)
	}
}

// The next attempt learns why the gate failed, output included.
func TestGateFailureReachesNextPrompt(t *testing.T) {
	store := newStore(t, tasks("a")...)
	cfg := testConfig(t)
	marker, base := filepath.Join(cfg.Root, "failed-once"), filepath.Join(cfg.Root, "baseline")
	// It passes on the starting tree (the baseline), fails once after
	// the first session with a long output whose end says why, then
	// passes: the retry reason keeps that end.
	cfg.TestCmd = "if [ ! -e " + base + " ]; then touch " + base + "; exit 0; fi; if [ -e " + marker + " ]; then exit 0; fi; touch " + marker +
		"; seq 1 3000; echo 'FAIL: TestLogin (want 200, got 500)'; exit 1"
	runner := looptest.NewFakeRunner(t).Always(agent(done, ""))
	rep, err := loop.Run(t.Context(), cfg, store, runner)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != loop.OutcomeComplete || runner.Calls() != 2 {
		t.Fatalf("outcome %s after %d runs: %s", rep.Outcome, runner.Calls(), rep.Message)
	}
	second := runner.Requests()[1].Prompt
	for _, s := range []string{"An earlier attempt did not finish", "test gate failed", "FAIL: TestLogin (want 200, got 500)"} {
		if !strings.Contains(second, s) {
			t.Errorf("second prompt lacks %q:\n%s", s, second)
		}
	}
}
