package agentproc

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/safefile"
	"github.com/ralph-dev/ralph/sandbox"
)

// DefaultGrace is the time between SIGTERM and SIGKILL when the agent and
// what it started are stopped.
const DefaultGrace = 5 * time.Second

// DefaultResultGrace is how long the agent may take to exit once its
// decoder has emitted the result (ARCHITECTURE.md §4).
// Claude Code takes up to about 3 s after its result line when a
// SessionEnd hook is slow; 5 s leaves room for that on a busy machine.
const DefaultResultGrace = 5 * time.Second

// StderrTail is how many bytes of the agent's standard error an Exit
// keeps (the end of it).
const StderrTail = 8 << 10

// EnvRun is the per-run marker Run adds to the agent's environment, with a
// random value: every process the agent starts inherits it, even one that
// left its process group, so that Run can tell the run's processes from
// everyone else's (a concurrent run's among them).
const EnvRun = "RALPH_RUN"

// streamBackstop bounds the wait for more of the agent's output once the
// agent and everything found to be its are gone; only a process out of
// Run's reach that kept the pipe could hold it longer. See awaitEnd.
const streamBackstop = 2 * time.Second

// killWait bounds the wait for SIGKILLed processes to disappear.
const killWait = 2 * time.Second

// Spec is one agent process to run.
type Spec struct {
	// Name is the agent's name for messages: "claude", "codex", …
	Name string
	// Path is the executable (absolute).
	Path string
	// Args are the arguments, without the executable's name.
	Args []string
	// Dir is the working directory; it is checked to be a directory
	// before anything starts ("" is Run's own).
	Dir string
	// Env is the full environment (see Environ); Run adds EnvRun.
	Env []string
	// OwnKeys are the model providers' API keys (APIKey) the agent may
	// log in with: its own provider's. A sandboxed agent is given no
	// other provider's key (a Claude Code session has no use for
	// OPENAI_API_KEY). nil keeps them all: an agent that may use any
	// provider (OpenCode), or a runner that does not say.
	OwnKeys []string
	// Stdin is written to standard input, which is then closed ("" is an
	// empty standard input, closed at once).
	Stdin string
	// LogPath is where the raw standard output is appended, byte for byte
	// as it is read ("" for none). The file and its directory are created
	// if missing; the file is never truncated, and an earlier stream cut
	// in the middle of a line gets its newline first.
	LogPath string
	// LogRoot is a trusted directory above LogPath (the project root):
	// nothing between it and the log is followed if it is a link, the log
	// itself included (see the package documentation, "Raw log"). Empty:
	// LogPath's own directory.
	LogRoot string

	// Timeout is the wall clock limit (0 for none).
	Timeout time.Duration
	// IdleTimeout is the longest the agent may be silent on standard
	// output (0 for none). It no longer applies once the decoder has
	// emitted the result.
	IdleTimeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL; 0 means DefaultGrace.
	Grace time.Duration
	// ResultGrace is how long the agent may take to exit once the decoder
	// has emitted an EventResult; 0 means DefaultResultGrace.
	ResultGrace time.Duration

	// Decode reads the agent's standard output to its end and calls emit
	// for every event, in order. An event of Kind loop.EventResult means
	// the agent has said its last word: from then the idle timeout no
	// longer applies and ResultGrace runs. Decode runs on its own
	// goroutine; io.EOF and os.ErrClosed are not errors. A nil Decode
	// reads the output to its end and emits nothing.
	Decode func(r io.Reader, emit func(loop.Event)) error
	// OnEvent gets every event emitted by Decode and one EventStderr per
	// line of standard error; calls never overlap. Output is not read
	// while OnEvent runs, so it must be quick, or the idle timeout may
	// count its time as the agent's silence. May be nil.
	OnEvent func(loop.Event)
	// Now stamps EventStderr events; nil means time.Now.
	Now func() time.Time

	// Sandbox, when not nil, runs the agent inside it (see the package
	// documentation, "Sandboxed runs"): the agent writes its tree (Dir's:
	// the project, or a worker's tree), a temp directory of its own, and a
	// scratch copy of each of its State directories, and works in a
	// private copy of the tree's git metadata; Exit.Checkout says how that
	// copy's HEAD moved. A sandboxed agent also gets a session of its own
	// (setsid), so that it cannot type into ralph's terminal (TIOCSTI);
	// its process group is the same. Without Sandbox, State is not used.
	Sandbox *sandbox.Boundary
	// ReadOnly, with a Sandbox, makes the agent's tree read-only too (a
	// verifier's session, whose shell runs the tests but must not change
	// the tree: sandbox.SessionParams.ReadOnly); Exit.Checkout is then
	// nil.
	ReadOnly bool
	// State are the agent's own state directories (its runner's
	// StateDirs).
	State []sandbox.State
	// Plan, with a Sandbox, is served to the agent by a broker on a Unix
	// socket of the session's own, named by RALPH_SOCKET in its
	// environment, from before the agent starts until everything it
	// started is gone (see the package documentation, "The plan through
	// a broker"). Without a Sandbox it is not used: an agent outside a
	// sandbox reaches the plan directly, and gets no RALPH_SOCKET.
	Plan *loop.PlanAccess

	// Trace, when set, is told when Run reaches each stage: "spawn" (just
	// before the agent is started), "started", "exited" (the agent exited
	// on its own), "reaped" (everything it started is gone). Benchmarks
	// use it to tell ralph's time from the agent's.
	Trace func(stage string)
}

