package opencode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/sandbox"
)

// Name is the agent's name: the --agent-cli value and RunResult.Agent.
const Name = "opencode"

// EnvBin names the OpenCode executable when Runner.Path is empty.
const EnvBin = "RALPH_OPENCODE"

// Title is the session title ralph gives every run: with a title, OpenCode
// makes no extra request to the model to invent one.
const Title = "ralph"

// DefaultGrace is the time between SIGTERM and SIGKILL when a run is
// stopped. OpenCode ignores SIGTERM and SIGINT during a run (it finishes
// the whole conversation), so waiting agentproc's 5 s only delays the
// SIGKILL; 2 s is left for its tool commands, which get SIGTERM too.
const DefaultGrace = 2 * time.Second

// DefaultRetryLimit is how long a run may go on retrying a failing API
// request (OpenCode logs each failed attempt, and prints nothing on
// standard output until one succeeds) before ralph stops it. OpenCode's own
// series of 5 retries takes about 77 s when the API sends no retry-after
// header, and is left alone; a retry-after of hours is not.
const DefaultRetryLimit = 2 * time.Minute

// The environment variables the runner sets or reads.
const (
	EnvConfigContent   = "OPENCODE_CONFIG_CONTENT"     // ralph's per-run config, merged with the user's
	EnvDisableUpdate   = "OPENCODE_DISABLE_AUTOUPDATE" // set to true: no self-update during a run
	EnvXDGConfig       = "XDG_CONFIG_HOME"
	EnvXDGData         = "XDG_DATA_HOME"
	EnvXDGCache        = "XDG_CACHE_HOME"
	EnvXDGState        = "XDG_STATE_HOME"
	streamErrorLogLine = `message="stream error"`
)

// Bin finds the OpenCode executable: Bin.LookPath(path, env) takes path
// if not empty, else env ($RALPH_OPENCODE's value), else `opencode` on
// PATH; a missing one is an *agentproc.NotFoundError
// (loop.ErrAgentNotFound).
var Bin = agentproc.Bin{Name: Name, EnvVar: EnvBin, Install: "install OpenCode (npm install -g opencode-ai)"}

// Runner runs OpenCode (`opencode run --format json`) as a loop.Runner.
// The zero value runs the `opencode` Bin.Resolve("") finds. A Runner is safe
// for concurrent use.
type Runner struct {
	// Path is the executable; "" means Bin.Resolve("").
	Path string
	// Grace is the time between SIGTERM and SIGKILL when the run is
	// stopped; zero means DefaultGrace.
	Grace time.Duration
	// ResultGrace is how long OpenCode may take to exit after its last
	// step; zero means agentproc.DefaultResultGrace.
	ResultGrace time.Duration
	// RetryLimit bounds the time OpenCode may spend retrying a failing API
	// request; zero means DefaultRetryLimit.
	RetryLimit time.Duration
	// Now is the clock of events and retry-after times; nil means time.Now.
	Now func() time.Time
	// Sandbox, when not nil, runs the agent in it (ralph's --sandbox):
	// it writes only its tree (the project, or its worker's tree), a temp
	// directory and a scratch copy of its own state (StateDirs), and
	// works in a private copy of the tree's git metadata
	// (RunResult.Checkout says how that moved).
	//
	// A verifier's session (a request that is not Sandboxed) runs in it
	// with the tree read-only as well, and gets bash: see VerifierSandbox.
	Sandbox *sandbox.Boundary
	// VerifierSandbox, when not nil and Sandbox is, is where a verifier's
	// session runs: in the sandbox with its tree read-only
	// (agentproc.Spec.ReadOnly), with bash allowed (edit, write and
	// webfetch stay denied), so that it can run the tests; a command's
	// write into the tree fails there ("Read-only file system"). When both
	// are nil the verifier runs outside any sandbox without bash: it
	// cannot run commands (see the package documentation).
	VerifierSandbox *sandbox.Boundary
}

var _ loop.Runner = (*Runner)(nil)

// ModelFor returns the model to pass with -m: the loop's tiers (opus,
// sonnet, haiku) and "" give "" — OpenCode's models belong to providers
// the user configured, so its own config picks the model — and anything
// else is passed as is (OpenCode wants provider/model).
func ModelFor(model string) string {
	switch model {
	case "", "opus", "sonnet", "haiku":
		return ""
	}
	return model
}

// Args returns OpenCode's arguments for req. The prompt is not one: it
// goes on standard input. The log lines OpenCode prints with --print-logs
// at level ERROR go to standard error, where the runner sees each failed
// API attempt of a silent retry.
func Args(req loop.RunRequest) []string {
	args := []string{"run", "--format", "json", "--title", Title, "--print-logs", "--log-level", "ERROR"}
	if m := ModelFor(req.Model); m != "" {
		args = append(args, "-m", m)
	}
	if !req.Sandboxed {
		// The agent whose permissions the per-run config denies.
		args = append(args, "--agent", readOnlyAgent)
	}
	return args
}

// readOnlyAgent is the agent the verifier runs: OpenCode's default one,
// named so that a default_agent of the user's does not escape the denial.
const readOnlyAgent = "build"

