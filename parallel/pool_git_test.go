package parallel

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// gitRepo makes a repository with one commit in a temporary directory.
func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed")
		}
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"config", "user.email", "dev@example.com"},
		{"config", "user.name", "Dev"},
	} {
		gitOut(t, dir, args...)
	}
	os.WriteFile(filepath.Join(dir, "shared.txt"), []byte("v0\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(".env\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".env"), []byte("SECRET=1\n"), 0o644)
	gitOut(t, dir, "add", "-A")
	gitOut(t, dir, "commit", "-q", "-m", "initial")
	return dir
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestPoolWithGit is the pool on a real repository: worktrees under
// .ralph/worktrees, .env copied in and never committed, blockers' work in
// the dependents' trees, a forced conflict retried, each task landed once,
// the user's branch and tree untouched.
func TestPoolWithGit(t *testing.T) {
	root := gitRepo(t)
	os.MkdirAll(filepath.Join(root, ".ralph"), 0o755)
	os.WriteFile(filepath.Join(root, ".ralph", "worktree-include"), []byte("# secrets\n.env\n"), 0o644)
	mainHead := gitOut(t, root, "rev-parse", "HEAD")
	status := gitOut(t, root, "status", "--porcelain")
	store := newStore(t, task("a"), task("b"), task("c", "a"), task("d", "b", "c"))
	blockers := map[string][]string{"c": {"a"}, "d": {"b", "c"}}
	var mu sync.Mutex
	var problems []string
	meet := meeting(2)
	run := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		if id == "a" || id == "b" {
			meet(id) // a and b begin from the same tip and both edit shared.txt
		}
		fail := func(s string) {
			mu.Lock()
			problems = append(problems, id+": "+s)
			mu.Unlock()
		}
		if envOf(req, "RALPH_WORKTREE") != req.Dir || !strings.HasPrefix(req.Dir, filepath.Join(root, ".ralph", "worktrees")+"/") {
			fail("works in " + req.Dir)
		}
		if _, err := os.Stat(filepath.Join(req.Dir, ".env")); err != nil {
			fail(".env not copied")
		}
		for _, b := range blockers[id] {
			if _, err := os.Stat(filepath.Join(req.Dir, b+".txt")); err != nil {
				fail("began without " + b + "'s work")
			}
		}
		os.WriteFile(filepath.Join(req.Dir, id+".txt"), []byte(id+"\n"), 0o644)
		if id == "a" || id == "b" {
			os.WriteFile(filepath.Join(req.Dir, "shared.txt"), []byte("by "+id+"\n"), 0o644)
		}
		return looptest.Result("<task-done>" + id + "</task-done>"), nil
	})
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 2}, store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if len(problems) > 0 {
		t.Errorf("problems: %v", problems)
	}
	log := gitOut(t, root, "log", "--format=%(trailers:key=Ralph-Task,valueonly)", DefaultInto)
	var landed []string
	for _, l := range strings.Fields(log) {
		landed = append(landed, l)
	}
	slices.Reverse(landed)
	if got := slices.Sorted(slices.Values(landed)); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("landed %v; want a, b, c, d once each", landed)
	}
	if slices.Index(landed, "d") < slices.Index(landed, "c") || slices.Index(landed, "c") < slices.Index(landed, "a") {
		t.Errorf("landed out of graph order: %v", landed)
	}
	files := gitOut(t, root, "ls-tree", "-r", "--name-only", DefaultInto)
	if strings.Contains(files, ".env") || strings.Contains(files, ".ralph") {
		t.Errorf("integration branch holds %q", files)
	}
	attempts := gitOut(t, root, "for-each-ref", "--format=%(refname:short)", "refs/heads/ralph/attempt/")
	if attempts == "" {
		t.Error("the conflicting attempt was not kept on an attempt branch")
	}
	if h := gitOut(t, root, "rev-parse", "HEAD"); h != mainHead {
		t.Error("the user's branch moved")
	}
	if st := gitOut(t, root, "status", "--porcelain"); st != status {
		t.Errorf("the user's tree changed: %q", st)
	}
}

