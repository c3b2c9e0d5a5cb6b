package claude

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// DefaultGrace is the time between SIGTERM and SIGKILL when the agent's
// process group is stopped (DESIGN §8).
const DefaultGrace = 5 * time.Second

// DefaultResultGrace is how long the agent may take to exit once its
// result line is read (DESIGN §8, "A result ends the session"). Claude
// Code takes up to about 3 s after its result line when a SessionEnd hook
// is slow; 5 s leaves room for that on a busy machine.
const DefaultResultGrace = 5 * time.Second

// StderrTail is how many bytes of the agent's standard error a RunResult
// keeps (the end of it).
const StderrTail = 8 << 10

// streamBackstop bounds the wait for more of the agent's output once its
// whole process group is gone; only a process that left the group (setsid)
// and kept the pipe could hold it longer. See awaitEnd.
const streamBackstop = 2 * time.Second

// Runner runs Claude Code (or any program that speaks its stream-json) as a
// loop.Runner. The zero value runs the `claude` found by LookPath("") with
// the default grace period. A Runner is safe for concurrent use.
type Runner struct {
	// Path is the agent executable; empty means LookPath("").
	Path string
	// Grace is the time between SIGTERM and SIGKILL when the agent's
	// process group is stopped; zero means DefaultGrace.
	Grace time.Duration
	// ResultGrace is how long the agent may take to exit once its result
	// line is read; then its process group is stopped and the result is
	// used as it is. Zero means DefaultResultGrace.
	ResultGrace time.Duration
	// Now is the clock for event times and usage-limit resets; nil means
	// time.Now.
	Now func() time.Time

	// trace, when set (by the overhead benchmark), is told when Run
	// reaches each stage: "enter", "spawn" (just before the agent is
	// started), "started", "exited" (the agent exited on its own), "return".
	trace func(stage string)
}

func (r *Runner) mark(stage string) {
	if r.trace != nil {
		r.trace(stage)
	}
}

var _ loop.Runner = (*Runner)(nil)

// The environment variables LookPath and Env look at.
const (
	EnvClaude     = "RALPH_CLAUDE"      // the agent executable, when --claude is not given
	EnvAPIKey     = "ANTHROPIC_API_KEY" // removed from the agent's environment unless UseAPIKey
	EnvClaudeCode = "CLAUDECODE"        // set inside Claude Code sessions; always removed
	EnvIsSandbox  = "IS_SANDBOX"        // lets --dangerously-skip-permissions run as root
)

// installHint says how to get or point to the agent.
const installHint = "install Claude Code (npm install -g @anthropic-ai/claude-code) or name the executable with --claude PATH or " + EnvClaude

// LookPath resolves the agent executable: explicit (from --claude PATH) if
// not empty, else $RALPH_CLAUDE if set, else `claude` on PATH. The error
// wraps loop.ErrAgentNotFound and says how to install or point to it.
func LookPath(explicit string) (string, error) {
	return LookPathFrom(explicit, os.Getenv(EnvClaude))
}

// LookPathFrom is LookPath with the value of $RALPH_CLAUDE given (for
// callers that read the environment themselves): flag is --claude's value,
// env $RALPH_CLAUDE's. The error names where a missing executable came
// from: `--claude "X"` or `$RALPH_CLAUDE "X"`.
func LookPathFrom(flag, env string) (string, error) {
	name, from := flag, "--claude"
	if name == "" {
		name, from = env, "$"+EnvClaude
	}
	if name == "" {
		name, from = "claude", "PATH"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		if from == "PATH" {
			return "", fmt.Errorf("%w: no claude on PATH; %s", loop.ErrAgentNotFound, installHint)
		}
		return "", fmt.Errorf("%w: %s %q is not an executable (%v); %s", loop.ErrAgentNotFound, from, name, unwrapExecErr(err), installHint)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return path, nil
}

// openLog opens the raw log for appending, never truncating it: a session
// run again under the same iteration (after a usage-limit wait) adds its
// stream after the earlier attempt's. If the earlier stream ended in the
// middle of a line (its agent was killed), a newline is written first, so
// that each attempt's lines stay whole.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err = f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			_, err = f.Write([]byte{'\n'})
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func unwrapExecErr(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// Args returns the agent's command-line arguments for req. The system
// prompt is passed by file so that its size never meets argv limits:
// --append-system-prompt-file systemPromptFile, which adds it to Claude
// Code's own system prompt (its tool instructions stay), or
// --system-prompt-file when req.ReplaceSystemPrompt asks to replace that.
// systemPromptFile is ignored when the request has no system prompt. A
// request that is not Sandboxed and has Tools gets --tools=A,B (only those
// are offered to the model) and --allowedTools=A,B (they run without
// asking, which -p mode cannot do). The user prompt is not an argument: it
// goes on standard input.
func Args(req loop.RunRequest, systemPromptFile string) []string {
	args := []string{"-p", "--verbose", "--output-format", "stream-json", "--no-session-persistence"}
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	if req.SystemPrompt != "" && systemPromptFile != "" {
		flag := "--append-system-prompt-file"
		if req.ReplaceSystemPrompt {
			flag = "--system-prompt-file"
		}
		args = append(args, flag, systemPromptFile)
	}
	if req.Sandboxed {
		args = append(args, "--dangerously-skip-permissions")
	} else if len(req.Tools) > 0 {
		// --tools restricts the set the model is offered (alone,
		// --allowedTools leaves Edit, Write, Agent, … on offer);
		// --allowedTools pre-approves them, or -p mode refuses every
		// Bash command that is not read-only (such as a test run). With
		// "=", the variadic options cannot swallow what follows.
		tools := strings.Join(req.Tools, ",")
		args = append(args, "--tools="+tools, "--allowedTools="+tools)
	}
	if req.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(req.MaxTurns))
	}
	return args
}

