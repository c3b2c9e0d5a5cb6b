package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/dag/postgres"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/parallel"
)

// TestBuildIntoRefusedInFlagWords: ralph build words the library's
// refused integration branches (a *parallel.IntoError, in Config.Into's
// words) as it always has, naming --into, byte for byte.
func TestBuildIntoRefusedInFlagWords(t *testing.T) {
	filesNeedGit(t)
	h := initHarness(t)
	gitInit(t, h.dir)
	h.add("x")
	agent, _ := fakeAgentPath(t)
	head := strings.TrimSpace(gitOut(t, h.dir, "symbolic-ref", "--short", "HEAD"))
	for _, tc := range []struct{ into, want string }{
		{"a..b", `ralph: invalid configuration: --into "a..b" is not a branch name git takes (see 'ralph build --help')`},
		{"ralph/task/x", `ralph: invalid configuration: --into "ralph/task/x": ralph, ralph/task/… and ralph/attempt/… are ralph's own branches (see 'ralph build --help')`},
		{head, "ralph: integration branch: " + head + " is checked out in a worktree; ralph never writes a checked-out branch (name another with --into, or switch that worktree away)"},
	} {
		r := h.run("build", "--claude", agent, "--workers", "1", "--into", tc.into)
		if r.code != exitError || r.stderr != tc.want+"\n" {
			t.Errorf("build --into %s: exit %d, stderr\n%s\nwant exit %d, stderr\n%s", tc.into, r.code, r.stderr, exitError, tc.want)
		}
	}
	st := h.store()
	defer st.Close()
	if _, err := st.RecordPlanSetting(t.Context(), parallel.SettingInto, "team/int"); err != nil {
		t.Fatal(err)
	}
	r := h.run("build", "--claude", agent, "--workers", "1", "--into", "other")
	want := "ralph: integration branch: this plan integrates into team/int (recorded by its first parallel build); --into other refused\n"
	if r.code != exitError || r.stderr != want {
		t.Errorf("build --into other on a plan of team/int: exit %d, stderr\n%s\nwant\n%s", r.code, r.stderr, want)
	}
}

// TestFlagWords: each library error a flag of ralph build names is worded
// as the CLI printed it before the library spoke of its own fields, and
// the worded error keeps the library's in its chain.
func TestFlagWords(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&parallel.IntoError{Reason: parallel.IntoRecordedJustNow, Branch: "b", Recorded: "a"},
			"integration branch: another build recorded a for this plan just now; --into b refused"},
		{&parallel.IntoError{Reason: parallel.IntoDiverged, Branch: "int", Remote: "origin"},
			"integration branch: int here and int on origin each have commits the other has not; merge them into one (git pull origin int with int checked out, then git push origin int) and build again"},
		{parallel.ErrNoSettings, "the store cannot record the plan's integration branch"},
		{parallel.ErrNoLandings, "the store cannot record what ralph lands on the integration branch"},
		{parallel.ErrCommitWithWorkers, "invalid configuration: --commit does not go with workers: each task's work is committed when it lands on the integration branch"},
		{parallel.ErrPeekWithWorkers, "invalid configuration: peek mode (--claim agent) does not go with workers: each worker's loop claims its task, so that its tree can begin from the integration tip"},
	} {
		got, ok := flagWords(tc.err)
		if !ok || got != tc.want {
			t.Errorf("flagWords(%v) = %q, %v; want %q", tc.err, got, ok, tc.want)
		}
		var err error
		if errors.Is(tc.err, loop.ErrConfig) {
			err = configError("ralph build", tc.err)
		} else {
			err = intoError(tc.err)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("the CLI's error for %v lost it from its chain", tc.err)
		}
	}
	// A configuration error naming no flag keeps the library's words;
	// oneLine drops its "loop: ".
	err := configError("ralph build", errors.Join(loop.ErrConfig))
	if got, want := oneLine(err.Error()), "invalid configuration (see 'ralph build --help')"; got != want {
		t.Errorf("unworded config error = %q; want %q", got, want)
	}
}

