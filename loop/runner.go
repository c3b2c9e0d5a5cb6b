package loop

import (
	"context"
	"errors"
	"time"
)

// Runner runs one agent session. The Claude Code implementation is
// claude.Runner; tests use looptest.FakeRunner or a RunnerFunc.
//
// Run blocks until the session ends. It returns a non-nil error only when the
// agent could not be run at all (ErrAgentNotFound, a log file that cannot be
// created, …); everything that happened once the agent started — success,
// agent-reported errors, usage limits, timeouts, crashes, cancellation — is
// described by the RunResult and its Class. A cancelled ctx stops the agent
// (its whole process group, for process runners) and returns a result with
// Class ClassCancelled. Run is safe for concurrent use.
type Runner interface {
	Run(ctx context.Context, req RunRequest) (RunResult, error)
}

// RunnerFunc adapts a function to the Runner interface.
type RunnerFunc func(ctx context.Context, req RunRequest) (RunResult, error)

// Run calls f(ctx, req).
func (f RunnerFunc) Run(ctx context.Context, req RunRequest) (RunResult, error) {
	return f(ctx, req)
}

// ErrAgentNotFound: the agent executable could not be found.
var ErrAgentNotFound = errors.New("loop: agent executable not found")

// Read-only tools given to the verifier session.
var VerifierTools = []string{"Bash", "Read", "Glob", "Grep"}

// RunRequest is one agent session to run.
type RunRequest struct {
	// Prompt is the user prompt; it reaches the agent on standard input.
	// It may be a custom slash command of the project in Dir (peek mode's
	// "/ralph-build <peek>"): a runner whose agent does not expand
	// .claude/commands/ itself, as Claude Code does, sends
	// ExpandSlashCommand(Dir, Prompt) instead.
	Prompt string
	// SystemPrompt, if not empty, is ralph's agent protocol for the
	// session. It is appended to the agent's own system prompt (Claude
	// Code: --append-system-prompt-file), which keeps the agent's
	// instructions for its tools, unless ReplaceSystemPrompt is set. It may
	// be large (megabytes); runners must not pass it on argv.
	SystemPrompt string
	// ReplaceSystemPrompt makes SystemPrompt replace the agent's system
	// prompt instead (Claude Code: --system-prompt-file), for embedders
	// that want the whole of it; the agent then loses its own tool
	// instructions. The loop never sets it.
	ReplaceSystemPrompt bool
	// Model is the model alias or id ("sonnet", "opus", "haiku", …).
	Model string
	// Sandboxed says the session is a work session, run with every
	// permission of the agent CLI granted: Claude Code's
	// --dangerously-skip-permissions, Codex's
	// --dangerously-bypass-approvals-and-sandbox (its own sandbox off),
	// Gemini CLI's --yolo, OpenCode's default agent instead of the
	// read-only one. It does not mean that the agent runs
	// in ralph's sandbox (--sandbox, package sandbox): that is the
	// runner's Boundary, set or not whatever this says. The loop sets it
	// for every session but the verifier's; otherwise only Tools are
	// allowed.
	Sandboxed bool
	// Tools lists the allowed tools when not Sandboxed.
	Tools []string
	// MaxTurns bounds the agent's turns (0: the agent's default).
	MaxTurns int
	// Dir is the working directory (the project root).
	Dir string
	// Env holds extra KEY=VALUE entries on top of the inherited environment,
	// such as the RALPH_* variables.
	Env []string
	// UseAPIKey keeps ANTHROPIC_API_KEY (and ANTHROPIC_AUTH_TOKEN, and the
	// other agents' API keys) in the agent's environment; by
	// default it is removed.
	UseAPIKey bool
	// LogPath, if not empty, receives the raw agent stream as it arrives.
	// Runners append to an existing file rather than truncate it: an
	// iteration run again after a usage-limit wait keeps both streams.
	LogPath string
	// LogRoot is a trusted directory above LogPath (the loop gives the
	// project root): LogPath and every directory between are opened
	// without following a link (package safefile, ARCHITECTURE.md §7). Empty:
	// LogPath's own directory is trusted and only the file is checked. A
	// refused link is not an error of the session: the stream goes
	// unlogged and RunResult.LogErr says why.
	LogRoot string
	// Timeout bounds the whole session (0: no wall-clock limit).
	Timeout time.Duration
	// IdleTimeout bounds the time without any output (0: no limit).
	IdleTimeout time.Duration
	// OnEvent, if not nil, is called for every event of the session, in
	// order, from the goroutine reading the stream.
	OnEvent func(Event)
	// Plan, when not nil, is the plan as this session's agent may reach
	// it from inside a sandbox: a runner that sandboxes its agent serves
	// it to the agent through a broker on a Unix socket of the session's
	// own and sets RALPH_SOCKET (package broker; agentproc does both for
	// a Spec with a Sandbox). A runner whose agent is not sandboxed
	// ignores it. The loop sets it for every session; see PlanAccess.
	Plan *PlanAccess
}

// EventKind says what an Event is.
type EventKind string

// The kinds of Event a runner reports.
const (
	EventInit       EventKind = "init"        // session started: SessionID, Model
	EventText       EventKind = "text"        // assistant text
	EventThinking   EventKind = "thinking"    // assistant reasoning
	EventToolUse    EventKind = "tool_use"    // a tool call: Tool, Input
	EventToolResult EventKind = "tool_result" // a tool's output: Text, IsError
	EventSystem     EventKind = "system"      // other system notices: Subtype, Text
	EventRateLimit  EventKind = "rate_limit"  // a rate-limit notice: Text, UsageLimit
	EventResult     EventKind = "result"      // the session's result line
	EventMalformed  EventKind = "malformed"   // a line that could not be parsed: Text, Err
	EventStderr     EventKind = "stderr"      // a line the agent wrote on stderr
)

