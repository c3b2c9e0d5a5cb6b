package claude

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ralph-dev/ralph/loop"
)

// The test binary doubles as a fake agent (os/exec's own pattern): with
// RALPH_FAKE_AGENT set, TestMain plays that agent instead of running tests.
const fakeAgentEnv = "RALPH_FAKE_AGENT"

// streamBackstop is agentproc's bound on the wait for more output once
// the agent and what it started are gone.
const streamBackstop = 2 * time.Second

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeAgentEnv); mode != "" {
		os.Exit(fakeAgent(mode))
	}
	if n, err := strconv.ParseInt(os.Getenv(decodeChildEnv), 10, 64); err == nil && n > 0 {
		os.Exit(decodeMemoryChild(n))
	}
	if spec := os.Getenv(hugeChildEnv); spec != "" {
		os.Exit(hugeChild(spec))
	}
	os.Exit(m.Run())
}

func out(format string, args ...any) {
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

const fakeInit = `{"type":"system","subtype":"init","session_id":"fake-1","model":"fake-model"}`

func fakeResult(text string) string {
	return `{"type":"result","subtype":"success","is_error":false,"num_turns":1,"total_cost_usd":0.01,"session_id":"fake-1","result":` + jsonQuote(text) + `}`
}

// spawnGrandchild starts a process that ignores SIGTERM, holds stdout and
// sleeps, and once it ignores SIGTERM, reports its pid on the stream.
func spawnGrandchild() { spawnGrandchildWith(nil) }

// spawnGrandchildWith is spawnGrandchild with the grandchild's process
// attributes (a session of its own: it leaves the agent's group).
func spawnGrandchildWith(attr *syscall.SysProcAttr) {
	ready, readyW, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), fakeAgentEnv+"=grandchild", "GORACE=atexit_sleep_ms=0")
	cmd.Stdout = os.Stdout
	cmd.ExtraFiles = []*os.File{readyW} // fd 3, closed by the grandchild when ready
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	readyW.Close()
	// A Go program started with SIGTERM ignored catches it again while
	// its runtime starts, until signal.Ignore: wait for that.
	_, _ = io.ReadAll(ready)
	ready.Close()
	out(`{"type":"system","subtype":"status","status":"grandchild %d"}`, cmd.Process.Pid)
}

// extraFakeModes are more parts the test binary plays, added by other test
// files (some build only on Linux).
var extraFakeModes = map[string]func() int{}