// TestMoveErrorInFlagWords: ralph task done and fail word a person's
// refused move of a live agent's task (a *loop.HeldError, in
// loop.Actor.Force's words) as they always have, naming --force, byte for
// byte, keeping the store's words around it and the error chain.
func TestMoveErrorInFlagWords(t *testing.T) {
	h := initHarness(t)
	h.add("Held by a live loop's agent")
	h.env["RALPH_HOLDER"] = loop.ThisProcess().String() // a live loop: this test
	h.ok("task", "claim", "t-1", "--agent", "agent-a")
	delete(h.env, "RALPH_HOLDER")
	for _, move := range []struct {
		args []string
		verb string
	}{{[]string{"done", "t-1"}, "complete"}, {[]string{"fail", "t-1", "--reason", "r"}, "fail"}} {
		r := h.run(append([]string{"task"}, move.args...)...)
		want := "ralph: a live agent holds the task: task t-1 is held by agent-a (holder " + loop.ThisProcess().String() + "); pass --force to " + move.verb + " it anyway\n"
		if r.code != exitError || r.stderr != want {
			t.Errorf("task %v: exit %d, stderr\n%s\nwant exit %d, stderr\n%s", move.args, r.code, r.stderr, exitError, want)
		}
	}

	held := &loop.HeldError{TaskID: "t-2", ClaimedBy: "agent-b", Holder: loop.Holder{Host: "h", PID: 7, Start: 9}, Move: loop.MoveComplete}
	err := moveError("done", fmt.Errorf("progress: %w", held))
	if want := "progress: loop: a live agent holds the task: task t-2 is held by agent-b (holder 7:9@h); pass --force to complete it anyway"; err.Error() != want {
		t.Errorf("moveError: %q, want %q", err, want)
	}
	var back *loop.HeldError
	if !errors.As(err, &back) || back != held || !errors.Is(err, loop.ErrHeldByLiveAgent) {
		t.Errorf("moveError lost the chain: %#v", err)
	}
	// A message that does not end with the refusal's own stays the
	// library's; other errors pass untouched.
	odd := fmt.Errorf("%w (and more)", held)
	if got := moveError("done", odd); got != odd {
		t.Errorf("moveError(%q) = %q, want it unchanged", odd, got)
	}
	if got := moveError("done", loop.ErrNotHolder); got != loop.ErrNotHolder {
		t.Errorf("moveError(%v) = %v, want it unchanged", loop.ErrNotHolder, got)
	}
}

// TestBrokerRefusalInFlagWords: the broker's refusals of a forced move
// and of a claim outside peek mode (a *broker.RefusalError, in the
// library's words) reach the agent's ralph through the socket and are
// worded as they always have been, naming --force and --claim agent.
func TestBrokerRefusalInFlagWords(t *testing.T) {
	h := initHarness(t)
	h.add("Theirs") // t-1
	h.env["RALPH_AGENT_ID"] = "agent-a"
	plan := peekPlan()
	plan.ClaimMode = loop.ClaimLoop // the loop claims: no claims of the agent's own
	serveBroker(t, h, plan)
	for _, tc := range []struct {
		cmd  []string
		env  map[string]string
		want string
	}{
		{[]string{"task", "done", "t-1", "--force"}, map[string]string{"RALPH_AGENT_ID": ""},
			"ralph: refused: --force is for people; agent agent-a moves only the tasks it holds\n"},
		{[]string{"task", "claim", "t-1"}, nil,
			"ralph: refused: in this run the ralph loop claims the tasks; an agent claims for itself in peek mode only (ralph build --claim agent)\n"},
	} {
		for k, v := range tc.env {
			h.env[k] = v
		}
		r := h.run(tc.cmd...)
		h.env["RALPH_AGENT_ID"] = "agent-a"
		if r.code != exitError || r.stderr != tc.want {
			t.Errorf("%v: exit %d, stderr\n%s\nwant exit %d, stderr\n%s", tc.cmd, r.code, r.stderr, exitError, tc.want)
		}
	}
}

// TestStoreErrorWords: the PostgreSQL store's errors that call for a
// command or a flag read, on stderr, exactly as they did when the library
// wrote the CLI's words itself (the old format strings, below), with the
// chain kept; elsewhere in a message (after a "ralph: " of the CLI's, say)
// they are worded in place.
func TestStoreErrorWords(t *testing.T) {
	const (
		server = "postgres://ralph@db.example/ralph"
		where  = "plan app on " + server
		rootA  = "0123456789ab"
		rootB  = "ba9876543210"
	)
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"no plan", &postgres.NoPlanError{Server: server, Plan: "app"},
			fmt.Sprintf("%v: %s has no ralph plan %q; 'ralph init --db URL --plan %s' makes it", postgres.ErrNoPlan, server, "app", "app")},
		{"other repository", fmt.Errorf("open: %w", &postgres.OtherRepositoryError{Plan: where, Recorded: rootA, Ours: rootB}),
			fmt.Sprintf("open: %v: %s was made for the repository whose root commit is %s; this one's is %s (another plan name, --plan NAME, keeps them apart)",
				postgres.ErrOtherRepository, where, rootA, rootB)},
		{"missing tables", &codedError{code: exitError, err: fmt.Errorf("%w (while listing)", &postgres.MissingTablesError{Plan: where, Detail: `relation "tasks" does not exist`})},
			fmt.Sprintf("postgres: %s: the plan's tables are missing (%s); 'ralph init --db URL' makes them (while listing)", where, `relation "tasks" does not exist`)},
	} {
		got := storeError(c.err)
		if got.Error() != c.want {
			t.Errorf("%s: storeError = %q\nwant %q", c.name, got, c.want)
		}
		if !errors.Is(got, c.err) {
			t.Errorf("%s: storeError lost the chain: %v", c.name, got)
		}
	}
	var ce *codedError
	if err := storeError(&codedError{code: exitNothing, err: &postgres.NoPlanError{Plan: "x"}}); !errors.As(err, &ce) || ce.code != exitNothing {
		t.Errorf("storeError lost the exit code: %v", err)
	}
	if err := errors.New("postgres: something else"); storeError(err) != err {
		t.Errorf("storeError changed an error it has no words for")
	}
}