// readOnlyPermission is what the verifier may not do. Denied tools are not
// offered to the model at all.
var readOnlyPermission = map[string]any{"bash": "deny", "edit": "deny", "webfetch": "deny"}

// shellPermission is what a verifier in a read-only sandbox may not do:
// edit (and write) and webfetch; bash is allowed, the sandbox keeping the
// tree read-only (a permission left to "ask" would be auto-rejected).
var shellPermission = map[string]any{"bash": "allow", "edit": "deny", "webfetch": "deny"}

// Config returns ralph's per-run config for OPENCODE_CONFIG_CONTENT,
// merged into user (the value the user's environment already gives it,
// which must then be a JSON object): instructionsFile, when not "", is
// added to "instructions" (OpenCode appends those files to its own system
// prompt), and a request that is not Sandboxed gets bash, edit and
// webfetch denied, for every agent and again for the verifier's agent.
// OpenCode merges this config after the user's global and project ones,
// so their providers and models still apply. It returns "" when there
// is nothing to add to user. shell says the verifier runs in a read-only
// sandbox and gets bash (shellPermission instead of readOnlyPermission).
func Config(user string, req loop.RunRequest, instructionsFile string, shell bool) (string, error) {
	if instructionsFile == "" && req.Sandboxed {
		return user, nil
	}
	cfg := map[string]any{}
	if strings.TrimSpace(user) != "" {
		if err := json.Unmarshal([]byte(user), &cfg); err != nil || cfg == nil {
			return "", fmt.Errorf("opencode: $%s is not a JSON object, and ralph adds its own settings to it: %v", EnvConfigContent, err)
		}
	}
	if instructionsFile != "" {
		list, _ := cfg["instructions"].([]any)
		cfg["instructions"] = append(list, instructionsFile)
	}
	if !req.Sandboxed {
		deny := readOnlyPermission
		if shell {
			deny = shellPermission
		}
		cfg["permission"] = overlay(cfg["permission"], deny)
		agents, _ := cfg["agent"].(map[string]any)
		if agents == nil {
			agents = map[string]any{}
		}
		agent, _ := agents[readOnlyAgent].(map[string]any)
		if agent == nil {
			agent = map[string]any{}
		}
		agent["permission"] = overlay(agent["permission"], deny)
		agents[readOnlyAgent] = agent
		cfg["agent"] = agents
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("opencode: config: %w", err)
	}
	return string(b), nil
}

// overlay returns base (an object, or nothing) with top's keys set.
func overlay(base any, top map[string]any) map[string]any {
	out := map[string]any{}
	if m, ok := base.(map[string]any); ok {
		for k, v := range m {
			out[k] = v
		}
	}
	for k, v := range top {
		out[k] = v
	}
	return out
}

// Env returns OpenCode's environment: base (ralph's own, os.Environ())
// with req.Env on top, OPENCODE_DISABLE_AUTOUPDATE=true, PWD=req.Dir
// (absolute) when the request names a directory, and
// OPENCODE_CONFIG_CONTENT holding Config's per-run settings. The user's
// keys and other settings are left as they are.
//
// PWD matters: `opencode run` works in $PWD when it is set, not in its
// working directory, and ralph's own PWD (the directory ralph was started
// in) would send the agent to the wrong tree — the main checkout instead
// of a worker's worktree. shell is Config's.
func Env(base []string, req loop.RunRequest, instructionsFile string, shell bool) ([]string, error) {
	extra := append(append([]string(nil), req.Env...), EnvDisableUpdate+"=true")
	if req.Dir != "" {
		dir, err := filepath.Abs(req.Dir)
		if err != nil {
			return nil, fmt.Errorf("opencode: working directory: %w", err)
		}
		extra = append(extra, "PWD="+dir)
	}
	env := agentproc.Environ(base, extra, nil)
	cfg, err := Config(agentproc.Getenv(env, EnvConfigContent), req, instructionsFile, shell)
	if err != nil {
		return nil, err
	}
	if cfg != "" {
		env = agentproc.Environ(env, []string{EnvConfigContent + "=" + cfg}, nil)
	}
	return env, nil
}

// StateDirs returns OpenCode's own directories, given its environment:
// its data (the session database, logs, logins), cache, config and state
// directories under the XDG base directories of env (defaults under
// $HOME), and ~/.npm, where it caches the package metadata it fetches. In
// a sandbox the agent works on a scratch copy of each (sandbox.State):
// the config files (opencode.json, opencode.jsonc, config.json, which
// name MCP servers, formatters, LSP commands and plugins), AGENTS.md,
// plugin/, agent/, command/, node_modules/, the cached packages and the
// tools in bin/ are read-only or copies whose changes are dropped, and so
// are npm's caches (npx's packages in _npx/ run when a user next uses
// them). Only the logins are the real files, writable (auth.json,
// mcp-auth.json). The session database, its storage, snapshots and logs
// start empty in the scratch.
func StateDirs(env []string) []sandbox.State {
	home := agentproc.Home(env)
	dir := func(key, def string) string {
		if v := agentproc.Getenv(env, key); v != "" && filepath.IsAbs(v) {
			return filepath.Join(v, "opencode")
		}
		return filepath.Join(home, def, "opencode")
	}
	return []sandbox.State{
		{Dir: dir(EnvXDGData, filepath.Join(".local", "share")), Keep: []string{"auth.json", "mcp-auth.json"},
			Fresh: []string{"opencode.db", "opencode.db-*", "storage", "snapshot", "log", "tool-output"}},
		{Dir: dir(EnvXDGCache, ".cache")},
		{Dir: dir(EnvXDGConfig, ".config")},
		{Dir: dir(EnvXDGState, filepath.Join(".local", "state"))},
		{Dir: filepath.Join(home, ".npm"), Fresh: []string{"_cacache", "_logs", "_update-notifier-last-checked"}},
	}
}

