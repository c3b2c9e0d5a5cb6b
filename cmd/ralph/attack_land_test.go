package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
)

// Issue 20's attacks on ralph's bookkeeping of what landed
// (ARCHITECTURE.md §7.3, and "ralph
// follows no link the agent planted"), run through the ralph binary with
// the stand-in agent executing each payload in its worktree, without
// --sandbox: the agent runs as the user, so it can write refs and its
// tree; what must hold is that ralph believes no landing it did not make,
// builds on no tip it did not put there, lands no revert, and writes
// neither the user's tree nor the user's branch.

// landPlans numbers the plans of landProjects on one server.
var landPlans atomic.Int64

// landProject is a git repository with ralph init and three tasks, t-1,
// t-2 (after t-1) and t-3 (after t-2); db, when not "", is a PostgreSQL
// URL the plan lives on.
type landProject struct {
	*e2e
}

func newLandProject(t *testing.T, db string) *landProject {
	t.Helper()
	if testing.Short() {
		t.Skip("builds through the ralph binary")
	}
	needTools(t, "git")
	p := &landProject{newBareProject(t, gitIdentity)}
	for name, content := range map[string]string{"README": "the project\n", ".gitignore": ".ralph/\n"} {
		p.write(name, content)
	}
	p.git("init", "-q", "-b", "main")
	p.git("add", "-A")
	p.git("commit", "-q", "-m", "the project")
	init := []string{"init"}
	if db != "" {
		init = []string{"--db", db, "--plan", fmt.Sprintf("attack-%d", landPlans.Add(1)), "init"}
	}
	if code, _, errs := p.ralph(init...); code != 0 {
		t.Fatalf("ralph init: %s", errs)
	}
	plan := filepath.Join(t.TempDir(), "plan.jsonl")
	os.WriteFile(plan, []byte(`{"id":"t-1","title":"Task one"}
{"id":"t-2","title":"Task two","blocked_by":["t-1"]}
{"id":"t-3","title":"Task three","blocked_by":["t-2"]}
`), 0o644)
	if code, _, errs := p.ralph("task", "import", plan); code != 0 {
		t.Fatalf("ralph task import: %s", errs)
	}
	return p
}

// build runs ralph build with one worker and the stand-in agent.
func (p *landProject) build(agent string, args ...string) (code int, out string) {
	p.t.Helper()
	code, stdout, stderr := p.ralph(append([]string{"build", "--workers", "1", "--claude", agent, "--max-iterations", "10"}, args...)...)
	return code, stdout + stderr
}

// landedFiles are the files on the integration branch.
func (p *landProject) landedFiles() []string {
	p.t.Helper()
	return strings.Fields(p.git("ls-tree", "-r", "--name-only", "ralph/integration"))
}

// sessions are the task ids of the agent's sessions so far.
func sessions(t *testing.T, script string) []string {
	var ids []string
	for _, c := range agentCalls(t, script) {
		ids = append(ids, c.Env["RALPH_TASK_ID"])
	}
	return ids
}

// work is an agent session that does its task's work: <task>.txt.
var work = agentStep{Sh: `echo "work of {task}" > "{task}.txt"`, Text: "Done. <task-done>{task}</task-done>"}

// forgeT2 is an agent session that does its task's work and also puts a
// commit of its own, with the trailer Ralph-Task: t-2, on the integration
// branch (git update-ref), as issue 20's item 6 did.
var forgeT2 = agentStep{Sh: `echo "work of {task}" > "{task}.txt"
echo forged > t-2.txt
git add t-2.txt
c=$(git commit-tree "$(git write-tree)" -p HEAD -m "Task two" -m "Ralph-Task: t-2
Ralph-Generation: 1")
git update-ref refs/heads/ralph/integration "$c"
git reset -q
rm t-2.txt`, Text: "Done. <task-done>{task}</task-done>"}

func TestAttackForgedLanding(t *testing.T) { attackForgedLanding(t, "") }

