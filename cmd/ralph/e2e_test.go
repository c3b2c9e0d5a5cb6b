package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/claude/claudetest"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/sandbox"
)

// End-to-end tests the way a user runs ralph: the ralph binary, a project
// that `ralph init` made (its /ralph-build command and SessionEnd hook as
// installed), and the real Claude Code CLI (the pinned release .ci/run
// installs) against a scripted fake Messages API on 127.0.0.1. Without the
// CLI they skip, saying how to install it; under CI=true they fail.

var (
	ralphBinOnce sync.Once
	ralphBinPath string
	ralphBinErr  error
)

// ralphBinary builds the ralph binary once per test run, into a directory
// TestMain removes.
func ralphBinary(t testing.TB) string {
	t.Helper()
	ralphBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ralph-e2e-bin-")
		if err != nil {
			ralphBinErr = err
			return
		}
		cleanups = append(cleanups, func() { os.RemoveAll(dir) })
		bin := filepath.Join(dir, "ralph")
		out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			ralphBinErr = errors.New("go build: " + err.Error() + "\n" + string(out))
			return
		}
		ralphBinPath = bin
	})
	if ralphBinErr != nil {
		t.Fatal(ralphBinErr)
	}
	return ralphBinPath
}

// e2e is a project made by `ralph init`, the real Claude Code, and the fake
// API it talks to.
type e2e struct {
	t      *testing.T
	bin    string // ralph
	claude string
	dir    string
	api    *claudetest.API
	env    []string
}

// newE2E makes the project (with init's extra args, such as --db) and
// serves script for its agent sessions.
func newE2E(t *testing.T, script func(claudetest.Request) claudetest.Reply, initArgs ...string) *e2e {
	t.Helper()
	claude := claudetest.Binary(t)
	api := claudetest.NewAPI(t, script)
	// claudetest.IsSandbox: the builds run as root without --sandbox.
	e := newProject(t, append(api.Env(t.TempDir()), "RALPH_CLAUDE="+claude, claudetest.IsSandbox), initArgs...)
	e.claude, e.api = claude, api
	return e
}

// commitProject makes the project a git repository on branch main with
// one commit of what `ralph init` made, as a user starting parallel
// builds would.
func commitProject(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=Dev", "-c", "user.email=dev@example.com", "commit", "-q", "-m", "ralph init"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// newProject makes a project with `ralph init` (and initArgs, such as
// --db), whose ralph commands run with env on top of the test's own
// environment, without the RALPH_ variables of an outer run.
func newProject(t *testing.T, env []string, initArgs ...string) *e2e {
	t.Helper()
	e := newBareProject(t, env)
	e.ok(append(initArgs, "init")...)
	return e
}

// newBareProject is newProject's project before `ralph init`: an empty
// directory, and the environment its commands run with.
func newBareProject(t *testing.T, env []string) *e2e {
	t.Helper()
	e := &e2e{t: t, bin: ralphBinary(t), dir: t.TempDir()}
	e.env = append(os.Environ(), "RALPH_AGENT_ID=", "RALPH_HOLDER=", "RALPH_DIR=", "RALPH_DB=", "RALPH_PLAN=", "RALPH_AGENT_CLI=", "RALPH_HOST_ID=")
	e.env = append(e.env, env...)
	return e
}

// gitIdentity lets git commit where no configuration names the user.
var gitIdentity = []string{"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com"}

// needTools skips the test when one of tools is not on PATH (fails it
// under CI=true, where every one must be installed).
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed", tool)
			}
			t.Skipf("%s is not installed", tool)
		}
	}
}

// needBwrap skips a test of --sandbox where bubblewrap is missing or
// cannot run (sandbox.Find; fails it under CI=true); git, which the
// private checkout needs, too.
func needBwrap(t *testing.T) {
	t.Helper()
	needTools(t, "git")
	if _, err := sandbox.Find(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bubblewrap: %v", err)
		}
		t.Skipf("bubblewrap is missing or cannot run here (apt-get install bubblewrap): %v", err)
	}
}

// e2eResult is how one ralph command ended.
type e2eResult struct {
	code           int
	stdout, stderr string
}

// run runs ralph in the project.
func (e *e2e) run(args ...string) e2eResult {
	e.t.Helper()
	cmd := exec.CommandContext(e.t.Context(), e.bin, args...)
	cmd.Dir = e.dir
	cmd.Env = e.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("ralph %s: %v", strings.Join(args, " "), err)
	}
	return e2eResult{code: code, stdout: out.String(), stderr: errb.String()}
}

// ralph runs ralph in the project: its exit code, stdout and stderr.
func (e *e2e) ralph(args ...string) (int, string, string) {
	e.t.Helper()
	r := e.run(args...)
	return r.code, r.stdout, r.stderr
}