// StopReason says why Run stopped the agent.
type StopReason int

const (
	// StopNone: the agent exited by itself.
	StopNone StopReason = iota
	// StopCancel: the context was cancelled.
	StopCancel
	// StopTimeout: Spec.Timeout passed.
	StopTimeout
	// StopIdle: the agent was silent for Spec.IdleTimeout.
	StopIdle
	// StopResultGrace: the agent did not exit within Spec.ResultGrace of
	// its result.
	StopResultGrace
)

// String returns the reason's name: "none", "cancel", "timeout", "idle",
// "result-grace".
func (r StopReason) String() string {
	switch r {
	case StopNone:
		return "none"
	case StopCancel:
		return "cancel"
	case StopTimeout:
		return "timeout"
	case StopIdle:
		return "idle"
	case StopResultGrace:
		return "result-grace"
	}
	return fmt.Sprintf("StopReason(%d)", int(r))
}

// Exit is how the agent's process ended.
type Exit struct {
	// ExitCode is the agent's exit code, -1 when a signal killed it.
	ExitCode int
	// Stop says why Run stopped the agent (StopNone: it exited by itself).
	Stop StopReason
	// AfterResult says, for an agent Run stopped, that the decoder had
	// emitted an EventResult before the stop (one emitted at the same
	// moment counts too); for an agent that exited by itself, that the
	// decoder emitted one at all.
	AfterResult bool
	// Cancelled says that the context was cancelled, at any point.
	Cancelled bool
	// Duration is the wall time Run measured, from the start of the agent
	// until its output was read to the end.
	Duration time.Duration
	// Stderr is the last StderrTail bytes of standard error, and then a
	// line of Run's own when it stopped the agent after ResultGrace.
	Stderr string
	// LogErr says why the raw log stopped being written, if it did (a
	// full disk), or why it was not opened: a link refused (errors.Is
	// ErrLink of package safefile). The run goes on without it.
	LogErr error
	// DecodeErr is the error Decode returned, if any.
	DecodeErr error
	// Checkout says how the sandboxed agent's private git checkout moved
	// (nil without Sandbox, or outside a git repository).
	Checkout *loop.Checkout
}