// Env returns the agent's environment: base (ralph's own, os.Environ())
// with req.Env on top (later entries win), without CLAUDECODE, without
// ANTHROPIC_API_KEY unless req.UseAPIKey, and with IS_SANDBOX=1 when the
// request is sandboxed (Claude Code refuses to skip permissions as root
// otherwise).
func Env(base []string, req loop.RunRequest) []string {
	all := make([]string, 0, len(base)+len(req.Env)+1)
	all = append(all, base...)
	all = append(all, req.Env...)
	if req.Sandboxed {
		all = append(all, EnvIsSandbox+"=1")
	}
	index := make(map[string]int, len(all))
	out := make([]string, 0, len(all))
	for _, kv := range all {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if k == EnvClaudeCode || (k == EnvAPIKey && !req.UseAPIKey) {
			continue
		}
		if i, seen := index[k]; seen {
			out[i] = kv
			continue
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// APIKeyNotice returns the notice the CLI prints once per run about
// ANTHROPIC_API_KEY (DESIGN §4), given ralph's environment (os.Environ())
// and --use-api-key; "" when there is nothing to say (no key, not asked to
// use one).
func APIKeyNotice(env []string, useAPIKey bool) string {
	set := false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, EnvAPIKey+"="); ok && v != "" {
			set = true
		}
	}
	switch {
	case set && useAPIKey:
		return "note: ANTHROPIC_API_KEY is passed to the agent (--use-api-key): usage is billed per token to that key"
	case set:
		return "note: ANTHROPIC_API_KEY is set but not passed to the agent, to avoid per-token billing; the agent uses its own login (pass --use-api-key to use the key)"
	case useAPIKey:
		return "note: --use-api-key given but ANTHROPIC_API_KEY is not set; the agent uses its own login"
	}
	return ""
}

func (r *Runner) grace() time.Duration {
	if r.Grace > 0 {
		return r.Grace
	}
	return DefaultGrace
}

func (r *Runner) resultGrace() time.Duration {
	if r.ResultGrace > 0 {
		return r.ResultGrace
	}
	return DefaultResultGrace
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// stopReason says why ralph stopped the agent.
type stopReason int

const (
	stopNone stopReason = iota
	stopCancel
	stopTimeout
	stopIdle
	stopResultGrace // the agent did not exit within ResultGrace of its result
)

// Run runs one agent session; see loop.Runner. It returns an error only
// when the agent could not be started (loop.ErrAgentNotFound, a log file
// or system prompt file that cannot be written). A log that cannot be
// written later (a full disk) does not stop the session: the log stops
// there, and RunResult.LogErr says why. Events go to req.OnEvent
// one at a time (stderr lines come from their own goroutine, but calls never
// overlap); the stream is not read while OnEvent runs, so it must be quick,
// or the idle timeout may count its time as the agent's silence.
func (r *Runner) Run(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
	r.mark("enter")
	defer r.mark("return")
	path := r.Path
	if path == "" {
		var err error
		if path, err = LookPath(""); err != nil {
			return loop.RunResult{}, err
		}
	}
	if req.Dir != "" {
		// Checked here so that a bad directory is not taken for a missing
		// agent (both fail Start with ENOENT).
		if fi, err := os.Stat(req.Dir); err != nil || !fi.IsDir() {
			return loop.RunResult{}, fmt.Errorf("claude: working directory %q is not a directory", req.Dir)
		}
	}
	if ctx.Err() != nil {
		return loop.RunResult{Class: loop.ClassCancelled, IsError: true, ExitCode: -1}, nil
	}

	var spFile string
	if req.SystemPrompt != "" {
		// Named after this process, so that a later Sweep removes it if
		// this process dies before the deferred Remove.
		f, err := os.CreateTemp("", systemPromptPattern(loop.ThisProcess()))
		if err != nil {
			return loop.RunResult{}, fmt.Errorf("claude: system prompt file: %w", err)
		}
		spFile = f.Name()
		defer os.Remove(spFile)
		_, werr := f.WriteString(req.SystemPrompt)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return loop.RunResult{}, fmt.Errorf("claude: system prompt file: %w", werr)
		}
	}

	var logFile *os.File
	if req.LogPath != "" {
		if err := os.MkdirAll(filepath.Dir(req.LogPath), 0o755); err != nil {
			return loop.RunResult{}, fmt.Errorf("claude: log file: %w", err)
		}
		f, err := openLog(req.LogPath)
		if err != nil {
			return loop.RunResult{}, fmt.Errorf("claude: log file: %w", err)
		}
		logFile = f
		defer logFile.Close()
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return loop.RunResult{}, fmt.Errorf("claude: %w", err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return loop.RunResult{}, fmt.Errorf("claude: %w", err)
	}
	defer errR.Close()

	grace := r.grace()
	cmd := exec.Command(path, Args(req, spFile)...)
	cmd.Dir = req.Dir
	cmd.Env = Env(os.Environ(), req)
	cmd.Stdin = strings.NewReader(req.Prompt)
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = agentSysProcAttr()
	// A backstop: once the agent has exited, Wait gives up on the stdin
	// copy after this long.
	cmd.WaitDelay = grace

	r.mark("spawn")
	start := time.Now()
	waitDone, err := startAgent(cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrPermission) {
			return loop.RunResult{}, fmt.Errorf("%w: %s: %v; %s", loop.ErrAgentNotFound, path, unwrapExecErr(err), installHint)
		}
		return loop.RunResult{}, fmt.Errorf("claude: start %s: %w", path, err)
	}
	pgid := cmd.Process.Pid
	r.mark("started")

	var emitMu sync.Mutex
	emit := func(ev loop.Event) {
		if req.OnEvent == nil {
			return
		}
		emitMu.Lock()
		defer emitMu.Unlock()
		req.OnEvent(ev)
	}

	src := &activityReader{r: outR, start: start}
	if logFile != nil {
		src.log = logFile
	}
	var sess Session
	streamDone := make(chan error, 1)
	resultRead := make(chan struct{}, 1) // the stream has given a result line
	go func() {
		dec := NewDecoder(src)
		dec.Now = r.Now
		for {
			line, err := dec.Decode()
			if err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
					err = nil
				}
				streamDone <- err
				return
			}
			for _, ev := range line.Events {
				sess.Add(ev)
				if ev.Kind == loop.EventResult {
					select {
					case resultRead <- struct{}{}:
					default:
					}
				}
				emit(ev)
			}
		}
	}()

	tail := &tailBuffer{max: StderrTail}
	stderrDone := make(chan struct{})
	errSrc := &activityReader{r: errR, start: start}
	go func() {
		defer close(stderrDone)
		drainStderr(errSrc, tail, func(s string) {
			emit(loop.Event{Kind: loop.EventStderr, At: r.now(), Text: s})
		})
	}()

	reason, afterResult := r.supervise(ctx, req, src, waitDone, resultRead)
	termed := reason != stopNone
	killAt := time.Now().Add(grace) // when what is left of the group gets SIGKILL
	if termed {
		// The agent is still running: SIGTERM the group, SIGKILL after
		// the grace period.
		termGroup(pgid)
		t := time.NewTimer(grace)
		select {
		case <-waitDone:
			t.Stop()
		case <-t.C:
			signalGroup(pgid, syscall.SIGKILL)
			<-waitDone
		}
	} else {
		r.mark("exited")
	}
	// The agent has exited; now its group: shells, MCP servers and whatever
	// else it started must not outlive it. The grace period is not granted
	// twice.
	reapGroup(pgid, killAt, termed)

	gone := time.Now()
	awaitEnd(streamDone, src, outR, gone)
	awaitEnd(stderrDone, errSrc, errR, gone)
	elapsed := time.Since(start)

	end := Ending{ExitCode: cmd.ProcessState.ExitCode(), Now: r.now(), StoppedAfterResult: afterResult && termed}
	switch {
	case afterResult:
		// The agent had finished: whatever stopped it afterwards, its
		// result stands — unless it is an error result while ctx is
		// cancelled, as below.
		if ctx.Err() != nil && sess.Result != nil && sess.Result.IsError {
			end.Cancelled = true
		}
	case reason == stopCancel:
		end.Cancelled = true
	case reason == stopTimeout:
		end.TimedOut = true
	case reason == stopIdle:
		end.IdleTimedOut = true
	default:
		// The agent may have been interrupted by the same signal that
		// cancelled ctx (it exits 0 with error_during_execution on SIGINT).
		if ctx.Err() != nil && (sess.Result == nil || sess.Result.IsError) {
			end.Cancelled = true
		}
	}
	res := Classify(&sess, end)
	res.Duration = elapsed
	if res.Model == "" {
		res.Model = req.Model
	}
	res.Stderr = tail.String()
	res.LogErr = src.logErr
	if reason == stopResultGrace {
		res.Stderr += fmt.Sprintf("\nralph: the agent did not exit within %v of its result line; its process group was stopped", r.resultGrace())
	}
	return res, nil
}

