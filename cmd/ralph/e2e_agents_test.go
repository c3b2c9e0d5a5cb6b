package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/agents/codex/codextest"
	"github.com/ralph-dev/ralph/agents/gemini/geminitest"
	"github.com/ralph-dev/ralph/agents/opencode/opencodetest"
	"github.com/ralph-dev/ralph/claude/claudetest"
)

// End-to-end tests of every agent ralph runs (README, "Other agents"), the
// way a user runs them: the ralph binary, a project `ralph init` made,
// `--agent-cli X`, and the real CLI (the pinned release .ci/run installs)
// against a scripted fake of its model API on 127.0.0.1. Without the CLI they
// skip, saying how to install it; under CI=true they fail.

// step is what a scripted agent does next: a shell command, or its final
// text.
type cliStep struct{ shell, text string }

// cliScript scripts one agent session: n is the number of tool results
// so far, last the latest one, user the user's side of the conversation
// (the prompt).
type cliScript func(n int, last, user string) cliStep

// agentKit serves an agent's fake model API with a script, and returns the
// environment that points the pinned CLI at it (ralph finds the CLI through
// $RALPH_<CLI>).
type agentKit struct {
	name  string
	serve func(t *testing.T, script cliScript) []string
}

var agentKits = []agentKit{
	{"claude", func(t *testing.T, script cliScript) []string {
		bin := claudetest.Binary(t)
		api := claudetest.NewAPI(t, func(r claudetest.Request) claudetest.Reply {
			return claudeReply(script(r.ToolResults(), r.LastToolResult(), r.UserText()))
		})
		// claudetest.IsSandbox: most builds run as root without --sandbox.
		return append(api.Env(t.TempDir()), "RALPH_CLAUDE="+bin, claudetest.IsSandbox)
	}},
	{"codex", func(t *testing.T, script cliScript) []string {
		bin := codextest.Binary(t)
		api := codextest.NewAPI(t, func(r codextest.Request) codextest.Reply {
			outs := r.ToolOutputs()
			last := ""
			if len(outs) > 0 {
				last = outs[len(outs)-1]
			}
			s := script(len(outs), last, strings.Join(r.Messages("user"), "\n"))
			if s.shell != "" {
				return codextest.Shell(s.shell)
			}
			return codextest.Text(s.text)
		})
		return append(api.Env(t.TempDir()), "RALPH_CODEX="+bin)
	}},
	{"gemini", func(t *testing.T, script cliScript) []string {
		bin := geminitest.Binary(t)
		api := geminitest.NewAPI(t, func(r geminitest.Request) geminitest.Reply {
			s := script(r.ToolResults(), r.LastToolResult(), r.UserText())
			if s.shell != "" {
				return geminitest.Shell(s.shell)
			}
			return geminitest.Text(s.text)
		})
		return append(api.Env(t.TempDir()), "RALPH_GEMINI="+bin)
	}},
	{"opencode", func(t *testing.T, script cliScript) []string {
		bin := opencodetest.Binary(t)
		api := opencodetest.NewAPI(t, func(r opencodetest.Request) opencodetest.Reply {
			s := script(r.ToolResults(), r.LastToolResult(), r.UserText())
			if s.shell != "" {
				return opencodetest.Shell(s.shell)
			}
			return opencodetest.Text(s.text)
		})
		return append(api.Env(t.TempDir()), "RALPH_OPENCODE="+bin)
	}},
}

func claudeReply(s cliStep) claudetest.Reply {
	if s.shell != "" {
		return claudetest.Bash(s.shell)
	}
	return claudetest.Text(s.text)
}

var taskIDPattern = regexp.MustCompile(`t-[0-9]+`)

// appendTask is the worker of a loop-claimed task: it appends its task id
// to order.txt with a shell command (after running before, if any), then
// reports the task done, naming the id the command printed.
func appendTask(before string) cliScript {
	return func(n int, last, user string) cliStep {
		if n == 0 {
			return cliStep{shell: before + `echo "$RALPH_TASK_ID" >> order.txt && echo "$RALPH_TASK_ID"`}
		}
		return cliStep{text: "Appended the id to order.txt.\n<task-done>" + taskIDPattern.FindString(last) + "</task-done>"}
	}
}