// TestLoopTextsInFlagWords: the loop's notices, no-specs error and
// closing messages that speak of a field a flag sets (Config.Commit,
// MaxCost, TestCmd, Scope.Feature, a feature's spec) are printed as the
// CLI printed them before the library spoke of its own fields, byte for
// byte; the others pass as they are.
func TestLoopTextsInFlagWords(t *testing.T) {
	unpriced := loop.Receipt{Agent: "opencode", Model: "local/qwen"}
	at := loop.AgentsTest{Command: "go test ./...", Commit: "0123456789abcdef", Uncommitted: "make test"}
	notices := []struct {
		note loop.Note
		want string
	}{
		{loop.Note{Kind: loop.NoteNotice, Message: "lib", Unpriced: &unpriced},
			`opencode reported no cost and no price is known for model "local/qwen": --max-cost cannot count its sessions`},
		{loop.Note{Kind: loop.NoteNotice, Message: "lib", Unpriced: &loop.Receipt{Model: "m"}},
			`the agent reported no cost and no price is known for model "m": --max-cost cannot count its sessions`},
		{loop.Note{Kind: loop.NoteNotice, Message: at.Announcement(), AgentsTest: &at},
			`test gate: "go test ./...", from AGENTS.md at commit 0123456789ab (read when the run began; edits to AGENTS.md during the run are not used); ` +
				`AGENTS.md in the working tree names the test command "make test", which is not committed: it is not run (commit it, or pass --test-cmd)`},
		{loop.Note{Kind: loop.NoteNotice, AgentsTest: &loop.AgentsTest{Command: "go test ./...", Commit: "abc"}},
			`test gate: "go test ./...", from AGENTS.md at commit abc (read when the run began; edits to AGENTS.md during the run are not used)`},
		{loop.Note{Kind: loop.NoteNotice, AgentsTest: &loop.AgentsTest{Uncommitted: "make test"}},
			`AGENTS.md in the working tree names the test command "make test", which is not committed: it is not run (commit it, or pass --test-cmd)`},
		{loop.Note{Kind: loop.NoteNotice, Message: "released task a"}, "released task a"},
	}
	for _, tc := range notices {
		if got := noticeWords(tc.note); got != tc.want {
			t.Errorf("noticeWords(%q) =\n%s\nwant\n%s", tc.note.Message, got, tc.want)
		}
	}

	notGit := fmt.Errorf("%w (/p): not a git repository", loop.ErrNotGitRepo)
	outside := &loop.EmptyFeatureError{Feature: "billing", Outside: 2}
	noSpecs := &loop.NoSpecsError{Missing: "no specs in /p/specs"}
	reports := []struct {
		rep  loop.Report
		want string
	}{
		{loop.Report{Outcome: loop.OutcomeGitFailed, Message: notGit.Error(), Cause: notGit},
			"--commit needs a git repository (/p): not a git repository"},
		{loop.Report{Outcome: loop.OutcomeNoPlan, Message: "iteration limit reached (2) and " + outside.Error(), Cause: outside},
			"iteration limit reached (2) and feature billing has no task (2 tasks were added without --feature billing)"},
		{loop.Report{Outcome: loop.OutcomeNoPlan, Message: strings.TrimPrefix(noSpecs.Error(), "loop: "), Cause: noSpecs},
			"nothing to plan: no specs in /p/specs; write specs in specs/*.md, or give a feature one with 'ralph feature add NAME --spec FILE'"},
		{loop.Report{Outcome: loop.OutcomeGitFailed, Message: "git gate failed: git commit: exit status 1"},
			"git gate failed: git commit: exit status 1"},
		// The text alone is not a cause: a message that merely reads like
		// one is printed as it is.
		{loop.Report{Outcome: loop.OutcomeGitFailed, Message: notGit.Error()}, notGit.Error()},
	}
	if outside.Error() != "feature billing has no task (2 tasks were added outside feature billing)" {
		t.Errorf("EmptyFeatureError = %q", outside)
	}
	for _, tc := range reports {
		if got := reportWords(tc.rep); got != tc.want {
			t.Errorf("reportWords(%q) =\n%s\nwant\n%s", tc.rep.Message, got, tc.want)
		}
	}

	lib := &loop.NoSpecsError{Missing: "feature billing has no spec yet (billing.md)"}
	err := noSpecsError(lib)
	want := "loop: nothing to plan: feature billing has no spec yet (billing.md); write specs in specs/*.md, or give a feature one with 'ralph feature add NAME --spec FILE'"
	if err.Error() != want || !errors.Is(err, loop.ErrNoSpecs) {
		t.Errorf("noSpecsError = %q (ErrNoSpecs in its chain: %v), want %q", err, errors.Is(err, loop.ErrNoSpecs), want)
	}
}

