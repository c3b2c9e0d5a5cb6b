package loop_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
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

func TestGateTrouble(t *testing.T) {
	tests := []struct {
		name    string
		repo    bool
		commit  bool
		testCmd string
		agents  string // AGENTS.md content
		work    bool   // the agent writes a file
		want    loop.Outcome
		runs    int
		msg     string
	}{
		{name: "failing tests stop with 3 after 1+MaxRetries", testCmd: "echo boom >&2; exit 1", work: true,
			want: loop.OutcomeTestGateFailed, runs: 2, msg: "boom"},
		{name: "the AGENTS.md test command is used", agents: "# Agents\n\n## Tests\n\n```sh\n$ exit 3\n```\n", work: true,
			want: loop.OutcomeTestGateFailed, runs: 2, msg: "exit 3"},
		{name: "passing tests complete", testCmd: "true", work: true, want: loop.OutcomeComplete, runs: 1},
		{name: "nothing changed is gate trouble, exit 5", repo: true, commit: true,
			want: loop.OutcomeGitFailed, runs: 2, msg: "changed nothing"},
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
			if tt.agents != "" {
				writeFile(t, cfg.Root, "AGENTS.md", tt.agents)
			}
			runner := looptest.NewFakeRunner(nil).Always(agent(done, ""))
			if tt.work {
				runner = looptest.NewFakeRunner(nil).Always(writer(cfg.Root))
			}
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Outcome != tt.want || runner.Calls() != tt.runs || !strings.Contains(rep.Message, tt.msg) {
				t.Errorf("outcome %s after %d runs (%q); want %s after %d with %q", rep.Outcome, runner.Calls(), rep.Message, tt.want, tt.runs, tt.msg)
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
	marker := filepath.Join(cfg.Root, "failed-once")
	cfg.TestCmd = "if [ -e " + marker + " ]; then exit 0; fi; touch " + marker + "; echo 'FAIL: TestLogin (want 200, got 500)'; exit 1"
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