// kitNamed is the kit of agent name.
func kitNamed(name string) agentKit {
	i := slices.IndexFunc(agentKits, func(k agentKit) bool { return k.name == name })
	return agentKits[i]
}

// forEachAgent runs f for every agent ralph runs, each with its own
// project, home and fake API, beside each other (go test's -parallel at
// a time): much of an agent's session is waiting for a CLI to start or
// a command to end.
func forEachAgent(t *testing.T, f func(t *testing.T, kit agentKit)) {
	for _, kit := range agentKits {
		t.Run(kit.name, func(t *testing.T) {
			t.Parallel()
			f(t, kit)
		})
	}
}

// chain adds the three tasks of a new user's plan, whose dependencies run
// against insertion order: t-1 after t-2 after t-3.
func (e *e2e) chain3() {
	e.t.Helper()
	e.ok("task", "add", "Ship it")   // t-1
	e.ok("task", "add", "Build it")  // t-2
	e.ok("task", "add", "Design it") // t-3
	e.ok("task", "dep", "add", "t-1", "t-2")
	e.ok("task", "dep", "add", "t-2", "t-3")
}

// receiptsAgents lists agent:mode of the project's receipts, oldest first.
func (e *e2e) receiptsAgents() []string {
	e.t.Helper()
	var st statusJSON
	if err := json.Unmarshal([]byte(e.ok("status", "--json")), &st); err != nil {
		e.t.Fatal(err)
	}
	var got []string
	for i := len(st.Receipts) - 1; i >= 0; i-- {
		got = append(got, st.Receipts[i].Agent+":"+st.Receipts[i].Mode)
	}
	return got
}

