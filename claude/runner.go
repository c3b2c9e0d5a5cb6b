package claude

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/sandbox"
)

// DefaultGrace is the time between SIGTERM and SIGKILL when the agent and
// what it started are stopped: agentproc.DefaultGrace.
const DefaultGrace = agentproc.DefaultGrace

// DefaultResultGrace is how long the agent may take to exit once its
// result line is read (ARCHITECTURE.md §4):
// agentproc.DefaultResultGrace. Claude Code takes up to about 3 s after
// its result line when a SessionEnd hook is slow; 5 s leaves room for
// that on a busy machine.
const DefaultResultGrace = agentproc.DefaultResultGrace

// StderrTail is how many bytes of the agent's standard error a RunResult
// keeps (the end of it): agentproc.StderrTail.
const StderrTail = agentproc.StderrTail

// Runner runs Claude Code (or any program that speaks its stream-json) as a
// loop.Runner. The zero value runs the `claude` found by LookPath("") with
// the default grace period. A Runner is safe for concurrent use.
type Runner struct {
	// Path is the agent executable; empty means LookPath("").
	Path string
	// Grace is the time between SIGTERM and SIGKILL when the agent and
	// what it started are stopped; zero means DefaultGrace.
	Grace time.Duration
	// ResultGrace is how long the agent may take to exit once its result
	// line is read; then it and what it started are stopped and the
	// result is used as it is. Zero means DefaultResultGrace.
	ResultGrace time.Duration
	// Now is the clock for event times and usage-limit resets; nil means
	// time.Now.
	Now func() time.Time

	// trace, when set (by the overhead benchmark), is told when Run
	// reaches each stage: "enter", then agentproc.Spec.Trace's stages
	// ("spawn", "started", "exited", "reaped"), then "return".
	trace func(stage string)
	// Sandbox, when not nil, runs the agent in it (ralph's --sandbox):
	// it writes only its tree (the project, or its worker's tree), a temp
	// directory and a scratch copy of its own state (StateDirs), and
	// works in a private copy of the tree's git metadata
	// (RunResult.Checkout says how that moved).
	Sandbox *sandbox.Boundary
}

func (r *Runner) mark(stage string) {
	if r.trace != nil {
		r.trace(stage)
	}
}

var _ loop.Runner = (*Runner)(nil)

// The environment variables LookPath and Env look at.
const (
	EnvClaude     = "RALPH_CLAUDE"         // the agent executable, when Runner.Path is empty
	EnvAPIKey     = "ANTHROPIC_API_KEY"    // removed from the agent's environment unless UseAPIKey
	EnvAuthToken  = "ANTHROPIC_AUTH_TOKEN" // a bearer token for the API, billed per token like the key: removed with it
	EnvClaudeCode = "CLAUDECODE"           // set inside Claude Code sessions; always removed
	EnvIsSandbox  = "IS_SANDBOX"           // "1" lets --dangerously-skip-permissions run as root: set only in ralph's sandbox
)

// Bin finds the agent executable: Bin.LookPath(path, env) takes path if
// not empty, else env ($RALPH_CLAUDE's value, for callers that read the
// environment themselves), else `claude` on PATH; a missing one is an
// *agentproc.NotFoundError (loop.ErrAgentNotFound) that names where the
// missing path came from and says how to install the agent.
var Bin = agentproc.Bin{Name: "claude", EnvVar: EnvClaude, Install: "install Claude Code (npm install -g @anthropic-ai/claude-code)"}

