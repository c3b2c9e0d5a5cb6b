package runnertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// Harness says how to run the runner under test against the suite's fake
// agent.
type Harness struct {
	// New returns the runner under test, set to run the program at path
	// as its agent. Give it a short grace period between SIGTERM and
	// SIGKILL (100 ms): the suite stops agents that ignore SIGTERM, and
	// waits for the grace to pass each time.
	New func(t *testing.T, path string) loop.Runner
	// Start is what the agent prints as it starts, before it answers (a
	// CLI's init line, newline-terminated); may be empty. An agent that
	// crashes or hangs prints only this.
	Start string
	// Answer renders what the agent prints on its standard output for a
	// session that ends as a says, Start included.
	Answer func(a Answer) string
	// UsageLimit, if not nil, renders a session whose agent hits a usage
	// limit that resets at reset, and how it exits. Nil: the agent reports
	// none, and the usage-limit subtest is skipped.
	UsageLimit func(reset time.Time) Exit
	// Secrets names variables of ralph's environment that the runner keeps
	// from its agent unless RunRequest.UseAPIKey is set (the API keys
	// that would bill per token).
	Secrets []string
}

// Answer is a session the fake agent plays, for Harness.Answer to render.
type Answer struct {
	// Text is the agent's final text, with sigils.
	Text string
	// Echo is the output of a tool the agent ran before it answered (it
	// holds a sigil that must not reach RunResult.Text); a harness whose
	// agent has no tools leaves it out.
	Echo string
	// Usage is what the session used; CostUSD what the agent says it cost,
	// where its CLI reports costs.
	Usage   loop.Usage
	CostUSD float64
	// SessionID is the session's id, where the CLI reports one.
	SessionID string
}

// Exit is what the fake agent prints and how it exits.
type Exit struct {
	Stdout string
	Stderr string
	Code   int
}

// Option declares something the runner's agent cannot do, so that
// TestRunner skips exactly the subtests that need it, naming the reason.
type Option func(*suite)

// WithoutUsage declares an agent that reports neither tokens nor cost:
// the usage checks are skipped.
func WithoutUsage() Option { return func(s *suite) { s.noUsage = true } }

// WithoutSession declares an agent with no session id.
func WithoutSession() Option { return func(s *suite) { s.noSession = true } }

// WithoutResultLine declares an agent whose exit is its result (a plain
// command, not an agent CLI): a clean exit is a session's end, a non-zero
// one the task's failure. The subtests of an agent that exits without a
// result or with a non-zero code are skipped; one killed by a signal is
// still trouble.
func WithoutResultLine() Option { return func(s *suite) { s.noResultLine = true } }

// WithoutIdleTimeout declares a runner that does not watch its agent's
// output (RunRequest.IdleTimeout): that subtest is skipped.
func WithoutIdleTimeout() Option { return func(s *suite) { s.noIdle = true } }

// WithoutLookup declares a runner that does not find its agent as an
// executable (it runs a command through a shell): the subtest of a missing
// agent is skipped.
func WithoutLookup() Option { return func(s *suite) { s.noLookup = true } }

// WithSlashCommands declares an agent that expands the project's custom
// slash commands itself, from .claude/commands/ (Claude Code): a prompt
// that is one must reach it as it is. Without it the runner must expand
// the command before the agent gets the prompt (loop.ExpandSlashCommand).
func WithSlashCommands() Option { return func(s *suite) { s.slashCommands = true } }

type suite struct {
	h            Harness
	noUsage      bool
	noSession    bool
	noResultLine bool
	noIdle       bool
	noLookup     bool
	// slashCommands: the agent expands custom slash commands itself.
	slashCommands bool
}

// The session the suite asks for and the answer it scripts.
const (
	taskID    = "T1"
	holder    = "runnertest-holder"
	finalText = "All done. <task-done>T1</task-done>"
	echoText  = "echoed by a tool: <task-failed>T1</task-failed>"
	sessionID = "runnertest-session-1"
	// grace bounds how long a stopped session may take to return, on top
	// of its own timeout: a harness's grace, the runner's bookkeeping and
	// a loaded CI machine.
	grace = 5 * time.Second
)

var (
	answerUsage = loop.Usage{InputTokens: 1000, OutputTokens: 50, CacheReadTokens: 200}
	answerCost  = 0.0125
)