// TestBuildWorkersRefuseCommitAndPeek: the rule that workers take neither
// --commit nor --claim agent is parallel.CheckLoop's, worded by ralph
// build byte for byte as before, whether the workers are asked for
// (--workers) or come from the plan's integration branch.
func TestBuildWorkersRefuseCommitAndPeek(t *testing.T) {
	h := initHarness(t)
	h.add("x")
	agent, _ := fakeAgentPath(t)
	const (
		peek    = "ralph: --workers does not go with --claim agent: each worker's loop claims its task, so that its worktree can start from the integration branch (see 'ralph build --help')\n"
		commit  = "ralph: --workers does not go with --commit: each finished task is committed as it is merged into the integration branch (see 'ralph build --help')\n"
		planned = "ralph: this plan is built in worktrees (it has an integration branch): --commit and --claim agent do not go with that (see 'ralph build --help')\n"
	)
	check := func(want string, args ...string) {
		t.Helper()
		r := h.run(append([]string{"build", "--claude", agent}, args...)...)
		if r.code != exitError || r.stderr != want {
			t.Errorf("build %v: exit %d, stderr\n%s\nwant exit %d, stderr\n%s", args, r.code, r.stderr, exitError, want)
		}
	}
	check(peek, "--workers", "2", "--claim", "agent")
	check(commit, "--workers", "2", "--commit")
	check(peek, "--workers", "2", "--commit", "--claim", "agent")
	st := h.store()
	defer st.Close()
	if _, err := st.RecordPlanSetting(t.Context(), parallel.SettingInto, "team/int"); err != nil {
		t.Fatal(err)
	}
	check(planned, "--commit")
	check(planned, "--claim", "agent")
}

// TestAgentNotFoundInFlagWords: a missing agent executable (the
// library's *agentproc.NotFoundError, which names no flag) is worded with
// the flag that names it, byte for byte as ralph always printed it, and
// keeps loop.ErrAgentNotFound in its chain.
func TestAgentNotFoundInFlagWords(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, tc := range []struct {
		a         agentCLI
		flag, env string
		want      string
	}{
		{agentCLIs[0], "/no/claude", "",
			`agent executable not found: --claude "/no/claude" is not an executable (stat /no/claude: no such file or directory); install Claude Code (npm install -g @anthropic-ai/claude-code) or name the executable with --claude PATH or RALPH_CLAUDE`},
		{agentCLIs[0], "", "",
			`agent executable not found: no claude on PATH; install Claude Code (npm install -g @anthropic-ai/claude-code) or name the executable with --claude PATH or RALPH_CLAUDE`},
		{agentCLIs[1], "/no/codex", "",
			`agent executable not found: --agent-bin "/no/codex" is not an executable (stat /no/codex: no such file or directory); install the Codex CLI (npm install -g @openai/codex) or name the executable with --agent-bin PATH or $RALPH_CODEX`},
		{agentCLIs[2], "", "/no/gemini",
			`agent executable not found: $RALPH_GEMINI "/no/gemini" is not an executable (stat /no/gemini: no such file or directory); install the Gemini CLI (npm install -g @google/gemini-cli) or name the executable with --agent-bin PATH or $RALPH_GEMINI`},
		{agentCLIs[3], "", "",
			`agent executable not found: no opencode on PATH; install OpenCode (npm install -g opencode-ai) or name the executable with --agent-bin PATH or $RALPH_OPENCODE`},
	} {
		_, lib := tc.a.bin.LookPath(tc.flag, tc.env)
		if lib == nil || strings.Contains(lib.Error(), "--") {
			t.Errorf("%s: library error %v, want one naming no flag", tc.a.name, lib)
		}
		err := notFoundError(lib, tc.a.binFlag)
		if got := oneLine(err.Error()); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.a.name, got, tc.want)
		}
		if !errors.Is(err, loop.ErrAgentNotFound) {
			t.Errorf("%s: the CLI's error lost loop.ErrAgentNotFound", tc.a.name)
		}
	}
}