// TestE2EAgentBuild: `ralph build --agent-cli X` finishes a new user's
// three-task plan in dependency order with each agent; the receipts and
// the raw streams name the agent; and a tool command the agent left
// running in a session of its own (setsid) does not outlive its session.
func TestE2EAgentBuild(t *testing.T) {
	forEachAgent(t, func(t *testing.T, kit agentKit) {
		// Late enough to come after the session's end on a loaded machine
		// (Gemini CLI's three sessions took 28 s beside the other agents').
		detach := `setsid sh -c 'sleep 12; echo late > late.txt' >/dev/null 2>&1 < /dev/null & `
		e := newProject(t, kit.serve(t, appendTask(detach)))
		e.chain3()
		start := time.Now()
		r := e.run("build", "--agent-cli", kit.name, "--use-api-key")
		took := time.Since(start)
		if r.code != 0 || !strings.Contains(r.stdout, "complete: all 3 tasks done") {
			t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		t.Logf("%s: 3 tasks in %v", kit.name, took.Round(time.Millisecond))
		if diff := cmp.Diff("t-3\nt-2\nt-1\n", e.read("order.txt")); diff != "" {
			t.Errorf("order the tasks ran in (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{kit.name + ":build", kit.name + ":build", kit.name + ":build"}, e.receiptsAgents()); diff != "" {
			t.Errorf("receipts (-want +got):\n%s", diff)
		}
		// Each receipt names the model the CLI ran, never the loop's tier
		// (which only Claude Code takes as a model name).
		var st statusJSON
		if err := json.Unmarshal([]byte(e.ok("status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		for _, r := range st.Receipts {
			if r.Model == "" || slices.Contains([]string{"opus", "sonnet", "haiku"}, r.Model) {
				t.Errorf("a %s receipt names model %q, not the model the CLI ran", r.Agent, r.Model)
			}
		}
		want := "iter-1-" + kit.name + ".ndjson"
		if kit.name == "claude" {
			want = "iter-1.ndjson"
		}
		if logs, _ := filepath.Glob(filepath.Join(e.dir, ".ralph", "logs", "*", want)); len(logs) != 1 {
			t.Errorf("raw streams: %v, want one %s", logs, want)
		}
		// Every detached command started before the build ended: its
		// sleep after that end, and a second.
		time.Sleep(time.Until(start.Add(took + 13*time.Second)))
		if _, err := os.Stat(filepath.Join(e.dir, "late.txt")); !os.IsNotExist(err) {
			t.Errorf("a detached tool command outlived its session: late.txt %v", err)
		}
		if pids := claudetest.ProcessesWithEnv("RALPH_DIR=" + e.dir); len(pids) > 0 {
			t.Errorf("processes of the agents left running: %v", pids)
		}
	})
}

// TestE2EAgentAPIError: an API that answers 500 is agent trouble that ends
// the build in bounded time (exit 4 with no retries), with the task back
// to pending.
func TestE2EAgentAPIError(t *testing.T) {
	forEachAgent(t, func(t *testing.T, kit agentKit) {
		var env []string
		switch kit.name {
		case "claude":
			api := claudetest.NewAPI(t, func(claudetest.Request) claudetest.Reply { return claudetest.Reply{Status: 500} })
			env = append(api.Env(t.TempDir()), "RALPH_CLAUDE="+claudetest.Binary(t), claudetest.IsSandbox)
		case "codex":
			api := codextest.NewAPI(t, func(codextest.Request) codextest.Reply { return codextest.Status(500, "boom") })
			env = append(api.Env(t.TempDir()), "RALPH_CODEX="+codextest.Binary(t))
		case "gemini":
			api := geminitest.NewAPI(t, func(geminitest.Request) geminitest.Reply { return geminitest.Status(500, "boom") })
			env = append(api.Env(t.TempDir()), "RALPH_GEMINI="+geminitest.Binary(t))
		case "opencode":
			api := opencodetest.NewAPI(t, func(opencodetest.Request) opencodetest.Reply {
				r := opencodetest.Status(500, "boom")
				r.Header = map[string]string{"retry-after-ms": "100"}
				return r
			})
			env = append(api.Env(t.TempDir()), "RALPH_OPENCODE="+opencodetest.Binary(t))
		}
		e := newProject(t, env)
		e.ok("task", "add", "Do it")
		start := time.Now()
		r := e.run("build", "--agent-cli", kit.name, "--use-api-key", "--max-retries", "0")
		took := time.Since(start)
		t.Logf("%s: 500 ended the build in %v", kit.name, took.Round(time.Millisecond))
		if r.code != 4 {
			t.Fatalf("build: exit %d, want 4\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if got := e.show("t-1").Status; got != "pending" {
			t.Errorf("t-1 is %s, want pending", got)
		}
		if took > time.Minute {
			t.Errorf("the build took %v on an API that answers 500", took)
		}
	})
}

// TestE2EAgentInterrupt: SIGINT to ralph while the agent's tool command
// runs: exit 130, the claim released, and every process of the agent gone.
func TestE2EAgentInterrupt(t *testing.T) {
	forEachAgent(t, func(t *testing.T, kit agentKit) {
		e := newProject(t, kit.serve(t, func(n int, last, user string) cliStep {
			if n == 0 {
				return cliStep{shell: `echo started > started.txt; sleep 60; echo "$RALPH_TASK_ID"`}
			}
			return cliStep{text: "<task-done>t-1</task-done>"}
		}))
		e.ok("task", "add", "Do it")
		cmd := exec.Command(e.bin, "build", "--agent-cli", kit.name, "--use-api-key")
		cmd.Dir, cmd.Env = e.dir, e.env
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Process.Kill()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(e.dir, "started.txt")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the tool command never started\nstdout:\n%s\nstderr:\n%s", out.String(), errb.String())
			}
		}
		sent := time.Now()
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		t.Logf("%s: exited %v after SIGINT", kit.name, time.Since(sent).Round(time.Millisecond))
		if cmd.ProcessState.ExitCode() != 130 {
			t.Fatalf("build: %v, want exit 130\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
		}
		if pids := claudetest.ProcessesWithEnv("RALPH_DIR=" + e.dir); len(pids) > 0 {
			t.Errorf("processes of the agent left running after SIGINT: %v", pids)
		}
		if got := e.show("t-1").Status; got != "pending" {
			t.Errorf("t-1 is %s after SIGINT, want pending (released)", got)
		}
	})
}

// TestE2EVerifiedByAnotherAgent: Claude Code does the work and Codex
// verifies it, read-only in its own way — named (`--verify
// --verify-agent-cli codex`), or as the other agent of a pool (`--verify
// --agent-cli claude,codex`: the verifier is another agent than the
// work's); the receipts and the raw streams say which agent did what.
func TestE2EVerifiedByAnotherAgent(t *testing.T) {
	claudeKit, codexKit := kitNamed("claude"), kitNamed("codex")
	verifier := func(n int, last, user string) cliStep {
		if !strings.Contains(user, "You are the verifier of ralph") {
			return cliStep{text: "not a verifier prompt"}
		}
		if n == 0 {
			// Codex's read-only sandbox refuses the write.
			return cliStep{shell: `cat order.txt; echo verifier > verifier-wrote.txt`}
		}
		return cliStep{text: "order.txt holds the id.\n<verify-pass/>"}
	}
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"named", []string{"--verify-agent-cli", "codex"}},
		{"pool", []string{"--agent-cli", "claude,codex"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := append(claudeKit.serve(t, appendTask("")), codexKit.serve(t, verifier)...)
			e := newProject(t, env)
			e.chain3()
			r := e.run(append([]string{"build", "--verify", "--use-api-key"}, tt.args...)...)
			if r.code != 0 || !strings.Contains(r.stdout, "complete: all 3 tasks done") {
				t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			want := []string{"claude:build", "codex:verify", "claude:build", "codex:verify", "claude:build", "codex:verify"}
			if diff := cmp.Diff(want, e.receiptsAgents()); diff != "" {
				t.Errorf("receipts (-want +got):\n%s", diff)
			}
			if _, err := os.Stat(filepath.Join(e.dir, "verifier-wrote.txt")); !os.IsNotExist(err) {
				t.Errorf("the read-only verifier wrote a file: %v", err)
			}
			for _, name := range []string{"iter-1.ndjson", "iter-1-verify-codex.ndjson"} {
				if logs, _ := filepath.Glob(filepath.Join(e.dir, ".ralph", "logs", "*", name)); len(logs) != 1 {
					t.Errorf("raw stream %s: found %v", name, logs)
				}
			}
		})
	}
}

// TestE2EAgentSandbox: with --sandbox, an agent's tool command can write
// in the project but not next to it; the build goes on.
func TestE2EAgentSandbox(t *testing.T) {
	needBwrap(t)
	forEachAgent(t, func(t *testing.T, kit agentKit) {
		outside := t.TempDir()
		escape := filepath.Join(outside, "escape.txt")
		try := `echo in > inside.txt; echo out > ` + escape + `; `
		env := append(kit.serve(t, appendTask(try)), "TMPDIR="+t.TempDir())
		e := newProject(t, env)
		e.ok("task", "add", "Do it")
		r := e.run("build", "--agent-cli", kit.name, "--use-api-key", "--sandbox")
		if r.code != 0 || !strings.Contains(r.stdout, "complete: all 1 task done") {
			t.Fatalf("build --sandbox: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if got := e.read("inside.txt"); got != "in\n" {
			t.Errorf("inside.txt = %q, want the sandboxed agent's write", got)
		}
		if _, err := os.Stat(escape); !os.IsNotExist(err) {
			t.Errorf("the sandboxed agent wrote outside the project: %v", err)
		}
	})
}

// TestE2EAgentUsageLimit: a usage limit the CLI reports (Codex: the
// ChatGPT plan's limit; Gemini CLI: a spent daily quota) stops the build
// with exit 10 under --on-usage-limit stop, the task back to pending.
// OpenCode reports none of its own (it relays the provider's words).
func TestE2EAgentUsageLimit(t *testing.T) {
	for _, name := range []string{"codex", "gemini"} {
		t.Run(name, func(t *testing.T) {
			var env []string
			switch name {
			case "codex":
				api := codextest.NewAPI(t, func(codextest.Request) codextest.Reply {
					return codextest.UsageLimit(time.Now().Add(2 * time.Hour))
				})
				env = append(api.Env(t.TempDir()), "RALPH_CODEX="+codextest.Binary(t))
			case "gemini":
				api := geminitest.NewAPI(t, func(geminitest.Request) geminitest.Reply { return geminitest.DailyQuota() })
				env = append(api.Env(t.TempDir()), "RALPH_GEMINI="+geminitest.Binary(t))
			}
			e := newProject(t, env)
			e.ok("task", "add", "Do it")
			r := e.run("build", "--agent-cli", name, "--use-api-key", "--on-usage-limit", "stop")
			if r.code != 10 || !strings.Contains(r.stdout+r.stderr, "usage limit") {
				t.Fatalf("build: exit %d, want 10 saying usage limit\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if got := e.show("t-1").Status; got != "pending" {
				t.Errorf("t-1 is %s, want pending", got)
			}
		})
	}
}

// TestE2EAgentPeekMode: `ralph build --claim agent` with agents that do not
// know Claude Code's slash commands: ralph expands /ralph-build from the
// file 'ralph init' installed, and the agent claims, works and reports
// through $RALPH_BIN itself.
func TestE2EAgentPeekMode(t *testing.T) {
	for _, kit := range agentKits[1:] { // Claude Code's peek mode is TestE2EPeekMode
		t.Run(kit.name, func(t *testing.T) {
			t.Parallel() // as forEachAgent
			peekMode(t, kit)
		})
	}
}

// peekMode is TestE2EAgentPeekMode for one agent.
func peekMode(t *testing.T, kit agentKit) {
	e := newProject(t, kit.serve(t, func(n int, last, user string) cliStep {
		if !strings.Contains(user, "You are one iteration of a ralph build loop") || strings.Contains(user, "/ralph-build") {
			return cliStep{text: "the prompt was not the expanded /ralph-build command"}
		}
		if n == 0 {
			id := taskIDPattern.FindString(user[strings.Index(user, "You are one iteration"):])
			return cliStep{shell: `"$RALPH_BIN" task claim ` + id + ` && echo ` + id + ` >> order.txt && "$RALPH_BIN" task done ` + id + ` --summary "appended"`}
		}
		return cliStep{text: "Done and reported."}
	}))
	e.chain3()
	r := e.run("build", "--agent-cli", kit.name, "--use-api-key", "--claim", "agent")
	if r.code != 0 {
		t.Fatalf("build --claim agent: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if diff := cmp.Diff("t-3\nt-2\nt-1\n", e.read("order.txt")); diff != "" {
		t.Errorf("order the agent claimed the tasks in (-want +got):\n%s", diff)
	}
	if got := e.ok("task", "plan-status"); got != "open=0 active=0 done=3 failed=0 blocked=0 total=3\n" {
		t.Errorf("plan-status: %s", got)
	}
}

// TestE2EOpenCodePermissionRefused: the real OpenCode, whose config sets
// bash to "ask" (which `opencode run` rejects), ends the build at once —
// one session, no retry — with exit 4 and words that name the permission
// and how to allow it, free of OpenCode's terminal codes; the task is
// back to pending.
func TestE2EOpenCodePermissionRefused(t *testing.T) {
	api := opencodetest.NewAPI(t, func(r opencodetest.Request) opencodetest.Reply {
		if r.ToolResults() == 0 {
			return opencodetest.Shell("make test")
		}
		return opencodetest.Text("<task-done>t-1</task-done>")
	})
	env := append(api.Env(t.TempDir()), "RALPH_OPENCODE="+opencodetest.Binary(t), `OPENCODE_CONFIG_CONTENT={"permission":{"bash":"ask"}}`)
	e := newProject(t, env)
	e.ok("task", "add", "Do it")
	r := e.run("build", "--agent-cli", "opencode", "--use-api-key")
	if r.code != 4 {
		t.Fatalf("build: exit %d, want 4\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"OpenCode's permissions refused bash (make test)", `{"permission": {"bash": "allow"}}`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stdout+r.stderr, "\x1b") || strings.Contains(r.stdout+r.stderr, `\x1b`) {
		t.Errorf("the output carries OpenCode's terminal codes:\n%s\n%s", r.stdout, r.stderr)
	}
	if n := len(api.Requests()); n != 1 {
		t.Errorf("%d API requests, want 1: a refusal is not retried", n)
	}
	if got := e.show("t-1").Status; got != "pending" {
		t.Errorf("t-1 is %s, want pending", got)
	}
}

// TestE2EAgentPool: `ralph build --agent-cli claude,codex` with the real
// CLIs. Claude Code, logged in to a subscription, meets its usage limit
// on the first session; the build goes on with Codex at once and
// finishes the plan, no wait, and the receipts and raw streams name
// both. With --max-cost-per-agent, Codex's first session spends its cap
// (its cost estimated from the tokens) and Claude Code does the rest.
func TestE2EAgentPool(t *testing.T) {
	claudeKit, codexKit := kitNamed("claude"), kitNamed("codex")
	t.Run("usage limit", func(t *testing.T) {
		reset := time.Now().Add(2 * time.Hour).Unix()
		e := newProject(t, append(claudeLimited(t, reset), codexKit.serve(t, appendTask(""))...))
		e.chain3()
		start := time.Now()
		r := e.run("build", "--agent-cli", "claude,codex")
		t.Logf("claude's usage limit, then codex: 3 tasks in %v", time.Since(start).Round(time.Millisecond))
		if r.code != 0 || !strings.Contains(r.stdout, "complete: all 3 tasks done") {
			t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		want := "claude hit its usage limit (resets at " + time.Unix(reset, 0).UTC().Format(time.RFC3339) + "); going on with codex"
		if !strings.Contains(r.stdout+r.stderr, want) || strings.Contains(r.stdout, "waiting until") {
			t.Errorf("the build does not say %q, or it waited:\nstdout:\n%s\nstderr:\n%s", want, r.stdout, r.stderr)
		}
		if diff := cmp.Diff("t-3\nt-2\nt-1\n", e.read("order.txt")); diff != "" {
			t.Errorf("order the tasks ran in (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"claude:build", "codex:build", "codex:build", "codex:build"}, e.receiptsAgents()); diff != "" {
			t.Errorf("receipts (-want +got):\n%s", diff)
		}
		if st := e.ok("status"); !strings.Contains(st, "codex") || !strings.Contains(st, "claude") {
			t.Errorf("ralph status does not name both agents:\n%s", st)
		}
		var runs []runJSON
		if err := json.Unmarshal([]byte(e.ok("runs", "--json")), &runs); err != nil {
			t.Fatal(err)
		}
		if len(runs) != 1 || !slices.Equal(runs[0].AgentNames, []string{"claude", "codex"}) {
			t.Errorf("ralph runs: %+v, want one run on claude, then codex", runs)
		}
		if out := e.ok("runs"); !strings.Contains(out, "RAN ON") || !strings.Contains(out, "claude,codex") {
			t.Errorf("ralph runs does not say the run ran on claude, then codex:\n%s", out)
		}
		for _, name := range []string{"iter-1.ndjson", "iter-1-codex.ndjson"} {
			if logs, _ := filepath.Glob(filepath.Join(e.dir, ".ralph", "logs", "*", name)); len(logs) != 1 {
				t.Errorf("raw stream %s: found %v", name, logs)
			}
		}
	})
	t.Run("workers", func(t *testing.T) {
		// The pool is the build's: the first worker to meet Claude
		// Code's limit moves both workers to Codex.
		env := claudeLimited(t, time.Now().Add(time.Hour).Unix())
		e := newProject(t, append(env, codexKit.serve(t, func(n int, last, user string) cliStep {
			if n == 0 {
				return cliStep{shell: `echo "$RALPH_TASK_ID"; echo work > "$RALPH_TASK_ID.txt"`}
			}
			id := taskIDPattern.FindString(last)
			return cliStep{text: "Wrote " + id + ".txt.\n<task-done>" + id + "</task-done>"}
		})...))
		commitProject(t, e.dir)
		e.ok("task", "add", "Left")                                               // t-1
		e.ok("task", "add", "Right")                                              // t-2
		e.ok("task", "add", "Both", "--blocked-by", "t-1", "--blocked-by", "t-2") // t-3
		r := e.run("build", "--agent-cli", "claude,codex", "--workers", "2")
		if r.code != 0 || !strings.Contains(r.stdout, "complete: all 3 tasks done") {
			t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		var st statusJSON
		if err := json.Unmarshal([]byte(e.ok("status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		var limited, worked int
		for _, rc := range st.Receipts {
			switch {
			case rc.Agent == "claude" && rc.ExitReason == "usage_limit":
				limited++
			case rc.Agent == "codex" && rc.ExitReason == "success":
				worked++
			default:
				t.Errorf("receipt of %s ended %s", rc.Agent, rc.ExitReason)
			}
		}
		// Each worker may have started Claude Code before the other's
		// session met the limit; none after.
		if limited < 1 || limited > 2 || worked != 3 {
			t.Errorf("%d claude sessions limited and %d codex sessions done, want 1 or 2 and 3", limited, worked)
		}
		out, err := exec.Command("git", "-C", e.dir, "log", "--format=%(trailers:key=Ralph-Task,valueonly)", "ralph/integration").CombinedOutput()
		if got := strings.Fields(string(out)); err != nil || len(got) != 3 {
			t.Errorf("landed %v (%v); want t-1, t-2, t-3 once each", got, err)
		}
	})
	t.Run("cost cap", func(t *testing.T) {
		env := append(claudeKit.serve(t, appendTask("")), codexKit.serve(t, appendTask(""))...)
		e := newProject(t, env)
		e.chain3()
		// A Codex session of the fake API's tokens is estimated at
		// $0.0224, a Claude Code one costs $0.0057: $0.02 is one Codex
		// session, and more than two of Claude Code's.
		r := e.run("build", "--agent-cli", "codex,claude", "--use-api-key", "--max-cost-per-agent", "0.02")
		if r.code != 0 || !strings.Contains(r.stdout, "complete: all 3 tasks done") {
			t.Fatalf("build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout+r.stderr, "codex reached its cost cap") || !strings.Contains(r.stdout, "going on with claude") || !strings.Contains(r.stdout, "-- agent: claude") {
			t.Errorf("the build does not say codex reached its cap and claude went on:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		}
		if diff := cmp.Diff([]string{"codex:build", "claude:build", "claude:build"}, e.receiptsAgents()); diff != "" {
			t.Errorf("receipts (-want +got):\n%s", diff)
		}
	})
}

// claudeLimited is the environment of the real Claude Code logged in to a
// subscription (no API key: ralph keeps it from the agent without
// --use-api-key) whose every request meets the usage limit that resets at
// reset (Unix seconds), as the API's unified rate-limit headers say it.
func claudeLimited(t *testing.T, reset int64) []string {
	api := claudetest.NewAPI(t, func(claudetest.Request) claudetest.Reply {
		return claudetest.Reply{Status: 429,
			Body: `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit. Please try again later."}}`,
			Header: map[string]string{
				"anthropic-ratelimit-unified-status":               "rejected",
				"anthropic-ratelimit-unified-reset":                strconv.FormatInt(reset, 10),
				"anthropic-ratelimit-unified-representative-claim": "five_hour",
			}}
	})
	return append(api.Env(t.TempDir()), "RALPH_CLAUDE="+claudetest.Binary(t), claudetest.IsSandbox, "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-not-a-token")
}