// fakeAgent plays an agent; it returns the exit code.
func fakeAgent(mode string) int {
	if play, ok := extraFakeModes[mode]; ok {
		return play()
	}
	switch mode {
	case "echo":
		// Reports what it was given: stdin, args, environment, the system
		// prompt file's size and hash.
		stdin, _ := io.ReadAll(os.Stdin)
		report := map[string]any{"stdin": string(stdin), "args": os.Args[1:]}
		env := map[string]string{}
		for _, k := range []string{"CLAUDECODE", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "RALPH_AGENT_ID", "RALPH_TASK_ID", "IS_SANDBOX", "RALPH_TEST_INHERITED"} {
			if v, ok := os.LookupEnv(k); ok {
				env[k] = v
			}
		}
		report["env"] = env
		for i, a := range os.Args {
			if (a == "--system-prompt-file" || a == "--append-system-prompt-file") && i+1 < len(os.Args) {
				data, err := os.ReadFile(os.Args[i+1])
				if err != nil {
					report["system_prompt_error"] = err.Error()
				}
				sum := sha256.Sum256(data)
				report["system_prompt_size"] = len(data)
				report["system_prompt_sha256"] = hex.EncodeToString(sum[:])
			}
		}
		b, _ := json.Marshal(report)
		out(fakeInit)
		out(fakeResult(string(b)))
		return 0
	case "echo-text":
		// Answers with its standard input.
		stdin, _ := io.ReadAll(os.Stdin)
		out(fakeInit)
		out(fakeResult(string(stdin)))
		return 0
	case "grandchild":
		signal.Ignore(syscall.SIGTERM)
		os.NewFile(3, "ready").Close()
		time.Sleep(time.Hour)
		return 0
	case "hang":
		// Ignores SIGTERM itself, and leaves a grandchild that does too.
		signal.Ignore(syscall.SIGTERM)
		out(fakeInit)
		spawnGrandchild()
		time.Sleep(time.Hour)
		return 0
	case "stubborn-grandchild":
		// Stops on SIGTERM, but its grandchild does not.
		out(fakeInit)
		spawnGrandchild()
		time.Sleep(time.Hour)
		return 0
	case "result-then-hang":
		// Finishes, then neither exits nor lets SIGTERM end it, and
		// leaves a grandchild that ignores SIGTERM too.
		signal.Ignore(syscall.SIGTERM)
		out(fakeInit)
		spawnGrandchild()
		out(fakeResult("done, then stuck"))
		time.Sleep(time.Hour)
		return 0
	case "result-then-stop":
		// Finishes, then stops itself (state T), as Claude Code does when
		// a SessionEnd hook runs `kill -STOP $PPID`: SIGTERM alone does
		// nothing until SIGCONT.
		out(fakeInit)
		out(fakeResult("done, then stopped"))
		stopSelf()
		time.Sleep(time.Hour)
		return 0
	case "error-result-then-hang":
		out(fakeInit)
		out(`{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"num_turns":1,"result":"Invalid API key"}`)
		time.Sleep(time.Hour)
		return 0
	case "result-then-slow-exit":
		// A slow SessionEnd hook: the exit comes a while after the result.
		out(fakeInit)
		out(fakeResult("done, slowly"))
		time.Sleep(800 * time.Millisecond)
		return 0
	case "exit-leaving-child":
		out(fakeInit)
		spawnGrandchild()
		out(fakeResult("done"))
		return 0
	case "crash":
		out(fakeInit)
		out(`{"type":"assistant","message":{"content":[{"type":"text","text":"working on it"}]}}`)
		fmt.Fprintln(os.Stderr, "panic: boom")
		return 2
	case "huge":
		out(fakeInit)
		fmt.Fprint(os.Stdout, `{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","content":"`)
		chunk := strings.Repeat("y", 1<<20)
		for range 64 {
			fmt.Fprint(os.Stdout, chunk)
		}
		out(`"}]}}`)
		out(fakeResult("after the huge line"))
		return 0
	case "escapee-holds-stdout":
		// Finishes and exits, leaving a grandchild in a session of its
		// own (out of reach of the group's signals) that holds stdout.
		out(fakeInit)
		spawnGrandchildWith(detachedAttr())
		out(fakeResult("done, the pipe still held"))
		return 0
	case "text-then-exit":
		out(fakeInit)
		out(`{"type":"assistant","message":{"content":[{"type":"text","text":"a long answer"}]}}`)
		fmt.Fprintln(os.Stderr, "a last word on stderr")
		out(fakeResult("the answer " + "<task-done>t-1</task-done>"))
		return 0
	case "garbage":
		out(fakeInit)
		out(`this is not json`)
		out(`{"type":"assistant","message":{"content":[{"type":"te`)
		out(`{"type":"mystery","x":1}`)
		out(fakeResult("fine anyway"))
		return 0
	case "drip":
		// Output every 50 ms for about 2 s: an idle timeout of 1 s must
		// not fire.
		out(fakeInit)
		for i := range 40 {
			time.Sleep(50 * time.Millisecond)
			out(`{"type":"system","subtype":"status","status":"tick %d"}`, i)
		}
		out(fakeResult("dripped"))
		return 0
	case "drip-forever":
		out(fakeInit)
		for i := 0; ; i++ {
			time.Sleep(50 * time.Millisecond)
			out(`{"type":"system","subtype":"status","status":"tick %d"}`, i)
		}
	case "silent":
		out(fakeInit)
		time.Sleep(time.Hour)
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown fake agent mode %q\n", mode)
	return 2
}

// fakeRequest returns a request that runs the fake agent in mode.
func fakeRequest(t *testing.T, mode string) loop.RunRequest {
	t.Helper()
	return loop.RunRequest{
		Prompt: "do the thing",
		Model:  "sonnet",
		Dir:    t.TempDir(),
		// A race-enabled test binary sleeps 1 s at exit unless told not to.
		Env:     []string{fakeAgentEnv + "=" + mode, "GORACE=atexit_sleep_ms=0"},
		LogPath: filepath.Join(t.TempDir(), "logs", "iter-1.ndjson"),
	}
}

func testRunner(t *testing.T) *Runner {
	t.Helper()
	return &Runner{Path: os.Args[0], Grace: 500 * time.Millisecond, ResultGrace: time.Second}
}

// collector gathers events from OnEvent.
type collector struct {
	mu     sync.Mutex
	events []loop.Event
}

func (c *collector) add(ev loop.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
}

func (c *collector) kinds() []loop.EventKind {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ks []loop.EventKind
	for _, ev := range c.events {
		if ev.Kind != loop.EventStderr {
			ks = append(ks, ev.Kind)
		}
	}
	return ks
}

// grandchildPID returns the pid the fake agent reported, or 0.
func (c *collector) grandchildPID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range c.events {
		if s, ok := strings.CutPrefix(ev.Text, "grandchild "); ok {
			pid, _ := strconv.Atoi(s)
			return pid
		}
	}
	return 0
}