// LookPath resolves the agent executable: explicit if not empty, else
// $RALPH_CLAUDE if set, else `claude` on PATH (Bin.LookPath).
func LookPath(explicit string) (string, error) {
	return Bin.LookPath(explicit, os.Getenv(EnvClaude))
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
// ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN unless req.UseAPIKey, and
// with IS_SANDBOX=1 when inSandbox: the agent runs in ralph's sandbox
// (Runner.Sandbox), which is what the variable tells Claude Code. Outside
// it IS_SANDBOX is what base and req.Env make it: as root, Claude Code
// then refuses --dangerously-skip-permissions unless the user's own
// environment says the machine is a sandbox
// (ARCHITECTURE.md §7.7); Classify reports that refusal as ClassRefused.
func Env(base []string, req loop.RunRequest, inSandbox bool) []string {
	extra := req.Env
	if inSandbox {
		extra = append(extra[:len(extra):len(extra)], EnvIsSandbox+"=1")
	}
	return agentproc.Environ(base, extra, func(k string) bool {
		return k == EnvClaudeCode || (k == EnvAPIKey || k == EnvAuthToken) && !req.UseAPIKey
	})
}

// APIKeysSet returns the API key variables set (not empty) in env,
// ralph's environment: ANTHROPIC_API_KEY, then ANTHROPIC_AUTH_TOKEN. Env
// removes them from the agent's unless RunRequest.UseAPIKey; a CLI tells
// its user so (ralph prints a notice once per run, ARCHITECTURE.md §7.7).
func APIKeysSet(env []string) []string {
	var set []string
	for _, k := range []string{EnvAPIKey, EnvAuthToken} {
		if agentproc.Getenv(env, k) != "" {
			set = append(set, k)
		}
	}
	return set
}

// Run runs one agent session; see loop.Runner. It returns an error only
// when the agent could not be started (loop.ErrAgentNotFound, a log file
// or system prompt file that cannot be written). A log that cannot be
// written later (a full disk) does not stop the session: the log stops
// there, and RunResult.LogErr says why. Events go to req.OnEvent
// one at a time (stderr lines come from their own goroutine, but calls never
// overlap); the stream is not read while OnEvent runs, so it must be quick,
// or the idle timeout may count its time as the agent's silence. The
// process handling — process group, timeouts, the result grace, stopping
// and reaping everything the agent started — is agentproc.Run's.
func (r *Runner) Run(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
	r.mark("enter")
	defer r.mark("return")
	path, err := Bin.Resolve(r.Path)
	if err != nil {
		return loop.RunResult{}, err
	}
	if ctx.Err() != nil {
		return loop.RunResult{Class: loop.ClassCancelled, IsError: true, ExitCode: -1}, nil
	}

	var spFile string
	if req.SystemPrompt != "" {
		// Named after this process, so that a later Sweep removes it if
		// this process dies before it is removed.
		f, remove, err := agentproc.TempFile("system-prompt", ".md", req.SystemPrompt)
		if err != nil {
			return loop.RunResult{}, fmt.Errorf("claude: %w", err)
		}
		defer remove()
		spFile = f
	}

	var sess Session
	env := Env(os.Environ(), req, r.Sandbox != nil)
	exit, err := agentproc.Run(ctx, agentproc.Spec{
		Name:        "claude",
		Path:        path,
		Args:        Args(req, spFile),
		Env:         env,
		Sandbox:     r.Sandbox,
		OwnKeys:     []string{EnvAPIKey, EnvAuthToken},
		State:       StateDirs(env),
		Stdin:       req.Prompt,
		Grace:       r.Grace,
		ResultGrace: r.ResultGrace,
		Decode: func(rd io.Reader, emit func(loop.Event)) error {
			dec := NewDecoder(rd)
			dec.Now = r.Now
			for {
				line, err := dec.Decode()
				if err != nil {
					return err
				}
				for _, ev := range line.Events {
					sess.Add(ev)
					emit(ev)
				}
			}
		},
		OnEvent: req.OnEvent,
		Now:     r.Now,
		Trace:   r.trace,
	}.WithRequest(req))
	if err != nil {
		if errors.Is(err, loop.ErrAgentNotFound) {
			return loop.RunResult{}, fmt.Errorf("%w; %s or name the executable in $%s", err, Bin.Install, Bin.EnvVar)
		}
		return loop.RunResult{}, err
	}

	// Claude Code exits 0 with error_during_execution on SIGINT: the
	// signal that cancelled ctx may have reached it first.
	res := Classify(&sess, exit.Ending(exit.Cancelled, sess.Result, r.Now))
	res.Agent = "claude"
	if res.Model == "" {
		res.Model = req.Model
	}
	exit.Fill(&res)
	return res, nil
}

// StateDirs returns Claude Code's own directory, given its environment:
// $CLAUDE_CONFIG_DIR, else ~/.claude. In a sandbox the agent works on a
// scratch copy of it (sandbox.State): settings.json and its hooks,
// statusLine, apiKeyHelper and env, CLAUDE.md, commands/, agents/,
// skills/, plugins/, hooks/, output-styles/ and the local install in
// local/ are read-only or copies whose changes are dropped, and new files
// are dropped too. Only .credentials.json is the real one, writable, so
// that a refreshed login is kept (Claude Code writes it by renaming a new
// file over it, and in place when that fails, as it does over a mount).
// The directories it fills as it runs (projects, todos, shell snapshots,
// …) start empty in the scratch. ~/.claude.json (its settings, projects
// and MCP servers, outside CLAUDE_CONFIG_DIR) stays read-only with the
// rest of the home directory: Claude Code runs without writing it.
func StateDirs(env []string) []sandbox.State {
	dir := agentproc.Getenv(env, "CLAUDE_CONFIG_DIR")
	if dir == "" {
		home := agentproc.Getenv(env, "HOME")
		if home == "" {
			return nil
		}
		dir = filepath.Join(home, ".claude")
	}
	return []sandbox.State{{Dir: dir, Keep: []string{".credentials.json"}, Fresh: claudeFresh}}
}

// claudeFresh are the entries of Claude Code's directory that it fills as
// it runs: histories, caches, logs and locks, no configuration.
var claudeFresh = []string{
	"projects", "sessions", "todos", "shell-snapshots", "statsig", "file-history", "session-env",
	"debug", "logs", "backups", "cache", "plans", "tasks", "ide", "telemetry", "paste-cache",
	"image-cache", "traces", "startup-perf", "usage-data", "shares", "state", "uploads", "jobs",
}