// TestPoolSetup: --setup runs in each worker's tree before its first
// agent, and what it makes (ignored files, such as dependencies) is there
// for the agent and never committed; a setup that fails is gate trouble
// that stops the run with exit 3 once its retries are spent, before any
// agent runs.
func TestPoolSetup(t *testing.T) {
	root := gitRepo(t)
	os.WriteFile(filepath.Join(root, ".gitignore"), []byte(".env\nnode_modules/\n"), 0o644)
	gitOut(t, root, "add", "-A")
	gitOut(t, root, "commit", "-q", "-m", "ignore deps")
	store := newStore(t, task("a"), task("b"))
	var mu sync.Mutex
	var problems []string
	run := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		if b, err := os.ReadFile(filepath.Join(req.Dir, "node_modules", "dep.js")); err != nil || string(b) != envOf(req, "RALPH_WORKER")+"\n" {
			mu.Lock()
			problems = append(problems, id+": no dependencies from --setup in its tree")
			mu.Unlock()
		}
		os.WriteFile(filepath.Join(req.Dir, id+".txt"), []byte(id), 0o644)
		return looptest.Result("<task-done>" + id + "</task-done>"), nil
	})
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	pc := Config{Loop: cfg, Workers: 2, Setup: `mkdir -p node_modules && echo "$RALPH_WORKER" > node_modules/dep.js`}
	rep, err := Run(t.Context(), pc, store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if len(problems) > 0 {
		t.Error(problems)
	}
	if files := gitOut(t, root, "ls-tree", "-r", "--name-only", DefaultInto); strings.Contains(files, "node_modules") {
		t.Errorf("the integration branch holds %q", files)
	}

	store = newStore(t, task("c"))
	ran := false
	pc.Setup = "echo cannot install >&2; exit 1"
	pc.Loop.MaxRetries = 1
	rep, err = Run(t.Context(), pc, store, loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		ran = true
		return looptest.Result(""), nil
	}))
	if err != nil || rep.Outcome != loop.OutcomeTestGateFailed || rep.ExitCode() != 3 || !strings.Contains(rep.Message, "cannot install") {
		t.Fatalf("Run with a failing setup = %v (exit %d), %v (%s); want test_gate_failed, exit 3, the setup's output", rep.Outcome, rep.ExitCode(), err, rep.Message)
	}
	if ran {
		t.Error("an agent ran although setup failed")
	}
	if c, _ := store.Counts(t.Context(), loop.Scope{}); c.InProgress != 0 {
		t.Errorf("%d tasks left in progress", c.InProgress)
	}
}

// TestPoolVerify: with --verify each worker's verifier judges the work in
// the worker's tree, with its snapshot store outside the tree; a verifier
// that writes is undone and its verdict does not count.
func TestPoolVerify(t *testing.T) {
	root := gitRepo(t)
	store := newStore(t, task("a"), task("b"))
	var mu sync.Mutex
	wrote := map[string]bool{}
	run := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		if len(req.Tools) > 0 { // the verifier
			if _, err := os.Stat(filepath.Join(req.Dir, id+".txt")); err != nil {
				return looptest.Result("<verify-fail>no " + id + ".txt</verify-fail>"), nil
			}
			mu.Lock()
			first := !wrote[id]
			wrote[id] = true
			mu.Unlock()
			if first { // the first verifier of each task writes: undone, not counted
				os.WriteFile(filepath.Join(req.Dir, "verifier.txt"), []byte("oops"), 0o644)
			}
			return looptest.Result("<verify-pass/>"), nil
		}
		os.WriteFile(filepath.Join(req.Dir, id+".txt"), []byte(id), 0o644)
		return looptest.Result("<task-done>" + id + "</task-done>"), nil
	})
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	cfg.Verify = true
	rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 2}, store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	files := gitOut(t, root, "ls-tree", "-r", "--name-only", DefaultInto)
	if !strings.Contains(files, "a.txt") || !strings.Contains(files, "b.txt") || strings.Contains(files, "verifier.txt") {
		t.Errorf("integration branch files %q; want a.txt and b.txt, not the verifier's", files)
	}
	stores, _ := filepath.Glob(filepath.Join(root, ".ralph", "worktrees", "w*.verify.git"))
	if len(stores) == 0 {
		t.Error("no verifier snapshot store beside the worker trees")
	}
	for _, id := range []string{"a", "b"} {
		if tk, _ := store.Get(t.Context(), id); tk.RetryCount != 1 {
			t.Errorf("%s retry count %d; want 1 (its first verdict did not count)", id, tk.RetryCount)
		}
	}
}