// Run starts the agent and waits until it and every process it started is
// gone (see the package documentation, "Nothing outlives the agent"). Its
// error is non-nil only when the agent could not be started: a missing or
// unexecutable Path (wrapping loop.ErrAgentNotFound), a Dir that is not a
// directory, a log file that cannot be opened. A ctx already cancelled
// returns Exit{Cancelled: true, ExitCode: -1} without starting anything.
func Run(ctx context.Context, s Spec) (Exit, error) {
	name := s.Name
	if name == "" {
		name = filepath.Base(s.Path)
	}
	if s.Dir != "" {
		// Checked here so that a bad directory is not taken for a missing
		// agent (both fail Start with ENOENT).
		if fi, err := os.Stat(s.Dir); err != nil || !fi.IsDir() {
			return Exit{}, fmt.Errorf("%s: working directory %q is not a directory", name, s.Dir)
		}
	}
	if ctx.Err() != nil {
		return Exit{Cancelled: true, ExitCode: -1}, nil
	}

	var logFile *os.File
	var logRefused error
	if s.LogPath != "" {
		f, err := openLog(s.LogRoot, s.LogPath)
		switch {
		case errors.Is(err, safefile.ErrLink):
			logRefused = err // the session runs, unlogged
		case err != nil:
			return Exit{}, fmt.Errorf("%s: log file: %w", name, err)
		default:
			logFile = f
			defer logFile.Close()
		}
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return Exit{}, fmt.Errorf("%s: %w", name, err)
	}
	defer outR.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return Exit{}, fmt.Errorf("%s: %w", name, err)
	}
	defer errR.Close()

	grace := s.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	resultGrace := s.ResultGrace
	if resultGrace <= 0 {
		resultGrace = DefaultResultGrace
	}
	now := s.Now
	if now == nil {
		now = time.Now
	}
	trace := func(stage string) {
		if s.Trace != nil {
			s.Trace(stage)
		}
	}

	// A sandboxed session's scratch directory, which holds its broker's
	// socket too: Sweep removes both if ralph is killed.
	var scratch string
	if s.Sandbox != nil {
		if scratch, err = TempDir("sandbox"); err != nil {
			return Exit{}, fmt.Errorf("%s: sandbox: %w", name, err)
		}
		defer removeAll(scratch)
	}
	var brk *sessionBroker
	if s.Sandbox != nil && s.Plan != nil {
		if brk, err = startBroker(ctx, s.Plan, scratch); err != nil {
			return Exit{}, fmt.Errorf("%s: %w", name, err)
		}
		defer brk.close()
	}
	s.Env = agentEnv(s, brk.socket())

	path, args, env := s.Path, s.Args, s.Env
	var box *sandboxed
	if s.Sandbox != nil {
		var err error
		if box, err = s.sandboxed(scratch); err != nil {
			return Exit{}, fmt.Errorf("%s: sandbox: %w", name, err)
		}
		path, args, env = box.sess.Path, box.sess.Args, box.sess.Env
	}

	marker := newMarker()
	cmd := exec.Command(path, args...)
	cmd.Dir = s.Dir
	// exec.Cmd keeps the last of duplicate keys: the marker wins over any
	// inherited one (an agent run by a ralph inside an agent), and PWD
	// names the working directory — exec.Cmd sets it only when Env is nil,
	// and a stale one sends some agents (OpenCode) to work in ralph's
	// directory instead of Dir.
	cmd.Env = append(env[:len(env):len(env)], EnvRun+"="+marker)
	if s.Dir != "" {
		if abs, err := filepath.Abs(s.Dir); err == nil {
			cmd.Env = append(cmd.Env, "PWD="+abs)
		}
	}
	cmd.Stdin = strings.NewReader(s.Stdin)
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = agentSysProcAttr(s.Sandbox != nil)
	// A backstop: once the agent has exited, Wait gives up on the stdin
	// copy after this long.
	cmd.WaitDelay = grace

	becomeSubreaper()
	// The watchdog stops what the run left if ralph is killed (see the
	// package documentation, "When ralph is killed").
	watch := watchRun(marker, grace)
	defer watch.end()
	trace("spawn")
	start := time.Now()
	var family *family
	waitDone, err := startAgent(cmd, func() {
		// Before Wait: the agent's start time is readable even if it
		// has exited already.
		family = newFamily(cmd.Process.Pid, marker, outR, errR)
		watch.started(family)
		brk.admit(cmd.Process.Pid)
	})
	outW.Close()
	errW.Close()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrPermission) {
			return Exit{}, fmt.Errorf("%w: %s: %v", loop.ErrAgentNotFound, s.Path, unwrapExecErr(err))
		}
		return Exit{}, fmt.Errorf("%s: start %s: %w", name, s.Path, err)
	}
	trace("started")

	var emitMu sync.Mutex
	emit := func(ev loop.Event) {
		if s.OnEvent == nil {
			return
		}
		emitMu.Lock()
		defer emitMu.Unlock()
		s.OnEvent(ev)
	}

	src := &activityReader{r: outR, start: start}
	if logFile != nil {
		src.log = logFile
	}
	streamDone := make(chan error, 1)
	resultRead := make(chan struct{}, 1) // the decoder has emitted a result
	go func() {
		if s.Decode == nil {
			_, err := io.Copy(io.Discard, src)
			streamDone <- err
			return
		}
		err := s.Decode(src, func(ev loop.Event) {
			if ev.Kind == loop.EventResult {
				select {
				case resultRead <- struct{}{}:
				default:
				}
			}
			emit(ev)
		})
		if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
			err = nil
		}
		// What the decoder left unread still goes to the log, and the
		// agent must not block on a full pipe.
		_, _ = io.Copy(io.Discard, src)
		streamDone <- err
	}()

	tail := &tailBuffer{max: StderrTail}
	stderrDone := make(chan struct{})
	errSrc := &activityReader{r: errR, start: start}
	go func() {
		defer close(stderrDone)
		drainStderr(errSrc, tail, func(line string) {
			emit(loop.Event{Kind: loop.EventStderr, At: now(), Text: line})
		})
	}()

	sv := supervisor{timeout: s.Timeout, idleTimeout: s.IdleTimeout, resultGrace: resultGrace, family: family}
	reason, afterResult := sv.supervise(ctx, src, waitDone, resultRead)
	termed := reason != StopNone
	killAt := time.Now().Add(grace) // when what is left gets SIGKILL
	if termed {
		// The agent is still running: SIGTERM it and what it started,
		// SIGKILL after the grace period.
		family.term() // its group too
		t := time.NewTimer(grace)
		select {
		case <-waitDone:
			t.Stop()
		case <-t.C:
			family.kill()
			<-waitDone
		}
	} else {
		trace("exited")
	}
	// The agent has exited; now what it started: shells, MCP servers, a
	// process that left its group must not outlive it. The grace period is
	// not granted twice.
	family.reap(killAt, termed)
	trace("reaped")

	gone := time.Now()
	derr := awaitEnd(streamDone, src, outR, gone)
	awaitEnd(stderrDone, errSrc, errR, gone)
	if reason == StopNone && !afterResult {
		// The decoder may lag behind an agent that exits at once.
		afterResult = ready(resultRead)
	}

	exit := Exit{
		ExitCode:    cmd.ProcessState.ExitCode(),
		Stop:        reason,
		AfterResult: afterResult,
		Cancelled:   ctx.Err() != nil,
		Duration:    time.Since(start),
		Stderr:      tail.String(),
		LogErr:      cmp.Or(logRefused, src.logErr),
		DecodeErr:   derr,
	}
	if reason == StopResultGrace {
		exit.Stderr += fmt.Sprintf("\nralph: the agent did not exit within %v of its result; it and what it started were stopped", resultGrace)
	}
	if box != nil {
		exit.Checkout = box.checkout(ctx)
	}
	return exit, nil
}

