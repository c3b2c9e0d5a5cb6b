package loop

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"time"
)

// Mode labels a run in receipts, logs and commit messages.
type Mode string

// The modes. Run implements ModeBuild, Plan ModePlan and RunPrompt
// ModePrompt; ModeVerify labels the verifier session's receipts.
const (
	ModeBuild  Mode = "build"
	ModePlan   Mode = "plan"
	ModePrompt Mode = "prompt"
	ModeVerify Mode = "verify"
)

// ClaimMode says who claims tasks.
type ClaimMode string

// The claim modes of `ralph build --claim`.
const (
	// ClaimLoop: the loop claims the next ready task before each run.
	ClaimLoop ClaimMode = "loop"
	// ClaimAgent: peek mode; the agent claims inside its session.
	ClaimAgent ClaimMode = "agent"
)

// UsageLimitPolicy says what a usage limit does.
type UsageLimitPolicy string

// The policies of `--on-usage-limit`.
const (
	UsageLimitWait UsageLimitPolicy = "wait"
	UsageLimitStop UsageLimitPolicy = "stop"
)

// Defaults of DefaultConfig, which are also the CLI's flags' defaults.
const (
	DefaultMaxIterations = 20
	DefaultMaxRetries    = 3
	// DefaultMaxConflicts is how many integration conflicts (races lost to
	// other workers' landings) a task may have before they count as task
	// trouble (Config.MaxConflicts 0).
	DefaultMaxConflicts = 10
	DefaultTimeout      = 30 * time.Minute
	DefaultIdleTimeout  = 10 * time.Minute
	DefaultMaxWait      = 6 * time.Hour
	// DefaultUsageWait is how long a usage-limit wait lasts when the agent
	// did not say when the limit resets.
	DefaultUsageWait = 5 * time.Minute
	// PeekLimit is how many claimable tasks peek mode shows the agent.
	PeekLimit = 10
)

