package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/agents/codex"
	"github.com/ralph-dev/ralph/agents/gemini"
	"github.com/ralph-dev/ralph/agents/opencode"
	"github.com/ralph-dev/ralph/claude"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/sandbox"
)

// envAgentCLI picks the agent CLI when --agent-cli is not given.
const envAgentCLI = "RALPH_AGENT_CLI"

// agentCLI is one agent CLI ralph can run (README, "Other agents"): its name,
// the variable that names its executable, how that is found, and its Runner.
type agentCLI struct {
	name string // --agent-cli's value
	// bin finds the executable from --agent-bin's value and
	// $RALPH_<CLI>'s; its error wraps loop.ErrAgentNotFound, worded by
	// notFoundError.
	bin agentproc.Bin
	// binFlag is the flag the error names for the executable: --claude
	// for Claude Code, else --agent-bin.
	binFlag string
	// runner returns the Runner of the executable at path, in box when
	// not nil (--sandbox).
	runner func(path string, box *sandbox.Boundary) loop.Runner
	// verifierSandbox, for a CLI whose verifier has no read-only shell of
	// its own (Gemini CLI, OpenCode), gives runner (one of runner's) the
	// sandbox its verifier runs in with the tree read-only; nil for the
	// CLIs whose verifier runs commands anyway (Claude Code's Bash,
	// Codex's read-only sandbox).
	verifierSandbox func(runner loop.Runner, box *sandbox.Boundary)
}

// agentCLIs are the agents ralph runs, the default first.
var agentCLIs = []agentCLI{
	{name: "claude", bin: claude.Bin, binFlag: "--claude",
		runner: func(path string, box *sandbox.Boundary) loop.Runner { return &claude.Runner{Path: path, Sandbox: box} }},
	{name: codex.Name, bin: codex.Bin, binFlag: "--agent-bin",
		runner: func(path string, box *sandbox.Boundary) loop.Runner { return &codex.Runner{Path: path, Sandbox: box} }},
	{name: gemini.Name, bin: gemini.Bin, binFlag: "--agent-bin",
		runner:          func(path string, box *sandbox.Boundary) loop.Runner { return &gemini.Runner{Path: path, Sandbox: box} },
		verifierSandbox: func(r loop.Runner, box *sandbox.Boundary) { r.(*gemini.Runner).VerifierSandbox = box }},
	{name: opencode.Name, bin: opencode.Bin, binFlag: "--agent-bin",
		runner: func(path string, box *sandbox.Boundary) loop.Runner {
			return &opencode.Runner{Path: path, Sandbox: box}
		},
		verifierSandbox: func(r loop.Runner, box *sandbox.Boundary) { r.(*opencode.Runner).VerifierSandbox = box }},
}

// agentCLINames lists the names --agent-cli takes.
func agentCLINames() []string {
	var names []string
	for _, a := range agentCLIs {
		names = append(names, a.name)
	}
	return names
}

// lookupAgentCLI returns the agent CLI called name; from is the flag or
// variable that named it, for the error.
func lookupAgentCLI(name, from string) (agentCLI, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return agentCLIs[0], nil
	}
	i := slices.IndexFunc(agentCLIs, func(a agentCLI) bool { return a.name == name })
	if i < 0 {
		return agentCLI{}, fmt.Errorf("%s %q: not an agent ralph runs; want one of %s", from, name, strings.Join(agentCLINames(), ", "))
	}
	return agentCLIs[i], nil
}

// agentCLIFlags are the flags that pick the agent; build, plan and prompt
// have them.
func agentCLIFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "agent-cli", Usage: "the agent `CLI` to run: " + strings.Join(agentCLINames(), ", ") + "; several, comma-separated, in order of preference: a usage limit, spend limit or refused login moves the run to the next", DefaultText: "$" + envAgentCLI + ", else claude"},
		&cli.StringFlag{Name: "agent-bin", Usage: "the agent CLI's executable `PATH`", DefaultText: "$RALPH_<CLI> (e.g. $RALPH_CODEX), else the CLI's name on PATH"},
		&cli.StringFlag{Name: "claude", Usage: "Claude Code's executable `PATH` (as --agent-bin with --agent-cli claude)", DefaultText: "$" + claude.EnvClaude + ", else claude on PATH"},
		&cli.BoolFlag{Name: "sandbox", Usage: "run the agent, the test gate and --setup in a sandbox: they write only their tree, a temp directory and a scratch copy of the agent's state; .ralph/ and the repository stay read-only (Linux: bubblewrap; macOS: sandbox-exec)"},
	}
}