func attackForgedLanding(t *testing.T, db string) {
	p := newLandProject(t, db)
	agent, script := fakeAgentPath(t, forgeT2, work)
	code, out := p.build(agent)
	if code != 5 {
		t.Fatalf("build with the forging agent: exit %d, want 5 (the integration finds the moved tip)\n%s", code, out)
	}
	forged := p.git("rev-parse", "ralph/integration")
	for _, want := range []string{forged[:12], "Ralph-Task trailers name t-2", ", run ralph build --accept-tip; or put it back: git update-ref refs/heads/ralph/integration "} {
		if !strings.Contains(out, want) {
			t.Errorf("the stop does not say %q:\n%s", want, out)
		}
	}
	if st := p.status("t-2"); st == "done" {
		t.Fatal("t-2 is done: a forged trailer counted as a landing")
	}
	// The next build stops before any agent runs, naming the commit.
	before := len(sessions(t, script))
	code, out = p.build(agent)
	if code != 5 || !strings.Contains(out, forged[:12]) || strings.Contains(out, "complete") {
		t.Fatalf("the next build: exit %d, want 5 naming %s\n%s", code, forged[:12], out)
	}
	if got := len(sessions(t, script)); got != before {
		t.Errorf("%d agent sessions ran after the forged commit; want none", got-before)
	}
	if st := p.status("t-2"); st == "done" {
		t.Fatal("t-2 is done after the second build")
	}
	// --accept-tip goes on from the forged tip: t-2 is worked like any
	// task.
	code, out = p.build(agent, "--accept-tip")
	if code != 0 || !strings.Contains(out, "accepted tip: ralph/integration at "+forged[:12]) {
		t.Fatalf("build --accept-tip: exit %d\n%s", code, out)
	}
	if got := sessions(t, script)[before:]; !slices.Contains(got, "t-2") {
		t.Errorf("sessions after the accept %v; want t-2 worked", got)
	}
	for _, id := range []string{"t-1", "t-2", "t-3"} {
		if st := p.status(id); st != "done" {
			t.Errorf("%s is %s after the accepted build", id, st)
		}
	}
	if got := p.git("show", "ralph/integration:t-2.txt"); got != "work of t-2" {
		t.Errorf("t-2.txt on the branch = %q; want t-2's own work", got)
	}
}

// TestAttackAgentMovesUserBranches: the agent moves main (the user's
// checked-out branch) and deletes another branch. ralph neither follows
// nor undoes that — it writes neither — lands the task's work on its own
// branch only, leaves the user's files alone, and says at the end what
// moved.
func TestAttackAgentMovesUserBranches(t *testing.T) {
	p := newLandProject(t, "")
	p.git("branch", "feature")
	os.WriteFile(filepath.Join(p.dir, "README"), []byte("the user's edit, not committed\n"), 0o644)
	files := userFiles(t, p.dir)
	agent, _ := fakeAgentPath(t, agentStep{Sh: `git update-ref refs/heads/main "$(git commit-tree "$(git rev-parse 'HEAD^{tree}')" -m evil)"
git branch -q -D feature
echo "work of {task}" > "{task}.txt"`, Text: "Done. <task-done>{task}</task-done>"}, work)
	code, out := p.build(agent)
	if code != 0 {
		t.Fatalf("build: exit %d\n%s", code, out)
	}
	for _, want := range []string{"branch main moved during the run", "branch feature was deleted",
		"ralph did not do that: it writes only its own ralph/… branches and the integration branch. If you did not either, an agent did: without --sandbox an agent runs as you and can write any branch (--sandbox keeps the repository's refs out of its reach)\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the end does not say %q:\n%s", want, out)
		}
	}
	if got := p.git("log", "-1", "--format=%s", "main"); got != "evil" {
		t.Errorf("main is at %q: ralph moved it", got)
	}
	if log := p.git("log", "--format=%B", "main"); strings.Contains(log, "Ralph-Task") {
		t.Errorf("ralph's commits reached main:\n%s", log)
	}
	if diff := cmp.Diff(files, userFiles(t, p.dir)); diff != "" {
		t.Errorf("the user's files changed (-before +after):\n%s", diff)
	}
	if got := p.landedFiles(); !slices.Contains(got, "t-3.txt") {
		t.Errorf("the integration branch holds %v", got)
	}
}