// Config is everything a build run takes. Start from DefaultConfig: the
// zero value of some fields is meaningful (MaxRetries 0 means no retries,
// Timeout 0 means no wall-clock limit).
type Config struct {
	// Root is the project root; .ralph/ lives under it. Required.
	Root string
	// Mode labels the run; empty means ModeBuild, the only mode Run takes
	// (Plan and RunPrompt set their own).
	Mode Mode
	// Scope limits the tasks worked on (whole plan, a feature, a task).
	Scope Scope
	// MaxIterations bounds the iterations (0: DefaultMaxIterations, or
	// DefaultPlanIterations in plan mode).
	MaxIterations int
	// Once runs a single iteration (MaxIterations 1).
	Once bool
	// Model and Strategy pick the model; see ParseStrategy.
	Model    string
	Strategy string
	// CustomStrategy, if set, replaces Model and Strategy.
	CustomStrategy Strategy
	// Verify runs a read-only verifier session after each task-done. It
	// needs ClaimLoop. A run with Verify or Commit and no Workspace needs
	// Root alone: it is refused (*TreeBusyError) beside another run there,
	// and refuses others while it runs (ARCHITECTURE.md §3.4).
	Verify bool
	// Verifier, if not nil, runs the verifier sessions instead of the
	// Runner given to Run: another agent checks the work (`ralph build
	// --verify-agent-cli codex`). The model strategy's choice is passed
	// on, and the runner maps it to its own tiers.
	Verifier Runner
	// Agent and VerifierAgent name the agent CLIs of the work and the
	// verifier sessions ("codex", "gemini", …) for the raw logs' names:
	// iter-<n>-<agent>.ndjson, iter-<n>-verify-<agent>.ndjson. Empty or
	// "claude" keeps the names of a Claude Code run (iter-<n>.ndjson).
	Agent, VerifierAgent string
	// MaxRetries is how often a task may be retried after task trouble, and
	// how many agent or gate failures in a row are tolerated. Negative is
	// invalid.
	MaxRetries int
	// MaxConflicts is how many times a worker's task may lose the race to
	// land (its work conflicts with what other workers landed meanwhile)
	// before a conflict counts as task trouble: until then a conflict sends
	// the task back to pending without counting a retry, and the next
	// attempt starts from the new tip, told the conflicting files (0:
	// DefaultMaxConflicts; ARCHITECTURE.md §5). Negative is invalid.
	MaxConflicts int
	// Timeout and IdleTimeout bound each agent session (0: no limit).
	Timeout     time.Duration
	IdleTimeout time.Duration
	// MaxTurns bounds the agent's turns (0: the agent's default).
	MaxTurns int
	// ClaimMode: ClaimLoop (default) or ClaimAgent (peek mode).
	ClaimMode ClaimMode
	// TestCmd is the test gate's command, run with sh -c in Root (a
	// worker's tree with Workspace) by Commands. Empty means the command
	// named in <Root>/AGENTS.md as committed when the run begins (see
	// ReadAgentsTest), announced at the start; no command at all means no
	// test gate. Build mode runs it once before the first session (the
	// baseline): failing there, it stops the run (ErrBaselineFailed).
	TestCmd string
	// FinalCmd is the final check's command (build mode, "" for none): run
	// like the test gate, where it runs, when the plan in scope is
	// complete (every task done). A failure adds the task "Make the final
	// check pass", its output's end as the description, and the run goes
	// on, at most MaxFinalRounds times; then the run stops with
	// OutcomeTestGateFailed. It needs a store that adds tasks
	// (TaskAdder).
	FinalCmd string
	// Commands runs the test gate's command (and, in a parallel build,
	// --setup): nil means HostCommands. A sandboxed build gives the one
	// that runs them in the agent's sandbox.
	Commands CommandRunner
	// Commit commits all changes after each successful iteration: every
	// change git does not ignore (.ralph/ aside), including files that
	// were uncommitted before the run began, such as the .claude/ files
	// `ralph init` writes — a project commits or ignores those first, or
	// the first commit carries them. The loop does not guess which
	// uncommitted files are the person's to keep out.
	Commit bool
	// MaxCost is the budget in USD (0: none).
	MaxCost float64
	// OnUsageLimit: UsageLimitWait (default) or UsageLimitStop.
	OnUsageLimit UsageLimitPolicy
	// MaxWait bounds a usage-limit wait (0: DefaultMaxWait).
	MaxWait time.Duration
	// UseAPIKey keeps ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN (and the
	// other agents' API keys) in the agent's environment.
	UseAPIKey bool
	// AgentID identifies this run's claims: "agent-" + 8 hex digits,
	// generated when empty.
	AgentID string
	// RalphBin is the absolute path of the ralph binary (RALPH_BIN).
	RalphBin string
	// Lease is the claim lease (0: DefaultLease); it is renewed every
	// third of it while the agent works.
	Lease time.Duration
	// Holder is the process that keeps the run's claims alive: given to
	// every agent as RALPH_HOLDER, recorded with every claim
	// (ARCHITECTURE.md §2.2). Zero means this process (ThisProcess).
	Holder Holder
	// Session names the run's logs: <LogDir>/<Session>.log and
	// <LogDir>/<Session>/iter-<n>.ndjson. Empty: "session-YYYYMMDD-HHMMSS"
	// from Now, in UTC, or the next second whose name no log in LogDir has
	// (two runs started in the same second); a name given here is used as
	// it is.
	Session string
	// LogDir holds the logs (empty: <Root>/.ralph/logs).
	LogDir string
	// SessionLog writes the session log.
	SessionLog bool
	// RawLogs passes each session's raw stream log path to the Runner.
	RawLogs bool
	// Observer receives the run's notes (may be nil).
	Observer Observer
	// Env holds extra KEY=VALUE entries for the agent, before the RALPH_*
	// ones.
	Env []string
	// Worker names the worker of a parallel build ("w2"; empty without
	// workers): on every note, receipt and raw log of the run.
	Worker string
	// Workspace, if set, is the worker's own working tree (ARCHITECTURE.md §5):
	// the agent, the test gate and the verifier work there instead of
	// Root, each attempt begins there from the integration tip, and a
	// task is done only once Workspace.Integrate landed its work. The
	// commit gate (Commit) is not used: integration commits.
	Workspace Workspace
	// Budget, if set, is where the run takes its iterations and its cost
	// from instead of MaxIterations and MaxCost: the workers of a parallel
	// build share one (see Budget).
	Budget Budget
	// Shared, if set, is what this run reads and writes once with the
	// other workers of one build: the session log, the AGENTS.md test
	// command, the notices of a run's start (see Shared).
	Shared *Shared
	// Now and Sleep are the clock, injectable for tests (nil: time.Now and
	// a timer that stops on ctx cancellation).
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
}

// DefaultConfig returns the defaults of `ralph build` for a project root.
func DefaultConfig(root string) Config {
	return Config{
		Root:          root,
		Mode:          ModeBuild,
		MaxIterations: DefaultMaxIterations,
		MaxRetries:    DefaultMaxRetries,
		Timeout:       DefaultTimeout,
		IdleTimeout:   DefaultIdleTimeout,
		ClaimMode:     ClaimLoop,
		OnUsageLimit:  UsageLimitWait,
		MaxWait:       DefaultMaxWait,
		Lease:         DefaultLease,
		SessionLog:    true,
		RawLogs:       true,
	}
}

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("loop: invalid configuration")

