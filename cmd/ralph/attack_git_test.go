package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Attacks on the git ralph runs on the host, through the ralph binary and
// the stand-in agent, without --sandbox (issue 20, items 4, 5, 8 and 10;
// ARCHITECTURE.md §7.1 holds in every mode).
// Each planted program would touch a marker in a directory outside the
// project; the marker must stay absent, and the run must end as it should.

// gitAttack is a project made by ralph init in a git repository with
// one commit, whose git uses a global configuration of the test's own.
type gitAttack struct {
	*e2e
	marks string // outside the project: where planted programs would leave markers
}

func newAttackProject(t *testing.T) *gitAttack {
	t.Helper()
	needTools(t, "git", "go")
	home := t.TempDir()
	global := filepath.Join(home, "gitconfig")
	if err := os.WriteFile(global, []byte("[user]\n\tname = Dev\n\temail = dev@example.com\n[init]\n\tdefaultBranch = main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newProject(t, []string{"GIT_CONFIG_GLOBAL=" + global, "GIT_CONFIG_NOSYSTEM=1"})
	p := &gitAttack{e2e: e, marks: t.TempDir()}
	p.write("README.md", "# project\n")
	p.git("init", "-q", "-b", "main")
	p.git("add", "-A")
	p.git("commit", "-q", "-m", "the project")
	return p
}

// mark is a command that leaves the marker name.
func (p *gitAttack) mark(name string) string {
	return "touch " + shQuote(filepath.Join(p.marks, name))
}

// noMarks fails the test for every marker a planted program left.
func (p *gitAttack) noMarks() {
	p.t.Helper()
	es, err := os.ReadDir(p.marks)
	if err != nil {
		p.t.Fatal(err)
	}
	for _, e := range es {
		if !strings.HasPrefix(e.Name(), "ok-") {
			p.t.Errorf("a planted program ran: %s", e.Name())
		}
	}
}

// build runs ralph build and wants exit code want.
func (p *gitAttack) build(want int, args ...string) e2eResult {
	p.t.Helper()
	r := p.run(append([]string{"build"}, args...)...)
	if r.code != want {
		p.t.Fatalf("ralph build %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
	}
	return r
}

// hook is a shell payload that plants an executable hook at path.
func hook(path, body string) string {
	return fmt.Sprintf("mkdir -p %s && printf '#!/bin/sh\\n%%s\\n' %s > %s && chmod +x %s",
		shQuote(filepath.Dir(path)), shQuote(body), shQuote(path), shQuote(path))
}

// TestAttackCommitHooks: hooks the agent plants in .git/hooks (first
// task), and a core.hooksPath it sets (second task), do not run when
// --commit commits its work; the work is committed all the same.
func TestAttackCommitHooks(t *testing.T) {
	p := newAttackProject(t)
	p.ok("task", "add", "First")
	p.ok("task", "add", "Second")
	var hooks []string
	for _, h := range []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "reference-transaction", "post-index-change"} {
		hooks = append(hooks, hook(".git/hooks/"+h, p.mark(h)))
	}
	agent, _ := fakeAgentPath(t,
		agentStep{Sh: strings.Join(append(hooks, "echo work > {task}.txt"), " && "), Text: done},
		agentStep{Sh: strings.Join([]string{
			hook("planted-hooks/pre-commit", p.mark("hooks-path-pre-commit")),
			hook("planted-hooks/post-commit", p.mark("hooks-path-post-commit")),
			"git config core.hooksPath planted-hooks",
			"echo work > {task}.txt",
		}, " && "), Text: done},
	)
	r := p.build(0, "--claude", agent, "--commit")
	if !strings.Contains(r.stdout, "complete: all 2 tasks done") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	p.noMarks()
	log := p.git("log", "--format=%s")
	if !strings.Contains(log, "build: iteration 1 - First") || !strings.Contains(log, "build: iteration 2 - Second") {
		t.Errorf("the work was not committed:\n%s", log)
	}
}

// TestAttackNestedRepositoryUnderCommit: a repository the agent makes
// inside the tree, committed by --commit as git add would (a gitlink),
// and then given a filter and a core.fsmonitor in its own .git/config —
// nothing in the project's .git — does not run them when the next
// commit stages the tree (git add would run git status inside it).
func TestAttackNestedRepositoryUnderCommit(t *testing.T) {
	p := newAttackProject(t)
	p.ok("task", "add", "First")
	p.ok("task", "add", "Second")
	agent, _ := fakeAgentPath(t,
		agentStep{Sh: "git init -q lib && echo lib > lib/lib.txt && git -C lib add lib.txt && git -C lib commit -q -m lib", Text: done},
		agentStep{Sh: strings.Join([]string{
			"echo '* filter=n' > lib/.gitattributes",
			"git -C lib config filter.n.clean " + shQuote(p.mark("nested-filter")+"; cat"),
			"git -C lib config core.fsmonitor " + shQuote(p.mark("nested-fsmonitor")+"; false"),
			"echo changed > lib/lib.txt",
			"echo work > {task}.txt",
		}, " && "), Text: done},
	)
	r := p.build(0, "--claude", agent, "--commit")
	if !strings.Contains(r.stdout, "complete: all 2 tasks done") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	p.noMarks()
	if files := p.git("ls-tree", "--name-only", "HEAD"); !strings.Contains(files, "lib") || !strings.Contains(files, "t-2.txt") {
		t.Errorf("HEAD holds:\n%s", files)
	}
}

// TestAttackFsmonitorDuringVerify: a core.fsmonitor the agent sets in the
// project's .git/config, and one in a nested repository it made (no write
// to the project's .git at all), do not run during --verify's snapshots;
// the verifier's pass counts.
func TestAttackFsmonitorDuringVerify(t *testing.T) {
	p := newAttackProject(t)
	p.ok("task", "add", "Work")
	plant := strings.Join([]string{
		"git init -q lib",
		"echo lib > lib/lib.txt",
		"git -C lib add lib.txt",
		"git -C lib commit -q -m lib",
		"echo '* filter=n' > lib/.gitattributes",
		"git -C lib config filter.n.clean " + shQuote(p.mark("nested-filter")+"; cat"),
		"git -C lib config core.fsmonitor " + shQuote(p.mark("nested-fsmonitor")+"; false"),
		"git config core.fsmonitor " + shQuote(p.mark("fsmonitor")+"; false"),
		"echo work > work.txt",
	}, " && ")
	agent, _ := fakeAgentPath(t, agentStep{Sh: plant, Text: done}, agentStep{Text: "Looks right. <verify-pass/>"})
	r := p.build(0, "--claude", agent, "--verify")
	if !strings.Contains(r.stdout, "complete: all 1 task done") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	p.noMarks()
	show := p.show("t-1")
	for _, l := range show.Logs {
		if l.Kind == "verify" || l.Kind == "retry" {
			t.Errorf("t-1's history has %s %q; want the verifier's pass counted", l.Kind, l.Message)
		}
	}
	if show.Status != "done" {
		t.Errorf("t-1 is %s, want done", show.Status)
	}
}

// TestAttackWorkersIntegration: during a --workers 2 build the agents
// plant a reference-transaction and a post-checkout hook, a core.fsmonitor
// and a clean filter defined in the repository's .git/config that a
// committed .gitattributes sends every file through; integration (worktree
// set-up, staging, commits, rebases, ref moves) runs none of them, and
// every task lands.
func TestAttackWorkersIntegration(t *testing.T) {
	p := newAttackProject(t)
	for i := 1; i <= 4; i++ {
		p.ok("task", "add", fmt.Sprintf("Task %d", i))
	}
	// Two agents at once may both want .git/config's lock: each config
	// write is tried again.
	git := `retry git -C "$RALPH_DIR"`
	plant := strings.Join([]string{
		"echo work > {task}.txt",
		`retry() { for i in 1 2 3 4 5 6 7 8 9 10; do "$@" && return; sleep 0.05; done; return 1; }`,
		hook(`$RALPH_DIR/.git/hooks/reference-transaction`, p.mark("reference-transaction")),
		hook(`$RALPH_DIR/.git/hooks/post-checkout`, p.mark("post-checkout")),
		git + " config core.fsmonitor " + shQuote(p.mark("fsmonitor")+"; false"),
		git + " config filter.planted.clean " + shQuote(p.mark("filter")+"; cat"),
		git + " config filter.planted.smudge " + shQuote(p.mark("smudge")+"; cat"),
		git + " config filter.planted.required true",
		"echo '* filter=planted' > .gitattributes",
	}, "; ")
	// The hook files contain $RALPH_DIR literally for hook(); expand it.
	plant = strings.ReplaceAll(plant, `'$RALPH_DIR/`, `"$RALPH_DIR"'/`)
	agent, _ := fakeAgentPath(t, agentStep{Sh: plant, Text: done})
	r := p.build(0, "--claude", agent, "--workers", "2")
	if !strings.Contains(r.stdout, "complete: all 4 tasks done") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	p.noMarks()
	files := p.git("ls-tree", "-r", "--name-only", "ralph/integration")
	for i := 1; i <= 4; i++ {
		if !strings.Contains(files, fmt.Sprintf("t-%d.txt", i)) {
			t.Errorf("t-%d's work did not land:\n%s\n%s", i, files, r.stdout)
		}
	}
}

// TestAttackAgentsTestLine: a test command the agent writes into
// AGENTS.md (a test: line, a fenced block under a Tests heading) is not
// run, by this build or the next; the committed one is, and the build and
// --dry-run say which and from which commit.
func TestAttackAgentsTestLine(t *testing.T) {
	p := newAttackProject(t)
	p.write("AGENTS.md", "# Agents\n\ntest: echo ran >> "+shQuote(filepath.Join(p.marks, "ok-committed"))+"\n")
	p.git("add", "AGENTS.md")
	p.git("commit", "-q", "-m", "agents")
	head := p.git("rev-parse", "HEAD")
	p.ok("task", "add", "First")
	p.ok("task", "add", "Second")
	plant := "printf '## Tests\\n\\n```\\n%s\\n```\\n\\ntest: %s\\n' " + shQuote(p.mark("fenced")) + " " + shQuote(p.mark("line")) +
		" > AGENTS.md && echo work > {task}.txt"
	agent, _ := fakeAgentPath(t, agentStep{Sh: plant, Text: done})

	dry := p.run("build", "--dry-run")
	if want := "(AGENTS.md at commit " + head[:12] + ")"; dry.code != 0 || !strings.Contains(dry.stdout, want) || !strings.Contains(dry.stdout, "ok-committed") {
		t.Errorf("dry run: exit %d, stdout:\n%s\nwant the committed command and %s", dry.code, dry.stdout, want)
	}
	r := p.build(0, "--claude", agent)
	if !strings.Contains(r.stdout, "from AGENTS.md at commit "+head[:12]) {
		t.Errorf("the build does not announce the command and its commit:\n%s", r.stdout)
	}
	p.noMarks()
	if b, _ := os.ReadFile(filepath.Join(p.marks, "ok-committed")); string(b) != "ran\nran\nran\n" {
		t.Errorf("the committed test command ran %q, want before the first task (the baseline) and after each", b)
	}
	// The next build reads the committed AGENTS.md again, and says that
	// the working copy's command is not run.
	p.ok("task", "add", "Third")
	r = p.build(0, "--claude", agent)
	p.noMarks()
	if !strings.Contains(r.stdout, "not committed: it is not run") {
		t.Errorf("the build does not say the working copy's command is not run:\n%s", r.stdout)
	}
}

// TestAttackSnapshotStoreLinks: links the agent plants in
// .ralph/verify-snapshot.git — its ignore file to a file of the user's,
// info/ and objects/pack to directories outside — do not make the next
// --verify write outside the store.
func TestAttackSnapshotStoreLinks(t *testing.T) {
	p := newAttackProject(t)
	p.ok("task", "add", "First")
	p.ok("task", "add", "Second")
	outside := t.TempDir()
	bashrc := filepath.Join(outside, "bashrc")
	if err := os.WriteFile(bashrc, []byte("the user's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"info", "pack"} {
		os.Mkdir(filepath.Join(outside, d), 0o755)
	}
	s := ".ralph/verify-snapshot.git"
	plant := strings.Join([]string{
		"mkdir -p " + s + "/objects",
		"rm -rf " + s + "/.gitignore " + s + "/info " + s + "/objects/pack",
		"ln -s " + shQuote(bashrc) + " " + s + "/.gitignore",
		"ln -s " + shQuote(filepath.Join(outside, "info")) + " " + s + "/info",
		"ln -s " + shQuote(filepath.Join(outside, "pack")) + " " + s + "/objects/pack",
		"echo work > {task}.txt",
	}, " && ")
	agent, _ := fakeAgentPath(t, agentStep{Sh: plant, Text: done}, agentStep{Text: "<verify-pass/>"},
		agentStep{Sh: plant, Text: done}, agentStep{Text: "<verify-pass/>"})
	r := p.build(0, "--claude", agent, "--verify")
	if !strings.Contains(r.stdout, "complete: all 2 tasks done") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	// The links the last task planted meet the next build's start.
	p.ok("task", "add", "Third")
	agent, _ = fakeAgentPath(t, agentStep{Text: done}, agentStep{Text: "<verify-pass/>"})
	p.build(0, "--claude", agent, "--verify")
	if b, _ := os.ReadFile(bashrc); string(b) != "the user's\n" {
		t.Errorf("the user's file reads %q", b)
	}
	for _, d := range []string{"info", "pack"} {
		if es, _ := os.ReadDir(filepath.Join(outside, d)); len(es) > 0 {
			t.Errorf("ralph wrote into %s outside the store: %d entries", d, len(es))
		}
	}
}

// TestAttackVerifierChanges: a verifier that commits, tags, plants a
// hook and writes a .ralph/prompts override has its verdict voided (the
// task is retried, the reason logged) and all of it undone; the retry's
// prompt is ralph's own, and --commit's commit runs no planted hook.
func TestAttackVerifierChanges(t *testing.T) {
	p := newAttackProject(t)
	p.ok("task", "add", "Work")
	before := p.git("for-each-ref", "--format=%(refname) %(objectname)")
	verifier := strings.Join([]string{
		"echo verifier > verifier.txt",
		"git add verifier.txt",
		"git commit -q -m 'the verifier was here'",
		"git tag planted",
		hook(".git/hooks/pre-commit", p.mark("pre-commit")),
		hook(".git/hooks/post-commit", p.mark("post-commit")),
		"mkdir -p .ralph/prompts",
		"printf 'PLANTED PROMPT {{.Task.ID}}\\n' > .ralph/prompts/build.md",
	}, " && ")
	agent, script := fakeAgentPath(t,
		agentStep{Sh: "echo work > work.txt", Text: done},
		agentStep{Sh: verifier, Text: "All good. <verify-pass/>"},
		agentStep{Sh: "echo work > work.txt", Text: done},
		agentStep{Text: "All good. <verify-pass/>"},
	)
	r := p.build(0, "--claude", agent, "--verify", "--commit")
	if !strings.Contains(r.stdout, "complete: all 1 task done") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	p.noMarks()
	show := p.show("t-1")
	var verify string
	for _, l := range show.Logs {
		if l.Kind == "verify" {
			verify = l.Message
		}
	}
	for _, name := range []string{"verifier.txt", ".git/hooks/pre-commit", ".ralph/prompts/build.md", "refs/tags/planted", "refs/heads/main"} {
		if !strings.Contains(verify, name) {
			t.Errorf("the verify log entry %q does not name %s", verify, name)
		}
	}
	if show.RetryCount != 1 {
		t.Errorf("retries %d, want 1: the voided pass is task trouble", show.RetryCount)
	}
	if p.git("tag") != "" {
		t.Errorf("the verifier's tag survived")
	}
	for _, f := range []string{".git/hooks/pre-commit", ".git/hooks/post-commit", ".ralph/prompts/build.md", "verifier.txt"} {
		if _, err := os.Lstat(filepath.Join(p.dir, f)); err == nil {
			t.Errorf("%s survived", f)
		}
	}
	after := p.git("for-each-ref", "--format=%(refname) %(objectname)")
	log := p.git("log", "--format=%s", "main")
	if strings.Contains(log, "the verifier was here") || !strings.Contains(log, "build: iteration 2 - Work") {
		t.Errorf("main's history:\n%s\nwant ralph's commit on the project's, not the verifier's", log)
	}
	if strings.Count(after, "\n") != strings.Count(before, "\n") {
		t.Errorf("refs before:\n%s\nafter:\n%s", before, after)
	}
	calls := agentCalls(t, script)
	if len(calls) != 4 || strings.Contains(calls[2].Prompt, "PLANTED PROMPT") {
		t.Errorf("%d sessions; the retry's prompt must be ralph's own", len(calls))
	}
}

// TestWorkersVerifierLeavesRalphsRefs: with --workers the verifier runs in
// a worktree while other workers' integrations move ralph's own refs (the
// integration branch, ralph/task/…): those moves are ralph's, not the
// verifier's, and neither void its verdict nor are undone.
func TestWorkersVerifierLeavesRalphsRefs(t *testing.T) {
	p := newAttackProject(t)
	for i := 1; i <= 4; i++ {
		p.ok("task", "add", fmt.Sprintf("Task %d", i))
	}
	// One step for both parts: the working agent writes its file, the
	// verifier writes the same bytes again; each reads its own sigil.
	agent, _ := fakeAgentPath(t, agentStep{Sh: "echo work > {task}.txt; sleep 0.3", Text: "Done. <task-done>{task}</task-done> <verify-pass/>"})
	r := p.build(0, "--claude", agent, "--workers", "2", "--verify")
	if !strings.Contains(r.stdout, "complete: all 4 tasks done") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	for i := 1; i <= 4; i++ {
		for _, l := range p.show(fmt.Sprintf("t-%d", i)).Logs {
			if l.Kind == "verify" {
				t.Errorf("t-%d: %s", i, l.Message)
			}
		}
	}
	files := p.git("ls-tree", "-r", "--name-only", "ralph/integration")
	for i := 1; i <= 4; i++ {
		if !strings.Contains(files, fmt.Sprintf("t-%d.txt", i)) {
			t.Errorf("t-%d's work did not land:\n%s\n%s", i, files, r.stdout)
		}
	}
}
