package codex

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/sandbox"
)

// Name is the agent's name: the --agent-cli value and RunResult.Agent.
const Name = "codex"

// The environment variables the runner looks at.
const (
	EnvBin       = "RALPH_CODEX"    // the agent executable, when Runner.Path is empty
	EnvCodexHome = "CODEX_HOME"     // Codex's state directory (default ~/.codex)
	EnvAPIKey    = "OPENAI_API_KEY" // removed from the agent's environment unless UseAPIKey
	EnvCodexKey  = "CODEX_API_KEY"  // Codex exec's own key variable; removed likewise
)

// Bin finds the agent executable: Bin.LookPath(path, env) takes path if
// not empty, else env ($RALPH_CODEX's value), else `codex` on PATH; a
// missing one is an *agentproc.NotFoundError (loop.ErrAgentNotFound).
var Bin = agentproc.Bin{Name: Name, EnvVar: EnvBin, Install: "install the Codex CLI (npm install -g @openai/codex)"}

// Tier is the Codex model and reasoning effort a model tier maps to.
type Tier struct {
	Model  string // a model slug the pinned Codex knows
	Effort string // model_reasoning_effort: low, medium, high
}

// Tiers maps the loop's model tiers to Codex: gpt-5.5 at high, medium
// and low reasoning effort. gpt-5.5 is the one model of the pinned
// release's catalog with a list price in Prices, so that a build on the
// default strategy has an estimated cost that --max-cost can count; the
// catalog's newer slugs (gpt-6.1-sol, gpt-6-luna, …) have none known yet,
// and a run on them (--model gpt-6.1-sol) has cost "unknown". Any other
// model string is given to Codex as it is (-m), with Codex's default
// effort.
var Tiers = map[string]Tier{
	"opus":   {Model: "gpt-5.5", Effort: "high"},
	"sonnet": {Model: "gpt-5.5", Effort: "medium"},
	"haiku":  {Model: "gpt-5.5", Effort: "low"},
}

// ModelFor returns the Codex model and reasoning effort for req.Model: a
// tier's, or the model as it is with no effort ("" for both: Codex's
// configured default).
func ModelFor(model string) (slug, effort string) {
	if t, ok := Tiers[model]; ok {
		return t.Model, t.Effort
	}
	return model, ""
}

// Args returns the agent's command-line arguments for req:
//
//	exec --json --skip-git-repo-check --ephemeral
//	  --dangerously-bypass-approvals-and-sandbox (Sandboxed) | --sandbox read-only
//	  [-m MODEL] [-c model_reasoning_effort=EFFORT]
//	  [-c model_instructions_file="FILE"] -
//
// The user prompt is not an argument: "-" makes Codex read it from
// standard input (see Stdin). instructionsFile holds req.SystemPrompt when
// req.ReplaceSystemPrompt asks to replace Codex's base instructions with
// it (model_instructions_file replaces them); it is ignored otherwise. A
// request that is not Sandboxed runs in Codex's read-only sandbox: commands
// run but cannot write (Codex offers no per-tool allow list, so req.Tools
// is not passed on). Codex has no turn limit: req.MaxTurns is not passed
// on either.
func Args(req loop.RunRequest, instructionsFile string) []string {
	args := []string{"exec", "--json", "--skip-git-repo-check", "--ephemeral"}
	if req.Sandboxed {
		args = append(args, "--dangerously-bypass-approvals-and-sandbox")
	} else {
		args = append(args, "--sandbox", "read-only")
	}
	model, effort := ModelFor(req.Model)
	if model != "" {
		args = append(args, "-m", model)
	}
	if effort != "" {
		args = append(args, "-c", "model_reasoning_effort="+effort)
	}
	if req.ReplaceSystemPrompt && req.SystemPrompt != "" && instructionsFile != "" {
		args = append(args, "-c", "model_instructions_file="+tomlString(instructionsFile))
	}
	return append(args, "-")
}

// tomlString quotes s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// Stdin returns what the agent reads on standard input: the user prompt,
// after ralph's system prompt in an instructions block when there is one
// to append (not ReplaceSystemPrompt). Codex has no way to append to its
// instructions from a file: model_instructions_file replaces its base
// prompt, developer_instructions exists only as a config string (on argv
// with -c) and profiles must live in $CODEX_HOME. The block reaches the
// model the way Codex itself gives it a project's AGENTS.md: in a user
// message, after Codex's own instructions, which stay whole.
func Stdin(req loop.RunRequest) string {
	if req.SystemPrompt == "" || req.ReplaceSystemPrompt {
		return req.Prompt
	}
	var b strings.Builder
	b.Grow(len(req.SystemPrompt) + len(req.Prompt) + 128)
	b.WriteString("# Instructions for this session (from ralph, the loop running it)\n\n<INSTRUCTIONS>\n")
	b.WriteString(strings.TrimRight(req.SystemPrompt, "\n"))
	b.WriteString("\n</INSTRUCTIONS>\n\n")
	b.WriteString(req.Prompt)
	return b.String()
}

// Env returns the agent's environment: base (ralph's own, os.Environ())
// with req.Env on top (later entries win), without OPENAI_API_KEY and
// CODEX_API_KEY unless req.UseAPIKey — as claude does with
// ANTHROPIC_API_KEY: a key in ralph's environment must not silently move
// a ChatGPT-plan login to per-token billing. CODEX_HOME and everything
// else of the user's own setup (login, config, providers) is kept.
func Env(base []string, req loop.RunRequest) []string {
	return agentproc.Environ(base, req.Env, func(key string) bool {
		return (key == EnvAPIKey || key == EnvCodexKey) && !req.UseAPIKey
	})
}

// StateDirs returns Codex's own directory, given its environment:
// $CODEX_HOME, else ~/.codex (from env's HOME, else the user's home
// directory). Codex writes there even with --ephemeral (SQLite state,
// skills, shell snapshots). In a sandbox the agent works on a scratch
// copy of it (sandbox.State): config.toml (notify, mcp_servers, model
// providers), AGENTS.md, prompts/, rules/ and skills/ are read-only or
// copies whose changes are dropped. Only auth.json is the real one,
// writable, so that a refreshed ChatGPT login is kept (Codex writes it in
// place). Its sessions, logs, shell snapshots and SQLite databases start
// empty in the scratch.
func StateDirs(env []string) []sandbox.State {
	dir := agentproc.Getenv(env, EnvCodexHome)
	if dir == "" {
		home := agentproc.Home(env)
		if home == "" {
			return nil
		}
		dir = filepath.Join(home, ".codex")
	}
	return []sandbox.State{{Dir: dir, Keep: []string{"auth.json"}, Fresh: codexFresh}}
}

// codexFresh are the entries of Codex's directory that it fills as it
// runs.
var codexFresh = []string{
	"sessions", "archived_sessions", "log", "shell_snapshots", "tmp", ".tmp", "cache",
	"*.sqlite", "*.sqlite-*", "*.db", "*.db-*", "history.jsonl",
}
