package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/forge/forgetest"
)

// githubEnv points ralph at the fake GitHub g with token.
func githubEnv(g *forgetest.GitHub, token string) []string {
	return []string{"GH_TOKEN=" + token, "GITHUB_TOKEN=", "GITHUB_API_URL=" + g.URL}
}

// planShape is what TestGitHubImport compares of a plan: each task's id,
// title, parent and blockers, in insertion order.
func planShape(t *testing.T, e *e2e) []string {
	t.Helper()
	var out []string
	for line := range strings.Lines(e.ok("task", "export")) {
		var task struct {
			ID, Title, Parent string
			BlockedBy         []string `json:"blocked_by"`
			Status            string
		}
		if err := json.Unmarshal([]byte(line), &task); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		out = append(out, task.ID+" "+task.Title+" parent="+task.Parent+" after="+strings.Join(task.BlockedBy, ",")+" "+task.Status)
	}
	return out
}

// TestGitHubImport: `ralph task import github:o/r --label ralph` makes
// tasks gh-N of the labelled open issues, with "depends on #N" as blockers
// (a closed one is done: no edge), an open blocker and an open sub-issue
// without the label pulled in; twice gives the same plan. A build (the
// real Claude Code against its fake API) then comments on the issue when
// it claims, finishes and fails its task — and never on an issue the
// plan did not import.
func TestGitHubImport(t *testing.T) {
	g := forgetest.New(t, "octo", "hello", "tok")
	g.AddIssue(forgetest.Issue{Title: "Lexer", Body: "Tokens.", Labels: []string{"ralph"}})                               // 1
	g.AddIssue(forgetest.Issue{Title: "Parser", Body: "Depends on #1 and #3.\nBlocked by #4", Labels: []string{"ralph"}}) // 2
	g.AddIssue(forgetest.Issue{Title: "Grammar notes"})                                                                   // 3
	g.AddIssue(forgetest.Issue{Title: "Old", State: "closed", Labels: []string{"ralph"}})                                 // 4
	g.AddIssue(forgetest.Issue{Title: "Epic", Labels: []string{"ralph", "big"}})                                          // 5
	g.AddIssue(forgetest.Issue{Title: "Part one", Parent: 5})                                                             // 6
	g.AddIssue(forgetest.Issue{Title: "Part done", Parent: 5, State: "closed"})                                           // 7
	g.AddIssue(forgetest.Issue{Title: "Someone else's", Labels: []string{"later"}})                                       // 8

	// The builds below run the real Claude Code (fake model API): it
	// reports each task done, but for gh-3, which it fails.
	claude := kitNamed("claude").serve(t, func(n int, last, user string) cliStep {
		if n == 0 {
			return cliStep{shell: `echo "$RALPH_TASK_ID"`}
		}
		if id := strings.TrimSpace(last); id != "gh-3" {
			return cliStep{text: "Done.\n<task-done>" + id + "</task-done>"}
		}
		return cliStep{text: "No notes to find.\n<task-failed>gh-3</task-failed>"}
	})
	e := newProject(t, append(claude, githubEnv(g, "tok")...))
	r := e.run("task", "import", "github:octo/hello", "--label", "ralph")
	if r.code != 0 || !strings.Contains(r.stdout, "imported 5 tasks from github:octo/hello") {
		t.Fatalf("import: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"gh-3 (#3) has no label \"ralph\"", "gh-6 (#6) has no label \"ralph\""} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("import does not say %q:\n%s", want, r.stdout)
		}
	}
	want := []string{
		"gh-1 Lexer parent= after= pending",
		"gh-2 Parser parent= after=gh-1,gh-3 pending",
		"gh-5 Epic parent= after= pending",
		"gh-3 Grammar notes parent= after= pending",
		"gh-6 Part one parent=gh-5 after= pending",
	}
	first := planShape(t, e)
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	if show := e.ok("task", "show", "gh-2"); !strings.Contains(show, "GitHub issue #2") {
		t.Errorf("gh-2's description does not say where it comes from:\n%s", show)
	}

	r = e.run("task", "import", "github:octo/hello", "--label", "ralph")
	if r.code != 0 || !strings.Contains(r.stdout, "imported 0 tasks (5 already present)") {
		t.Fatalf("second import: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if diff := cmp.Diff(first, planShape(t, e)); diff != "" {
		t.Errorf("the second import changed the plan (-first +second):\n%s", diff)
	}
	// Another repository's issues would collide with these ids.
	if r := e.run("task", "import", "github:octo/other"); r.code != 1 || !strings.Contains(r.stderr, "this plan's GitHub issues come from octo/hello, not octo/other") {
		t.Errorf("import from another repository: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := e.run("task", "import", "github:octo/hello", "--label", "ralph"); r.code != 0 {
		t.Errorf("third import: exit %d", r.code)
	}
	// A bad token changes nothing.
	bad := newProject(t, githubEnv(g, "wrong"))
	if r := bad.run("task", "import", "github:octo/hello"); r.code != 1 || !strings.Contains(r.stderr, "401") {
		t.Errorf("import with a refused token: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := bad.ok("task", "plan-status"); !strings.Contains(got, "total=0") {
		t.Errorf("a refused import changed the plan: %s", got)
	}

	// The build comments on the issues it moves.
	if r := e.run("build", "--use-api-key", "--task", "gh-1"); r.code != 0 {
		t.Fatalf("build gh-1: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if r := e.run("build", "--use-api-key", "--task", "gh-3", "--max-retries", "0"); r.code != 8 && r.code != 0 {
		t.Fatalf("build gh-3: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	// A task an agent (or anyone) adds with an id gh-N names no issue the
	// plan imported: no comment reaches issue #8, and an import of #8
	// collides with it rather than take it for the issue.
	e.ok("task", "add", "Sneaky", "--id", "gh-8")
	if r := e.run("task", "import", "github:octo/hello", "--label", "later"); r.code != 1 || !strings.Contains(r.stderr, "task gh-8: task id already exists (a task with an issue's id gh-N that no import of the issue made is in the plan") {
		t.Errorf("import of #8 over an agent's gh-8: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := e.run("build", "--use-api-key", "--task", "gh-8"); r.code != 0 {
		t.Fatalf("build gh-8: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	comments := func(n int) []string {
		var out []string
		for _, c := range g.Comments(n) {
			out = append(out, c.Body)
		}
		return out
	}
	if got := comments(1); len(got) != 2 || !strings.Contains(got[0], "ralph claimed this issue as task `gh-1`") || !strings.Contains(got[1], "ralph finished task `gh-1`") {
		t.Errorf("comments on #1: %q", got)
	}
	if got := comments(3); len(got) != 2 || !strings.Contains(got[1], "ralph failed task `gh-3`") || !strings.Contains(got[1], "No notes to find") {
		t.Errorf("comments on #3: %q", got)
	}
	if got := comments(8); len(got) != 0 {
		t.Errorf("comments on #8, which the plan did not import: %q", got)
	}
	if u := g.Unknown(); len(u) > 0 {
		t.Errorf("requests the fake does not serve: %q", u)
	}
}

// TestGitHubImportBadInput: a repository that is no OWNER/REPO, --label
// without github:, and no token are said, and change nothing.
func TestGitHubImportBadInput(t *testing.T) {
	g := forgetest.New(t, "octo", "hello", "tok")
	e := newProject(t, append(githubEnv(g, ""), "PATH=/nonexistent"))
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"github:octo"}, `"github:octo" is not a GitHub repository: want OWNER/REPO`},
		{[]string{"plan.jsonl", "--label", "x"}, "--label goes with github:OWNER/REPO"},
		{[]string{"github:octo/hello"}, "no GitHub token"},
	} {
		r := e.run(append([]string{"task", "import"}, tt.args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("import %v: exit %d, stderr %q; want exit 1 saying %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
	if got := e.ok("task", "plan-status"); !strings.Contains(got, "total=0") {
		t.Errorf("refused imports changed the plan: %s", got)
	}
	if reqs := g.Requests(); len(reqs) > 0 {
		t.Errorf("requests made: %q", reqs)
	}
}

// TestGitHubPullRequest: `ralph build --workers 2 --pr --pr-follow`
// against the fake GitHub and a real bare remote, the real Claude Code
// (fake model API) as the agent. The build pushes the
// integration branch and opens the pull request listing the plan's tasks
// and costs; CI (a goroutine watching the remote) fails the first push's
// check and a reviewer requests changes; each becomes a task with the
// failing output or the comments as its context (in its agent's prompt
// too), built and pushed to the
// pull request; the second push's check passes and the run ends, exit 0.
func TestGitHubPullRequest(t *testing.T) {
	g := forgetest.New(t, "octo", "hello", "tok")
	// The real Claude Code against its fake API: each task's file, then
	// its sigil. The prompts of the pull request's tasks are kept.
	var mu sync.Mutex
	prompts := map[string]string{}
	env := kitNamed("claude").serve(t, func(n int, last, user string) cliStep {
		if n == 0 {
			return cliStep{shell: `echo "$RALPH_TASK_ID" > "$RALPH_TASK_ID.txt" && echo "$RALPH_TASK_ID"`}
		}
		id := strings.TrimSpace(last)
		mu.Lock()
		prompts[id] = user
		mu.Unlock()
		return cliStep{text: "Wrote it.\n<task-done>" + id + "</task-done>"}
	})
	e, remote := prProject(t, g, env...)

	// CI and a reviewer: they answer each push of the integration branch
	// once the pull request is open.
	pushes := 0
	stop := onPush(t, g, remote, func(sha string) {
		if pushes++; pushes == 1 {
			n := g.Pulls()[0].Number
			id := g.AddReview(n, forgetest.Review{User: "alice", State: "CHANGES_REQUESTED", Body: "Say hello too."})
			g.AddReviewComment(n, forgetest.ReviewComment{ReviewID: id, User: "alice", Path: "t-1.txt", Line: 1, Body: "Greet here."})
			g.SetCheckRuns(sha, forgetest.CheckRun{Name: "ci", Conclusion: "failure", Title: "1 test failed", Text: "--- FAIL: TestGreeting\n    want hello"})
			return
		}
		g.SetCheckRuns(sha, forgetest.CheckRun{Name: "ci", Conclusion: "success"})
	})
	r := e.run("build", "--use-api-key", "--workers", "2", "--pr", "--pr-follow", "--github-repo", "octo/hello")
	stop()
	t.Logf("build --pr --pr-follow:\n%s", r.stdout)
	if r.code != 0 {
		t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"pull request #1 opened", "pull request #1 asks: Fix the failing check ci (task pr-check-",
		"pull request #1 asks: Address the review of alice (task pr-review-", "pull request #1 updated",
		"pull request #1: 1 check run passed on", "the reviews that asked for changes have their tasks done"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the build does not say %q:\n%s", want, r.stdout)
		}
	}
	pulls := g.Pulls()
	if len(pulls) != 1 || pulls[0].Head != "ralph/integration" || pulls[0].Base != "main" || pulls[0].State != "open" {
		t.Fatalf("pull requests: %+v", pulls)
	}
	body := pulls[0].Body
	var st statusJSON
	if err := json.Unmarshal([]byte(e.ok("status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	var spent float64
	for _, rc := range st.Receipts {
		spent += rc.CostUSD
	}
	for _, want := range []string{"| t-1 | Left | done |", "| t-2 | Right | done |", "| pr-check-", "| pr-review-", fmt.Sprintf("Cost: $%.4f over 4 agent sessions", spent)} {
		if !strings.Contains(body, want) {
			t.Errorf("the pull request's body lacks %q:\n%s", want, body)
		}
	}
	if got, want := gitOut(t, remote, "rev-parse", "refs/heads/ralph/integration"), gitOut(t, e.dir, "rev-parse", "refs/heads/ralph/integration"); got != want {
		t.Errorf("the remote's integration branch is at %s, the build's at %s", got, want)
	}
	var fixes []string
	for line := range strings.Lines(e.ok("task", "export")) {
		var task struct{ ID, Description, Status string }
		if err := json.Unmarshal([]byte(line), &task); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(task.ID, "pr-") {
			fixes = append(fixes, task.ID)
			if task.Status != "done" {
				t.Errorf("%s is %s, want done", task.ID, task.Status)
			}
			mu.Lock()
			prompt := prompts[task.ID]
			mu.Unlock()
			if strings.HasPrefix(task.ID, "pr-check-") && (!strings.Contains(task.Description, "--- FAIL: TestGreeting") || !strings.Contains(prompt, "--- FAIL: TestGreeting")) {
				t.Errorf("%s's description, or its agent's prompt, lacks the failing output:\n%s\nprompt:\n%s", task.ID, task.Description, prompt)
			}
			if strings.HasPrefix(task.ID, "pr-review-") && (!strings.Contains(task.Description, "t-1.txt:1: Greet here.") || !strings.Contains(prompt, "t-1.txt:1: Greet here.")) {
				t.Errorf("%s's description, or its agent's prompt, lacks the review comment:\n%s\nprompt:\n%s", task.ID, task.Description, prompt)
			}
		}
	}
	if len(fixes) != 2 {
		t.Errorf("tasks from the pull request: %v, want a check's and a review's", fixes)
	}
	if u := g.Unknown(); len(u) > 0 {
		t.Errorf("requests the fake does not serve: %q", u)
	}
}

// prProject is a project on branch main with a bare remote origin on
// main and two tasks, for the --pr tests; env is the agent's.
func prProject(t *testing.T, g *forgetest.GitHub, env ...string) (e *e2e, remote string) {
	t.Helper()
	e = newProject(t, append(append(env, githubEnv(g, "tok")...), "RALPH_PR_POLL=50ms"))
	commitProject(t, e.dir)
	remote = filepath.Join(t.TempDir(), "hello.git")
	gitOut(t, e.dir, "init", "-q", "--bare", remote)
	gitOut(t, e.dir, "remote", "add", "origin", remote)
	gitOut(t, e.dir, "push", "-q", "origin", "main")
	e.ok("task", "add", "Left")  // t-1
	e.ok("task", "add", "Right") // t-2
	return e, remote
}

// TestGitHubPullRequestBound: a check that fails on every push ends
// --pr-follow at its bound, exit 3, saying so.
func TestGitHubPullRequestBound(t *testing.T) {
	g := forgetest.New(t, "octo", "hello", "tok")
	agent, _ := fakeAgentPath(t, agentStep{Sh: `date +%N > "$RALPH_TASK_ID.txt"`, Text: "<task-done>{task}</task-done>"})
	e, remote := prProject(t, g)
	stop := onPush(t, g, remote, func(sha string) {
		g.SetCheckRuns(sha, forgetest.CheckRun{Name: "ci", Conclusion: "failure", Text: "always"})
	})
	r := e.run("build", "--claude", agent, "--workers", "2", "--pr", "--pr-follow", "--pr-rounds", "1", "--github-repo", "octo/hello")
	stop()
	if r.code != 3 || !strings.Contains(r.stderr, "after 1 round (--pr-rounds)") {
		t.Fatalf("build: exit %d, want 3 at the bound\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestGitHubPullRequestBadInput: --pr's flags that do not go together, a
// remote that is not on GitHub without --github-repo, and no remote are
// said before anything runs.
func TestGitHubPullRequestBadInput(t *testing.T) {
	g := forgetest.New(t, "octo", "hello", "tok")
	e, _ := prProject(t, g)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--pr-follow"}, "--pr-follow goes with --pr"},
		{[]string{"--github-repo", "o/r"}, "--github-repo goes with --pr"},
		{[]string{"--pr", "--workers", "1"}, "remote origin ("},
		{[]string{"--pr", "--workers", "1", "--github-repo", "nope"}, `"nope" is not a GitHub repository`},
		{[]string{"--pr", "--workers", "1", "--remote", "upstream", "--github-repo", "o/r"}, `no such remote "upstream"`},
		{[]string{"--pr", "--pr-follow", "--pr-rounds", "0", "--workers", "1", "--github-repo", "o/r"}, "--pr-rounds 0: want 1 or more"},
		{[]string{"--pr", "--pr-rounds", "2", "--workers", "1", "--github-repo", "o/r"}, "--pr-rounds and --pr-wait go with --pr-follow"},
		{[]string{"--pr", "--github-repo", "o/r"}, "--pr goes with --workers"},
	} {
		r := e.run(append([]string{"build", "--claude", "/bin/true"}, tt.args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("build %v: exit %d, stderr %q; want exit 1 saying %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
	if got := e.ok("task", "plan-status"); got != "open=2 active=0 done=0 failed=0 blocked=0 total=2\n" {
		t.Errorf("refused builds changed the plan: %s", got)
	}
	if reqs := g.Requests(); len(reqs) > 0 {
		t.Errorf("requests made: %q", reqs)
	}
}

// onPush is CI on the fake GitHub g: each new commit the integration
// branch of the bare repository remote is pushed to, once g has a pull
// request, is given to ci. The returned stop ends the watch.
func onPush(t *testing.T, g *forgetest.GitHub, remote string, ci func(sha string)) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var seen []string
		for {
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			out, err := exec.Command("git", "-C", remote, "rev-parse", "-q", "--verify", "refs/heads/ralph/integration").Output()
			sha := strings.TrimSpace(string(out))
			if err != nil || slices.Contains(seen, sha) || len(g.Pulls()) == 0 {
				continue
			}
			seen = append(seen, sha)
			ci(sha)
		}
	}()
	return func() { close(quit); <-done }
}

// TestWithoutSecret: a remote's URL is shown without the token it may
// carry.
func TestWithoutSecret(t *testing.T) {
	for in, want := range map[string]string{
		"https://x-access-token:ghp_secret@example.com/o/r.git": "https://x-access-token:xxxxx@example.com/o/r.git",
		"https://ghp_secret@example.com/o/r.git":                "https://xxxxx@example.com/o/r.git",
		"git@example.com:o/r.git":                               "git@example.com:o/r.git",
		"/srv/git/r.git":                                        "/srv/git/r.git",
	} {
		if got := withoutSecret(in); got != want || strings.Contains(got, "ghp_secret") {
			t.Errorf("withoutSecret(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestGitHubPullRequestForgedFinding: an agent that adds a task with the
// id of a review to come (pr-review-N) cannot make that review count as
// answered: --pr-follow knows its findings by its own record, and the
// collision is said (exit 1), never "no review asks for changes".
func TestGitHubPullRequestForgedFinding(t *testing.T) {
	g := forgetest.New(t, "octo", "hello", "tok")
	agent, _ := fakeAgentPath(t, agentStep{
		Sh:   `if [ "$RALPH_TASK_ID" = t-1 ]; then for i in 1 2 3 4 5 6; do "$RALPH_BIN" task add "Forged $i" --id "pr-review-$i" >/dev/null; done; fi; echo "$RALPH_TASK_ID" > "$RALPH_TASK_ID.txt"`,
		Text: "<task-done>{task}</task-done>"})
	e, remote := prProject(t, g)
	stop := onPush(t, g, remote, func(sha string) {
		n := g.Pulls()[0].Number
		g.AddReview(n, forgetest.Review{User: "alice", State: "CHANGES_REQUESTED", Body: "No."})
		g.SetCheckRuns(sha, forgetest.CheckRun{Name: "ci", Conclusion: "success"})
	})
	r := e.run("build", "--claude", agent, "--workers", "2", "--pr", "--pr-follow", "--github-repo", "octo/hello")
	stop()
	if r.code != 1 || !strings.Contains(r.stderr, "--pr-follow: add task pr-review-") || strings.Contains(r.stdout, "have their tasks done") {
		t.Fatalf("build: exit %d, want 1 saying the forged task collides\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