// Event is something that happened during a session, for terminal views,
// logs and embedding programs.
type Event struct {
	Kind      EventKind
	At        time.Time
	SessionID string
	Model     string
	Subtype   string
	Text      string
	Tool      string
	// Input is the tool call's key argument (the Bash command, the file
	// path), or its JSON input when there is no obvious key.
	Input   string
	IsError bool
	// UsageLimit is set on EventRateLimit events.
	UsageLimit *UsageLimit
	// Result is set on EventResult events.
	Result *RunResult
	Err    error
}

// Usage counts tokens.
type Usage struct {
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
}

// ErrorClass says how a session ended.
type ErrorClass string

// The classes of a finished session.
const (
	ClassSuccess     ErrorClass = "success"      // the agent finished without error
	ClassAgentError  ErrorClass = "agent_error"  // the agent reported is_error (even with exit 0)
	ClassUsageLimit  ErrorClass = "usage_limit"  // a subscription usage limit was hit; see UsageLimit
	ClassAPIError    ErrorClass = "api_error"    // transient API trouble: 5xx, 529, a 429 that is not a usage limit
	ClassAuth        ErrorClass = "auth"         // 401/403: bad or missing credentials
	ClassMaxTurns    ErrorClass = "max_turns"    // the turn limit was reached
	ClassTimeout     ErrorClass = "timeout"      // the wall-clock timeout killed the agent
	ClassIdleTimeout ErrorClass = "idle_timeout" // no output for IdleTimeout; the agent was killed
	ClassCrashed     ErrorClass = "crashed"      // exited without a result line (non-zero exit or none at all)
	ClassCancelled   ErrorClass = "cancelled"    // the context was cancelled; the agent was stopped
	// ClassRefused: the agent refused to run as it was set up (Claude Code
	// skipping permissions as root outside a sandbox); running it again
	// cannot help, so the loop stops at once (OutcomeAgentFailed). Text is
	// the runner's account of the refusal and of what to change.
	ClassRefused ErrorClass = "refused"
)

// ErrorClasses lists every class.
func ErrorClasses() []ErrorClass {
	return []ErrorClass{ClassSuccess, ClassAgentError, ClassUsageLimit, ClassAPIError, ClassAuth,
		ClassMaxTurns, ClassTimeout, ClassIdleTimeout, ClassCrashed, ClassCancelled, ClassRefused}
}

// UsageLimit describes a rejected usage limit.
type UsageLimit struct {
	// ResetsAt is when the limit resets; zero when the agent did not say.
	ResetsAt time.Time
	// Type is the agent's name for the limit ("five_hour", …), if given.
	Type string
	// Message is the agent's own words, if any.
	Message string
}

// RunResult is how a session ended and what it produced.
type RunResult struct {
	// Text is the final result text: the result line's text, else the last
	// assistant text (for ClassRefused, the runner's account of the
	// refusal). Sigils are parsed from this alone.
	Text      string
	ExitCode  int
	IsError   bool
	SessionID string
	Model     string
	Turns     int
	Duration  time.Duration
	CostUSD   float64
	// CostSource says where CostUSD comes from: the agent reported it
	// (CostReported, also meant by ""), it is estimated from the tokens
	// with a price table (CostEstimated), or the agent reported none and
	// no price is known for the model (CostUnknown; CostUSD is 0).
	CostSource CostSource
	Usage      Usage
	// Agent names the agent CLI that ran the session ("claude", "codex",
	// "gemini", "opencode"); empty for runners that do not say.
	Agent string
	// Subtype is the result line's subtype ("success", "error_max_turns", …).
	Subtype string
	// TerminalReason is the agent's terminal_reason, if given.
	TerminalReason string
	// APIErrorStatus is the HTTP status of an API error the agent reported.
	APIErrorStatus int
	// Class says how the session ended.
	Class ErrorClass
	// UsageLimit is set when Class is ClassUsageLimit.
	UsageLimit *UsageLimit
	// Stderr is the tail of the agent's standard error.
	Stderr string
	// LogErr, if not nil, is why the raw stream log (RunRequest.LogPath)
	// stopped being written (a full disk), or was never opened (a link
	// refused, errors.Is(LogErr, safefile.ErrLink)): the session went on,
	// but the log lacks the rest of its stream. The loop says so in a
	// notice.
	LogErr error `json:"-"`
	// Checkout, when not nil, says how the agent's private git checkout
	// moved during the session (a sandboxed agent's; see Checkout).
	Checkout *Checkout `json:"-"`
}

// OK reports whether the session ended in success.
func (r RunResult) OK() bool { return r.Class == ClassSuccess }

// CostSource says where a session's cost comes from.
type CostSource string

// The sources of a cost.
const (
	CostReported  CostSource = "reported"  // the agent reported it
	CostEstimated CostSource = "estimated" // estimated from tokens with a price table
	CostUnknown   CostSource = "unknown"   // not reported, and no price known for the model
)

// Price is what a model costs, in US dollars per million tokens, for
// estimating the cost of a session whose agent reports none.
type Price struct {
	Input      float64 // input tokens not read from a cache
	CacheRead  float64 // input tokens read from a cache
	CacheWrite float64 // input tokens written to a cache
	Output     float64 // output tokens (reasoning included)
}

// Cost returns what u costs at p.
func (p Price) Cost(u Usage) float64 {
	return (float64(u.InputTokens)*p.Input + float64(u.CacheReadTokens)*p.CacheRead +
		float64(u.CacheWriteTokens)*p.CacheWrite + float64(u.OutputTokens)*p.Output) / 1e6
}
