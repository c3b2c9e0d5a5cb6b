package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

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
	err := taskError(fmt.Errorf("progress: %w", held))
	if want := "progress: loop: a live agent holds the task: task t-2 is held by agent-b (holder 7:9@h); pass --force to complete it anyway"; err.Error() != want {
		t.Errorf("taskError: %q, want %q", err, want)
	}
	var back *loop.HeldError
	if !errors.As(err, &back) || back != held || !errors.Is(err, loop.ErrHeldByLiveAgent) {
		t.Errorf("taskError lost the chain: %#v", err)
	}
	// A message that does not end with the refusal's own stays the
	// library's; other errors pass untouched.
	odd := fmt.Errorf("%w (and more)", held)
	if got := taskError(odd); got != odd {
		t.Errorf("taskError(%q) = %q, want it unchanged", odd, got)
	}
	if got := taskError(loop.ErrNotHolder); got != loop.ErrNotHolder {
		t.Errorf("taskError(%v) = %v, want it unchanged", loop.ErrNotHolder, got)
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