// chosenAgent is the agent a command runs, resolved before anything is
// claimed.
type chosenAgent struct {
	agentCLI
	path    string
	sandbox *sandbox.Sandbox // --sandbox
}

// newRunner returns the agent's Runner, in box when not nil (--sandbox:
// see boundary). Agents other than Claude Code expand peek mode's
// "/ralph-build <peek>" themselves (loop.ExpandSlashCommand).
func (a chosenAgent) newRunner(box *sandbox.Boundary) loop.Runner {
	return a.runner(a.path, box)
}

// agentPool is the agents a command runs (--agent-cli A[,B…]), in order
// of preference: one, or a loop.Pool of several (DESIGN §16).
type agentPool []chosenAgent

// chooseAgents resolves --agent-cli (or $RALPH_AGENT_CLI), a name or a
// comma-separated list of names in order of preference, and each one's
// executable: --agent-bin (one agent only), --claude for Claude Code,
// else $RALPH_<CLI>, else the CLI on PATH. A name ralph does not know, or
// given twice, is a usage error; a missing executable wraps
// loop.ErrAgentNotFound. Every executable is found before anything runs.
func chooseAgents(c *cli.Context, cfg appConfig) (agentPool, error) {
	list, from := c.String("agent-cli"), "--agent-cli"
	if !c.IsSet("agent-cli") {
		list, from = cfg.getenv(envAgentCLI), "$"+envAgentCLI
	}
	usage := func(err error) error { return &usageError{cmd: "ralph " + c.Command.Name, err: err} }
	var names []agentCLI
	for name := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(name) == "" && strings.Contains(list, ",") {
			return nil, usage(fmt.Errorf("%s %q: an empty name in the list", from, list))
		}
		a, err := lookupAgentCLI(name, from)
		if err != nil {
			return nil, usage(err)
		}
		if slices.ContainsFunc(names, func(b agentCLI) bool { return b.name == a.name }) {
			return nil, usage(fmt.Errorf("%s %q: %s is named twice", from, list, a.name))
		}
		names = append(names, a)
	}
	if len(names) > 1 {
		switch {
		case strings.TrimSpace(c.String("agent-bin")) != "":
			return nil, usage(fmt.Errorf("--agent-bin names one executable, but %s names %d agents: give each its $RALPH_<CLI> (e.g. $RALPH_CODEX)", from, len(names)))
		case strings.TrimSpace(c.String("claude")) != "" && !slices.ContainsFunc(names, func(a agentCLI) bool { return a.name == "claude" }):
			return nil, usage(fmt.Errorf("--claude names Claude Code's executable, but %s does not name claude", from))
		}
	}
	var pool agentPool
	for _, a := range names {
		chosen, err := resolveAgentBin(c, cfg, a, len(names) == 1 || a.name == "claude")
		if err != nil {
			return nil, err
		}
		pool = append(pool, chosen)
	}
	return pool, nil
}

// names is the pool's --agent-cli: its names, comma-separated.
func (ap agentPool) names() string {
	var names []string
	for _, a := range ap {
		names = append(names, a.name)
	}
	return strings.Join(names, ",")
}

// has reports whether the pool has agent name.
func (ap agentPool) has(name string) bool {
	return slices.ContainsFunc(ap, func(a chosenAgent) bool { return a.name == name })
}

// runner is the runner of the pool's agents in box (--sandbox): the one
// agent's, or a loop.Pool over them when there are several or a cost cap
// per agent (maxCost, 0: none). each, if not nil, is given every agent's
// own runner first (the verifier's shell), wrap wraps it (the progress
// file's DocumentRunner).
func (ap agentPool) runner(box *sandbox.Boundary, maxCost float64, each func(chosenAgent, loop.Runner), wrap func(loop.Runner) loop.Runner) (loop.Runner, error) {
	var agents []loop.PoolAgent
	for _, a := range ap {
		r := a.newRunner(box)
		if each != nil {
			each(a, r)
		}
		if wrap != nil {
			r = wrap(r)
		}
		agents = append(agents, loop.PoolAgent{Name: a.name, Runner: r})
	}
	if len(agents) == 1 && maxCost == 0 {
		return agents[0].Runner, nil
	}
	return loop.NewPool(maxCost, agents...)
}