// normalize fills the defaults of zero fields and checks the rest of a
// build run's Config: the checks every mode shares, then its mode's own
// (modeOf). It returns the mode and the strategy to use.
func (c *Config) normalize() (modeKind, Strategy, error) { return c.normalizeFor(ModeBuild) }

// normalizeFor is normalize for a run of the given mode: Run passes
// ModeBuild, Plan ModePlan, RunPrompt ModePrompt.
func (c *Config) normalizeFor(mode Mode) (modeKind, Strategy, error) {
	bad := func(format string, args ...any) (modeKind, Strategy, error) {
		return modeKind{}, nil, fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
	}
	if c.Root == "" {
		return bad("root directory is required")
	}
	if abs, err := filepath.Abs(c.Root); err == nil {
		c.Root = abs
	}
	if c.Mode == "" {
		c.Mode = ModeBuild
	}
	if c.Mode != mode {
		if mode == ModeBuild {
			return bad("mode %q: the build loop runs mode build only (plan mode is Plan, prompt mode RunPrompt)", c.Mode)
		}
		return bad("mode %q: this entry point runs mode %s only", c.Mode, mode)
	}
	if s := c.checkCommon(); s != "" {
		return bad("%s", s)
	}
	kind := modeOf(c)
	if s := kind.check(c); s != "" {
		return bad("%s", s)
	}
	c.fillDefaults(kind)
	if c.AgentID == "" {
		id, err := NewAgentID()
		if err != nil {
			return modeKind{}, nil, err
		}
		c.AgentID = id
	}
	if c.CustomStrategy != nil {
		return kind, c.CustomStrategy, nil
	}
	s, err := ParseStrategy(c.Strategy, c.Model)
	if err != nil {
		return modeKind{}, nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	return kind, s, nil
}

// checkCommon checks the fields every mode reads. It returns the problem,
// or "".
func (c *Config) checkCommon() string {
	switch {
	case c.Scope.Feature != "" && c.Scope.TaskID != "":
		return "scope takes a feature or a task, not both"
	case c.MaxIterations < 0:
		return fmt.Sprintf("max iterations %d is negative", c.MaxIterations)
	case c.MaxRetries < 0:
		return fmt.Sprintf("max retries %d is negative", c.MaxRetries)
	case c.MaxConflicts < 0:
		return fmt.Sprintf("max conflicts %d is negative", c.MaxConflicts)
	case c.Timeout < 0 || c.IdleTimeout < 0 || c.MaxWait < 0 || c.Lease < 0:
		return "durations must not be negative"
	case c.MaxCost < 0:
		return fmt.Sprintf("max cost %v is negative", c.MaxCost)
	}
	switch c.ClaimMode {
	case "", ClaimLoop, ClaimAgent:
	default:
		return fmt.Sprintf("claim mode %q (want loop or agent)", c.ClaimMode)
	}
	switch c.OnUsageLimit {
	case "", UsageLimitWait, UsageLimitStop:
	default:
		return fmt.Sprintf("on-usage-limit %q (want wait or stop)", c.OnUsageLimit)
	}
	return ""
}

// fillDefaults gives the zero fields of a checked Config their defaults.
func (c *Config) fillDefaults(kind modeKind) {
	if c.MaxIterations == 0 {
		c.MaxIterations = kind.iterations
	}
	if c.Once || kind.single {
		c.MaxIterations = 1
	}
	if c.ClaimMode == "" {
		c.ClaimMode = ClaimLoop
	}
	if c.MaxConflicts == 0 {
		c.MaxConflicts = DefaultMaxConflicts
	}
	if c.OnUsageLimit == "" {
		c.OnUsageLimit = UsageLimitWait
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.Holder.IsZero() {
		c.Holder = ThisProcess()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Sleep == nil {
		c.Sleep = sleepCtx
	}
	if c.Session == "" {
		c.Session = SessionName(c.Now())
	}
	if c.LogDir == "" {
		c.LogDir = filepath.Join(c.Root, ".ralph", "logs")
	}
}

// NewAgentID returns "agent-" followed by 8 random hex digits.
func NewAgentID() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("loop: agent id: %w", err)
	}
	return "agent-" + hex.EncodeToString(b[:]), nil
}

// SessionName is the session name of a run started at t:
// "session-YYYYMMDD-HHMMSS" in UTC.
func SessionName(t time.Time) string {
	return t.UTC().Format(sessionLayout)
}

// sessionLayout is the time layout of session names.
const sessionLayout = "session-20060102-150405"

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