// newMarker returns a random value for EnvRun.
func newMarker() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// openLog opens the raw log for appending, never truncating it: a session
// run again under the same iteration (after a usage-limit wait) adds its
// stream after the earlier attempt's. If the earlier stream ended in the
// middle of a line (its agent was killed), a newline is written first, so
// that each attempt's lines stay whole. The log and its missing
// directories below root (trusted; "" for the log's own directory) are
// made and opened without following a link (safefile): an existing log
// must be a regular file with a single name.
func openLog(root, path string) (*os.File, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if root == "" {
		root = dir
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	d, err := safefile.MkdirAllDir(root, dir, 0o755)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	f, err := d.Append(filepath.Base(path), 0o644)
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

// awaitEnd waits for a reader of the agent's output to reach the end of
// its pipe (done), once the agent and what it started are gone (since
// gone). Only a process out of Run's reach (see the package documentation)
// can hold that end back: the pipe is closed once the reader has waited
// streamBackstop for more in vain — never while the reader is busy with
// what it has read (a huge line to decode, an OnEvent writing a huge
// answer to a slow terminal), which would throw away what is still in the
// pipe, the result among it. It returns what done gave.
func awaitEnd[T any](done <-chan T, src *activityReader, pipe *os.File, gone time.Time) T {
	tick := time.NewTicker(streamBackstop / 8)
	defer tick.Stop()
	for {
		select {
		case v := <-done:
			return v
		case <-tick.C:
			if src.readWait(gone) >= streamBackstop {
				pipe.Close() // unblocks the reader
				return <-done
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
//
// onStart runs on that goroutine once the agent has started, before Wait.
func startAgent(cmd *exec.Cmd, onStart func()) (<-chan error, error) {
	started := make(chan error, 1)
	waitDone := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		onStart()
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

// supervisor holds what supervise needs.
type supervisor struct {
	timeout, idleTimeout, resultGrace time.Duration
	family                            *family
}

// supervise waits until the agent exits (StopNone: waitDone was received)
// or must be stopped (waitDone was not received). afterResult says that
// the decoder had emitted its result by then (a result that came at the
// same moment as the stop counts too): from that moment the idle timeout
// no longer applies (the agent has said its last word) and the agent has
// ResultGrace to exit.
func (sv supervisor) supervise(ctx context.Context, src *activityReader, waitDone <-chan error, resultRead <-chan struct{}) (reason StopReason, afterResult bool) {
	var wallC, idleC <-chan time.Time
	if sv.timeout > 0 {
		t := time.NewTimer(sv.timeout)
		defer t.Stop()
		wallC = t.C
	}
	var idle *time.Timer
	if sv.idleTimeout > 0 {
		idle = time.NewTimer(sv.idleTimeout)
		defer idle.Stop()
		idleC = idle.C
	}
	var graceC <-chan time.Time
	for {
		select {
		case <-waitDone:
			return StopNone, afterResult || ready(resultRead)
		case <-ctx.Done():
			return StopCancel, afterResult || ready(resultRead)
		case <-wallC:
			return StopTimeout, afterResult || ready(resultRead)
		case <-idleC:
			// Reads do not reset the timer (they only record the time);
			// when it fires, it checks how long output has been quiet.
			if quiet := src.quietFor(); quiet < sv.idleTimeout {
				idle.Reset(sv.idleTimeout - quiet)
				continue
			}
			return StopIdle, afterResult || ready(resultRead)
		case <-resultRead:
			afterResult = true
			resultRead, idleC = nil, nil
			t := time.NewTimer(sv.resultGrace)
			defer t.Stop()
			graceC = t.C
			// The agent has said its last word: what its tools started
			// has been started. Its tree is recorded now, while it still
			// hangs together (see family.snapshot).
			sv.family.snapshot()
		case <-graceC:
			return StopResultGrace, true
		}
	}
}