// userFiles are the files of the user's tree, .git and .ralph aside.
func userFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == ".git" || rel == ".ralph" {
			return filepath.SkipDir
		}
		if d.Type()&os.ModeSymlink != 0 {
			to, _ := os.Readlink(path)
			files[rel] = "-> " + to
			return nil
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		files[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestAttackIntegrationBranchRewoundOrDeleted: the integration branch
// rewound (git branch -f ralph/integration ralph/integration~1) or deleted
// (git branch -D) between builds or by the agent during one: the build
// stops (exit 5) naming the tasks whose work is missing, and never says
// "complete".
func TestAttackIntegrationBranchRewoundOrDeleted(t *testing.T) { attackRewoundOrDeleted(t, "") }

func attackRewoundOrDeleted(t *testing.T, db string) {
	rewind := `git branch -f ralph/integration ralph/integration~1`
	remove := `git branch -D ralph/integration`
	for _, tc := range []struct {
		name    string
		between string // a command run between two builds, or:
		during  string // the third session's payload
		missing string
	}{
		{"rewound between builds", rewind, "", "the work of t-2 is missing"},
		{"deleted between builds", remove, "", "the work of t-1, t-2 is missing"},
		{"rewound during a build", "", rewind, "the work of t-2 is missing"},
		{"deleted during a build", "", remove, "the work of t-1, t-2 is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newLandProject(t, db)
			var agent string
			var code int
			var out string
			if tc.between != "" {
				agent, _ = fakeAgentPath(t, work)
				if code, out = p.build(agent, "--max-iterations", "2"); code != 0 {
					t.Fatalf("first build: exit %d\n%s", code, out)
				}
				p.git(strings.Fields(tc.between)[1:]...)
				code, out = p.build(agent)
			} else {
				agent, _ = fakeAgentPath(t, work, work, agentStep{Sh: tc.during + "\n" + work.Sh, Text: work.Text})
				code, out = p.build(agent)
			}
			if code != 5 || !strings.Contains(out, tc.missing) || !strings.Contains(out, "--accept-tip") {
				t.Fatalf("exit %d; want 5 saying %q and how to go on\n%s", code, tc.missing, out)
			}
			if strings.Contains(out, "complete") {
				t.Errorf("the build says complete:\n%s", out)
			}
			if st := p.status("t-3"); st == "done" {
				t.Error("t-3 is done")
			}
		})
	}
}

// TestAttackAgentResetHard: the agent working on t-2 runs git reset
// --hard HEAD~1 in its worktree (dropping t-1's landed work from its
// tree) and then does its own work: t-2 lands as that work alone, and
// t-1's work stays on the branch.
func TestAttackAgentResetHard(t *testing.T) {
	p := newLandProject(t, "")
	agent, _ := fakeAgentPath(t, work, agentStep{Sh: "git reset -q --hard HEAD~1\n" + work.Sh, Text: work.Text}, work)
	if code, out := p.build(agent); code != 0 {
		t.Fatalf("build: exit %d\n%s", code, out)
	}
	got := p.landedFiles()
	for _, want := range []string{"t-1.txt", "t-2.txt", "t-3.txt"} {
		if !slices.Contains(got, want) {
			t.Errorf("the integration branch lacks %s: %v", want, got)
		}
	}
	if got := p.git("show", "ralph/integration:t-1.txt"); got != "work of t-1" {
		t.Errorf("t-1.txt = %q", got)
	}
}

// TestAttackWorktreeLinkedToMainCheckout is issue 20's item 3 without the
// sandbox: the agent replaces its worktree with a link to the main
// checkout. ralph finds the link before it runs git there: the attempt
// is task trouble, the link set aside, the worktree made again; the
// user's tree (uncommitted edits and untracked files), HEAD, checked-out
// branch and .ralph/progress.db are untouched, and none of the user's
// edits reach the integration branch.
func TestAttackWorktreeLinkedToMainCheckout(t *testing.T) {
	p := newLandProject(t, "")
	os.WriteFile(filepath.Join(p.dir, "README"), []byte("the user's edit, not committed\n"), 0o644)
	os.WriteFile(filepath.Join(p.dir, "notes.txt"), []byte("the user's untracked notes\n"), 0o644)
	files := userFiles(t, p.dir)
	head, status := p.git("rev-parse", "HEAD"), p.git("status", "--porcelain")
	agent, _ := fakeAgentPath(t, agentStep{Sh: `d="$RALPH_WORKTREE"
cd /
rm -rf "$d"
ln -s "$RALPH_DIR" "$d"`, Text: "Done. <task-done>{task}</task-done>"}, work)
	// A test gate that writes where it runs: it must never run in the
	// user's tree.
	code, out := p.build(agent, "--test-cmd", "echo gate > gate-ran-here.txt")
	if code != 0 {
		t.Fatalf("build: exit %d\n%s", code, out)
	}
	if diff := cmp.Diff(files, userFiles(t, p.dir)); diff != "" {
		t.Errorf("the user's files changed (-before +after):\n%s", diff)
	}
	if got := p.git("symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Errorf("the user's HEAD is %s", got)
	}
	if got := p.git("rev-parse", "HEAD"); got != head {
		t.Errorf("the user's branch moved to %s", got)
	}
	if got := p.git("status", "--porcelain"); got != status {
		t.Errorf("git status in the user's tree:\n%s\nwant:\n%s", got, status)
	}
	if _, err := os.Stat(filepath.Join(p.dir, ".ralph", "progress.db")); err != nil {
		t.Errorf(".ralph/progress.db: %v", err)
	}
	landed := p.landedFiles()
	if slices.Contains(landed, "notes.txt") || p.git("show", "ralph/integration:README") != "the project" {
		t.Errorf("the user's edits reached the integration branch: %v", landed)
	}
	_, show, _ := p.ralph("task", "show", "t-1")
	if !strings.Contains(show, "symbolic link") {
		t.Errorf("t-1's history does not say what the agent did:\n%s", show)
	}
	aside, _ := filepath.Glob(filepath.Join(p.dir, ".ralph", "worktrees", "w1.aside", "*"))
	if len(aside) != 1 {
		t.Errorf("set aside: %v; want the link, kept", aside)
	} else if fi, err := os.Lstat(aside[0]); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("%s is not the agent's link: %v", aside[0], err)
	}
	for _, id := range []string{"t-1", "t-2", "t-3"} {
		if st := p.status(id); st != "done" {
			t.Errorf("%s is %s", id, st)
		}
	}
}