// resolveAgentBin finds a's executable; withFlags says whether --agent-bin
// and --claude speak for a (they name the work agent's executable).
func resolveAgentBin(c *cli.Context, cfg appConfig, a agentCLI, withFlags bool) (chosenAgent, error) {
	var flag string
	if withFlags {
		bin, cl := strings.TrimSpace(c.String("agent-bin")), strings.TrimSpace(c.String("claude"))
		switch {
		case cl != "" && a.name != "claude":
			return chosenAgent{}, &usageError{cmd: "ralph " + c.Command.Name, err: fmt.Errorf("--claude names Claude Code's executable, but the agent is %s: use --agent-bin", a.name)}
		case cl != "" && bin != "" && cl != bin:
			return chosenAgent{}, &usageError{cmd: "ralph " + c.Command.Name, err: fmt.Errorf("--claude %q and --agent-bin %q name two executables: give one", cl, bin)}
		case bin != "":
			flag = bin
		default:
			flag = cl
		}
	}
	path, err := a.bin.LookPath(flag, cfg.getenv(a.bin.EnvVar))
	if err != nil {
		return chosenAgent{}, notFoundError(err, a.binFlag)
	}
	chosen := chosenAgent{agentCLI: a, path: path}
	if c.Bool("sandbox") {
		if chosen.sandbox, err = sandbox.Find(); err != nil {
			return chosenAgent{}, fmt.Errorf("--sandbox: %w", err)
		}
	}
	return chosen, nil
}

// boundary returns what the agents of the project at root may write in
// the sandbox (--sandbox), decided now, before any agent runs, from the
// project root, its repository and where the workers' trees go
// (ARCHITECTURE.md §7.4); nil without --sandbox.
func (a chosenAgent) boundary(root string) (*sandbox.Boundary, error) {
	if a.sandbox == nil {
		return nil, nil
	}
	box, err := a.sandbox.Boundary(sandbox.BoundaryParams{Root: root})
	if err != nil {
		return nil, fmt.Errorf("--sandbox: %w", err)
	}
	return box, nil
}

// giveVerifierShell gives the verifier's runner (verifier's CLI) a
// sandbox with the tree read-only, when its CLI has no read-only shell of
// its own and the build has no --sandbox (box nil), so that it can run the
// tests (ARCHITECTURE.md §3.6). Where no sandbox works here it says at the
// start that the verifier cannot run commands.
func giveVerifierShell(cfg appConfig, root string, verifier chosenAgent, runner loop.Runner, box *sandbox.Boundary) {
	if verifier.verifierSandbox == nil || box != nil {
		return
	}
	sb, err := sandbox.Find()
	if err == nil {
		if box, err = sb.Boundary(sandbox.BoundaryParams{Root: root}); err == nil {
			verifier.verifierSandbox(runner, box)
			return
		}
	}
	fmt.Fprintf(cfg.stderr, "ralph: %s\n", agentproc.NoVerifierShell(verifier.name, err))
}

// findAgents resolves the agents (chooseAgents), prints the API-key
// notice when Claude Code is one, and returns their runner (runner: in
// its sandbox's boundary with --sandbox).
func findAgents(c *cli.Context, cfg appConfig, root string, useAPIKey bool) (loop.Runner, agentPool, error) {
	agents, err := chooseAgents(c, cfg)
	if err != nil {
		return nil, nil, err
	}
	if agents.has("claude") {
		apiKeyNotice(cfg, useAPIKey)
	}
	box, err := agents[0].boundary(root)
	if err != nil {
		return nil, nil, err
	}
	runner, err := agents.runner(box, 0, nil, nil)
	return runner, agents, err
}

// apiKeyNotice prints what happens to ANTHROPIC_API_KEY and
// ANTHROPIC_AUTH_TOKEN (ARCHITECTURE.md §7.7).
func apiKeyNotice(cfg appConfig, useAPIKey bool) {
	if notice := apiKeyNoticeText(claude.APIKeysSet(apiKeyEnv(cfg)), useAPIKey); notice != "" {
		fmt.Fprintf(cfg.stderr, "ralph: %s\n", notice)
	}
}

// apiKeyNoticeText is the notice about the API key variables that are
// set (claude.APIKeysSet) and --use-api-key; "" when there is nothing to
// say (neither set, not asked to use them). It names the ones that are
// set.
func apiKeyNoticeText(set []string, useAPIKey bool) string {
	names, verb, them := strings.Join(set, " and "), "is", "that key"
	if len(set) > 1 {
		verb, them = "are", "them"
	}
	switch {
	case len(set) > 0 && useAPIKey:
		return "note: " + names + " " + verb + " passed to the agent (--use-api-key): usage is billed per token to " + them
	case len(set) > 0:
		return "note: " + names + " " + verb + " set but not passed to the agent, to avoid per-token billing; the agent uses its own login (pass --use-api-key to use " + them + ")"
	case useAPIKey:
		return "note: --use-api-key given but neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN is set; the agent uses its own login"
	}
	return ""
}