// ok runs a command that must exit 0 and returns its stdout.
func (e *e2e) ok(args ...string) string {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("ralph %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// show returns `ralph task show ID --json`.
func (e *e2e) show(id string) taskShowJSON {
	e.t.Helper()
	var got taskShowJSON
	if err := json.Unmarshal([]byte(e.ok("task", "show", id, "--json")), &got); err != nil {
		e.t.Fatal(err)
	}
	return got
}

// status is task id's status.
func (e *e2e) status(id string) string {
	e.t.Helper()
	return e.show(id).Status
}

// git runs git in the project and returns its output, trimmed.
func (e *e2e) git(args ...string) string {
	e.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = e.dir, e.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// write writes a file, and the directories it is in: name is relative to
// the project, or absolute.
func (e *e2e) write(name, content string) {
	e.t.Helper()
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(e.dir, name)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *e2e) read(name string) string {
	e.t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, name))
	if err != nil {
		e.t.Fatal(err)
	}
	return string(b)
}

// worker is the agent of a loop-claimed task: it appends its task id to
// order.txt with the Bash tool, then reports the task done.
func worker(r claudetest.Request) claudetest.Reply {
	if r.ToolResults() == 0 {
		return claudetest.Bash(`echo "$RALPH_TASK_ID" >> order.txt && echo "$RALPH_TASK_ID"`)
	}
	return claudetest.Text("Appended the id to order.txt.\n<task-done>" + r.LastToolResult() + "</task-done>")
}

// TestE2EBuild is the scenario of a new user: init, three tasks whose
// dependencies run against insertion order, build. Every task is done, in
// dependency order, each in one session, and nothing was released behind
// the loop's back.
func TestE2EBuild(t *testing.T) {
	e := newE2E(t, worker)
	e.ok("task", "add", "Ship it")   // t-1
	e.ok("task", "add", "Build it")  // t-2
	e.ok("task", "add", "Design it") // t-3
	e.ok("task", "dep", "add", "t-1", "t-2")
	e.ok("task", "dep", "add", "t-2", "t-3")

	r := e.run("build", "--use-api-key")
	if r.code != 0 || !strings.Contains(r.stdout, "complete: all 3 tasks done") {
		t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if diff := cmp.Diff("t-3\nt-2\nt-1\n", e.read("order.txt")); diff != "" {
		t.Errorf("order the tasks ran in (-want +got):\n%s", diff)
	}
	if got := e.ok("task", "plan-status"); got != "open=0 active=0 done=3 failed=0 blocked=0 total=3\n" {
		t.Errorf("plan-status: %s", got)
	}
	for _, id := range []string{"t-1", "t-2", "t-3"} {
		for _, l := range e.show(id).Logs {
			if l.Kind == "release" || l.Kind == "retry" {
				t.Errorf("%s log: %s %q: the loop's claim was moved behind its back", id, l.Kind, l.Message)
			}
		}
	}
	if n := strings.Count(r.stdout, "\n== iteration "); n != 6 { // a header and a footer each
		t.Errorf("%d iterations, want 3:\n%s", n/2, r.stdout)
	}
}

// TestE2ETwoBuildsShareAPlan: two `ralph build` processes on one
// project, each running the real Claude Code, on a chain of three tasks
// and one beside it: a loop keeps finding nothing ready while the other
// works, and the other's last completion can land between its look for a
// ready task and its count of the plan. Both wait rather than stop as
// blocked, both end 0, and every task is worked once.
func TestE2ETwoBuildsShareAPlan(t *testing.T) {
	e := newE2E(t, worker)
	e.ok("task", "add", "Ship it")   // t-1
	e.ok("task", "add", "Build it")  // t-2
	e.ok("task", "add", "Design it") // t-3
	e.ok("task", "add", "Aside")     // t-4
	e.ok("task", "dep", "add", "t-1", "t-2")
	e.ok("task", "dep", "add", "t-2", "t-3")

	results := make([]e2eResult, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = e.run("build", "--use-api-key") })
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 || !strings.Contains(r.stdout, "complete: all 4 tasks done") {
			t.Errorf("build %d: exit %d\nstdout:\n%s\nstderr:\n%s", i, r.code, r.stdout, r.stderr)
		}
	}
	worked := strings.Fields(e.read("order.txt"))
	slices.Sort(worked)
	if diff := cmp.Diff([]string{"t-1", "t-2", "t-3", "t-4"}, worked); diff != "" {
		t.Errorf("sessions per task: each task once (-want +got):\n%s", diff)
	}
	if got := e.ok("task", "plan-status"); got != "open=0 active=0 done=4 failed=0 blocked=0 total=4\n" {
		t.Errorf("plan-status: %s", got)
	}
}

