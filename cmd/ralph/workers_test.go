package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// workersProject is a small Go project in a git repository, set up as a
// user would: ralph init, the plan imported, everything committed.
type workersProject struct {
	t      *testing.T
	bin    string
	dir    string
	env    []string
	marks  string // the stand-in agent's scratch directory
	agent  string
	deps   map[string][]string
	titles []string
}

func (p *workersProject) git(args ...string) string {
	p.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", p.dir}, args...)...)
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		p.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (p *workersProject) ralph(args ...string) (int, string, string) {
	p.t.Helper()
	return runBinary(p.t, p.bin, p.dir, p.env, args...)
}

// newWorkersProject makes the project: package calc with a test, the plan
// of 12 tasks (deps: id → blockers), the stand-in agent. Each task fNN
// writes fNN.go, a function that calls its blockers' functions — so the
// package only builds when every blocker's work is in the tree — after
// checking that their files are there; c1 and c2 both append a line to
// notes.txt at once, the first time they run: one of them conflicts.
func newWorkersProject(t *testing.T, deps map[string][]string) *workersProject {
	needTools(t, "git", "go")
	p := &workersProject{t: t, bin: ralphBinary(t), dir: t.TempDir(), marks: t.TempDir(), deps: deps}
	p.env = append(os.Environ(), "RALPH_AGENT_ID=", "RALPH_HOLDER=", "RALPH_DIR=", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod",
		"GIT_AUTHOR_NAME=Dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=Dev", "GIT_COMMITTER_EMAIL=dev@example.com")
	files := map[string]string{
		"go.mod":       "module example.com/calc\n\ngo 1.22\n",
		"calc.go":      "// Package calc is the project the workers build.\npackage calc\n",
		"calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestBuilds(t *testing.T) {}\n",
		"notes.txt":    "notes\n",
		".gitignore":   ".env\n",
		".env":         "SECRET=local\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(p.dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p.git("init", "-q", "-b", "main")
	if code, _, errs := p.ralph("init"); code != 0 {
		t.Fatalf("ralph init: %s", errs)
	}
	// The worktrees get .env, which git ignores.
	if err := os.WriteFile(filepath.Join(p.dir, ".ralph", "worktree-include"), []byte(".env\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.git("add", "-A")
	p.git("commit", "-q", "-m", "the project")

	var plan, depLines strings.Builder
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range deps {
			if !yield(id) {
				return
			}
		}
	}) {
		bs := deps[id]
		pri := 2
		if strings.HasPrefix(id, "c") {
			pri = 0 // the two that conflict are taken first, at once
		}
		blocked := `[]`
		if len(bs) > 0 {
			blocked = `["` + strings.Join(bs, `","`) + `"]`
		}
		fmt.Fprintf(&plan, `{"id":%q,"title":"Task %s","priority":%d,"blocked_by":%s}`+"\n", id, id, pri, blocked)
		fmt.Fprintf(&depLines, "%s %s\n", id, strings.Join(bs, " "))
	}
	planFile := filepath.Join(t.TempDir(), "plan.jsonl")
	os.WriteFile(planFile, []byte(plan.String()), 0o644)
	depsFile := filepath.Join(p.marks, "deps")
	os.WriteFile(depsFile, []byte(depLines.String()), 0o644)
	if code, _, errs := p.ralph("task", "import", planFile); code != 0 {
		t.Fatalf("import: %s", errs)
	}

	p.agent = filepath.Join(t.TempDir(), "agent.sh")
	script := `#!/bin/sh
cat >/dev/null
id=$RALPH_TASK_ID
marks=` + shQuote(p.marks) + `
echo "$id $RALPH_WORKER $PWD" >> "$marks/runs"
verdict="<task-done>$id</task-done>"
[ "$PWD" = "$RALPH_WORKTREE" ] || echo "$id: works in $PWD, not $RALPH_WORKTREE" >> "$marks/problems"
[ -f .env ] || echo "$id: no .env in its tree" >> "$marks/problems"
case $id in
c*)
	if [ ! -e "$marks/$id.first" ]; then
		touch "$marks/$id.first"
		sleep 1
	fi
	echo "line by $id" >> notes.txt
	;;
*)
	n=$(echo "$id" | sed "s/^f0*//")
	calls=""
	for b in $(grep "^$id " "$marks/deps" | cut -d' ' -f2-); do
		if [ ! -f "$b.go" ]; then
			echo "$id: began without $b's work" >> "$marks/problems"
			verdict="<task-failed>$id</task-failed>"
		fi
		B=$(echo "$b" | tr f F)
		calls="$calls + $B()"
	done
	F=$(echo "$id" | tr f F)
	printf 'package calc\n\n// %s is task %s.\nfunc %s() int { return %s%s }\n' "$F" "$id" "$F" "$n" "$calls" > "$id.go"
	;;
esac
printf '{"type":"system","subtype":"init","session_id":"s-%s","model":"stand-in"}\n' "$id"
printf '{"type":"result","subtype":"success","is_error":false,"result":"Done. %s","session_id":"s-%s","num_turns":1,"total_cost_usd":0.01}\n' "$verdict" "$id"
`
	if err := os.WriteFile(p.agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// landed returns the task ids of the commits on branch, oldest first.
func (p *workersProject) landed(branch string) []string {
	var ids []string
	for l := range strings.FieldsSeq(p.git("log", "--format=%(trailers:key=Ralph-Task,valueonly)", branch)) {
		ids = append(ids, l)
	}
	slices.Reverse(ids)
	return ids
}

// TestWorkersBuildAGoProject is issue 10's "done when", the way a user runs
// it: `ralph build --workers 4` on a Go project made with ralph init, 12
// tasks with dependencies, a stand-in agent that writes real code and
// checks that each blocker's file is in its worktree, `go test ./...` as
// the test gate, and two tasks that conflict. Every task's change lands
// once on ralph/integration, in an order the graph allows; the conflict is
// retried from the new tip; the user's branch and tree are untouched; exit
// 0.
func TestWorkersBuildAGoProject(t *testing.T) {
	if testing.Short() {
		t.Skip("12 agent sessions with go test gates")
	}
	deps := map[string][]string{
		"c1": nil, "c2": nil,
		"f01": nil, "f02": nil, "f03": {"f01"}, "f04": {"f01", "f02"}, "f05": {"f03"}, "f06": {"f04"},
		"f07": {"f05", "f06"}, "f08": {"f02"}, "f09": {"f08"}, "f10": {"f07", "f09"},
	}
	p := newWorkersProject(t, deps)
	head := p.git("rev-parse", "HEAD")
	code, out, errs := p.ralph("build", "--workers", "4", "--claude", p.agent, "--test-cmd", "go test ./...", "--max-iterations", "40")
	if code != 0 {
		t.Fatalf("ralph build --workers 4: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if problems, err := os.ReadFile(filepath.Join(p.marks, "problems")); err == nil {
		t.Errorf("the stand-in agent saw:\n%s", problems)
	}
	if !strings.Contains(out, "integration branch: ralph/integration · merge it with: git merge ralph/integration") {
		t.Errorf("the end does not name the branch and how to merge it:\n%s", out)
	}
	for _, w := range []string{"[w1] ", "[w2] ", "[w3] ", "[w4] "} {
		if !strings.Contains(out, w) {
			t.Errorf("no line of worker %s in the output:\n%s", w, out)
		}
	}

	checkLandedInOrder(t, p.landed("ralph/integration"), deps)
	p.checkConflictRetried()
	p.checkIntegrationBuilds(head)
	p.checkWorkersNamed()
	raws, _ := filepath.Glob(filepath.Join(p.dir, ".ralph", "logs", "session-*", "w*-iter-*.ndjson"))
	if len(raws) < 12 {
		t.Errorf("raw streams per worker and iteration: %v", raws)
	}
}

// TestWorkersConflictsDoNotStarve is issue 22's starvation case through
// the binary: twelve tasks that each append a line to one file, four
// workers, default retries. Every round all but one of the workers lose
// the race to land; a lost race is no retry (loop.Config.MaxConflicts),
// so all twelve land, each once.
func TestWorkersConflictsDoNotStarve(t *testing.T) {
	if testing.Short() {
		t.Skip("a dozen agent sessions and more")
	}
	deps := map[string][]string{}
	for i := 1; i <= 12; i++ {
		deps[fmt.Sprintf("c%02d", i)] = nil
	}
	p := newWorkersProject(t, deps)
	code, out, errs := p.ralph("build", "--workers", "4", "--claude", p.agent, "--max-iterations", "200")
	if code != 0 {
		t.Fatalf("ralph build --workers 4: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	checkLandedInOrder(t, p.landed("ralph/integration"), deps)
	notes := p.git("show", "ralph/integration:notes.txt") + "\n" // git's output, trimmed
	for id := range deps {
		if strings.Count(notes, "line by "+id+"\n") != 1 {
			t.Errorf("notes.txt holds %s's line %d times; want once:\n%s", id, strings.Count(notes, "line by "+id+"\n"), notes)
		}
	}
	if !strings.Contains(out, "integration conflict") {
		t.Errorf("no race was lost (the case is meant to make them):\n%s", out)
	}
}

// checkLandedInOrder checks that order, the tasks landed on the
// integration branch, holds each task of deps once, each after its
// blockers.
func checkLandedInOrder(t *testing.T, order []string, deps map[string][]string) {
	t.Helper()
	if got, want := slices.Sorted(slices.Values(order)), slices.Sorted(func(yield func(string) bool) {
		for id := range deps {
			yield(id)
		}
	}); !slices.Equal(got, want) {
		t.Fatalf("landed %v; want each of the %d tasks once", order, len(deps))
	}
	for id, bs := range deps {
		for _, b := range bs {
			if slices.Index(order, b) > slices.Index(order, id) {
				t.Errorf("%s landed before its blocker %s: %v", id, b, order)
			}
		}
	}
}

// checkConflictRetried checks the two conflicting tasks c1 and c2: both
// lines on the integration branch, the conflicting attempt kept, each
// commit with its generation, exactly one of them sent back by the
// conflict — a lost race, no retry counted.
func (p *workersProject) checkConflictRetried() {
	t := p.t
	t.Helper()
	notes := p.git("show", "ralph/integration:notes.txt")
	if !strings.Contains(notes, "line by c1") || !strings.Contains(notes, "line by c2") {
		t.Errorf("notes.txt on the integration branch = %q; want both conflicting tasks' lines", notes)
	}
	if p.git("for-each-ref", "--format=%(refname:short)", "refs/heads/ralph/attempt/") == "" {
		t.Error("the conflicting attempt was not kept on an attempt branch")
	}
	lost := 0
	for _, id := range []string{"c1", "c2"} {
		if show := p.git("log", "-1", "--format=%B", "ralph/integration", "--grep", "Ralph-Task: "+id); !strings.Contains(show, "Ralph-Generation: ") {
			t.Errorf("%s's commit lacks its generation trailer: %q", id, show)
		}
		_, js, _ := p.ralph("task", "show", id, "--json")
		if !strings.Contains(js, `"retry_count": 0`) {
			t.Errorf("%s was retried: a lost race is no retry\n%s", id, js)
		}
		if _, show, _ := p.ralph("task", "show", id); strings.Contains(show, "integration conflict") {
			lost++
		}
	}
	if lost != 1 {
		t.Errorf("%d of c1, c2 sent back by a conflict; want exactly one", lost)
	}
}

// checkIntegrationBuilds checks that what landed builds and passes its
// tests, holds neither .env nor the worktrees, and that the user's branch
// (at head) and tree are untouched.
func (p *workersProject) checkIntegrationBuilds(head string) {
	t := p.t
	t.Helper()
	// What landed builds and passes its tests.
	check := filepath.Join(t.TempDir(), "check")
	p.git("worktree", "add", "-q", "--detach", check, "ralph/integration")
	cmd := exec.Command("go", "test", "./...")
	cmd.Dir, cmd.Env = check, p.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("go test on the integration branch: %v\n%s", err, out)
	}
	if files := p.git("ls-tree", "-r", "--name-only", "ralph/integration"); strings.Contains(files, ".env") || strings.Contains(files, ".ralph/worktrees") {
		t.Errorf("the integration branch holds %q", files)
	}
	if got := p.git("rev-parse", "HEAD"); got != head {
		t.Error("the user's branch moved")
	}
	for line := range strings.Lines(p.git("status", "--porcelain")) {
		if !strings.Contains(line, ".ralph/") { // the plan and its logs live there
			t.Errorf("the user's tree changed: %q", line)
		}
	}
}

// checkWorkersNamed checks that the receipts and the session log name
// the workers.
func (p *workersProject) checkWorkersNamed() {
	t := p.t
	t.Helper()
	_, status, _ := p.ralph("status")
	if !strings.Contains(status, "WORKER") || !strings.Contains(status, " w1 ") && !strings.Contains(status, " w2 ") {
		t.Errorf("ralph status names no worker:\n%s", status)
	}
	logs, _ := filepath.Glob(filepath.Join(p.dir, ".ralph", "logs", "session-*.log"))
	if len(logs) != 1 {
		t.Fatalf("session logs %v; want one for the run", logs)
	}
	slog, _ := os.ReadFile(logs[0])
	for _, w := range []string{"[w1] === iteration", "[w2] --- iteration", "[w3] status: "} {
		if !strings.Contains(string(slog), w) {
			t.Errorf("the session log lacks %q:\n%s", w, slog)
		}
	}
}

// TestWorkersKillNineThenBuildAgain: ralph is killed with SIGKILL in the
// middle of a parallel build — by the test gate, which runs during
// integration — and `ralph build --workers 2` is run again. No task's work
// is lost or lands twice, and the plan finishes.
func TestWorkersKillNineThenBuildAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("two parallel builds with go test gates")
	}
	deps := map[string][]string{
		"c1": nil, "c2": nil, "f01": nil, "f02": nil, "f03": {"f01"}, "f04": {"f02", "f03"}, "f05": nil, "f06": {"f05"},
	}
	p := newWorkersProject(t, deps)
	// The 5th gate kills ralph with SIGKILL, mid-integration: the gate
	// runs as sh -c GATE, whose parent is ralph.
	gate := filepath.Join(p.marks, "gate.sh")
	os.WriteFile(gate, []byte(`#!/bin/sh
n=$(cat `+shQuote(p.marks)+`/gates 2>/dev/null || echo 0)
n=$((n+1))
echo $n > `+shQuote(p.marks)+`/gates
if [ $n = 5 ]; then kill -9 "$(cut -d' ' -f4 /proc/$PPID/stat)"; sleep 5; fi
exec go test ./...
`), 0o755)
	code, out, errs := p.ralph("build", "--workers", "2", "--claude", p.agent, "--test-cmd", gate, "--max-iterations", "40")
	if code != -1 && code != 137 {
		t.Fatalf("first build: exit %d, want killed\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	before := p.landed("ralph/integration")
	if len(before) == len(deps) {
		t.Fatalf("everything landed before the kill: %v", before)
	}
	// Without --workers: the plan has an integration branch now, so this
	// build works in a worktree too.
	code, out, errs = p.ralph("build", "--claude", p.agent, "--test-cmd", "go test ./...", "--max-iterations", "40")
	if code != 0 {
		t.Fatalf("second build: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	if !strings.Contains(out, "[w1] ") {
		t.Errorf("the second build (no --workers, a plan with an integration branch) did not run as worker w1:\n%s", out)
	}
	order := p.landed("ralph/integration")
	if got := slices.Sorted(slices.Values(order)); !slices.Equal(got, []string{"c1", "c2", "f01", "f02", "f03", "f04", "f05", "f06"}) {
		t.Fatalf("landed %v; want each task once (before the kill: %v)", order, before)
	}
	if !slices.Equal(order[:len(before)], before) {
		t.Errorf("history rewritten: %v, then %v", before, order)
	}
	_, plan, _ := p.ralph("task", "plan-status")
	if !strings.Contains(plan, "done=8") || !strings.Contains(plan, "active=0") {
		t.Errorf("plan-status after the second build: %s", plan)
	}
}

// TestWorkersBadInput: what --workers refuses, before anything runs or is
// claimed, with its exit code.
func TestWorkersBadInput(t *testing.T) {
	needTools(t, "git", "go")
	agent, _ := fakeAgentPath(t, agentStep{Text: "<task-done>{task}</task-done>"})
	for _, tc := range []struct {
		name  string
		git   []string // commands that make the repository, none: not one
		args  []string
		code  int
		words string
	}{
		{"not a repository", nil, []string{"--workers", "2"}, 5, "not a git repository"},
		{"no commit", [][]string{{"init", "-q"}}[0], []string{"--workers", "2"}, 5, "no commit"},
		{"progress file", nil, []string{"--workers", "2", "--progress", "p.md"}, 1, "--workers needs the task database"},
		{"peek mode", nil, []string{"--workers", "2", "--claim", "agent"}, 1, "--claim agent"},
		{"commit gate", nil, []string{"--workers", "2", "--commit"}, 1, "--commit"},
		{"negative", nil, []string{"--workers", "-1"}, 1, "want 1 or more"},
		{"zero", nil, []string{"--workers", "0"}, 1, "want 1 or more"},
		{"into without workers", nil, []string{"--into", "x"}, 1, "go with --workers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := initHarness(t)
			h.ok("task", "add", "A")
			if tc.git != nil {
				cmd := exec.Command("git", append([]string{"-C", h.dir}, tc.git...)...)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git: %v\n%s", err, out)
				}
			}
			before := h.dump()
			r := h.run(append([]string{"build", "--claude", agent}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.words) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, tc.code, tc.words)
			}
			if diff := cmp.Diff(before, h.dump()); diff != "" {
				t.Errorf("the plan changed (-before +after):\n%s", diff)
			}
		})
	}
}