// processGone reports whether pid has exited (gone, or a zombie waiting to
// be reaped by init).
func processGone(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func TestArgs(t *testing.T) {
	base := []string{"-p", "--verbose", "--output-format", "stream-json", "--no-session-persistence", "--model", "sonnet"}
	tests := []struct {
		name   string
		req    loop.RunRequest
		spFile string
		want   []string
	}{
		{name: "plain", req: loop.RunRequest{Model: "sonnet"}, want: base},
		{
			name: "sandboxed: every permission, tools ignored",
			req:  loop.RunRequest{Model: "sonnet", Sandboxed: true, Tools: []string{"Bash"}},
			want: append(base[:len(base):len(base)], "--dangerously-skip-permissions"),
		},
		{
			// --tools restricts what the model is offered, --allowedTools
			// lets those run without asking; "=" keeps either from
			// swallowing what follows.
			name: "tools: offered and allowed",
			req:  loop.RunRequest{Model: "sonnet", Tools: loop.VerifierTools},
			want: append(base[:len(base):len(base)], "--tools=Bash,Read,Glob,Grep", "--allowedTools=Bash,Read,Glob,Grep"),
		},
		{
			name:   "appended system prompt, max turns",
			req:    loop.RunRequest{Model: "sonnet", SystemPrompt: "x", MaxTurns: 3},
			spFile: "/tmp/sp.md",
			want:   append(base[:len(base):len(base)], "--append-system-prompt-file", "/tmp/sp.md", "--max-turns", "3"),
		},
		{
			name:   "replacing system prompt",
			req:    loop.RunRequest{Model: "sonnet", SystemPrompt: "x", ReplaceSystemPrompt: true},
			spFile: "/tmp/sp.md",
			want:   append(base[:len(base):len(base)], "--system-prompt-file", "/tmp/sp.md"),
		},
		{
			name: "no system prompt: the file is ignored",
			req:  loop.RunRequest{Model: "sonnet"}, spFile: "/tmp/sp.md",
			want: base,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Args(tt.req, tt.spFile)); diff != "" {
				t.Errorf("Args (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunEcho(t *testing.T) {
	// A temporary directory of its own: the check for left-behind system
	// prompt files must not see those of other packages' tests running at
	// the same time.
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("CLAUDECODE", "1")
	t.Setenv("ANTHROPIC_API_KEY", "sk-secret")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "bearer-secret")
	t.Setenv("RALPH_TEST_INHERITED", "yes")
	t.Setenv(EnvIsSandbox, "")
	os.Unsetenv(EnvIsSandbox)                                                           // t.Setenv restores it afterwards
	bigPrompt := strings.Repeat("system prompt line that is long enough\n", 1<<20/38+1) // > 1 MB
	bigSum := sha256.Sum256([]byte(bigPrompt))

	tests := []struct {
		name      string
		edit      func(*loop.RunRequest)
		wantEnv   map[string]string
		wantArgs  []string // checked as a subsequence-free exact list, minus the system prompt file name
		wantSP    bool
		wantStdin string
	}{
		{
			name:      "plain: key and token removed, RALPH_* passed, prompt on stdin",
			edit:      func(r *loop.RunRequest) { r.Env = append(r.Env, "RALPH_AGENT_ID=agent-0123abcd", "RALPH_TASK_ID=t-1") },
			wantEnv:   map[string]string{"RALPH_AGENT_ID": "agent-0123abcd", "RALPH_TASK_ID": "t-1", "RALPH_TEST_INHERITED": "yes"},
			wantArgs:  []string{"-p", "--verbose", "--output-format", "stream-json", "--no-session-persistence", "--model", "sonnet"},
			wantStdin: "do the thing",
		},
		{
			// Skipping permissions outside ralph's sandbox: no IS_SANDBOX
			// (as root, Claude Code would refuse; this stand-in does not).
			name: "use api key, skip permissions, tools ignored, max turns",
			edit: func(r *loop.RunRequest) {
				r.UseAPIKey, r.Sandboxed, r.Tools, r.MaxTurns = true, true, []string{"Bash"}, 7
				r.Env = append(r.Env, "CLAUDECODE=again")
			},
			wantEnv:   map[string]string{"ANTHROPIC_API_KEY": "sk-secret", "ANTHROPIC_AUTH_TOKEN": "bearer-secret", "RALPH_TEST_INHERITED": "yes"},
			wantArgs:  []string{"-p", "--verbose", "--output-format", "stream-json", "--no-session-persistence", "--model", "sonnet", "--dangerously-skip-permissions", "--max-turns", "7"},
			wantStdin: "do the thing",
		},
		{
			name: "tools offered and allowed with =, big system prompt by file, multi-line prompt",
			edit: func(r *loop.RunRequest) {
				r.Tools, r.SystemPrompt = loop.VerifierTools, bigPrompt
				r.Prompt = "line one\nline two\n" + strings.Repeat("z", 300<<10)
			},
			wantEnv:   map[string]string{"RALPH_TEST_INHERITED": "yes"},
			wantArgs:  []string{"-p", "--verbose", "--output-format", "stream-json", "--no-session-persistence", "--model", "sonnet", "--append-system-prompt-file", "FILE", "--tools=Bash,Read,Glob,Grep", "--allowedTools=Bash,Read,Glob,Grep"},
			wantSP:    true,
			wantStdin: "line one\nline two\n" + strings.Repeat("z", 300<<10),
		},
		{
			name: "a system prompt that replaces the agent's",
			edit: func(r *loop.RunRequest) {
				r.Sandboxed, r.SystemPrompt, r.ReplaceSystemPrompt = true, bigPrompt, true
			},
			wantEnv:   map[string]string{"RALPH_TEST_INHERITED": "yes"},
			wantArgs:  []string{"-p", "--verbose", "--output-format", "stream-json", "--no-session-persistence", "--model", "sonnet", "--system-prompt-file", "FILE", "--dangerously-skip-permissions"},
			wantSP:    true,
			wantStdin: "do the thing",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := fakeRequest(t, "echo")
			tt.edit(&req)
			res, err := testRunner(t).Run(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Class != loop.ClassSuccess {
				t.Fatalf("class %s: %s", res.Class, Describe(res))
			}
			var report struct {
				Stdin  string            `json:"stdin"`
				Args   []string          `json:"args"`
				Env    map[string]string `json:"env"`
				SPSize int               `json:"system_prompt_size"`
				SPSum  string            `json:"system_prompt_sha256"`
				SPErr  string            `json:"system_prompt_error"`
			}
			if err := json.Unmarshal([]byte(res.Text), &report); err != nil {
				t.Fatalf("agent report %q: %v", res.Text, err)
			}
			for i := range report.Args {
				if i > 0 && (report.Args[i-1] == "--system-prompt-file" || report.Args[i-1] == "--append-system-prompt-file") {
					report.Args[i] = "FILE"
				}
			}
			if diff := cmp.Diff(tt.wantArgs, report.Args); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantEnv, report.Env); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
			if report.Stdin != tt.wantStdin {
				t.Errorf("stdin: got %d bytes, want %d", len(report.Stdin), len(tt.wantStdin))
			}
			if tt.wantSP {
				if report.SPErr != "" || report.SPSize != len(bigPrompt) || report.SPSum != hex.EncodeToString(bigSum[:]) {
					t.Errorf("system prompt: size %d (want %d), err %q", report.SPSize, len(bigPrompt), report.SPErr)
				}
			}
			// The raw stream went to the log as it came.
			logged, err := os.ReadFile(req.LogPath)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(logged), fakeInit+"\n") || !strings.Contains(string(logged), `"type":"result"`) {
				t.Errorf("log file holds %q", logged)
			}
		})
	}
	// The system prompt file is removed afterwards.
	left, _ := filepath.Glob(filepath.Join(os.TempDir(), "ralph-system-prompt-*"))
	if len(left) > 0 {
		t.Errorf("system prompt files left behind: %v", left)
	}
}

// Two sessions with the same LogPath (an iteration run again after a
// usage-limit wait) leave both streams in it, in order.
// A stream cut mid-line (the agent was killed) is ended with a newline
// before the next one is appended.
func TestRunLogAppends(t *testing.T) {
	tests := []struct {
		name, before, want string
	}{
		{name: "new file"},
		{name: "earlier stream", before: fakeInit + "\n", want: fakeInit + "\n"},
		{name: "earlier stream cut mid-line", before: `{"type":"assis`, want: `{"type":"assis` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logPath := filepath.Join(t.TempDir(), "logs", "iter-1.ndjson")
			if tt.before != "" {
				if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(logPath, []byte(tt.before), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			testLogAppends(t, logPath, tt.want)
		})
	}
}

func testLogAppends(t *testing.T, logPath, before string) {
	t.Helper()
	var want strings.Builder
	want.WriteString(before)
	for _, text := range []string{"first attempt", "second attempt"} {
		req := fakeRequest(t, "echo-text")
		req.Prompt, req.LogPath = text, logPath
		res, err := testRunner(t).Run(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if res.Class != loop.ClassSuccess || res.Text != text {
			t.Fatalf("class %s, text %q: %s", res.Class, res.Text, Describe(res))
		}
		want.WriteString(fakeInit + "\n" + fakeResult(text) + "\n")
	}
	got, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.String(), string(got)); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

func TestRunProcessHygiene(t *testing.T) {
	const grace = 500 * time.Millisecond
	// Generous margins: the race detector and a shared 2-core machine.
	const margin = 3 * time.Second
	tests := []struct {
		name        string
		mode        string
		edit        func(*loop.RunRequest)
		cancelAfter bool // cancel the context on the first event
		wantClass   loop.ErrorClass
		wantText    string
		wantKinds   []loop.EventKind
		maxElapsed  time.Duration
		grandchild  bool
		grace       time.Duration // instead of the default 500 ms
		resultGrace time.Duration // instead of the default 1 s
	}{
		{
			name: "hang with a grandchild: wall timeout kills the whole group", mode: "hang",
			edit:      func(r *loop.RunRequest) { r.Timeout = time.Second },
			wantClass: loop.ClassTimeout, maxElapsed: time.Second + grace + margin, grandchild: true,
		},
		{
			name: "hang with a grandchild: idle timeout", mode: "hang",
			edit:      func(r *loop.RunRequest) { r.IdleTimeout = time.Second },
			wantClass: loop.ClassIdleTimeout, maxElapsed: time.Second + grace + margin, grandchild: true,
		},
		{
			name: "hang with a grandchild: cancel", mode: "hang", cancelAfter: true,
			wantClass: loop.ClassCancelled, maxElapsed: grace + margin, grandchild: true,
		},
		{
			// The grace period runs once for the whole group: the
			// grandchild gets SIGKILL 2 s after the SIGTERM, not 2 s after
			// the agent's exit.
			name: "timeout with a grandchild that outlives SIGTERM", mode: "stubborn-grandchild",
			edit:      func(r *loop.RunRequest) { r.Timeout = time.Second },
			grace:     2 * time.Second,
			wantClass: loop.ClassTimeout, maxElapsed: time.Second + 3*time.Second, grandchild: true,
		},
		{
			// A result ends the session: the agent gets the result grace
			// (1 s) to exit, not the idle timeout (60 s); then the whole
			// group is stopped, SIGKILL included, and the result stands.
			name: "result, then hang with a grandchild: stopped after the result grace", mode: "result-then-hang",
			edit:      func(r *loop.RunRequest) { r.IdleTimeout = time.Minute },
			wantClass: loop.ClassSuccess, wantText: "done, then stuck",
			wantKinds:  []loop.EventKind{loop.EventInit, loop.EventSystem, loop.EventResult},
			maxElapsed: time.Second + grace + margin, grandchild: true,
		},
		{
			// SIGTERM reaches a stopped agent only with a SIGCONT: without
			// it the agent would wait for SIGKILL, 10 s later.
			name: "result, then stopped (state T): SIGCONT lets SIGTERM end it", mode: "result-then-stop",
			edit:      func(r *loop.RunRequest) { r.IdleTimeout = time.Minute },
			grace:     10 * time.Second,
			wantClass: loop.ClassSuccess, wantText: "done, then stopped", maxElapsed: time.Second + margin,
		},
		{
			// The result is used as it is, an error result too.
			name: "error result, then hang: the error stands", mode: "error-result-then-hang",
			edit:      func(r *loop.RunRequest) { r.IdleTimeout = time.Minute },
			wantClass: loop.ClassAuth, wantText: "Invalid API key", maxElapsed: time.Second + grace + margin,
		},
		{
			// The wall timeout after the result does not throw it away.
			name: "result, then hang past the wall timeout: the result stands", mode: "result-then-hang",
			edit:        func(r *loop.RunRequest) { r.Timeout = time.Second },
			resultGrace: time.Minute,
			wantClass:   loop.ClassSuccess, wantText: "done, then stuck", maxElapsed: time.Second + grace + margin, grandchild: true,
		},
		{
			// Exiting within the grace is an ordinary exit: exit code 0
			// counts, and the idle timeout (shorter than the exit's delay,
			// 800 ms, but longer than a loaded machine takes to start the
			// helper) no longer applies once the result is read.
			name: "result, then a slow exit within the grace", mode: "result-then-slow-exit",
			edit:      func(r *loop.RunRequest) { r.IdleTimeout = 400 * time.Millisecond },
			wantClass: loop.ClassSuccess, wantText: "done, slowly", maxElapsed: margin, resultGrace: 3 * time.Second,
		},
		{
			name: "normal exit leaving a grandchild: it is stopped too", mode: "exit-leaving-child",
			wantClass: loop.ClassSuccess, wantText: "done", maxElapsed: grace + margin, grandchild: true,
		},
		{
			name: "crash: non-zero exit, no result", mode: "crash",
			wantClass: loop.ClassCrashed, wantText: "working on it",
			wantKinds: []loop.EventKind{loop.EventInit, loop.EventText}, maxElapsed: margin,
		},
		{
			name: "64 MB line", mode: "huge",
			wantClass: loop.ClassSuccess, wantText: "after the huge line",
			wantKinds: []loop.EventKind{loop.EventInit, loop.EventToolResult, loop.EventResult}, maxElapsed: 20 * time.Second,
		},
		{
			name: "garbage lines are reported and skipped", mode: "garbage",
			wantClass: loop.ClassSuccess, wantText: "fine anyway",
			wantKinds: []loop.EventKind{loop.EventInit, loop.EventMalformed, loop.EventMalformed, loop.EventResult}, maxElapsed: margin,
		},
		{
			// The idle timeout (1 s) is shorter than the run (2 s) but
			// longer than any gap in its output (50 ms).
			name: "slow drip: the idle timeout does not fire while output flows", mode: "drip",
			edit:      func(r *loop.RunRequest) { r.IdleTimeout = 1 * time.Second },
			wantClass: loop.ClassSuccess, wantText: "dripped", maxElapsed: 2*time.Second + margin,
		},
		{
			name: "endless drip: the wall timeout still fires", mode: "drip-forever",
			edit:      func(r *loop.RunRequest) { r.IdleTimeout, r.Timeout = 2*time.Second, 1*time.Second },
			wantClass: loop.ClassTimeout, maxElapsed: 1*time.Second + margin,
		},
		{
			name: "silence: the idle timeout fires", mode: "silent",
			edit:      func(r *loop.RunRequest) { r.IdleTimeout = 300 * time.Millisecond },
			wantClass: loop.ClassIdleTimeout, maxElapsed: 300*time.Millisecond + margin,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := fakeRequest(t, tt.mode)
			if tt.edit != nil {
				tt.edit(&req)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var c collector
			var once sync.Once
			req.OnEvent = func(ev loop.Event) {
				c.add(ev)
				if tt.cancelAfter && ev.Text != "" && strings.HasPrefix(ev.Text, "grandchild") {
					once.Do(cancel)
				}
			}
			runner := testRunner(t)
			if tt.grace != 0 {
				runner.Grace = tt.grace
			}
			if tt.resultGrace != 0 {
				runner.ResultGrace = tt.resultGrace
			}
			start := time.Now()
			res, err := runner.Run(ctx, req)
			elapsed := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantClass, res.Class); diff != "" {
				t.Errorf("Class (-want +got):\n%s\n%s", diff, Describe(res))
			}
			if tt.wantText != "" {
				if diff := cmp.Diff(tt.wantText, res.Text); diff != "" {
					t.Errorf("Text (-want +got):\n%s", diff)
				}
			}
			if tt.wantKinds != nil {
				if diff := cmp.Diff(tt.wantKinds, c.kinds()); diff != "" {
					t.Errorf("event kinds (-want +got):\n%s", diff)
				}
			}
			if elapsed > tt.maxElapsed {
				t.Errorf("Run took %v, want at most %v", elapsed, tt.maxElapsed)
			}
			if tt.grandchild {
				pid := c.grandchildPID()
				if pid == 0 {
					t.Fatal("the fake agent reported no grandchild")
				}
				if !processGone(pid) {
					sendSignal(pid, syscall.SIGKILL)
					t.Errorf("grandchild %d survived the run", pid)
				}
			}
			if res.Class == loop.ClassCrashed && !strings.Contains(res.Stderr, "panic: boom") {
				t.Errorf("Stderr = %q, want the agent's stderr", res.Stderr)
			}
		})
	}
}

func TestRunNotStarted(t *testing.T) {
	t.Run("missing binary", func(t *testing.T) {
		r := &Runner{Path: filepath.Join(t.TempDir(), "no-such-claude")}
		_, err := r.Run(t.Context(), fakeRequest(t, "echo"))
		if !errors.Is(err, loop.ErrAgentNotFound) {
			t.Fatalf("err = %v, want ErrAgentNotFound", err)
		}
	})
	t.Run("log file cannot be created", func(t *testing.T) {
		blocker := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(blocker, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		req := fakeRequest(t, "echo")
		req.LogPath = filepath.Join(blocker, "iter-1.ndjson")
		if _, err := testRunner(t).Run(t.Context(), req); err == nil {
			t.Fatal("Run succeeded with a log path under a file")
		}
	})
	t.Run("missing working directory is not a missing agent", func(t *testing.T) {
		req := fakeRequest(t, "echo")
		req.Dir = filepath.Join(req.Dir, "nope")
		_, err := testRunner(t).Run(t.Context(), req)
		if err == nil || errors.Is(err, loop.ErrAgentNotFound) || !strings.Contains(err.Error(), "working directory") {
			t.Fatalf("err = %v, want a working directory error", err)
		}
	})
	t.Run("context already cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		res, err := testRunner(t).Run(ctx, fakeRequest(t, "echo"))
		if err != nil || res.Class != loop.ClassCancelled {
			t.Fatalf("got %v, %v; want a cancelled result", res.Class, err)
		}
	})
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "claude")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other-agent")
	if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		explicit string
		env      string
		path     string
		want     string
		wantErr  string
	}{
		{name: "explicit wins", explicit: other, env: "/nowhere/x", path: dir, want: other},
		{name: "RALPH_CLAUDE next", env: other, path: dir, want: other},
		{name: "PATH last", path: dir, want: exe},
		{name: "explicit missing", explicit: "/nowhere/claude", path: dir, wantErr: `path "/nowhere/claude" is not an executable`},
		{name: "RALPH_CLAUDE missing", env: "/nowhere/claude", path: dir, wantErr: `$RALPH_CLAUDE "/nowhere/claude" is not an executable`},
		{name: "nothing on PATH", path: t.TempDir(), wantErr: "no claude on PATH; install Claude Code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvClaude, tt.env)
			t.Setenv("PATH", tt.path)
			got, err := LookPath(tt.explicit)
			if tt.wantErr != "" {
				if !errors.Is(err, loop.ErrAgentNotFound) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrAgentNotFound saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestAPIKeysSet: the key variables that are set, in order; an empty one
// is not set.
func TestAPIKeysSet(t *testing.T) {
	tests := []struct {
		env  []string
		want []string
	}{
		{[]string{"ANTHROPIC_AUTH_TOKEN=tok", "HOME=/h", "ANTHROPIC_API_KEY=sk"}, []string{EnvAPIKey, EnvAuthToken}},
		{[]string{"ANTHROPIC_API_KEY=sk", "ANTHROPIC_AUTH_TOKEN="}, []string{EnvAPIKey}},
		{[]string{"HOME=/root", "CLAUDE_CODE_OAUTH_TOKEN=login"}, nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, APIKeysSet(tt.env)); diff != "" {
			t.Errorf("APIKeysSet(%q) (-want +got):\n%s", tt.env, diff)
		}
	}
}

// TestEnv: what the agent's environment keeps of ralph's and of the
// request's, and IS_SANDBOX=1 only in ralph's sandbox
// (ARCHITECTURE.md §7.7).
func TestEnv(t *testing.T) {
	base := []string{"HOME=/h", "CLAUDECODE=1", "ANTHROPIC_API_KEY=sk", "ANTHROPIC_AUTH_TOKEN=tok", "CLAUDE_CODE_OAUTH_TOKEN=login"}
	tests := []struct {
		name      string
		base      []string
		req       loop.RunRequest
		inSandbox bool
		want      []string
	}{
		{"outside the sandbox: no IS_SANDBOX, key and token removed", base, loop.RunRequest{Sandboxed: true}, false,
			[]string{"HOME=/h", "CLAUDE_CODE_OAUTH_TOKEN=login"}},
		{"in ralph's sandbox: IS_SANDBOX=1", base, loop.RunRequest{Sandboxed: true}, true,
			[]string{"HOME=/h", "CLAUDE_CODE_OAUTH_TOKEN=login", "IS_SANDBOX=1"}},
		{"the verifier in the sandbox is in it too", base, loop.RunRequest{Tools: loop.VerifierTools}, true,
			[]string{"HOME=/h", "CLAUDE_CODE_OAUTH_TOKEN=login", "IS_SANDBOX=1"}},
		{"the user's own IS_SANDBOX is kept", append(base, "IS_SANDBOX=1"), loop.RunRequest{Sandboxed: true}, false,
			[]string{"HOME=/h", "CLAUDE_CODE_OAUTH_TOKEN=login", "IS_SANDBOX=1"}},
		{"the sandbox's wins over the user's", append(base, "IS_SANDBOX=yes"), loop.RunRequest{Sandboxed: true}, true,
			[]string{"HOME=/h", "CLAUDE_CODE_OAUTH_TOKEN=login", "IS_SANDBOX=1"}},
		{"--use-api-key keeps both", base, loop.RunRequest{UseAPIKey: true}, false,
			[]string{"HOME=/h", "ANTHROPIC_API_KEY=sk", "ANTHROPIC_AUTH_TOKEN=tok", "CLAUDE_CODE_OAUTH_TOKEN=login"}},
		{"the request cannot put the token back", base, loop.RunRequest{Env: []string{"ANTHROPIC_AUTH_TOKEN=again", "RALPH_TASK_ID=t-1"}}, false,
			[]string{"HOME=/h", "CLAUDE_CODE_OAUTH_TOKEN=login", "RALPH_TASK_ID=t-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Env(tt.base, tt.req, tt.inSandbox)
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tt.want))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("env (-want +got):\n%s", diff)
			}
		})
	}
}

// A reader busy with what it read — a huge line to decode, an OnEvent
// that writes a huge answer to a slow terminal — may still be at work
// long after the agent has exited: what is left in the pipes (the result
// line) must be read all the same, not cut off by the backstop that
// guards against a pipe held open by a process that left the group.
func TestRunSlowConsumerAfterExit(t *testing.T) {
	req := fakeRequest(t, "text-then-exit")
	var c collector
	req.OnEvent = func(ev loop.Event) {
		if ev.Kind == loop.EventText {
			time.Sleep(streamBackstop + time.Second)
		}
		c.add(ev)
	}
	res, err := testRunner(t).Run(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Class != loop.ClassSuccess || res.Text != "the answer <task-done>t-1</task-done>" {
		t.Errorf("class %s, text %q: %s", res.Class, res.Text, Describe(res))
	}
	var stderr bool
	for _, ev := range c.events {
		stderr = stderr || ev.Kind == loop.EventStderr && ev.Text == "a last word on stderr"
	}
	if !stderr {
		t.Error("the agent's stderr line was not reported")
	}
}

// A process that left the agent's group (setsid) and holds its stdout
// cannot keep Run waiting. On Linux it is found (by the run's marker) and
// stopped like the rest — SIGKILL after the grace, as it ignores SIGTERM;
// elsewhere it is out of reach, and once the group is gone and the reader
// has waited streamBackstop for more output in vain, the pipe is closed.
func TestRunPipeHeldByEscapee(t *testing.T) {
	req := fakeRequest(t, "escapee-holds-stdout")
	var c collector
	req.OnEvent = c.add
	runner := testRunner(t)
	start := time.Now()
	res, err := runner.Run(t.Context(), req)
	elapsed := time.Since(start)
	pid := c.grandchildPID()
	if pid == 0 {
		t.Error("the fake agent reported no grandchild")
	}
	gone := pid != 0 && processGone(pid)
	if pid != 0 && !gone {
		sendSignal(pid, syscall.SIGKILL)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Class != loop.ClassSuccess || res.Text != "done, the pipe still held" {
		t.Errorf("class %s, text %q: %s", res.Class, res.Text, Describe(res))
	}
	if runtime.GOOS == "linux" {
		if !gone {
			t.Errorf("the escapee %d survived the run", pid)
		}
		if elapsed > runner.Grace+3*time.Second {
			t.Errorf("Run took %v, want the grace's %v and a little", elapsed, runner.Grace)
		}
		return
	}
	if elapsed < streamBackstop || elapsed > streamBackstop+3*time.Second {
		t.Errorf("Run took %v, want the backstop's %v and a little", elapsed, streamBackstop)
	}
}