// TestPoolTwoBuildsAtOnce: two parallel builds of one project at the same
// time (two ralph processes) never share a tree: the second takes the
// trees the first does not hold. Every task lands once.
func TestPoolTwoBuildsAtOnce(t *testing.T) {
	root := gitRepo(t)
	var tasks []loop.Task
	for i := range 12 {
		tasks = append(tasks, task(fmt.Sprintf("t%02d", i)))
	}
	store := newStore(t, tasks...)
	var mu sync.Mutex
	trees := map[string]map[string]bool{} // tree → agent ids that worked in it
	run := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		mu.Lock()
		if trees[req.Dir] == nil {
			trees[req.Dir] = map[string]bool{}
		}
		trees[req.Dir][envOf(req, "RALPH_AGENT_ID")] = true
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		os.WriteFile(filepath.Join(req.Dir, id+".txt"), []byte(id), 0o644)
		return looptest.Result("<task-done>" + id + "</task-done>"), nil
	})
	var wg sync.WaitGroup
	reps := make([]Report, 2)
	for k := range reps {
		cfg := loop.DefaultConfig(root)
		cfg.SessionLog, cfg.RawLogs = false, false
		cfg.MaxIterations = 100
		wg.Go(func() {
			var err error
			if reps[k], err = Run(t.Context(), Config{Loop: cfg, Workers: 2}, store, run); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, r := range reps {
		if r.Outcome != loop.OutcomeComplete {
			t.Errorf("a build ended %v (%s)", r.Outcome, r.Message)
		}
	}
	for dir, agents := range trees {
		if len(agents) > 1 {
			t.Errorf("tree %s was worked in by %d builds' workers: %v", dir, len(agents), agents)
		}
	}
	landed := strings.Fields(gitOut(t, root, "log", "--format=%(trailers:key=Ralph-Task,valueonly)", DefaultInto))
	if len(landed) != 12 || len(slices.Compact(slices.Sorted(slices.Values(landed)))) != 12 {
		t.Errorf("landed %v; want each of 12 tasks once", landed)
	}
}

// concurrently is a stand-in agent whose first sessions of tasks a and b
// overlap (both begin from the same tip), each running its work in its
// tree.
func concurrently(work map[string]func(dir string)) loop.Runner {
	meet := meeting(2)
	return loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		meet(id)
		work[id](req.Dir)
		return looptest.Result("<task-done>" + id + "</task-done>"), nil
	})
}

// TestPoolDeleteAgainstEdit: one task deletes a file another edits at the
// same time. The second to land conflicts, goes back to pending (a lost
// race: no retry counted), starts again from the new tip, and lands;
// nothing is lost or applied twice.
func TestPoolDeleteAgainstEdit(t *testing.T) {
	root := gitRepo(t)
	store := newStore(t, task("a"), task("b"))
	run := concurrently(map[string]func(string){
		"a": func(dir string) { os.Remove(filepath.Join(dir, "shared.txt")) },
		"b": func(dir string) { os.WriteFile(filepath.Join(dir, "shared.txt"), []byte("v1 by b\n"), 0o644) },
	})
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 2}, store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	landed := strings.Fields(gitOut(t, root, "log", "--format=%(trailers:key=Ralph-Task,valueonly)", DefaultInto))
	if len(landed) != 2 {
		t.Fatalf("landed %v; want a and b once each", landed)
	}
	loser := landed[0] // newest first: the one that landed second
	tk, _ := store.Get(t.Context(), loser)
	logs, _ := store.Logs(t.Context(), loser)
	i := slices.IndexFunc(logs, func(e loop.LogEntry) bool { return e.Kind == loop.LogRelease })
	if tk.RetryCount != 0 || i < 0 || !strings.Contains(logs[i].Message, "shared.txt") {
		t.Errorf("%s: retry count %d, logs %+v; want a release naming shared.txt and no retry", loser, tk.RetryCount, logs)
	}
	files := gitOut(t, root, "ls-tree", "-r", "--name-only", DefaultInto)
	if loser == "a" && strings.Contains(files, "shared.txt") || loser == "b" && !strings.Contains(files, "shared.txt") {
		t.Errorf("files %q after %s landed last", files, loser)
	}
}

