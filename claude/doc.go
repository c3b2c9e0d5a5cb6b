// Package claude runs Claude Code — or any program that speaks its
// stream-json — as a loop.Runner: it builds the arguments and environment,
// spawns the agent in its own process group, parses its NDJSON stream into
// typed loop.Events, writes the raw stream to the iteration's log, enforces
// the wall-clock and idle timeouts, stops the whole group on every exit,
// classifies how the session ended, and renders a terminal view.
//
// The pieces can be used on their own: LookPath, Args and Env say how the
// agent is started; a Decoder parses a stream from any io.Reader (tests and
// benchmarks need no process); Session and Classify turn events into a
// loop.RunResult; a Formatter prints events for people.
//
// # Decisions
//
// Starting the agent. The executable is Runner.Path, else $RALPH_CLAUDE,
// else `claude` on PATH (LookPath, by Bin); a missing one is an
// *agentproc.NotFoundError (loop.ErrAgentNotFound) with a hint on how to
// install or name it, returned before anything runs; the message names
// where the missing path came from (`$RALPH_CLAUDE "X"` or the caller's
// path). Bin.LookPath takes $RALPH_CLAUDE's value from the caller, so a CLI
// with its own view of the environment names it right, and words the
// error with its own flags (NotFoundError.Missing).
// The arguments are `-p --verbose --output-format stream-json
// --no-session-persistence --model M`, then `--append-system-prompt-file
// F` (the system prompt is written to a temporary file, removed after the
// run: a 1 MB prompt never meets argv limits; see "Nothing outlives
// ralph" below), then
// `--dangerously-skip-permissions`
// when sandboxed, or else, when the request names Tools, `--tools=A,B
// --allowedTools=A,B` (with "=": the options are variadic and would
// swallow what follows), then `--max-turns N` when set. Both tool options
// are needed: --allowedTools alone only pre-approves, and the model is
// still offered every tool (Edit, Write, Agent, …); --tools alone
// restricts the offer, but -p mode, which cannot ask, then refuses every
// Bash command that is not read-only — a test run that writes a cache
// among them (checked with the pinned CLI, in TestE2EVerifierTools). The
// user prompt is written to standard input, which is then closed.
//
// System prompt. ralph's system prompt (its agent protocol: sigils, `$RALPH_BIN
// task …`, one task per session) is appended to Claude Code's own, not put
// in its place: Claude Code's prompt is what tells the model how to use its
// tools (Bash, Edit, Read, …), and a session without it works worse. An
// embedder that wants the whole system prompt sets
// RunRequest.ReplaceSystemPrompt, and the file goes with
// `--system-prompt-file` instead. Both options exist in the pinned CLI
// (2.1.330; its --help names them under --bare); the end-to-end test sends
// a 1 MB prompt each way and checks which one kept Claude Code's own text.
//
// Process handling is agentproc's (see its package documentation): the
// process group and parent-death signal, the raw log (appended byte for
// byte, never truncated; RunResult.LogErr says why it stopped), the wall
// and idle timeouts, the result grace, stopping with SIGTERM, SIGCONT and
// SIGKILL, and reaping every process the agent started — those that left
// its group included — before Run returns; also LookPath's and Sweep's
// mechanics, the temporary file naming, and the unbounded line reading.
// What follows is what Claude Code adds.
//
// Environment. ralph's own environment, then RunRequest.Env on top (a later
// entry wins), without CLAUDECODE (Claude Code refuses to nest) and without
// ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN (a bearer token for the API,
// billed per token like the key) unless RunRequest.UseAPIKey — even when
// RunRequest.Env names them. CLAUDE_CODE_OAUTH_TOKEN, a subscriber's own
// login, is kept. APIKeysSet names those that are set, for the
// once-per-run notice the CLI prints about them, kept or removed.
//
// IS_SANDBOX is an honest hand-over (ARCHITECTURE.md §7): the runner sets
// IS_SANDBOX=1 only when the agent runs in ralph's sandbox
// (Runner.Sandbox), and otherwise passes on what ralph's environment (or
// RunRequest.Env) says. As root, Claude Code refuses
// --dangerously-skip-permissions (a work session, RunRequest.Sandboxed)
// unless IS_SANDBOX is "1": 2.1.330 writes "--dangerously-skip-permissions
// cannot be used with root/sudo privileges for security reasons" on
// stderr and exits 1 before its first stream line. Classify recognises
// exactly that — exit code 1, an empty stream, the line on stderr, never
// tool output — as loop.ClassRefused, with RootRefusal as the result's
// text: run with --sandbox, as another user, or with IS_SANDBOX=1 when the
// machine is itself a sandbox. The loop stops at once (exit 4) instead of
// retrying what would be refused again. The verifier skips no permission
// and is not refused.
//
// A result ends the session (ARCHITECTURE.md §4). Once the result line is
// read, the agent has Runner.ResultGrace (default 5 s: Claude Code takes up
// to about 3 s after its result line when a SessionEnd hook is slow) to exit;
// an agent still there then — a hook that hangs, or stops the CLI for good
// with `kill -STOP $PPID` — is stopped, and the result is used as it is: a
// success stays a success (the exit code of a process ralph killed says
// nothing against it), not agent trouble and not a timeout; RunResult.Stderr
// ends with a line saying the agent was stopped. A cancel or the wall timeout
// that comes after the result stops the agent at once, and the result stands
// too (an error result under a cancelled ctx counts as cancelled, as it does
// when the agent exits by itself).
//
// Nothing outlives ralph: see agentproc, "Nothing outlives the agent" and
// "Leftovers of a dead ralph". The system prompt file is an
// agentproc.TempFile of kind system-prompt
// (ralph-system-prompt-<pid>-<start>-<host>-<random>.md, the name earlier
// releases used), removed when Run returns, and swept when ralph died
// first. cmd/ralph calls agentproc.Sweep at start.
//
// Events. OnEvent is called in stream order; stderr lines come from another
// goroutine, but calls never overlap. One stream line gives zero or more
// events: an assistant message one per content block (text, thinking,
// tool_use), a user message one per tool_result (named after its tool_use,
// IsError from the block), system lines EventInit or EventSystem (Subtype
// api_retry, status, compact_boundary, …, Text a summary where there is
// one), rate_limit_event an EventRateLimit (Subtype the status, UsageLimit
// with resetsAt and the limit's type, utilization as an integer percentage
// or a fraction), result an EventResult whose Result holds the line's
// fields. stream_event lines (partial messages) and unknown types give no
// event; Decoder.Decode still returns them as a Line with their type and raw
// bytes. Unknown fields are ignored. A line that is not a JSON object gives
// an EventMalformed quoting its first 200 bytes, and the stream goes on. A
// tool's output is cut to ToolOutputLimit (8 KiB) in its event; a tool call
// carries its key argument (Bash command, file path, pattern, URL) or, for
// other tools, its JSON input cut to 512 bytes. EventResult's Text is the
// result text, or the joined "errors" when there is none (for display);
// RunResult.Text, the only text sigils are read from, is the result's text,
// else the last assistant text — except for an error result, whose empty
// text is not replaced by the agent's chatter.
//
// Parsing. Lines are read with an agentproc.LineReader (most parsed where
// they lie; a line of more than 4 MiB in memory of its own, given back
// once it is decoded); a huge line's big texts// are decoded a piece at a time into strings of their exact
// size while the pieces read are given back, and a result that repeats
// the last assistant text shares its string. A huge line costs about one
// copy of itself (Line.Raw is nil for it). Instead of encoding/json, a small structural scanner reads each
// line in one pass, skipping strings with bytes.IndexByte and picking out
// only the fields ralph reads. It checks structure (brackets, quotes,
// colons, commas, literals), which is what tells a truncated or garbled
// line from a good one; it does not check UTF-8 or number grammar. Key
// order is free.
//
// Classification (Classify), from structured fields only, never from tool
// output, first match wins:
//
//   - cancelled / timeout / idle_timeout: ralph stopped the agent before
//     its result line. A cancel also covers an agent that exits on its own
//     while ctx is cancelled without a clean result (Claude Code exits 0
//     with error_during_execution on SIGINT).
//   - usage_limit: a rejected rate_limit_event; or an error result with
//     api_error "usage_limit_reached"; or a 429 error result whose text says
//     a limit was hit ("You've hit your session limit · resets 6:30pm
//     (UTC)"); or the legacy "Claude AI usage limit reached|<epoch>". The
//     reset time comes from resetsAt, else the epoch, else the "resets
//     <time> (<zone>)" text (the next such time after now; an unknown zone
//     or format leaves it zero, and the loop waits its default).
//   - crashed: no result line, whatever the exit code.
//   - success: a result without is_error, and exit code 0 — or any exit
//     code when ralph stopped the agent after that result.
//   - max_turns: subtype error_max_turns or terminal_reason max_turns.
//   - auth: api_error_status 401 or 403.
//   - api_error: api_error_status 408, 429 or 5xx (529 included), or
//     terminal_reason api_error without a status (a timed-out request).
//   - agent_error: anything else — is_error even with exit 0, another 4xx
//     (an unknown model), a non-zero exit after a good result.
//
// Terminal view (Formatter): assistant text as is; tool calls as
// "> Tool key-argument" on one line; failed tools in red with their first
// five lines; API retries, near or hit usage limits, malformed lines and
// stderr lines as notices; an error result once (not when the same text was
// just shown); and Footer's line with duration, turns, tokens, cost and how
// the run ended. Colour only when the writer is a terminal and NO_COLOR is
// unset; piped output is plain lines.
//
// # Performance
//
// Measured on the shared 2-core development machine (Go 1.26, load 3 to 5
// from other work, so figures vary by ±40% from run to run; medians of 10):
//
//   - Parsing: 410 MB/s on the pinned CLI's transcripts (testdata, 88 KB of
//     init, assistant, result, stream_event and api_retry lines) and
//     1.5 GB/s on a tool-heavy session (files read, tests run); encoding/json
//     into a map does 36 and 69 MB/s. go test ./claude -run '^$' -bench
//     'BenchmarkDecode' -benchtime=300ms -count=10 -benchmem
//   - Memory: parsing 1 GB of stream-json (transcripts, a tool-heavy session
//     and a 1 MB line, round after round, generated on the fly) peaks at
//     21.5 MB RSS in a child process. go test ./claude -run
//     'TestDecodeMemoryFlat$' -v -stream-bytes=1073741824
//   - Overhead: ralph's own time around one real Claude Code run (a Bash
//     call, then the final text, against the fake API) is 1.4 ms for a
//     0.6 s run: 0.2% (0.8 ms before every descendant was looked for in
//     /proc after the exit: that pass costs 0.7 ms, see agentproc). It is
//     timed by marks inside Run — before the agent starts (temporary
//     system prompt file, log file, pipes) and after it exits (reaping
//     what it started, draining the stream, classifying); parsing and
//     logging overlap the agent's run. go test ./claude -run '^$' -bench
//     BenchmarkRunOverhead -benchtime=10x
package claude