// awaitEnd waits for a reader of the agent's output to reach the end of
// its pipe (done), once the agent's process group is gone (since gone).
// Only a process that left the group (setsid) and kept the pipe open can
// hold that end back: the pipe is closed once the reader has waited
// streamBackstop for more in vain — never while the reader is busy with
// what it has read (a huge line to decode, an OnEvent writing a huge
// answer to a slow terminal), which would throw away what is still in
// the pipe, the result line among it.
func awaitEnd[T any](done <-chan T, src *activityReader, pipe *os.File, gone time.Time) {
	tick := time.NewTicker(streamBackstop / 8)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if src.readWait(gone) >= streamBackstop {
				pipe.Close() // unblocks the reader
				<-done
				return
			}
		}
	}
}

// startAgent starts cmd and waits for it on a goroutine of its own; the
// channel gets Wait's error. That goroutine is locked to its OS thread
// from before the fork until the agent has exited. On Linux the agent's
// parent-death signal fires when the thread that forked it ends, not the
// process (go.dev/issue/27505), and the Go runtime ends a thread when a
// goroutine locked to it returns without unlocking: any goroutine of the
// program — a library's — that ran on the forking thread and did so would
// kill the agent. No other goroutine runs on a locked thread, so the
// forking thread lives as long as the agent. The cost is nothing: Wait
// holds a thread in wait(2) all the same.
func startAgent(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	waitDone := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waitDone <- cmd.Wait()
	}()
	return waitDone, <-started
}

