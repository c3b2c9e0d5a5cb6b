// Package opencode runs OpenCode (`opencode run --format json`, checked
// with opencode-ai 1.18.33) as a loop.Runner: it builds the arguments,
// environment and per-run config, runs the CLI through agentproc (own
// process group, every descendant reaped, raw log, timeouts), decodes its
// JSON lines into loop.Events, and classifies how the session ended.
//
// The pieces work on their own: Args, Env, Config and StateDirs say how
// OpenCode is started; a Decoder parses a stream from any io.Reader and
// gathers its Session; Classify turns a Session and an agentproc.Ending into a
// loop.RunResult.
//
// # Starting OpenCode
//
// The executable is Runner.Path, else $RALPH_OPENCODE, else
// `opencode` on PATH (Bin). The arguments are `run --format json
// --title ralph --print-logs --log-level ERROR`, then `-m provider/model`
// when the request names a model other than a tier. The prompt goes on
// standard input (OpenCode reads it there when no message argument is
// given); one that is a Claude Code custom slash command of the project
// (peek mode's "/ralph-build <peek>") is expanded first
// (loop.ExpandSlashCommand). --title spares the extra request OpenCode
// otherwise makes to have the model invent a title. --print-logs at
// level ERROR puts one log line on standard error per failed API
// attempt (see "Silent retries").
//
// Model tiers. OpenCode's models belong to providers (anthropic/…,
// openai/…, a provider of the user's config), and a user may have any of
// them configured, or none of Anthropic's. The loop's tiers (opus, sonnet,
// haiku) therefore pass no -m: the user's OpenCode config ("model") picks
// the model for every tier. Any other model string is passed with -m as is
// (OpenCode wants provider/model): `--model anthropic/claude-sonnet-4-5`
// with the fixed strategy pins one.
//
// Environment. ralph's own, then RunRequest.Env on top, plus
// OPENCODE_DISABLE_AUTOUPDATE=true (no self-update in the middle of a
// loop), PWD=<the work dir>, and OPENCODE_CONFIG_CONTENT (below). The
// user's keys, config files ($OPENCODE_CONFIG, ~/.config/opencode,
// opencode.json in the project) and OPENCODE_DISABLE_MODELS_FETCH are left
// as they are: models.dev's catalog is where OpenCode finds its built-in
// providers' models and prices, which give the reported cost. Trap: `opencode
// run` works in $PWD when it is set, not in its working directory; ralph's
// own PWD (where ralph was started) sent the agent to the wrong tree
// (checked: the test's file landed in the package directory) until PWD
// was set.
//
// Per-run config. OPENCODE_CONFIG_CONTENT holds a JSON config that
// OpenCode merges after the global config, $OPENCODE_CONFIG and the
// project's opencode.json and .opencode directories (read in the pinned
// binary), so the user's providers, keys and model still apply, and
// "instructions" lists are joined, not replaced. A user who sets
// OPENCODE_CONFIG_CONTENT already gets ralph's settings merged into theirs
// (it must then be a JSON object; Run says so otherwise). Nothing of
// ralph's is written into the user's project.
//
// System prompt. req.SystemPrompt is written to a temporary file
// (agentproc.TempFile, removed when Run returns, swept if ralph dies) and
// named in the per-run config's "instructions": OpenCode appends those
// files to its own system prompt, which stays (checked with the fake API:
// a 256 KiB prompt arrives whole in the system message, after OpenCode's
// own). OpenCode has no way to replace its prompt short of an agent in the
// user's config, so ReplaceSystemPrompt appends too.
//
// Read-only verifier. A request that is not Sandboxed (the loop's
// verifier) gets "permission": {"bash","edit","webfetch": "deny"} in the
// per-run config, for every agent and again for the agent "build", which
// it is run as (--agent build, so that a default_agent of the user's does
// not escape; an agent's own permissions would override the global ones).
// Denied tools are not offered to the model at all (checked: no bash,
// edit, write or webfetch in the request; read, glob and grep remain), and
// a call to one comes back as an error of tool "invalid". OpenCode cannot
// allow bash while keeping it read-only (`--agent plan` is not read-only:
// bash ran and wrote in AGENT-CLIS's check), so where a sandbox is given
// (Runner.Sandbox, or Runner.VerifierSandbox for a verifier alone) the
// verifier runs in it with the tree read-only (agentproc.Spec.ReadOnly)
// and bash set to "allow" (edit and webfetch still denied): it runs the
// tests, and a command's write into the tree fails with "Read-only file
// system" (checked in TestE2EVerifierRunsTestsReadOnly). Without a
// sandbox it has no bash and cannot run the tests; ralph build says so at
// the start (agentproc.NoVerifierShell). Work sessions keep OpenCode's
// defaults, which in `run` allow everything.
//
// # The stream
//
// Lines are step_start, tool_use (one per finished tool call),
// text, reasoning (with --thinking only), step_finish and error; each
// carries sessionID. The Decoder maps them: the first line with a session
// id gives EventInit; tool_use gives EventToolUse (Tool = part.tool, Input
// = the command, filePath, pattern or url, else the JSON input cut to 512
// bytes) and EventToolResult (its output cut to 8 KiB, IsError when
// state.status is "error", with the error as Text); text gives EventText,
// reasoning EventThinking; error gives an EventSystem (Subtype "error",
// IsError) and is remembered for Classify; a line that is not a JSON
// object (a plugin or a runtime may print on stdout too) gives
// EventMalformed and the stream goes on; step_start, unknown types,
// and step_finish give none — except the trap below. Lines of any length
// are read (agentproc.LineReader).
//
// No terminal line. --format json has none: the stream just ends after
// the last step_finish, whose reason is "stop" (tool-calls otherwise).
// The Decoder synthesizes the EventResult there, from the Session so far,
// so that agentproc's result grace starts and the idle timeout stops.
//
// What maps. RunResult.Text is the text parts of the last step (joined by
// newlines), else the last text of any step; Turns counts step_finish
// lines; Usage sums their tokens (input excludes cache reads, as OpenCode
// counts it; output includes reasoning; cache.read and cache.write);
// SessionID is OpenCode's; Agent is "opencode"; Model is the -m model,
// else the "model" its config names (ConfiguredModel: the global config,
// $OPENCODE_CONFIG, the project's opencode.json(c), then
// $OPENCODE_CONFIG_CONTENT, the last that names one), else DefaultModel
// ("opencode-default": OpenCode ran the model it used last, and the stream
// does not say which) — never the loop's tier, which OpenCode does not
// see. What the CLI does not report: the model used, a usage limit's reset time (except
// through a retry-after header in an APIError's data), rate-limit notices,
// its retries (see below), and the duration (RunResult.Duration is
// ralph's).
//
// Cost. step_finish carries part.cost, summed. When it is above 0 the
// model's config had prices (models.dev's catalog, or "cost" in a
// hand-written provider): loop.CostReported. When it is 0 while tokens
// were used, the model has no prices in OpenCode's config: the cost is
// estimated from Prices when the model is known (-m) and listed
// (loop.CostEstimated), else it is 0 and loop.CostUnknown.
//
// # Classification (Classify)
//
// From structured fields only, never tool output, first match wins:
// ralph's own stops (cancelled, timeout, idle_timeout) before the last
// step; then the last error line: APIError 401/403 and ProviderAuthError
// are auth; APIError 408, 429 and 5xx, an APIError without status that
// OpenCode calls retryable (no connection), and "The operation timed out."
// (the provider's timeout option) are api_error; a 429 whose message says
// a usage limit was hit is usage_limit, with the reset from its
// retry-after header when there is one — OpenCode itself has no notion
// of a usage limit, and relays the provider's words: OpenAI's
// insufficient_quota (a billing matter that no wait cures) stays
// api_error; anything else (a 400, an unknown model, a context overflow)
// is agent_error. Then api_error when ralph stopped a run that kept
// retrying; crashed when no step_finish with reason "stop" came, whatever
// the exit code; success with exit 0 (or when ralph stopped OpenCode after
// its last step); agent_error for another exit after the last step.
//
// # Traps handled
//
// Silent retries. OpenCode retries a 5xx, 408, 409 or 429 five times,
// backing off 2, 4, 8, 16 and 32 s (about 77 s in all), or as long as the
// answer's retry-after or retry-after-ms header says — up to 24 days —
// and prints nothing on standard output meanwhile; no setting bounds it.
// A ralph-side limit does: each failed attempt logs a line on standard
// error (`message="stream error"`, thanks to --print-logs), and when
// Runner.RetryLimit (default DefaultRetryLimit, 2 minutes) passes after
// such a line with no output since, the run is stopped and classified
// api_error, its stderr saying why. OpenCode's own series of about 77 s is
// left to end by itself (an outage of a minute does not cost the session);
// a retry-after of an hour does not keep a loop waiting. The idle timeout
// applies too. Measured: a 500 on every request with retry-after-ms 200
// ends as api_error in 4.8 s (6 requests); without the header it takes
// about 77 s (AGENT-CLIS); a 429 with retry-after 3600 and RetryLimit 3 s
// is stopped 9.3 s after the start.
//
// Signals. OpenCode is said to ignore SIGTERM and SIGINT during a run
// (AGENT-CLIS: a SIGTERM during a tool call let it finish the
// conversation). With agentproc's stop (SIGTERM and SIGCONT to the group
// and to every descendant) it sometimes ends at once (60 to 110 ms in the
// tests) and sometimes waits for the SIGKILL. The grace before SIGKILL is
// therefore short: DefaultGrace, 2 s, not agentproc's 5 s (Runner.Grace
// overrides it); OpenCode's SQLite session store survives a SIGKILL.
//
// Detached tool commands. OpenCode runs its shell commands in their own
// session (setsid), and a command sent to the background outlives
// OpenCode; agentproc reaps every process carrying the run's marker
// (checked: `setsid sh -c 'sleep 3; echo late > late.txt' &` never
// writes late.txt).
//
// State directories (StateDirs, for a sandbox): OpenCode's data (session
// database, logs, snapshots), cache, config and state directories under
// the XDG base directories, and ~/.npm, where it caches the npm metadata
// it fetches in the background at start (harmless offline). In the
// sandbox each is a scratch copy whose changes are dropped (its plugins,
// config files and cached packages run code in a user's next session);
// only auth.json and mcp-auth.json are the real files, and the session
// database starts empty (checked with the pinned 1.18.33, a state filled
// by an earlier run outside the sandbox included).
//
// # Measurements
//
// Real runs of the pinned 1.18.33 against opencodetest's fake, one at a
// time on the shared 2-core machine (go test ./agents/opencode -run
// TestE2E -v; each test logs its run's wall time and the largest RSS of
// the test's children so far):
//
//   - a tool call, then the final text: 3.9 to 4.1 s, about 640 MB max RSS
//     (AGENT-CLIS measured 2.9 to 3.7 s and 600 to 675 MB); the first run
//     in a git work tree took 8 s (OpenCode snapshots the tree);
//   - read-only verifier: 4.0 s; 500 with retries: 4.8 s;
//   - cancel during a tool call or a stalled API: Run returns 0.06 to 2.1 s
//     after the cancel;
//   - the largest run seen peaked at 850 MB.
package opencode