// TestPoolSameChangeTwice: two tasks make the same change at the same
// time. The second to land finds its work on the tip already: it is done
// with no commit of its own and the build completes (it stopped with a
// git failure, exit 5, when ralph recorded a landing of the tip on itself).
func TestPoolSameChangeTwice(t *testing.T) {
	root := gitRepo(t)
	store := newStore(t, task("a"), task("b"))
	same := func(dir string) { os.WriteFile(filepath.Join(dir, "same.txt"), []byte("same\n"), 0o644) }
	run := concurrently(map[string]func(string){"a": same, "b": same})
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	obs := &notes{}
	cfg.Observer = obs
	rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 2}, store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete || rep.ExitCode() != 0 {
		t.Fatalf("Run = %v (exit %d), %v (%s)", rep.Outcome, rep.ExitCode(), err, rep.Message)
	}
	landed := strings.Fields(gitOut(t, root, "log", "--format=%(trailers:key=Ralph-Task,valueonly)", DefaultInto))
	if len(landed) != 1 {
		t.Fatalf("landed %v; want one of a and b", landed)
	}
	for _, id := range []string{"a", "b"} {
		if tk, _ := store.Get(t.Context(), id); tk.Status != loop.StatusDone || tk.RetryCount != 0 {
			t.Errorf("%s: %s, %d retries; want done at once", id, tk.Status, tk.RetryCount)
		}
	}
	other := map[string]string{"a": "b", "b": "a"}[landed[0]]
	if !slices.ContainsFunc(obs.all(), func(n string) bool {
		return strings.Contains(n, "task "+other+": its changes are on the integration branch already")
	}) {
		t.Errorf("no notice that %s's work was on the tip already: %q", other, obs.all())
	}
	if got := gitOut(t, root, "show", DefaultInto+":same.txt"); got != "same" {
		t.Errorf("same.txt on the branch: %q", got)
	}
}

// TestPoolIncludeDirReplacedByLink: an agent replaces the ignored
// directory of a worktree-include file in its tree with a link to a
// directory outside. The next attempt in that tree finds the file copied
// anew, in a real directory, and the build completes: nothing was written
// through the link, what it points to is untouched (the link stayed, git
// ignores it, and every later build stopped with exit 5).
func TestPoolIncludeDirReplacedByLink(t *testing.T) {
	root := gitRepo(t)
	os.WriteFile(filepath.Join(root, ".gitignore"), []byte(".env\nsecrets\n"), 0o644)
	gitOut(t, root, "add", "-A")
	gitOut(t, root, "commit", "-q", "-m", "ignore secrets")
	os.MkdirAll(filepath.Join(root, "secrets"), 0o755)
	os.WriteFile(filepath.Join(root, "secrets", "key.env"), []byte("KEY=1\n"), 0o644)
	os.MkdirAll(filepath.Join(root, ".ralph"), 0o755)
	os.WriteFile(filepath.Join(root, ".ralph", "worktree-include"), []byte("secrets/key.env\n"), 0o644)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "bashrc"), []byte("export PATH\n"), 0o644)
	store := newStore(t, task("a"), task("b", "a"))
	var seen []string
	run := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		secrets := filepath.Join(req.Dir, "secrets")
		if fi, err := os.Lstat(secrets); err == nil && fi.IsDir() {
			if b, err := os.ReadFile(filepath.Join(secrets, "key.env")); err == nil {
				seen = append(seen, id+": "+string(b))
			}
		}
		if id == "a" {
			os.RemoveAll(secrets)
			if err := os.Symlink(outside, secrets); err != nil {
				return loop.RunResult{}, err
			}
		}
		os.WriteFile(filepath.Join(req.Dir, id+".txt"), []byte(id+"\n"), 0o644)
		return looptest.Result("<task-done>" + id + "</task-done>"), nil
	})
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 1}, store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if want := []string{"a: KEY=1\n", "b: KEY=1\n"}; !slices.Equal(seen, want) {
		t.Errorf("the agents saw secrets/key.env as %q; want %q", seen, want)
	}
	entries, _ := os.ReadDir(outside)
	if b, _ := os.ReadFile(filepath.Join(outside, "bashrc")); len(entries) != 1 || string(b) != "export PATH\n" {
		t.Errorf("outside the tree: %v, bashrc %q", entries, b)
	}
	if files := gitOut(t, root, "ls-tree", "-r", "--name-only", DefaultInto); strings.Contains(files, "secrets") {
		t.Errorf("the integration branch holds %q", files)
	}
}