// TestE2EPeekMode runs `ralph build --claim agent`: the real CLI expands
// /ralph-build from the command file init installed, and the agent claims,
// finishes and reports each task itself through $RALPH_BIN. Its claims are
// held by the loop (RALPH_HOLDER), and the SessionEnd hook, which fires
// after every session, leaves them alone.
func TestE2EPeekMode(t *testing.T) {
	e := newE2E(t, func(r claudetest.Request) claudetest.Reply {
		if !strings.Contains(r.UserText(), "You are one iteration of a ralph build loop") {
			return claudetest.Text("this is not the /ralph-build command")
		}
		results := r.ToolResultTexts()
		switch len(results) {
		case 0:
			return claudetest.Bash(`"$RALPH_BIN" task claim`)
		case 1:
			id := strings.Fields(results[0])[0]
			return claudetest.Bash(`"$RALPH_BIN" task done ` + id + ` --summary "did ` + id + `"`)
		}
		id := strings.Fields(results[0])[0]
		return claudetest.Text("Claimed, did and reported " + id + ".\n<task-done>" + id + "</task-done>")
	})
	e.ok("task", "add", "First")
	e.ok("task", "add", "Second", "--blocked-by", "t-1")

	r := e.run("build", "--claim", "agent", "--use-api-key")
	if r.code != 0 {
		t.Fatalf("build --claim agent: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if got := e.ok("task", "plan-status"); got != "open=0 active=0 done=2 failed=0 blocked=0 total=2\n" {
		t.Errorf("plan-status: %s", got)
	}
	for _, id := range []string{"t-1", "t-2"} {
		var kinds []string
		for _, l := range e.show(id).Logs {
			kinds = append(kinds, l.Kind)
			if !strings.HasPrefix(l.Actor, "agent-") {
				t.Errorf("%s: %s entry by %q, want the agent", id, l.Kind, l.Actor)
			}
			if l.Kind == "claim" && !strings.Contains(l.Message, "by the agent, holder ") {
				t.Errorf("%s: claim %q does not name the loop as its holder", id, l.Message)
			}
		}
		if diff := cmp.Diff([]string{"claim", "done"}, kinds); diff != "" {
			t.Errorf("%s history (-want +got):\n%s", id, diff)
		}
	}
}

// TestE2EPeekModeOnPostgres is peek mode with the plan on PostgreSQL and
// the real Claude Code: the agent's own `$RALPH_BIN task claim` and `task
// done` reach the plan on the server although the project does not
// remember it (.ralph/db.json removed; the build names it with --db), by
// the RALPH_DB and RALPH_PLAN ralph gives the agent.
func TestE2EPeekModeOnPostgres(t *testing.T) {
	db := []string{"--db", pgtest.URL(t), "--plan", "e2e"}
	e := newE2E(t, func(r claudetest.Request) claudetest.Reply {
		results := r.ToolResultTexts()
		switch len(results) {
		case 0:
			return claudetest.Bash(`"$RALPH_BIN" task claim`)
		case 1:
			id := strings.Fields(results[0])[0]
			return claudetest.Bash(`"$RALPH_BIN" task done ` + id + ` --summary "did ` + id + `"`)
		}
		id := strings.Fields(results[0])[0]
		return claudetest.Text("Claimed, did and reported " + id + ".\n<task-done>" + id + "</task-done>")
	}, db...)
	e.ok(append(db, "task", "add", "First")...)
	e.ok(append(db, "task", "add", "Second", "--blocked-by", "t-1")...)
	if err := os.Remove(filepath.Join(e.dir, ".ralph", "db.json")); err != nil {
		t.Fatal(err)
	}
	if r := e.run("task", "plan-status"); r.code == 0 {
		t.Fatalf("without db.json or --db, plan-status read a plan: %s", r.stdout)
	}
	r := e.run(append(db, "build", "--claim", "agent", "--use-api-key")...)
	if r.code != 0 {
		t.Fatalf("build --claim agent: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if got := e.ok(append(db, "task", "plan-status")...); got != "open=0 active=0 done=2 failed=0 blocked=0 total=2\n" {
		t.Errorf("plan-status: %s", got)
	}
	var got taskShowJSON
	if err := json.Unmarshal([]byte(e.ok(append(db, "task", "show", "t-2", "--json")...)), &got); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, l := range got.Logs {
		kinds = append(kinds, l.Kind)
	}
	if diff := cmp.Diff([]string{"claim", "done"}, kinds); diff != "" {
		t.Errorf("t-2 history (-want +got):\n%s", diff)
	}
}

// TestE2EPlanThenBuild plans from a spec with the real agent adding tasks
// through $RALPH_BIN, then builds what was planned.
func TestE2EPlanThenBuild(t *testing.T) {
	e := newE2E(t, func(r claudetest.Request) claudetest.Reply {
		if strings.Contains(r.UserText(), "You are the planner of ralph") {
			if r.ToolResults() == 0 {
				return claudetest.Bash(`"$RALPH_BIN" task add "Write the greeting" && "$RALPH_BIN" task add "Print the greeting" --blocked-by t-1`)
			}
			return claudetest.Text("Planned two tasks.\n<promise>COMPLETE</promise>")
		}
		return worker(r)
	})
	if err := os.MkdirAll(filepath.Join(e.dir, "specs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "specs", "hello.md"), []byte("# Hello\n\nGreet the world.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := e.run("plan", "--use-api-key"); r.code != 0 {
		t.Fatalf("plan: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if got := e.ok("task", "plan-status"); got != "open=2 active=0 done=0 failed=0 blocked=0 total=2\n" {
		t.Fatalf("after plan: %s", got)
	}
	if r := e.run("build", "--use-api-key"); r.code != 0 {
		t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if diff := cmp.Diff("t-1\nt-2\n", e.read("order.txt")); diff != "" {
		t.Errorf("order the planned tasks ran in (-want +got):\n%s", diff)
	}
}

// TestE2EPlanChecksThenBuild: the real Claude Code, asked by the plan
// prompt for a check per task, adds a task with one through $RALPH_BIN
// (marked as its own); the build prompt shows the check, ralph runs it
// when the agent reports done — the first attempt's work fails it and is
// sent back with the check's output, the second passes it.
func TestE2EPlanChecksThenBuild(t *testing.T) {
	var mu sync.Mutex
	var prompts []string
	e := newE2E(t, func(r claudetest.Request) claudetest.Reply {
		if strings.Contains(r.UserText(), "You are the planner of ralph") {
			if !strings.Contains(r.UserText(), `--check "CMD"`) {
				return claudetest.Text("the plan prompt asks for no check")
			}
			if r.ToolResults() == 0 {
				return claudetest.Bash(`"$RALPH_BIN" task add "Write greet.sh" --check 'sh greet.sh | grep -qx hello'`)
			}
			return claudetest.Text("Planned.\n<promise>COMPLETE</promise>")
		}
		if r.ToolResults() == 0 {
			mu.Lock()
			prompts = append(prompts, r.UserText())
			attempt := len(prompts)
			mu.Unlock()
			if attempt == 1 {
				return claudetest.Bash(`echo 'echo bye' > greet.sh`)
			}
			return claudetest.Bash(`echo 'echo hello' > greet.sh`)
		}
		return claudetest.Text("Wrote greet.sh.\n<task-done>t-1</task-done>")
	})
	if err := os.MkdirAll(filepath.Join(e.dir, "specs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.dir, "specs", "greet.md"), []byte("# Greet\n\nA script that says hello.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := e.run("plan", "--use-api-key"); r.code != 0 {
		t.Fatalf("plan: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if show := e.ok("task", "show", "t-1"); !strings.Contains(show, "sh greet.sh | grep -qx hello") || !strings.Contains(show, "written by agent") {
		t.Fatalf("t-1 after plan:\n%s", show)
	}
	r := e.run("build", "--use-api-key")
	if r.code != 0 {
		t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if e.status("t-1") != "done" || len(prompts) != 2 {
		t.Fatalf("t-1 %s after %d sessions; want done after 2", e.status("t-1"), len(prompts))
	}
	if !strings.Contains(prompts[0], "## The task's check") || !strings.Contains(prompts[0], "sh greet.sh | grep -qx hello") {
		t.Errorf("the build prompt does not show the check:\n%s", prompts[0])
	}
	if !strings.Contains(prompts[1], "the task's check failed") {
		t.Errorf("the second attempt is not told the check failed:\n%s", prompts[1])
	}
	if got := e.read("greet.sh"); got != "echo hello\n" {
		t.Errorf("greet.sh = %q", got)
	}
}

// TestE2EVerify runs `ralph build --verify`. The real verifier session is
// offered only Bash, Read, Glob and Grep, and its first session tries to
// write anyway: the tree comes back as it was, that verdict does not count,
// and the task is verified again and done.
func TestE2EVerify(t *testing.T) {
	var mu sync.Mutex
	verifiers := 0
	e := newE2E(t, func(r claudetest.Request) claudetest.Reply {
		if !strings.Contains(r.UserText(), "You are the verifier of ralph") {
			return worker(r)
		}
		mu.Lock()
		defer mu.Unlock()
		if r.ToolResults() == 0 {
			verifiers++
			if verifiers == 1 {
				return claudetest.Bash(`echo verifier-was-here > evil.txt; echo changed >> notes.txt; rm keep.txt; echo wrote`)
			}
		}
		return claudetest.Text("Checked the work.\n<verify-pass/>")
	})
	for name, content := range map[string]string{"notes.txt": "my notes\n", "keep.txt": "keep me\n"} {
		if err := os.WriteFile(filepath.Join(e.dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.ok("task", "add", "Write it")

	r := e.run("build", "--verify", "--use-api-key")
	if r.code != 0 || !strings.Contains(r.stdout, "complete: all 1 task done") {
		t.Fatalf("build --verify: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	files := map[string]string{}
	for _, name := range []string{"notes.txt", "keep.txt", "order.txt"} {
		files[name] = e.read(name)
	}
	if diff := cmp.Diff(map[string]string{"notes.txt": "my notes\n", "keep.txt": "keep me\n", "order.txt": "t-1\nt-1\n"}, files); diff != "" {
		t.Errorf("files after the run (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "evil.txt")); !os.IsNotExist(err) {
		t.Errorf("the verifier's evil.txt survived: %v", err)
	}
	var verifierTools [][]string
	for _, req := range e.api.Requests() {
		if strings.Contains(req.UserText(), "You are the verifier of ralph") {
			var tools []string
			for _, name := range req.ToolNames() {
				if name != "DeferredToolPlaceholder" { // the CLI's placeholder, not a tool
					tools = append(tools, name)
				}
			}
			sort.Strings(tools)
			verifierTools = append(verifierTools, tools)
		}
	}
	if len(verifierTools) == 0 {
		t.Fatal("no verifier request reached the API")
	}
	for _, tools := range verifierTools {
		if diff := cmp.Diff([]string{"Bash", "Glob", "Grep", "Read"}, tools); diff != "" {
			t.Errorf("tools offered to the verifier (-want +got):\n%s", diff)
		}
	}
	var logged bool
	for _, l := range e.show("t-1").Logs {
		logged = logged || strings.Contains(l.Message, "the verifier changed files (restored)")
	}
	if !logged {
		t.Errorf("the task's history does not say the verifier changed files: %+v", e.show("t-1").Logs)
	}
}

// TestE2EKillNine kills ralph with SIGKILL while the real agent works:
// the agent dies with it (a parent-death signal), the claim of the dead
// loop is recovered by the very next ralph call (holder-gone), not after
// its 15-minute lease, and the next build finishes the task.
func TestE2EKillNine(t *testing.T) {
	var stall atomic.Bool
	stall.Store(true)
	e := newE2E(t, func(r claudetest.Request) claudetest.Reply {
		if stall.Load() {
			return claudetest.Reply{Blocks: []claudetest.Block{{Text: "Thinking"}}, StallAt: 2}
		}
		return worker(r)
	})
	e.ok("task", "add", "Survive a crash")
	cmd := exec.CommandContext(t.Context(), e.bin, "build", "--use-api-key")
	cmd.Dir, cmd.Env = e.dir, e.env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.api.Stalled:
	case <-time.After(60 * time.Second):
		t.Fatal("the agent never reached the API")
	}
	marker := "ANTHROPIC_BASE_URL=" + e.api.URL
	agents := slices.DeleteFunc(claudetest.ProcessesWithEnv(marker), func(pid int) bool { return pid == cmd.Process.Pid })
	if len(agents) == 0 {
		t.Fatal("no agent process found while the session runs")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	for left := agents; ; {
		left = slices.DeleteFunc(left, func(pid int) bool { return !slices.Contains(claudetest.ProcessesWithEnv(marker), pid) })
		if len(left) == 0 {
			break
		}
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("agent processes %v still run 5 s after ralph was killed", left)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The next call recovers the dead loop's claim at once.
	got := e.show("t-1")
	if got.Status != "pending" || got.Logs[len(got.Logs)-1].Kind != "holder-gone" {
		t.Fatalf("after the crash: %s, last entry %+v; want pending, holder-gone", got.Status, got.Logs[len(got.Logs)-1])
	}
	stall.Store(false)
	if r := e.run("build", "--use-api-key"); r.code != 0 {
		t.Fatalf("build after the crash: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if got := e.ok("task", "plan-status"); got != "open=0 active=0 done=1 failed=0 blocked=0 total=1\n" {
		t.Errorf("plan-status: %s", got)
	}
}

// TestE2EResultThenStall: the real agent prints its result line and then
// hangs (here a SessionEnd hook of the user's stops it). ralph takes the
// result after a short grace instead of waiting for the idle timeout, and
// the task is done.
func TestE2EResultThenStall(t *testing.T) {
	e := newE2E(t, worker)
	settings := filepath.Join(e.dir, ".claude", "settings.json")
	data, err := os.ReadFile(settings)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	hooks := s["hooks"].(map[string]any)
	hooks["SessionEnd"] = append(hooks["SessionEnd"].([]any),
		map[string]any{"hooks": []any{map[string]any{"type": "command", "command": "kill -STOP $PPID"}}})
	if data, err = json.Marshal(s); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(settings, data, 0o644); err != nil {
		t.Fatal(err)
	}
	e.ok("task", "add", "Finish and hang")

	start := time.Now()
	r := e.run("build", "--use-api-key", "--idle-timeout", "2m")
	if r.code != 0 || !strings.Contains(r.stdout, "complete: all 1 task done") {
		t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if took := time.Since(start); took > 60*time.Second {
		t.Errorf("took %v: ralph waited for the hung agent", took)
	}
	if left := claudetest.ProcessesWithEnv("ANTHROPIC_BASE_URL=" + e.api.URL); len(left) > 0 {
		t.Errorf("processes of the run left behind: %v", left)
	}
}

// TestE2EWorkers runs `ralph build --workers 2` with the real Claude Code
// in a git repository `ralph init` made: each agent works in its worker's
// tree (its Bash runs there), the last task starts from a tip that holds
// its two blockers' work, and everything lands on ralph/integration while
// the user's tree stays as it was.
func TestE2EWorkers(t *testing.T) { e2eWorkers(t) }

// TestE2EWorkersThroughPgBouncer is TestE2EWorkers with the plan on
// PostgreSQL reached through PgBouncer in transaction pooling: the worker
// that finds t-3 blocked waits by asking the server (or hearing its
// sibling's commit), never by LISTEN, and the build ends the same.
func TestE2EWorkersThroughPgBouncer(t *testing.T) {
	url, _ := pgtest.Pooled(t)
	e2eWorkers(t, "--db", url, "--plan", "e2e")
}

// e2eWorkers is TestE2EWorkers on a project `ralph init initArgs…` made.
func e2eWorkers(t *testing.T, initArgs ...string) {
	e := newE2E(t, func(r claudetest.Request) claudetest.Reply {
		if r.ToolResults() == 0 {
			// The task id, then the work: a file listing what the tree
			// holds.
			return claudetest.Bash(`echo "$RALPH_TASK_ID"; ls > "$RALPH_TASK_ID.txt"; [ "$PWD" = "$RALPH_WORKTREE" ] && echo in-worktree`)
		}
		id := strings.Fields(r.LastToolResult())[0]
		return claudetest.Text("Listed the tree into " + id + ".txt.\n<task-done>" + id + "</task-done>")
	}, initArgs...)
	commitProject(t, e.dir)
	e.ok("task", "add", "Left")                                               // t-1
	e.ok("task", "add", "Right")                                              // t-2
	e.ok("task", "add", "Both", "--blocked-by", "t-1", "--blocked-by", "t-2") // t-3

	r := e.run("build", "--workers", "2", "--use-api-key")
	if r.code != 0 || !strings.Contains(r.stdout, "integration branch: ralph/integration") {
		t.Fatalf("build --workers 2: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	git := func(args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", e.dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if got := git("show", "ralph/integration:t-3.txt"); !strings.Contains(got, "t-1.txt") || !strings.Contains(got, "t-2.txt") {
		t.Errorf("t-3 began in a tree without its blockers' work: it listed %q", got)
	}
	if got := strings.Fields(git("log", "--format=%(trailers:key=Ralph-Task,valueonly)", "ralph/integration")); len(got) != 3 {
		t.Errorf("landed %v; want t-1, t-2, t-3 once each", got)
	}
	for _, id := range []string{"t-1", "t-2", "t-3"} {
		if _, err := os.Stat(filepath.Join(e.dir, id+".txt")); err == nil {
			t.Errorf("%s.txt was written in the user's tree, not the worker's", id)
		}
		for _, l := range e.show(id).Logs {
			if l.Kind == "release" || l.Kind == "retry" {
				t.Errorf("%s log: %s %q", id, l.Kind, l.Message)
			}
		}
	}
}

// pythonJourney is the project of a new user's first build (issue 22): a
// spec of three small features, one Python module each, and a unittest
// suite whose tests of all three fail until they are written. Each feature
// is the file its worker writes and the test module that checks it.
var pythonJourney = []struct {
	title, module, code, test string
}{
	{"Add greet", "greet", "def greet(name):\n    return f\"Hello, {name}!\"\n", "test_greet"},
	{"Add square", "square", "def square(n):\n    return n * n\n", "test_square"},
	{"Add shout", "shout", "def shout(s):\n    return s.upper() + \"!\"\n", "test_shout"},
}

// pythonFiles are the journey's spec and tests, and a .gitignore that
// keeps out ralph's own files and Python's caches (the checks, the
// verifiers and the final command write __pycache__ in the trees).
var pythonFiles = map[string]string{
	".gitignore": ".ralph/\n__pycache__/\n",
	"specs/toolkit.md": "# Toolkit\n\nThree small functions, one module each at the project's root:\n\n" +
		"- `greet.greet(name)` returns `Hello, NAME!`.\n" +
		"- `square.square(n)` returns n squared.\n" +
		"- `shout.shout(s)` returns s in upper case followed by `!`.\n\n" +
		"The tests are in tests/ (`python -m unittest`).\n",
	"tests/__init__.py": "",
	"tests/test_greet.py": "import unittest\n\nfrom greet import greet\n\n\nclass GreetTest(unittest.TestCase):\n" +
		"    def test_name(self):\n        self.assertEqual(greet(\"Ada\"), \"Hello, Ada!\")\n\n" +
		"    def test_empty(self):\n        self.assertEqual(greet(\"\"), \"Hello, !\")\n",
	"tests/test_square.py": "import unittest\n\nfrom square import square\n\n\nclass SquareTest(unittest.TestCase):\n" +
		"    def test_positive(self):\n        self.assertEqual(square(3), 9)\n\n" +
		"    def test_negative(self):\n        self.assertEqual(square(-4), 16)\n",
	"tests/test_shout.py": "import unittest\n\nfrom shout import shout\n\n\nclass ShoutTest(unittest.TestCase):\n" +
		"    def test_word(self):\n        self.assertEqual(shout(\"hey\"), \"HEY!\")\n\n" +
		"    def test_empty(self):\n        self.assertEqual(shout(\"\"), \"!\")\n",
}

// needPython returns the environment entries that put `python` on PATH:
// none where it is there already, else a directory holding `python` →
// python3 (a fresh Debian has only python3). Without either it skips the
// test (fails it under CI=true).
func needPython(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("python"); err == nil {
		return nil
	}
	needTools(t, "python3")
	python3, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal(err)
	}
	if python3, err = filepath.Abs(python3); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(python3, filepath.Join(dir, "python")); err != nil {
		t.Fatal(err)
	}
	return []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// newPythonJourney makes the journey's project with `ralph init`, commits
// it on main in a fresh git repository, and serves script for its agent
// sessions.
func newPythonJourney(t *testing.T, script func(claudetest.Request) claudetest.Reply) *e2e {
	t.Helper()
	needTools(t, "git")
	python := needPython(t)
	e := newE2E(t, script)
	e.env = append(e.env, python...)
	for name, content := range pythonFiles {
		e.write(name, content)
	}
	commitProject(t, e.dir)
	return e
}

// journeyTask is the task id in a build or verify prompt ("# Your task:
// t-2: …", "# Task t-2: …").
var journeyTask = regexp.MustCompile(`(?m)^# (?:Your task: |Task )(t-\d+): (.*)$`)

// journeyScript is the agents of the journey, keyed on what each request
// holds, never on the order they come in (two workers and their
// verifiers call at once): the planner adds the three tasks, each with
// its test module as its check; a worker writes the module of its task's
// title; a verifier runs the task's tests and passes it only if they
// passed.
func journeyScript(r claudetest.Request) claudetest.Reply {
	text := r.UserText()
	switch {
	case strings.Contains(text, "You are the planner of ralph"):
		if r.ToolResults() > 0 {
			return claudetest.Text("Planned the three features.\n<promise>COMPLETE</promise>")
		}
		var adds []string
		for _, f := range pythonJourney {
			adds = append(adds, fmt.Sprintf(`"$RALPH_BIN" task add %q -d "Write %s.py as specs/toolkit.md says." --check 'python -m unittest tests.%s'`,
				f.title, f.module, f.test))
		}
		return claudetest.Bash(strings.Join(adds, " && "))
	}
	m := journeyTask.FindStringSubmatch(text)
	if m == nil {
		return claudetest.Text("a prompt without a task")
	}
	id, title := m[1], m[2]
	i := slices.IndexFunc(pythonJourney, func(f struct{ title, module, code, test string }) bool { return f.title == title })
	if i < 0 {
		return claudetest.Text("no such feature: " + title)
	}
	f := pythonJourney[i]
	if strings.Contains(text, "You are the verifier of ralph") {
		if r.ToolResults() == 0 {
			return claudetest.Bash("python -m unittest tests." + f.test + " 2>&1 && echo TESTS-PASSED")
		}
		if strings.Contains(r.LastToolResult(), "TESTS-PASSED") {
			return claudetest.Text("The tests of " + f.module + " pass.\n<verify-pass/>")
		}
		return claudetest.Text("<verify-fail>the tests of " + f.module + " fail</verify-fail>")
	}
	if r.ToolResults() == 0 {
		return claudetest.Bash(fmt.Sprintf("printf '%%s' %s > %s.py && python -m unittest tests.%s", shellQuote(f.code), f.module, f.test))
	}
	return claudetest.Text("Wrote " + f.module + ".py; its tests pass.\n<task-done>" + id + "</task-done>")
}

// shellQuote quotes s for sh in single quotes.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// TestE2EPythonJourney is issue 22's journey of a new user with the real
// Claude Code: a Python project with a spec of three features and a
// failing unittest suite; `ralph plan` writes three tasks, each with its
// own tests as its check; `ralph build --workers 2 --verify --final-cmd
// 'python -m unittest'` lists those checks as the agent's, one a line,
// and finishes all three in one build — each check and
// verifier passed, each task landed once on ralph/integration — and the
// whole suite, run once the plan is complete, passes there.
func TestE2EPythonJourney(t *testing.T) {
	e := newPythonJourney(t, journeyScript)
	checks, ids := planJourney(t, e)

	r := e.run("build", "--workers", "2", "--verify", "--final-cmd", "python -m unittest", "--use-api-key")
	if r.code != 0 {
		t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if got := e.ok("task", "plan-status"); got != "open=0 active=0 done=3 failed=0 blocked=0 total=3\n" {
		t.Errorf("plan-status: %s\nbuild stdout:\n%s", got, r.stdout)
	}
	// The build announces the checks the planner wrote, one a line.
	for id, title := range ids {
		line := regexp.MustCompile(`(?m)^\[w\d\]     ` + id + `: ` + regexp.QuoteMeta(checks[title]) + `  \(written by agent agent-[0-9a-f]+\)$`)
		if !line.MatchString(r.stdout) {
			t.Errorf("the build does not list %s's check on a line of its own:\n%s", id, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "the final check passed: python -m unittest") {
		t.Errorf("the build does not say the final check passed:\n%s", r.stdout)
	}
	landed := strings.Fields(e.git("log", "--format=%(trailers:key=Ralph-Task,valueonly)", "ralph/integration"))
	sort.Strings(landed)
	if diff := cmp.Diff([]string{"t-1", "t-2", "t-3"}, landed); diff != "" {
		t.Errorf("tasks landed on ralph/integration (-want +got):\n%s", diff)
	}
	for _, f := range pythonJourney {
		if got := e.git("show", "ralph/integration:"+f.module+".py") + "\n"; got != f.code {
			t.Errorf("%s.py on ralph/integration = %q, want %q", f.module, got, f.code)
		}
	}
	checkJourneyRequests(t, e, checks, ids)
}

// planJourney runs `ralph plan` on the journey's project and checks what
// it planned: a task per feature, its test module as its check, marked as
// the agent's. It returns the checks by title and the titles by id.
func planJourney(t *testing.T, e *e2e) (checks, ids map[string]string) {
	t.Helper()
	if r := e.run("plan", "--use-api-key"); r.code != 0 {
		t.Fatalf("plan: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var planned []taskJSON
	if err := json.Unmarshal([]byte(e.ok("task", "list", "--json")), &planned); err != nil {
		t.Fatal(err)
	}
	checks, ids = map[string]string{}, map[string]string{}
	for _, task := range planned {
		if task.CheckBy == "" {
			t.Errorf("%s: check %q not marked as the agent's", task.ID, task.Check)
		}
		checks[task.Title], ids[task.ID] = task.Check, task.Title
	}
	want := map[string]string{}
	for _, f := range pythonJourney {
		want[f.title] = "python -m unittest tests." + f.test
	}
	if diff := cmp.Diff(want, checks); diff != "" {
		t.Fatalf("planned tasks and their checks (-want +got):\n%s", diff)
	}
	return checks, ids
}

// checkJourneyRequests checks what the fake API saw of the journey's
// build, and the tasks' histories: every task's build prompt showed its
// check, a verifier judged it, and no attempt was sent back.
func checkJourneyRequests(t *testing.T, e *e2e, checks, ids map[string]string) {
	t.Helper()
	shown, verified := map[string]bool{}, map[string]bool{}
	for _, req := range e.api.Requests() {
		text := req.UserText()
		m := journeyTask.FindStringSubmatch(text)
		if m == nil {
			continue
		}
		switch {
		case strings.Contains(text, "You are the verifier of ralph"):
			verified[m[1]] = true
		case strings.Contains(text, "## The task's check") && strings.Contains(text, checks[m[2]]):
			shown[m[1]] = true
		}
	}
	for id, title := range ids {
		if !shown[id] {
			t.Errorf("%s (%s): no build prompt showed its check %q", id, title, checks[title])
		}
		if !verified[id] {
			t.Errorf("%s (%s): no verifier ran", id, title)
		}
		for _, l := range e.show(id).Logs {
			if l.Kind == "release" || l.Kind == "retry" || l.Kind == "fail" {
				t.Errorf("%s log: %s %q", id, l.Kind, l.Message)
			}
		}
	}
}

// TestE2EPythonJourneyBaseline is the journey's project built with the
// whole failing suite as the test gate, as the user of issue 22 first
// did: the build runs the suite once before any agent, shows its output
// once, stops with exit 3 (no request reached the API) and says what to
// do instead.
func TestE2EPythonJourneyBaseline(t *testing.T) {
	e := newPythonJourney(t, journeyScript)
	for _, f := range pythonJourney {
		e.ok("task", "add", f.title, "--check", "python -m unittest tests."+f.test)
	}
	r := e.run("build", "--workers", "2", "--verify", "--test-cmd", "python -m unittest", "--use-api-key")
	if r.code != 3 {
		t.Fatalf("build: exit %d, want 3\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if n := len(e.api.Requests()); n != 0 {
		t.Errorf("%d requests reached the API; want none before the baseline", n)
	}
	for _, s := range []string{"the test gate already fails on the starting tree", "before any agent ran", "ralph task add --check", "--final-cmd"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
	if n := strings.Count(r.stdout, "the test gate's output on the starting tree"); n != 1 || !strings.Contains(r.stdout, "No module named 'greet'") {
		t.Errorf("the suite's output is shown %d times (want once, with the failure):\n%s", n, r.stdout)
	}
	if got := e.ok("task", "plan-status"); got != "open=3 active=0 done=0 failed=0 blocked=0 total=3\n" {
		t.Errorf("plan-status: %s", got)
	}
}

// TestE2ENotLoggedIn: the real Claude Code with no API key and no login
// ("Not logged in · Please run /login") ends the build at once — one
// session, no retry — with exit 4 and the words that fix it; the task
// stays pending.
func TestE2ENotLoggedIn(t *testing.T) {
	home := t.TempDir()
	e := newProject(t, []string{"RALPH_CLAUDE=" + claudetest.Binary(t), claudetest.IsSandbox,
		"HOME=" + home, "TMPDIR=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude"),
		"ANTHROPIC_API_KEY=", "ANTHROPIC_AUTH_TOKEN=", "CLAUDE_CODE_OAUTH_TOKEN=", "ANTHROPIC_BASE_URL=",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1"})
	e.ok("task", "add", "Write greet.sh")
	r := e.run("build")
	if r.code != 4 {
		t.Fatalf("ralph build: exit %d; want 4\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"not logged in", "Not logged in · Please run /login", "claude, then /login", "--use-api-key"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("the build's end does not say %q:\n%s", want, r.stderr)
		}
	}
	if n := strings.Count(r.stdout, "== iteration"); n != 2 { // the start and the end of one
		t.Errorf("%d iteration lines; want one session, not retried:\n%s", n, r.stdout)
	}
	if show := e.ok("task", "show", "t-1", "--json"); !strings.Contains(show, `"status": "pending"`) || !strings.Contains(show, `"retry_count": 0`) {
		t.Errorf("the task after the build:\n%s", show)
	}
}