// Run runs one OpenCode session; see loop.Runner. It returns an error only
// when OpenCode could not be started (loop.ErrAgentNotFound, a system
// prompt file or log file that cannot be written, a user's
// $OPENCODE_CONFIG_CONTENT that is not a JSON object). Events go to
// req.OnEvent, one at a time (see agentproc.Spec.OnEvent).
func (r *Runner) Run(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
	// OpenCode does not know Claude Code's custom slash commands: peek
	// mode's "/ralph-build <peek>" reaches it as the command's text.
	req.Prompt = loop.ExpandSlashCommand(req.Dir, req.Prompt)
	path, err := Bin.Resolve(r.Path)
	if err != nil {
		return loop.RunResult{}, err
	}
	var instructions string
	if req.SystemPrompt != "" {
		// Named after this process, so that agentproc.Sweep removes it if
		// this process dies before remove. OpenCode has no way to replace
		// its own prompt but an agent of the user's config:
		// ReplaceSystemPrompt appends as well.
		file, remove, err := agentproc.TempFile("opencode-instructions", ".md", req.SystemPrompt)
		if err != nil {
			return loop.RunResult{}, fmt.Errorf("opencode: instructions file: %w", err)
		}
		defer remove()
		instructions = file
	}
	box, readOnly := agentproc.Boundary(req, r.Sandbox, r.VerifierSandbox)
	env, err := Env(os.Environ(), req, instructions, readOnly)
	if err != nil {
		return loop.RunResult{}, err
	}
	// The model: -m's, else what the config names, read before OpenCode
	// starts (the project's files are the agent's to edit).
	model := ModelFor(req.Model)
	if model == "" {
		model = ConfiguredModel(env, req.Dir)
	}
	if model == "" {
		model = DefaultModel
	}
	grace := r.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	retryLimit := r.RetryLimit
	if retryLimit <= 0 {
		retryLimit = DefaultRetryLimit
	}

	// runCtx is cancelled when OpenCode has been retrying a failing API
	// request for retryLimit: a failed attempt shows as a "stream error"
	// log line on stderr, a success as output on stdout.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu       sync.Mutex
		retrying *time.Timer
		dec      *Decoder
	)
	onEvent := func(ev loop.Event) {
		mu.Lock()
		switch {
		case ev.Kind == loop.EventStderr && strings.Contains(ev.Text, streamErrorLogLine):
			if retrying == nil {
				retrying = time.AfterFunc(retryLimit, stop)
			}
		case ev.Kind != loop.EventStderr && retrying != nil:
			retrying.Stop()
			retrying = nil
		}
		mu.Unlock()
		if req.OnEvent != nil {
			req.OnEvent(ev)
		}
	}
	exit, err := agentproc.Run(runCtx, agentproc.Spec{
		Name:        Name,
		Path:        path,
		Args:        Args(req),
		Env:         env,
		Sandbox:     box,
		ReadOnly:    readOnly,
		State:       StateDirs(env),
		Stdin:       req.Prompt,
		Grace:       grace,
		ResultGrace: r.ResultGrace,
		Decode: func(rd io.Reader, emit func(loop.Event)) error {
			d := NewDecoder(rd)
			d.Now = r.Now
			mu.Lock()
			dec = d
			mu.Unlock()
			return d.Run(emit)
		},
		OnEvent: onEvent,
		Now:     r.Now,
	}.WithRequest(req))
	if err != nil {
		return loop.RunResult{}, err
	}
	mu.Lock()
	defer mu.Unlock()
	if retrying != nil {
		retrying.Stop()
	}
	sess := &Session{}
	if dec != nil {
		sess = dec.Session()
	}
	// OpenCode's errors come on lines of their own, not as an error
	// result: after its last step its session stands whatever stopped it.
	// Run got runCtx: a stop on cancel while ctx stands is the retry
	// watch's.
	end := exit.Ending(ctx.Err() != nil, nil, r.Now)
	end.Model = model
	res := Classify(sess, end)
	exit.Fill(&res)
	if end.GaveUp {
		res.Stderr += fmt.Sprintf("\nralph: OpenCode kept retrying a failing API request for %v; it was stopped", retryLimit)
	}
	return res, nil
}