// TestPoolGateFailsOnlyAfterReplay: two tasks that each pass the test gate
// alone but not together (x.txt and y.txt must not both exist). The second
// to land fails the gate after its replay: task trouble, with the test's
// output as the reason and the attempt kept. Its next attempt begins from
// the tip with the other's work, where the gate fails in the tree: gate
// trouble, which stops the run (exit 3) once the streak passes
// MaxRetries. The integration branch never holds both.
func TestPoolGateFailsOnlyAfterReplay(t *testing.T) {
	root := gitRepo(t)
	store := newStore(t, task("x"), task("y"))
	run := concurrently(map[string]func(string){
		"x": func(dir string) { os.WriteFile(filepath.Join(dir, "x.txt"), []byte("x\n"), 0o644) },
		"y": func(dir string) { os.WriteFile(filepath.Join(dir, "y.txt"), []byte("y\n"), 0o644) },
	})
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	cfg.MaxRetries = 1
	cfg.TestCmd = `if [ -f x.txt ] && [ -f y.txt ]; then echo "FAIL: x and y clash"; exit 1; fi`
	rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 2}, store, run)
	if err != nil || rep.Outcome != loop.OutcomeTestGateFailed {
		t.Fatalf("Run = %v, %v (%s); want the test gate's stop", rep.Outcome, err, rep.Message)
	}
	landed := strings.Fields(gitOut(t, root, "log", "--format=%(trailers:key=Ralph-Task,valueonly)", DefaultInto))
	if len(landed) != 1 {
		t.Fatalf("landed %v; want only the first of x and y", landed)
	}
	loser := map[string]string{"x": "y", "y": "x"}[landed[0]]
	logs, _ := store.Logs(t.Context(), loser)
	i := slices.IndexFunc(logs, func(e loop.LogEntry) bool { return e.Kind == loop.LogRetry })
	if i < 0 || !strings.Contains(logs[i].Message, "after replaying") || !strings.Contains(logs[i].Message, "FAIL: x and y clash") {
		t.Errorf("%s's retry reason does not give the test output: %+v", loser, logs)
	}
	if tk, _ := store.Get(t.Context(), loser); tk.Status != loop.StatusPending || tk.RetryCount != 1 {
		t.Errorf("%s is %s after %d retries; want pending again after 1", loser, tk.Status, tk.RetryCount)
	}
	if refs := gitOut(t, root, "for-each-ref", "--format=%(refname:short)", "refs/heads/ralph/attempt/"+loser+"/"); refs == "" {
		t.Errorf("no attempt branch of %s: the attempt that failed after its replay is lost", loser)
	}
}