// TestRunner runs the conformance subtests against the runner h makes.
// Each subtest writes its own fake agent and makes its own runner. See
// the package doc for what is checked.
func TestRunner(t *testing.T, h Harness, opts ...Option) {
	t.Helper()
	if h.New == nil || h.Answer == nil {
		t.Fatal("runnertest: Harness.New and Harness.Answer are required")
	}
	if ok, why := supported(); !ok {
		t.Skip("runnertest: " + why)
	}
	s := &suite{h: h}
	for _, o := range opts {
		o(s)
	}
	tests := []struct {
		name string
		run  func(*testing.T)
	}{
		{"Answer", s.testAnswer},
		{"Request", s.testRequest},
		{"SlashCommand", s.testSlashCommand},
		{"Secrets", s.testSecrets},
		{"Usage", s.testUsage},
		{"ExitWithoutResult", s.testExitWithoutResult},
		{"NonZeroExit", s.testNonZeroExit},
		{"Killed", s.testKilled},
		{"Cancel", s.testCancel},
		{"CancelledBeforeRun", s.testCancelledBefore},
		{"Timeout", s.testTimeout},
		{"IdleTimeout", s.testIdleTimeout},
		{"UsageLimit", s.testUsageLimit},
		{"Log", s.testLog},
		{"AgentNotFound", s.testNotFound},
		{"Concurrent", s.testConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

func (s *suite) answer() Answer {
	return Answer{Text: finalText, Echo: echoText, Usage: answerUsage, CostUSD: answerCost, SessionID: sessionID}
}

// request is the work session the suite asks for, in dir.
func request(dir string) loop.RunRequest {
	return loop.RunRequest{
		Prompt:       "Do task T1.",
		SystemPrompt: "the protocol",
		Model:        "runnertest-model",
		Sandboxed:    true,
		Dir:          dir,
		Env:          []string{"RALPH_TASK_ID=" + taskID, "RALPH_HOLDER=" + holder, "RALPH_ITERATION=1"},
	}
}

// run runs req with the runner for f and fails the test on an error. It
// checks that OnEvent is not called once Run has returned.
func (s *suite) run(t *testing.T, ctx context.Context, f *fake, req loop.RunRequest) loop.RunResult {
	t.Helper()
	var returned atomic.Bool
	var late atomic.Int32
	user := req.OnEvent
	req.OnEvent = func(ev loop.Event) {
		if returned.Load() {
			late.Add(1)
		}
		if user != nil {
			user(ev)
		}
	}
	res, err := s.h.New(t, f.path).Run(ctx, req)
	returned.Store(true)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := late.Load(); n > 0 {
		t.Errorf("OnEvent called %d times after Run returned", n)
	}
	return res
}

func describe(res loop.RunResult) string {
	return fmt.Sprintf("class %s exit %d text %q stderr %q", res.Class, res.ExitCode, res.Text, res.Stderr)
}

// testAnswer: the final text reaches RunResult.Text with its sigils; a
// tool's output does not.
func (s *suite) testAnswer(t *testing.T) {
	f := newFake(t, Exit{Stdout: s.h.Answer(s.answer())}, thenExit)
	res := s.run(t, t.Context(), f, request(t.TempDir()))
	if res.Class != loop.ClassSuccess || !res.OK() {
		t.Fatalf("%s; want success", describe(res))
	}
	if !strings.Contains(res.Text, finalText) {
		t.Errorf("Text %q lacks the final text %q", res.Text, finalText)
	}
	if strings.Contains(res.Text, "<task-failed>") {
		t.Errorf("Text %q holds a tool's output: sigils come from the final text alone", res.Text)
	}
	if res.ExitCode != 0 || res.IsError {
		t.Errorf("exit %d, is_error %v; want 0, false", res.ExitCode, res.IsError)
	}
	if !s.noSession && res.SessionID != sessionID {
		t.Errorf("SessionID %q, want %q", res.SessionID, sessionID)
	}
	f.gone(t)
}

// testRequest: the prompt on stdin, the system prompt off argv, the
// directory and the environment.
func (s *suite) testRequest(t *testing.T) {
	const inherited = "RALPH_RUNNERTEST_INHERITED"
	t.Setenv(inherited, "from-ralph")
	dir := t.TempDir()
	req := request(dir)
	marker := "runnertest-system-prompt-marker"
	req.SystemPrompt = marker + "\n" + strings.Repeat("protocol text, ", 1<<16) // about 1 MiB
	req.Env = append(req.Env, "RALPH_RUNNERTEST_EXTRA=a value with spaces")
	f := newFake(t, Exit{Stdout: s.h.Answer(s.answer())}, thenExit)
	res := s.run(t, t.Context(), f, req)
	if res.Class != loop.ClassSuccess {
		t.Fatalf("%s; want success", describe(res))
	}
	rec := f.record(t)
	if !strings.Contains(rec.stdin, req.Prompt) {
		t.Errorf("standard input %.200q lacks the prompt %q", rec.stdin, req.Prompt)
	}
	for _, a := range rec.args {
		if strings.Contains(a, marker) {
			t.Errorf("the system prompt is on argv (%d bytes): it must not hit argv limits", len(a))
		}
	}
	if want, _ := filepath.EvalSymlinks(dir); rec.cwd != want {
		t.Errorf("working directory %q, want %q", rec.cwd, want)
	}
	for _, kv := range append(req.Env, inherited+"=from-ralph") {
		if !rec.hasEnv(kv) {
			t.Errorf("environment lacks %q", kv)
		}
	}
}

// testSlashCommand: a prompt that is a custom slash command of the
// project in Dir (peek mode's "/ralph-build <peek>") reaches an agent that
// does not know them as the command's text, its arguments in place, and
// one that does (WithSlashCommands) as it is.
func (s *suite) testSlashCommand(t *testing.T) {
	dir := t.TempDir()
	cmds := filepath.Join(dir, ".claude", "commands")
	if err := os.MkdirAll(cmds, 0o755); err != nil {
		t.Fatal(err)
	}
	const body = "Expanded runnertest command: $ARGUMENTS (end).\n"
	if err := os.WriteFile(filepath.Join(cmds, "runnertest-cmd.md"), []byte("---\ndescription: d\n---\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	req := request(dir)
	args := "## Claimable\n- T1 Do it\n"
	req.Prompt = "/runnertest-cmd " + args
	f := newFake(t, Exit{Stdout: s.h.Answer(s.answer())}, thenExit)
	res := s.run(t, t.Context(), f, req)
	if res.Class != loop.ClassSuccess {
		t.Fatalf("%s; want success", describe(res))
	}
	stdin := f.record(t).stdin
	want := strings.ReplaceAll(body, "$ARGUMENTS", args)
	if s.slashCommands {
		want = req.Prompt
	} else if strings.Contains(stdin, "/runnertest-cmd") {
		t.Errorf("standard input %.300q holds the literal command: an agent that does not know Claude Code's slash commands gets its text (loop.ExpandSlashCommand; WithSlashCommands if yours expands them)", stdin)
	}
	if !strings.Contains(stdin, want) {
		t.Errorf("standard input %.300q lacks %q", stdin, want)
	}
}

// testSecrets: the keys that would bill per token are kept from the agent
// unless UseAPIKey.
func (s *suite) testSecrets(t *testing.T) {
	if len(s.h.Secrets) == 0 {
		t.Skip("the harness names no Secrets")
	}
	for _, k := range s.h.Secrets {
		t.Setenv(k, "runnertest-secret")
	}
	for _, use := range []bool{false, true} {
		f := newFake(t, Exit{Stdout: s.h.Answer(s.answer())}, thenExit)
		req := request(t.TempDir())
		req.UseAPIKey = use
		if res := s.run(t, t.Context(), f, req); res.Class != loop.ClassSuccess {
			t.Fatalf("%s; want success", describe(res))
		}
		rec := f.record(t)
		for _, k := range s.h.Secrets {
			if got := rec.hasEnv(k + "=runnertest-secret"); got != use {
				t.Errorf("UseAPIKey %v: %s passed to the agent: %v", use, k, got)
			}
		}
	}
}

// testUsage: tokens and cost reach the result.
func (s *suite) testUsage(t *testing.T) {
	if s.noUsage {
		t.Skip("WithoutUsage")
	}
	f := newFake(t, Exit{Stdout: s.h.Answer(s.answer())}, thenExit)
	res := s.run(t, t.Context(), f, request(t.TempDir()))
	if res.Class != loop.ClassSuccess {
		t.Fatalf("%s; want success", describe(res))
	}
	if res.Usage != answerUsage {
		t.Errorf("Usage %+v, want %+v", res.Usage, answerUsage)
	}
	switch res.CostSource {
	case "", loop.CostReported:
		if math.Abs(res.CostUSD-answerCost) > 1e-9 {
			t.Errorf("reported cost %v, want the agent's %v", res.CostUSD, answerCost)
		}
	case loop.CostEstimated:
		if res.CostUSD <= 0 {
			t.Errorf("estimated cost %v for %+v, want more than 0", res.CostUSD, res.Usage)
		}
	case loop.CostUnknown:
		if res.CostUSD != 0 {
			t.Errorf("cost %v with source unknown, want 0", res.CostUSD)
		}
	default:
		t.Errorf("CostSource %q is none of loop's", res.CostSource)
	}
}

// testExitWithoutResult: an agent that exits 0 having said nothing final
// crashed.
func (s *suite) testExitWithoutResult(t *testing.T) {
	if s.noResultLine {
		t.Skip("WithoutResultLine")
	}
	f := newFake(t, Exit{Stdout: s.h.Start}, thenExit)
	res := s.run(t, t.Context(), f, request(t.TempDir()))
	if res.Class != loop.ClassCrashed {
		t.Errorf("%s; want crashed (no result)", describe(res))
	}
	f.gone(t)
}

// testNonZeroExit: a non-zero exit without a result crashed, with its code
// and its standard error kept.
func (s *suite) testNonZeroExit(t *testing.T) {
	if s.noResultLine {
		t.Skip("WithoutResultLine")
	}
	f := newFake(t, Exit{Stdout: s.h.Start, Stderr: "panic: runnertest boom\n", Code: 3}, thenExit)
	res := s.run(t, t.Context(), f, request(t.TempDir()))
	if res.Class != loop.ClassCrashed || res.ExitCode != 3 {
		t.Errorf("%s; want crashed with exit 3", describe(res))
	}
	if !strings.Contains(res.Stderr, "runnertest boom") {
		t.Errorf("Stderr %q lacks the agent's last words", res.Stderr)
	}
	f.gone(t)
}

// testKilled: an agent killed by a signal (the OOM killer) crashed.
func (s *suite) testKilled(t *testing.T) {
	f := newFake(t, Exit{Stdout: s.h.Start}, thenKill)
	res := s.run(t, t.Context(), f, request(t.TempDir()))
	if res.Class != loop.ClassCrashed || res.OK() {
		t.Errorf("%s; want crashed", describe(res))
	}
	f.gone(t)
}

// testCancel: cancelling the context stops the agent and its grandchild
// that ignores SIGTERM.
func (s *suite) testCancel(t *testing.T) {
	f := newFake(t, Exit{Stdout: s.h.Start}, thenHang)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		if f.waitReady() {
			cancel()
		}
	}()
	start := time.Now()
	res := s.run(t, ctx, f, request(t.TempDir()))
	if res.Class != loop.ClassCancelled {
		t.Errorf("%s; want cancelled", describe(res))
	}
	if d := time.Since(start); d > grace {
		t.Errorf("Run took %v after a cancel, want under %v", d, grace)
	}
	f.gone(t)
}

// testCancelledBefore: a context cancelled before Run is a cancelled
// session, not an error, and leaves nothing running.
func (s *suite) testCancelledBefore(t *testing.T) {
	f := newFake(t, Exit{Stdout: s.h.Answer(s.answer())}, thenHang)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := s.run(t, ctx, f, request(t.TempDir()))
	if res.Class != loop.ClassCancelled {
		t.Errorf("%s; want cancelled", describe(res))
	}
	f.gone(t)
}

// stopTimeout is the Timeout and IdleTimeout of the subtests that wait for
// them.
const stopTimeout = 300 * time.Millisecond

// testTimeout: the wall-clock timeout stops a busy agent.
func (s *suite) testTimeout(t *testing.T) {
	s.stopped(t, loop.ClassTimeout, "timeout", func(req *loop.RunRequest) { req.Timeout = stopTimeout })
}

// testIdleTimeout: an agent silent for IdleTimeout is stopped.
func (s *suite) testIdleTimeout(t *testing.T) {
	if s.noIdle {
		t.Skip("WithoutIdleTimeout")
	}
	s.stopped(t, loop.ClassIdleTimeout, "idle timeout", func(req *loop.RunRequest) { req.IdleTimeout = stopTimeout })
}

// stopped runs an agent that starts and then hangs, with the limit set
// sets to stopTimeout: the session ends with class want, promptly, and
// leaves no process.
func (s *suite) stopped(t *testing.T, want loop.ErrorClass, limit string, set func(*loop.RunRequest)) {
	f := newFake(t, Exit{Stdout: s.h.Start}, thenHang)
	req := request(t.TempDir())
	set(&req)
	start := time.Now()
	res := s.run(t, t.Context(), f, req)
	if res.Class != want {
		t.Errorf("%s; want %s", describe(res), want)
	}
	if d := time.Since(start); d > stopTimeout+grace {
		t.Errorf("Run took %v with a %v %s", d, stopTimeout, limit)
	}
	f.gone(t)
}

// testUsageLimit: a usage limit is a wait with its reset time, not a
// failure.
func (s *suite) testUsageLimit(t *testing.T) {
	if s.h.UsageLimit == nil {
		t.Skip("the harness renders no UsageLimit")
	}
	reset := time.Now().Add(3 * time.Hour).Truncate(time.Minute)
	f := newFake(t, s.h.UsageLimit(reset), thenExit)
	res := s.run(t, t.Context(), f, request(t.TempDir()))
	if res.Class != loop.ClassUsageLimit || res.UsageLimit == nil {
		t.Fatalf("%s; want usage_limit", describe(res))
	}
	// Some CLIs print the reset to the minute.
	if got := res.UsageLimit.ResetsAt; got.Sub(reset).Abs() > time.Minute {
		t.Errorf("resets at %v, want %v", got, reset)
	}
}

// testLog: the raw stream is appended to LogPath.
func (s *suite) testLog(t *testing.T) {
	stream := s.h.Answer(s.answer())
	f := newFake(t, Exit{Stdout: stream}, thenExit)
	req := request(t.TempDir())
	req.LogRoot = t.TempDir()
	req.LogPath = filepath.Join(req.LogRoot, "logs", "iter-1.ndjson")
	if err := os.MkdirAll(filepath.Dir(req.LogPath), 0o755); err != nil {
		t.Fatal(err)
	}
	const before = "an earlier session's stream\n"
	if err := os.WriteFile(req.LogPath, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	res := s.run(t, t.Context(), f, req)
	if res.Class != loop.ClassSuccess || res.LogErr != nil {
		t.Fatalf("%s, log error %v; want success", describe(res), res.LogErr)
	}
	data, err := os.ReadFile(req.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), before) {
		t.Errorf("the log was not appended to: it starts %.100q", data)
	}
	if !strings.Contains(string(data), strings.TrimSpace(stream)) {
		t.Errorf("the log %.300q lacks the agent's stream", data)
	}
}

// testNotFound: an agent that cannot be found is the one error of Run.
func (s *suite) testNotFound(t *testing.T) {
	if s.noLookup {
		t.Skip("WithoutLookup")
	}
	missing := filepath.Join(t.TempDir(), "no-such-agent")
	_, err := s.h.New(t, missing).Run(t.Context(), request(t.TempDir()))
	if !errors.Is(err, loop.ErrAgentNotFound) {
		t.Errorf("Run with a missing agent: %v, want loop.ErrAgentNotFound", err)
	}
}

// testConcurrent: one runner, sessions at once, each with its own answer.
func (s *suite) testConcurrent(t *testing.T) {
	const n = 3
	f := newFake(t, Exit{Stdout: s.h.Answer(s.answer())}, thenExit)
	r := s.h.New(t, f.path)
	var wg sync.WaitGroup
	results := make([]loop.RunResult, n)
	errs := make([]error, n)
	for i := range n {
		a := s.answer()
		a.Text = fmt.Sprintf("session %d. <task-done>T%d</task-done>", i, i)
		req := request(t.TempDir())
		req.Env = append(req.Env, outEnv+"="+f.output(t, i, s.h.Answer(a)))
		wg.Go(func() { results[i], errs[i] = r.Run(t.Context(), req) })
	}
	wg.Wait()
	for i := range n {
		want := fmt.Sprintf("<task-done>T%d</task-done>", i)
		if errs[i] != nil || results[i].Class != loop.ClassSuccess || !strings.Contains(results[i].Text, want) {
			t.Errorf("session %d: %v, %s; want success with %s", i, errs[i], describe(results[i]), want)
		}
	}
}
