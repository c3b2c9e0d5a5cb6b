// Package codex runs the OpenAI Codex CLI (`codex exec --json`, checked
// with @openai/codex 0.169.0) as a loop.Runner, on agentproc for the
// process work (process group, signals, reaping of every descendant, raw
// log, timeouts). Package codextest holds the pinned binary and a fake
// Responses API for its tests; shared/AGENT-CLIS.md the facts checked on
// the CLI.
//
// # Command line
//
//	codex exec --json --skip-git-repo-check --ephemeral
//	  --dangerously-bypass-approvals-and-sandbox | --sandbox read-only
//	  [-m MODEL] [-c model_reasoning_effort=EFFORT] [-c model_instructions_file="FILE"] -
//
// A work session (RunRequest.Sandboxed) runs with every permission; the
// verifier (not Sandboxed) in Codex's read-only sandbox, where commands run
// but cannot write (the model reads "Read-only file system"). Codex has no
// per-tool allow list and no turn limit: RunRequest.Tools and MaxTurns are
// not passed on. --ephemeral keeps sessions/ out of CODEX_HOME. The prompt
// comes on standard input ("-"): given as an argument while standard input
// is an open pipe, Codex would wait for that pipe to close. Codex does
// not know Claude Code's custom slash commands: a prompt that is one of
// the project's (peek mode's "/ralph-build <peek>") is expanded first
// (loop.ExpandSlashCommand).
//
// Model tiers (Tiers): opus → gpt-5.5 with high reasoning effort, sonnet →
// gpt-5.5 medium, haiku → gpt-5.5 low: of the pinned release's catalog,
// gpt-5.5 is the model with a known list price, so that the default
// strategy's cost is estimated and --max-cost holds (the catalog's newer
// gpt-6.1-sol and gpt-6-luna have no price known; ask for them with
// --model, and their cost is "unknown"). Any other model is passed as is (-m); none leaves
// Codex's configured model, which the runner reads from
// $CODEX_HOME/config.toml to name the model of the result and price it.
//
// # System prompt
//
// Codex cannot append instructions from a file. model_instructions_file
// replaces its base prompt (checked: the first developer message becomes
// the file's text), developer_instructions exists only as a string (on
// argv with -c, which RunRequest.SystemPrompt must never be: it can be
// megabytes), and --profile takes only a plain name of a file in
// $CODEX_HOME, which is the user's. So ralph's system prompt goes first on
// standard input, in an instructions block before the prompt (Stdin):
// the model gets it in the user message, after Codex's own developer
// instructions, which stay whole — the way Codex itself delivers a
// project's AGENTS.md. With ReplaceSystemPrompt, the prompt goes to a
// temp file (agentproc.TempFile) named by -c model_instructions_file.
//
// # Environment
//
// ralph's environment with RunRequest.Env on top. OPENAI_API_KEY and
// CODEX_API_KEY are removed unless RunRequest.UseAPIKey, as claude removes
// ANTHROPIC_API_KEY: a key that happens to be in ralph's environment must
// not move a ChatGPT-plan login to per-token billing. CODEX_HOME and the
// user's login and config are kept; StateDirs names CODEX_HOME (else
// ~/.codex), which Codex writes even with --ephemeral (SQLite state,
// skills, shell snapshots). In a sandbox it is a scratch copy whose
// changes are dropped — config.toml's notify and mcp_servers run programs
// in a user's next session — and only auth.json is the real file (Codex
// writes it in place, so a refreshed ChatGPT login is kept).
//
// # Events
//
// thread.started → EventInit (SessionID = thread_id; no model in the
// stream). turn.started → EventSystem "turn_started". item.completed
// agent_message → EventText; reasoning → EventThinking.
// command_execution → EventToolUse (Tool "exec", Input the command without
// Codex's `/bin/bash -lc '…'` wrapper) when it starts and EventToolResult
// (IsError on status failed or a non-zero exit code; output cut to
// ToolOutputLimit) when it completes. file_change → "apply_patch" (Input
// the paths; the result lists "kind path"), mcp_tool_call →
// "mcp__server__tool" (Input the JSON arguments; the result or error),
// web_search → "web_search" (Input the query; no result). An item whose
// start was not seen gives its EventToolUse when it completes. An item of
// type error (a non-fatal warning: "Model metadata … not found") →
// EventSystem "warning". A top-level error line → EventSystem "api_retry"
// for "Reconnecting..." (Codex retries), EventRateLimit "rejected" for a
// usage-limit message, EventSystem "error" otherwise; none is fatal by
// itself. turn.completed and turn.failed → EventResult. Unknown types and
// items (todo_list, …) are skipped; a line that is not a JSON object (or
// whose known fields have the wrong types) → EventMalformed. Lines of any
// length (agentproc.LineReader).
//
// # Result
//
// Text is the last agent_message (sigils come from it alone); on a failed
// turn it is the failure's message, as claude's error results carry the
// API's words. Turns counts turn.started: one per `codex exec` — Codex
// does not report its model requests. Usage is turn.completed's, summed by
// Codex over the turn's requests: OpenAI's input_tokens include the cached
// ones, so InputTokens = input_tokens − cached_input_tokens −
// cache_write_input_tokens, CacheReadTokens = cached_input_tokens,
// CacheWriteTokens = cache_write_input_tokens, OutputTokens =
// output_tokens (reasoning included). Codex reports no cost: CostUSD is
// estimated from Prices (CostEstimated), or 0 with CostUnknown for a model
// without a price.
//
// Classify (the precedence of claude.Classify): ralph's stops first
// (cancelled, timeout, idle_timeout); then a usage limit ("You've hit your
// usage limit … try again at 7:07 AM." — Codex's words for a 429 whose
// body is {"error":{"type":"usage_limit_reached","resets_at":…}}; ResetsAt
// read from them, in Codex's local time: $TZ of its environment, else
// ralph's); then turn.completed with exit 0 → success; turn.failed → auth
// ("unexpected status 401/403"), api_error (retry exhaustion: "exceeded
// retry limit, last status: 429", Codex's "We're currently experiencing
// high demand" for a 5xx, "stream disconnected", idle timeouts) or
// agent_error (a 400, anything else); no turn end → crashed.
//
// # Traps handled
//
//   - An API that cannot be reached (connection refused) makes Codex
//     reconnect for ever, even with its retries at 0, printing
//     "Reconnecting... waiting for network" at growing intervals (0 s, 5 s,
//     15 s, …). UnreachableRetries such lines in a row make the runner stop
//     it: api_error, in about 5 s plus the grace period.
//   - Tool commands run in a session of their own (setsid): agentproc reaps
//     every descendant, so a detached `sleep 3; echo late > late.txt`
//     never writes (tested).
//   - SIGTERM ends Codex with 143 and no turn.failed, SIGINT with 1: a run
//     stopped because ctx was cancelled is cancelled whatever it printed.
//   - An empty prompt on standard input makes Codex hang, printing
//     nothing (seen for 25 s); the loop never sends one.
//   - A CODEX_HOME inside TMPDIR makes Codex refuse to create its helper
//     binaries, and then every command of the read-only sandbox fails with
//     "bwrap: execvp codex-linux-sandbox" (a test-only setup: codextest
//     keeps them apart).
//
// # Figures
//
// go test -run TestReal -v ./agents/codex/ with 0.169.0, 2 shared cores:
// a session with one tool call 0.55 s wall; HTTP 500 with retries off
// 0.4 s, with Codex's default retries 25.7 s (30 requests); unreachable API stopped
// in 5.5 s; cancel during a `sleep 30` tool returned 1.4 s after the tool
// started (grace 2 s); the largest resident set of a Codex process 145 MB
// (getrusage of the children).
package codex