// TestPoolAgentOnABranch: an agent that checks out a branch in its tree
// (and commits there) gets its work landed, and ralph never writes that
// branch; a repository the agent makes inside its tree is refused with a
// reason, moved aside whole, and the task lands on its next attempt.
func TestPoolAgentOnABranch(t *testing.T) {
	root := gitRepo(t)
	gitOut(t, root, "branch", "develop")
	store := newStore(t, task("a"), task("b"))
	var mu sync.Mutex
	tries := map[string]int{}
	run := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		mu.Lock()
		tries[id]++
		n := tries[id]
		mu.Unlock()
		switch {
		case id == "a":
			gitOut(t, req.Dir, "checkout", "-q", "develop")
			os.WriteFile(filepath.Join(req.Dir, "a.txt"), []byte("a\n"), 0o644)
			gitOut(t, req.Dir, "add", "-A")
			gitOut(t, req.Dir, "-c", "user.name=Agent", "-c", "user.email=agent@example.com", "commit", "-q", "-m", "agent's own commit")
		case id == "b" && n == 1:
			os.MkdirAll(filepath.Join(req.Dir, "web"), 0o755)
			gitOut(t, filepath.Join(req.Dir, "web"), "init", "-q")
			os.WriteFile(filepath.Join(req.Dir, "web", "index.js"), []byte("x\n"), 0o644)
		default:
			os.WriteFile(filepath.Join(req.Dir, "b.txt"), []byte("b\n"), 0o644)
		}
		return looptest.Result("<task-done>" + id + "</task-done>"), nil
	})
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 1}, store, run)
	if err != nil || rep.Outcome != loop.OutcomeComplete {
		t.Fatalf("Run = %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if msg := gitOut(t, root, "log", "-1", "--format=%B", "develop"); strings.Contains(msg, "Ralph-Task") {
		t.Errorf("ralph moved develop to its own commit: %q", msg)
	}
	files := gitOut(t, root, "ls-tree", "-r", "--name-only", DefaultInto)
	if !strings.Contains(files, "a.txt") || !strings.Contains(files, "b.txt") || strings.Contains(files, "web") {
		t.Errorf("integration branch files %q; want a.txt and b.txt, no web", files)
	}
	logs, _ := store.Logs(t.Context(), "b")
	if i := slices.IndexFunc(logs, func(e loop.LogEntry) bool { return e.Kind == loop.LogRetry }); i < 0 || !strings.Contains(logs[i].Message, "web") {
		t.Errorf("b's retry reason does not name the repository: %+v", logs)
	}
	aside, _ := filepath.Glob(filepath.Join(root, ".ralph", "worktrees", "w1.nested", "*", "web", "index.js"))
	if len(aside) != 1 {
		t.Errorf("the agent's repository was not kept aside: %v", aside)
	}
}

// TestPoolBaselineOnTheTip: the test gate's baseline runs once for the
// build, in a worker's tree put at the integration tip first: what an
// earlier build's failed attempt left in that tree (bad.txt, kept on an
// attempt branch) is not what the baseline tests.
func TestPoolBaselineOnTheTip(t *testing.T) {
	root := gitRepo(t)
	store := newStore(t, task("a"))
	run := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		id := envOf(req, "RALPH_TASK_ID")
		if id == "a" {
			os.WriteFile(filepath.Join(req.Dir, "bad.txt"), []byte("bad\n"), 0o644)
			return looptest.Result("<task-failed>a</task-failed>"), nil
		}
		os.WriteFile(filepath.Join(req.Dir, id+".txt"), []byte(id+"\n"), 0o644)
		return looptest.Result("<task-done>" + id + "</task-done>"), nil
	})
	cfg := loop.DefaultConfig(root)
	cfg.SessionLog, cfg.RawLogs = false, false
	if rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 1}, store, run); err != nil || rep.Outcome != loop.OutcomeCompleteWithFailures {
		t.Fatalf("first build: %v, %v (%s)", rep.Outcome, err, rep.Message)
	}
	if _, err := store.AddTask(t.Context(), loop.NewTask{ID: "b", Title: "b", Priority: 2}); err != nil {
		t.Fatal(err)
	}
	marks := filepath.Join(t.TempDir(), "ran")
	cfg.TestCmd = "echo x >> " + marks + "; test ! -e bad.txt"
	rep, err := Run(t.Context(), Config{Loop: cfg, Workers: 2}, store, run)
	if err != nil || rep.Outcome != loop.OutcomeCompleteWithFailures {
		t.Fatalf("second build: %v, %v (%s); want b done past a baseline on the tip", rep.Outcome, err, rep.Message)
	}
	if b, _ := os.ReadFile(marks); string(b) != "x\nx\n" {
		t.Errorf("the test command ran %q; want twice: the build's baseline, b's gate", b)
	}
}