// ready reports whether c has a value, without waiting (a nil c has none).
func ready(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// supervise waits until the agent exits (stopNone: waitDone was received)
// or must be stopped (waitDone was not received). afterResult says that
// the stream had given its result line by then (a result that came at the
// same moment as the stop counts too): from that moment the idle timeout
// no longer applies (the agent has said its last word) and the agent has
// ResultGrace to exit.
func (r *Runner) supervise(ctx context.Context, req loop.RunRequest, src *activityReader, waitDone <-chan error, resultRead <-chan struct{}) (reason stopReason, afterResult bool) {
	var wallC, idleC <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		wallC = t.C
	}
	var idle *time.Timer
	if req.IdleTimeout > 0 {
		idle = time.NewTimer(req.IdleTimeout)
		defer idle.Stop()
		idleC = idle.C
	}
	var graceC <-chan time.Time
	for {
		select {
		case <-waitDone:
			return stopNone, afterResult || ready(resultRead)
		case <-ctx.Done():
			return stopCancel, afterResult || ready(resultRead)
		case <-wallC:
			return stopTimeout, afterResult || ready(resultRead)
		case <-idleC:
			// Reads do not reset the timer (they only record the time);
			// when it fires, it checks how long output has been quiet.
			if quiet := src.quietFor(); quiet < req.IdleTimeout {
				idle.Reset(req.IdleTimeout - quiet)
				continue
			}
			return stopIdle, afterResult || ready(resultRead)
		case <-resultRead:
			afterResult = true
			resultRead, idleC = nil, nil
			t := time.NewTimer(r.resultGrace())
			defer t.Stop()
			graceC = t.C
		case <-graceC:
			return stopResultGrace, true
		}
	}
}
