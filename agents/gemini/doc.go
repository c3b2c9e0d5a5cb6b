// Package gemini runs Google's Gemini CLI (@google/gemini-cli, checked with
// 0.61.0) headless as a loop.Runner: it builds the arguments and
// environment, runs the CLI through agentproc (process group, timeouts,
// raw log, every descendant reaped), decodes its stream-json output into
// loop.Events, and classifies how the session ended.
//
// The pieces can be used on their own: Bin, Args, Env, StateDirs
// and WriteContext say how the CLI is started; a Decoder parses a stream
// from any io.Reader; Session and Classify turn events into a
// loop.RunResult; Prices and EstimateCost price its tokens.
//
// # Starting the CLI
//
// The executable is Runner.Path, else $RALPH_GEMINI, else `gemini`
// on PATH. The arguments are `--output-format stream-json -m MODEL`, then
// `--include-directories DIR` when there is a system prompt (below), then
// `--yolo` for a work session (RunRequest.Sandboxed) and for a verifier
// in a read-only sandbox (below). The user prompt goes
// on standard input, which is then closed: stdin that is not a terminal
// makes the CLI headless, no -p needed (checked with the pinned CLI). A
// prompt that is one of the project's Claude Code custom slash commands
// (peek mode's "/ralph-build <peek>") is expanded first
// (loop.ExpandSlashCommand).
//
// Model. `-m` is always given: with the CLI's default "auto", every turn
// first makes a routing call on another model. The loop's tiers map to
// opus → gemini-2.5-pro, sonnet → gemini-2.5-flash, haiku →
// gemini-2.5-flash-lite (Tiers); any other string is passed as the model
// id; no model means DefaultModel, gemini-2.5-pro (the CLI's own default
// when it does not route).
//
// Read-only sessions. The verifier (Sandboxed false) has no read-only
// shell in this CLI: in its default approval mode a headless CLI offers
// the model only read tools (list_directory, read_file, grep_search, glob,
// google_web_search, update_topic, enter_plan_mode, invoke_agent), and a
// call to run_shell_command comes back as the error tool_not_registered
// (checked in TestE2EReadOnlyRefusesShell). So where a sandbox is given
// (Runner.Sandbox, or Runner.VerifierSandbox for a verifier alone) the
// verifier runs in it with the tree read-only (agentproc.Spec.ReadOnly)
// and --yolo: it runs the tests, and a write into the tree — by its shell
// or by write_file — fails with "Read-only file system" (checked in
// TestE2EVerifierRunsTestsReadOnly). Without a sandbox it keeps the read
// tools only and cannot run commands (tests, builds), unlike under Claude
// Code, whose verifier has Bash; ralph build says so at the start
// (agentproc.NoVerifierShell). RunRequest.Tools is not passed on: the
// CLI's --allowed-tools is deprecated in favour of policy files.
//
// Environment. ralph's own, then RunRequest.Env on top, then
// GEMINI_CLI_NO_RELAUNCH=true and GEMINI_CLI_TRUST_WORKSPACE=true, which
// ralph always sets, for every user:
//   - without GEMINI_CLI_NO_RELAUNCH the CLI is a Node parent that
//     relaunches itself as a child (to raise its heap limit), and the
//     parent ignores SIGTERM and SIGINT: ralph's stop would reach a
//     process that does nothing. It also halves the memory (one Node
//     process, not two).
//   - without GEMINI_CLI_TRUST_WORKSPACE, in a folder the user has not
//     trusted, the CLI silently downgrades --yolo to the default mode (a
//     work session that cannot write) and ignores the project's settings
//     and GEMINI.md. Running ralph in a project is trusting it.
//
// The user's login, keys (GEMINI_API_KEY, GOOGLE_API_KEY, Vertex AI),
// settings and GEMINI_SYSTEM_MD are left as they are. There is no
// equivalent of Claude's ANTHROPIC_API_KEY rule: the CLI picks its
// authentication from its settings (security.auth.selectedType).
//
// Turn limit. RunRequest.MaxTurns is not passed on: the CLI reads a turn
// limit only from its settings (model.maxSessionTurns). A settings file
// named by GEMINI_CLI_SYSTEM_DEFAULTS_PATH would do, but the CLI refuses
// one under a world-writable directory such as /tmp ("Parent directory
// '/tmp' is insecure"), and ralph does not write into the user's
// ~/.gemini. When the user's limit is hit, the session is max_turns.
//
// # System prompt
//
// GEMINI_SYSTEM_MD replaces the CLI's whole system instruction — its
// tool instructions and safety mandates with it (checked: only the file's
// text was sent) — so ralph does not use it. Instead WriteContext writes
// ralph's prompt into a new temporary directory
// ($TMPDIR/ralph-gemini-context-*) as the CLI's context file, and Args
// adds that directory with --include-directories: the CLI loads the
// context files of every workspace directory, and sends them in the first
// user turn, in <loaded_context>, after the session context — the place
// the project's own GEMINI.md goes. The CLI's system instruction stays
// whole. Both checked in TestE2EToolCallThenDone against the fake API.
// The prompt never reaches argv (only the directory's path does), so its
// size does not matter. The file is named GEMINI.md unless the user's
// settings name other context files (context.fileName in the system,
// project or user settings: the first name is used; see ContextFileName).
// The directory is removed when Run returns; it is not named after ralph's
// process, so agentproc.Sweep does not remove it if ralph is killed first
// (a few kilobytes in TMPDIR). The directory is also a workspace
// directory of the session: the model sees it listed, and could read or
// write it.
//
// # Stream and events
//
// The CLI writes one JSON object per line on standard output: init,
// message (role user: the prompt echoed; role assistant with delta:true:
// a chunk of the model's text), tool_use, tool_result, error (warnings and
// errors: severity and message), result (status success or error, an
// error object, stats). Its standard error is noise (colour warnings,
// "YOLO mode is enabled" twice, "Ripgrep is not available", [STARTUP]
// lines, retry notices, stack traces): it goes to EventStderr and the
// stderr tail, never into classification.
//
//   - init → EventInit (session id, model).
//   - assistant chunks → one EventText per message: consecutive chunks are
//     joined and emitted when a line of another kind comes or the stream
//     ends, so a view and the final text see whole messages, as with
//     Claude Code's text blocks.
//   - tool_use → EventToolUse: Tool is tool_name, Input the key argument
//     (command, file_path, dir_path, pattern, path, query, url, prompt,
//     in that order) or the JSON parameters cut to 512 bytes.
//   - tool_result → EventToolResult named after its tool_use, IsError for
//     status error, Text the output (or the error message when there is
//     none), cut to 8 KiB.
//   - error → EventSystem (Subtype the severity).
//   - result → EventResult with its RunResult.
//   - a line that is not a JSON object → EventMalformed quoting its first
//     200 bytes; the stream goes on. Unknown types give no event.
//
// Lines of any length are read (agentproc.LineReader).
//
// # What maps to RunResult
//
//   - Text: the last assistant message (chunks joined); sigils are read
//     from it. For an error result, its error message.
//   - SessionID and Model from init; Agent "gemini".
//   - Turns: the CLI reports none. It is the number of model replies seen:
//     a reply starts with text or a tool call that follows the prompt or a
//     tool result. (A reply with several parallel tool calls counts once.)
//   - Usage, from result.stats, which sums every model call of the session
//     (routing calls included): input_tokens are the prompt tokens with the
//     cached ones, cached those read from the cache, input the rest. So
//     InputTokens = input (input_tokens − cached in releases without it),
//     CacheReadTokens = cached, OutputTokens = output_tokens plus whatever
//     total_tokens holds beyond input_tokens + output_tokens: the thinking
//     tokens, billed as output. CacheWriteTokens stays 0.
//   - Cost: the CLI reports none. It is estimated per model of
//     stats.models (keyed by the model the API reported) with Prices, list
//     prices of the Gemini API (see Prices for their date and limits):
//     CostSource estimated; a model with tokens but no price makes it
//     CostUnknown and 0. A login with a Google account (no per-token
//     billing) still gets the list-price estimate. No result line, no
//     stats: CostUnknown.
//   - APIErrorStatus: the `"code":NNN` of the API error quoted in the
//     error message, else the exit code + 256 when the exit code is 144 to
//     255 and the message is an "[API Error…": the CLI exits with the
//     final error's HTTP status mod 256 (500 → 244, 429 → 173, 401 → 145,
//     403 → 147).
//   - Duration: ralph's wall time, not duration_ms.
//
// # Classification
//
// Classify reads the result line's status and error message and the exit
// code; first match wins:
//
//   - cancelled / timeout / idle_timeout: ralph stopped the CLI before its
//     result (and a cancel covers a CLI that exits by itself without a
//     good result while ctx is cancelled).
//   - crashed: no result line, whatever the exit code. On SIGTERM or
//     SIGINT the CLI exits 0 at once without a result line; that is not a
//     success.
//   - usage_limit: an HTTP 429 whose message says a per-day quota is spent
//     (the API's QuotaFailure names a PerDay quota, and the CLI says "You
//     have exhausted your daily quota on this model."), or a quota limit
//     of 0 for the model, or a retry delay over 5 minutes ("Suggested retry
//     after 3600s.": the CLI turns the API's RetryInfo into that, and does
//     not retry it either). ResetsAt is now plus the delay, else, for a
//     daily quota, the next midnight Pacific time (when the Gemini API's
//     daily quotas reset). The pinned CLI reports these as
//     TerminalQuotaError on stderr, but its result line's error.type says
//     "unknown", so the message is what ralph reads (checked with the
//     bodies geminitest.DailyQuota and QuotaRetryAfter script).
//   - success: result status success, and exit 0 (or any exit code when
//     ralph stopped the CLI after that result).
//   - max_turns: error type FatalTurnLimitedError, or exit 53.
//   - auth: HTTP 401 or 403, or exit 41 (FatalAuthenticationError: no or
//     a bad authentication method).
//   - api_error: HTTP 408, 429 (rate limiting with a short delay or none —
//     "Resource has been exhausted (e.g. check quota)." is the API's
//     per-minute rate limit and passes), 499 or 5xx; or an "[API Error: …]"
//     without a status ("terminated": a stalled stream the CLI gave up on
//     after about 300 s).
//   - agent_error: anything else — another 4xx (an unknown model: 404),
//     an invalid stream (result status error without an error object), a
//     fatal tool error (exit 54), a non-zero exit after a good result.
//
// # Traps handled
//
//   - Retries are silent on standard output: the CLI retries 429 and 5xx
//     up to 10 times with backoff (5 s doubling to 30 s: over 200 s, see
//     shared/AGENT-CLIS.md), writing only "Attempt n failed" on stderr. An
//     idle timeout shorter than that stops such a session; ralph leaves the
//     user's general.maxAttempts alone (the tests set it to 1).
//   - The exit code after a result is the HTTP status mod 256, not 1.
//   - A missing result line is a failure even with exit 0.
//   - Shell tool commands run in their own session (setsid) and the CLI
//     does not stop them when it is stopped; agentproc reaps every
//     descendant, those that left the process group included (checked in
//     TestE2EDetachedToolCommandReaped).
//   - Without GEMINI_CLI_NO_RELAUNCH, signals reach a parent that ignores
//     them (above).
//
// # Measurements
//
// Real runs of the pinned CLI against the fake API, on the shared 2-core
// machine under load from other work (go test -v -run TestE2E
// ./agents/gemini/; wall time of Runner.Run, and the largest resident set
// of any child process so far, from getrusage): a shell tool call then the
// final text, 2.2 to 4.3 s and 250 to 290 MB; an HTTP 500, 1.3 s (one
// request: general.maxAttempts 1 in the test settings; with the default
// retries it takes over 200 s, see shared/AGENT-CLIS.md); a daily quota or
// an hour's retry delay (usage_limit), 1.3 to 1.4 s; the read-only session
// refusing a shell write, 2.8 s; a cancel during `sleep 30`, Run returns
// 30 ms to 1 s after the cancel (grace 2 s), nothing left. Most of the time
// is Node starting (about 1.2 s before the first request).
package gemini