// TestAttackLandOnPostgres runs the forged landing and the rewound or
// deleted branch with the plan on PostgreSQL (ARCHITECTURE.md §6: the landings
// are recorded in the shared store).
func TestAttackLandOnPostgres(t *testing.T) {
	url := pgtest.URL(t)
	t.Run("ForgedLanding", func(t *testing.T) { attackForgedLanding(t, url) })
	t.Run("RewoundOrDeleted", func(t *testing.T) { attackRewoundOrDeleted(t, url) })
}

// TestAttackAgentMovesFence: the agent points its own task's claim fence
// (refs/ralph/claims/…) at the tip it began from, and deletes the next
// task's before that one began. Neither lets a stale claim land nor stops
// the current one: the fence is ralph's to put back, by compare-and-swap
// under the claim the store still says is current, and every task lands
// once with its own work.
func TestAttackAgentMovesFence(t *testing.T) {
	p := newLandProject(t, "")
	moveFence := agentStep{Sh: `echo "work of {task}" > "{task}.txt"
git update-ref refs/ralph/claims/ralph%2Fintegration/{task} HEAD
git update-ref -d refs/ralph/claims/ralph%2Fintegration/t-3 2>/dev/null || true`, Text: "Done. <task-done>{task}</task-done>"}
	agent, _ := fakeAgentPath(t, moveFence, moveFence, moveFence)
	code, out := p.build(agent)
	if code != 0 {
		t.Fatalf("build with the agent that moves its fence: exit %d\n%s", code, out)
	}
	for _, id := range []string{"t-1", "t-2", "t-3"} {
		if st := p.status(id); st != "done" {
			t.Errorf("%s is %s", id, st)
		}
		if got := p.git("show", "ralph/integration:"+id+".txt"); got != "work of "+id {
			t.Errorf("%s.txt on the branch = %q", id, got)
		}
		if n := strings.Count(p.git("log", "--format=%B", "ralph/integration"), "Ralph-Task: "+id+"\n"); n != 1 {
			t.Errorf("%s landed %d times; want once", id, n)
		}
		if fence, tip := p.git("rev-parse", "refs/ralph/claims/ralph%2Fintegration/"+id), p.git("log", "-1", "--format=%H", "--grep", "Ralph-Task: "+id, "ralph/integration"); fence != tip {
			t.Errorf("%s's fence is at %s; want its landing, %s", id, fence, tip)
		}
	}
}
