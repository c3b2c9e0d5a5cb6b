package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/claude"
	"github.com/ralph-dev/ralph/dag/progress"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/parallel"
)

// buildCommand is `ralph build`: the build loop of ARCHITECTURE.md §3 over
// the task graph, or over a markdown progress file with --progress. The
// policy is package loop's; this file turns flags into a loop.Config, opens
// the store, prints the run and maps its Report to the exit code.
func buildCommand(cfg appConfig) *cli.Command {
	return &cli.Command{
		Name:      "build",
		Usage:     "run the agent in a loop, one task an iteration, until the plan is done",
		UsageText: "ralph build [options]",
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "max-iterations", Value: loop.DefaultMaxIterations, Usage: "stop after `N` iterations"},
			&cli.BoolFlag{Name: "once", Usage: "run a single iteration"},
			&cli.BoolFlag{Name: "dry-run", Usage: "show the next task, the model and the prompt source; run nothing, change nothing"},
			&cli.StringFlag{Name: "feature", Usage: "work only on the tasks of feature `F`"},
			&cli.StringFlag{Name: "task", Usage: "work only on task `ID` (or, if it has subtasks, on them)"},
			&cli.StringFlag{Name: "model", Usage: "model `M` (opus, sonnet, haiku or a full id); without --strategy it means --strategy fixed"},
			&cli.StringFlag{Name: "strategy", Usage: "model strategy `S`: " + strings.Join(loop.StrategyNames(), ", "), DefaultText: "fixed with --model, else cost-optimized"},
			&cli.BoolFlag{Name: "verify", Usage: "check every finished task with a read-only verifier session"},
			&cli.IntFlag{Name: "max-retries", Value: loop.DefaultMaxRetries, Usage: "retry a task up to `N` times; also how many agent or gate failures in a row are tolerated"},
			&cli.DurationFlag{Name: "timeout", Value: loop.DefaultTimeout, Usage: "wall-clock limit of one agent session, a `DURATION` (0: none)"},
			&cli.DurationFlag{Name: "idle-timeout", Value: loop.DefaultIdleTimeout, Usage: "stop a session that prints nothing for this `DURATION` (0: never)"},
			&cli.StringFlag{Name: "claim", Value: string(loop.ClaimLoop), Usage: "who claims tasks, `MODE`: loop, or agent (peek mode: the agent claims with 'ralph task claim')"},
			&cli.DurationFlag{Name: "lease", Value: loop.DefaultLease, Usage: "claim lease, renewed while the agent works, a `DURATION`"},
			&cli.StringFlag{Name: "progress", Usage: "work through the markdown progress `FILE` instead of the task database"},
			&cli.StringFlag{Name: "test-cmd", Usage: "test gate: shell command `C` run after each finished task", DefaultText: "the test command AGENTS.md names, if any"},
			&cli.StringFlag{Name: "final-cmd", Usage: "final check: shell command `C` run once the plan is complete; a failure adds a task to make it pass (at most 3 times, then exit 3)"},
			&cli.BoolFlag{Name: "commit", Usage: "commit all changes after each finished task (needs a git repository)"},
			&cli.Float64Flag{Name: "max-cost", Usage: "stop before an iteration once this run has spent `USD` (0: no budget)"},
			&cli.Float64Flag{Name: "max-cost-per-agent", Usage: "with several --agent-cli: an agent whose sessions have cost `USD` in this run is out, the next goes on; every agent at its cap stops the run (exit 9) (0: no cap)"},
			&cli.StringFlag{Name: "on-usage-limit", Value: string(loop.UsageLimitWait), Usage: "on a usage limit, `POLICY`: wait for the reset, or stop (exit 10)"},
			&cli.DurationFlag{Name: "max-wait", Value: loop.DefaultMaxWait, Usage: "longest usage-limit wait, a `DURATION`; a later reset stops the run"},
			&cli.BoolFlag{Name: "use-api-key", Usage: "keep the API key in the agent's environment (per-token billing): ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN for Claude Code, OPENAI_API_KEY and CODEX_API_KEY for Codex"},
			&cli.IntFlag{Name: "workers", Usage: "run `N` agents at once, each in its own git worktree, merging each finished task into the integration branch", DefaultText: "1 if the plan has an integration branch, else none"},
			&cli.StringFlag{Name: "into", Usage: "with workers: the integration `BRANCH`, recorded with the plan by its first parallel build", DefaultText: parallel.DefaultInto + ", or the plan's"},
			&cli.StringFlag{Name: "setup", Usage: "with workers: shell command `C` run in each worker's tree before its first agent (e.g. install dependencies)"},
			&cli.StringFlag{Name: "remote", Usage: "with workers, or a plan that has an integration branch: the git remote `NAME` where the integration branch lives, for builds of one plan on several machines; task and attempt branches are pushed there, and a task lands by a push that only fast-forwards"},
			&cli.StringFlag{Name: "base", Usage: "with workers, or a plan that has an integration branch: the `BRANCH` the integration branch follows, recorded with the plan: each build first merges its new commits into the integration branch (with --remote, the remote's BRANCH)", DefaultText: "the plan's, or the branch checked out when it is first recorded"},
			&cli.BoolFlag{Name: "accept-tip", Usage: "with workers, or a plan that has an integration branch: accept the integration branch as it is now where it is not where ralph last put it (someone moved, rewound or deleted it; a deleted one is made again from HEAD): the tasks whose landed work it lacks go back to pending, and the build goes on from it"},
			otelFlag(),
			notifyFlag(),
		}, append(append(agentCLIFlags(), prFlags()...),
			&cli.StringFlag{Name: "verify-agent-cli", Usage: "with --verify: another agent `CLI` checks the work (" + strings.Join(agentCLINames(), ", ") + "), read-only in its own way; its executable is $RALPH_<CLI>, else its name on PATH", DefaultText: "the --agent-cli"},
		)...),
		Action: func(c *cli.Context) error { return build(c, cfg) },
	}
}

// buildAgents resolves the work agents (--agent-cli) and the verifier's
// (--verify-agent-cli; none when not given: the loop's verifier is then
// the work agent, or with several agents another of them).
func buildAgents(c *cli.Context, cfg appConfig) (agents agentPool, verifier *chosenAgent, err error) {
	// Every name is checked before any executable is looked for.
	var v agentCLI
	name := strings.TrimSpace(c.String("verify-agent-cli"))
	if name != "" {
		if v, err = lookupAgentCLI(name, "--verify-agent-cli"); err != nil {
			return nil, nil, &usageError{cmd: "ralph build", err: err}
		}
	}
	if agents, err = chooseAgents(c, cfg); err != nil {
		return nil, nil, err
	}
	if name == "" || (len(agents) == 1 && name == agents[0].name) {
		return agents, nil, nil
	}
	chosen, err := resolveAgentBin(c, cfg, v, false)
	if err != nil {
		return nil, nil, fmt.Errorf("the verifier: %w", err)
	}
	return agents, &chosen, nil
}

// buildUsage is a usage error of ralph build.
func buildUsage(format string, a ...any) error {
	return &usageError{cmd: "ralph build", err: fmt.Errorf(format, a...)}
}

// checkBuildFlags refuses the flags of ralph build that do not go
// together, before anything is opened.
func checkBuildFlags(c *cli.Context) error {
	feature, taskID, progressFile := strings.TrimSpace(c.String("feature")), strings.TrimSpace(c.String("task")), c.String("progress")
	switch {
	case feature != "" && taskID != "":
		return buildUsage("--feature and --task cannot be used together")
	case progressFile != "" && feature != "":
		return buildUsage("--feature needs the task database; a progress file has no features")
	case progressFile != "" && c.String("claim") == string(loop.ClaimAgent):
		return buildUsage("--claim agent needs the task database (the agent claims with 'ralph task claim'), not --progress")
	}
	if err := checkWorkerFlags(c, progressFile != ""); err != nil {
		return err
	}
	switch {
	case c.IsSet("remote") && strings.TrimSpace(c.String("remote")) == "":
		return buildUsage("--remote needs the name of a git remote (git remote -v lists them)")
	case c.IsSet("verify-agent-cli") && !c.Bool("verify"):
		return buildUsage("--verify-agent-cli goes with --verify")
	case c.Float64("max-cost-per-agent") < 0:
		return buildUsage("--max-cost-per-agent %v: want 0 (no cap) or more", c.Float64("max-cost-per-agent"))
	case c.IsSet("base") && strings.TrimSpace(c.String("base")) == "":
		return buildUsage("--base needs the name of a branch")
	case c.IsSet("remote") && progressFile != "":
		return buildUsage("--remote goes with --workers, and needs the task database, not --progress")
	}
	return nil
}

// checkWorkerFlags refuses --workers with what workers do not take, and
// the flags of workers without --workers.
func checkWorkerFlags(c *cli.Context, progressMode bool) error {
	if !c.IsSet("workers") {
		if c.IsSet("into") || c.IsSet("setup") {
			return buildUsage("--into and --setup go with --workers")
		}
		return nil
	}
	switch {
	case c.Int("workers") < 1:
		return buildUsage("--workers %d: want 1 or more", c.Int("workers"))
	case progressMode:
		return buildUsage("--workers needs the task database, not --progress")
	}
	lc := loop.Config{Commit: c.Bool("commit"), ClaimMode: loop.ClaimMode(c.String("claim"))}
	if err := parallel.CheckLoop(lc); err != nil {
		return workersError(err, false)
	}
	return nil
}

// build is the action of `ralph build`: flags → loop.Config, the plan
// opened, the runners chosen, then one loop (buildSolo) or the workers
// (buildParallel), as package parallel decides, and the run printed.
func build(c *cli.Context, cfg appConfig) (err error) {
	if _, err := args(c, 0, 0, ""); err != nil {
		return err
	}
	p, err := projectRoot(c)
	if err != nil {
		return err
	}
	set, err := applyConfig(c, cfg, p)
	if err != nil {
		return err
	}
	if err := checkBuildFlags(c); err != nil {
		return err
	}
	pr, err := prepPR(c, cfg, p)
	if err != nil {
		return err
	}
	lc := buildConfig(c, cfg, p)
	store, closeStore, err := openBuildStore(c, cfg, p, c.String("progress"))
	if err != nil {
		return err
	}
	defer closeStore()
	if err := checkScope(c.Context, store, lc.Scope); err != nil {
		return err
	}
	if c.Bool("dry-run") {
		if err := dryRun(c.Context, cfg, lc, store); err != nil {
			return err
		}
		printSettings(c, cfg, set)
		return nil
	}
	run := newRun(c.Context, cfg, store, loop.RunKindBuild, lc.Scope)
	defer func() { run.end(c.Context, err) }()
	if run.notify, err = newNotifier(c, cfg, p, loop.RunKindBuild); err != nil {
		return err
	}
	run.issues = issueComments(c.Context, cfg, store)
	// The agents must exist before anything is claimed.
	agents, verifier, err := buildAgents(c, cfg)
	if err != nil {
		return agentsMissing(c, cfg, lc, store, err)
	}
	runner, view, err := buildRunners(c, cfg, p, &lc, store, agents, verifier)
	if err != nil {
		return err
	}
	// A plan that has an integration branch is built in worktrees,
	// whoever builds it: package parallel decides.
	workers := parallel.Workers(c.Context, store, c.Int("workers"))
	if err := checkWorkers(c, lc, workers); err != nil {
		return err
	}
	if workers > 0 {
		rep, err := buildParallel(c, cfg, p, lc, workers, store, runner, view, run)
		if pr == nil || err != nil {
			return err
		}
		return pr.finish(c.Context, cfg, store, lc.Scope, rep, func(context.Context) (*parallel.Report, error) {
			rep, err := buildParallel(c, cfg, p, lc, workers, store, runner, view, run)
			return &rep, err
		})
	}
	return buildSolo(c, cfg, p, lc, store, runner, view, run)
}

// buildConfig is the loop.Config the flags of ralph build ask for.
func buildConfig(c *cli.Context, cfg appConfig, p project) loop.Config {
	lc := loop.DefaultConfig(p.root)
	lc.Scope = loop.Scope{Feature: strings.TrimSpace(c.String("feature")), TaskID: strings.TrimSpace(c.String("task"))}
	lc.MaxIterations = c.Int("max-iterations")
	lc.Once = c.Bool("once")
	lc.Model = strings.TrimSpace(c.String("model"))
	lc.Strategy = strings.TrimSpace(c.String("strategy"))
	lc.Verify = c.Bool("verify")
	lc.MaxRetries = c.Int("max-retries")
	lc.ClaimMode = loop.ClaimMode(c.String("claim"))
	lc.Lease = c.Duration("lease")
	lc.TestCmd = strings.TrimSpace(c.String("test-cmd"))
	lc.FinalCmd = strings.TrimSpace(c.String("final-cmd"))
	lc.Commit = c.Bool("commit")
	lc.MaxCost = c.Float64("max-cost")
	// Timeouts, usage limits, logs and the agent's environment (the plan
	// on a server included), as plan and prompt set them.
	agentConfig(c, cfg, p, &lc)
	return lc
}

// checkScope refuses a scope that names nothing: bad input, said before
// the run writes any log.
func checkScope(ctx context.Context, store loop.TaskStore, scope loop.Scope) error {
	if scope.Feature != "" {
		if fstore, ok := store.(loop.FeatureStore); ok {
			if _, err := fstore.Feature(ctx, scope.Feature); err != nil {
				return err
			}
		}
	}
	if scope.TaskID != "" {
		if _, err := store.Get(ctx, scope.TaskID); err != nil {
			return err
		}
	}
	return nil
}

// buildRunners sets in lc what the agents need (RALPH_BIN, the sandbox,
// the verifier's runner); it returns the work agents' runner (a loop.Pool
// of several) and the view that prints the run, which every session's
// result passes through. verifier is --verify-agent-cli's, if given.
func buildRunners(c *cli.Context, cfg appConfig, p project, lc *loop.Config, store loop.TaskStore, agents agentPool, verifier *chosenAgent) (loop.Runner, *buildView, error) {
	var err error
	if lc.RalphBin, err = ralphBin(); err != nil {
		if lc.ClaimMode == loop.ClaimAgent {
			return nil, nil, fmt.Errorf("peek mode needs the path of the ralph binary for the agent: %w", err)
		}
		fmt.Fprintf(cfg.stderr, "ralph: warning: RALPH_BIN is not set for the agent: %v\n", err)
	}
	if agents.has("claude") || (lc.Verify && verifier != nil && verifier.name == "claude") {
		apiKeyNotice(cfg, lc.UseAPIKey)
	}
	sweepLeftovers(c.Context, cfg)
	// With --sandbox, what agents and gates may write is decided here,
	// once, before any of them runs (ARCHITECTURE.md §7).
	box, err := agents[0].boundary(p.root)
	if err != nil {
		return nil, nil, err
	}
	lc.Commands = &agentproc.Commands{Sandbox: box}
	lc.Agent = agents[0].name
	if verifier != nil {
		lc.Verifier, lc.VerifierAgent = verifier.newRunner(box), verifier.name
		if lc.Verify {
			giveVerifierShell(cfg, p.root, *verifier, lc.Verifier, box)
		}
	}
	view := newBuildView(cfg.stdout)
	view.logDir = p.rel(lc.LogDir)
	view.pooled = len(agents) > 1
	// Without --verify-agent-cli the work agents verify too (each one
	// another's work, when there are several).
	var each func(chosenAgent, loop.Runner)
	if lc.Verify && verifier == nil {
		each = func(a chosenAgent, r loop.Runner) { giveVerifierShell(cfg, p.root, a, r, box) }
	}
	var wrap func(loop.Runner) loop.Runner
	if ps, ok := store.(progress.Recorder); ok {
		wrap = func(r loop.Runner) loop.Runner {
			return &progress.DocumentRunner{Runner: r, Store: ps.Store, Refused: func(err error) {
				view.warn("the agent's updated progress file was not written: %v", err)
			}}
		}
	}
	runner, err := agents.runner(box, c.Float64("max-cost-per-agent"), each, wrap)
	if err != nil {
		return nil, nil, err
	}
	lc.Observer = view
	return runner, view, nil
}

// agentsMissing is the end of a build whose agents buildAgents did not
// find (err): a run with nothing to do needs no agent, so an empty,
// finished or blocked plan says so (exit 2, 0, 6) rather than "agent not
// found"; a usage error stays one.
func agentsMissing(c *cli.Context, cfg appConfig, lc loop.Config, store loop.TaskStore, err error) error {
	var uerr *usageError
	if errors.As(err, &uerr) {
		return err
	}
	if plan, derr := loop.DryRun(c.Context, lc, store); derr == nil && plan.Outcome != "" {
		_, progressMode := store.(progress.Recorder)
		return outcomeError(plan.Outcome, plan.ExitCode(), plan.Message, progressMode, cfg.stdout)
	}
	return err
}

// checkWorkers refuses the flags that need workers when the build has
// none, and what workers do not take when it has some (from the plan's
// integration branch: --workers was checked before).
func checkWorkers(c *cli.Context, lc loop.Config, workers int) error {
	switch {
	case c.IsSet("remote") && workers == 0:
		return buildUsage("--remote goes with --workers (or a plan that has an integration branch): only the integration branch lives on the remote")
	case c.IsSet("base") && workers == 0:
		return buildUsage("--base goes with --workers (or a plan that has an integration branch): it names the branch the integration branch follows")
	case c.Bool("pr") && workers == 0:
		return buildUsage("--pr goes with --workers (or a plan that has an integration branch): the pull request carries the integration branch")
	case c.Bool("accept-tip") && workers == 0:
		return buildUsage("--accept-tip goes with --workers (or a plan that has an integration branch): it accepts the integration branch's tip")
	case workers > 0:
		if err := parallel.CheckLoop(lc); err != nil {
			return workersError(err, !c.IsSet("workers"))
		}
	}
	return nil
}

// buildSolo runs one loop in the checkout and prints its end: the
// session log, the outcome.
func buildSolo(c *cli.Context, cfg appConfig, p project, lc loop.Config, store loop.TaskStore, runner loop.Runner, view *buildView, run *runRecord) error {
	traces, stopTraces := startTraces(c, cfg, 0)
	defer stopTraces()
	lc.Observer = run.observe(withTraces(view, traces))
	rep, err := loop.Run(c.Context, lc, store, runner)
	run.rep = &rep
	if err != nil {
		if errors.Is(err, loop.ErrConfig) {
			return configError("ralph build", err)
		}
		return err
	}
	printTotals(cfg.stdout, "build", rep)
	printSessionLog(cfg.stdout, p, lc.LogDir, rep.Session)
	_, progressMode := store.(progress.Recorder)
	return outcomeError(rep.Outcome, rep.ExitCode(), reportWords(rep), progressMode, cfg.stdout)
}

// buildParallel runs the worker pool, the view showing each worker (a
// board on a terminal), and prints its end (printParallel). The traces
// get the run's own session_end (the workers send theirs), which ends
// the run span.
func buildParallel(c *cli.Context, cfg appConfig, p project, lc loop.Config, workers int, store loop.TaskStore, runner loop.Runner, view *buildView, run *runRecord) (parallel.Report, error) {
	view.workers = true
	if claude.IsTerminal(rawOut(cfg.stdout)) {
		view.board = newBoard(rawOut(cfg.stdout), cfg.now, cfg.getenv)
	}
	traces, stopTraces := startTraces(c, cfg, workers)
	defer stopTraces()
	lc.Observer = run.observe(withTraces(view, traces))
	pc := parallel.Config{Loop: lc, Workers: workers, Into: strings.TrimSpace(c.String("into")), Setup: c.String("setup"),
		Base: strings.TrimSpace(c.String("base")), Remote: strings.TrimSpace(c.String("remote")), AcceptTip: c.Bool("accept-tip"), AcceptedBy: loop.Actor{Person: personName(cfg)}, Words: buildWords}
	rep, err := parallel.Run(c.Context, pc, store, runner)
	run.rep, run.into = &rep.Report, rep.Into
	if traces != nil {
		total := rep.Report
		traces.Observe(loop.Note{Kind: loop.NoteSessionEnd, At: cfg.now(), Session: rep.Session, Mode: loop.ModeBuild, Report: &total})
	}
	if err != nil {
		switch {
		case errors.Is(err, loop.ErrConfig):
			return rep, configError("ralph build", err)
		case errors.Is(err, parallel.ErrInto), errors.Is(err, parallel.ErrNoSettings), errors.Is(err, parallel.ErrNoLandings):
			return rep, intoError(err)
		case rep.Outcome == loop.OutcomeError:
			return rep, err
		}
		fmt.Fprintf(cfg.stderr, "ralph: warning: %v\n", err)
	}
	return rep, printParallel(cfg, p, lc.LogDir, rep)
}

// printParallel prints the end of a parallel build: the session log, the
// warnings, an accepted tip, the integration branch and how to merge it,
// the outcome.
func printParallel(cfg appConfig, p project, logDir string, rep parallel.Report) error {
	printTotals(cfg.stdout, "build", rep.Report)
	printSessionLog(cfg.stdout, p, logDir, rep.Session)
	for _, w := range rep.Warnings {
		fmt.Fprintf(cfg.stderr, "ralph: warning: %s\n", w)
	}
	if rep.AcceptedTip != "" {
		back := "nothing went back to pending"
		if len(rep.Reopened) > 0 {
			back = "back to pending, their work not on it: " + strings.Join(rep.Reopened, ", ")
		}
		fmt.Fprintf(cfg.stdout, "accepted tip: %s at %.12s · %s\n", rep.Into, rep.AcceptedTip, back)
	}
	switch {
	case rep.Into == "" || rep.Outcome == loop.OutcomeGitFailed:
	case rep.Remote != "":
		// Any clone can take it, whether or not it ran a build.
		fmt.Fprintf(cfg.stdout, "integration branch: %s on %s · merge it with: git pull %s %s\n", rep.Into, rep.Remote, rep.Remote, rep.Into)
	default:
		fmt.Fprintf(cfg.stdout, "integration branch: %s · merge it with: git merge %s\n", rep.Into, rep.Into)
	}
	return outcomeError(rep.Outcome, rep.ExitCode(), reportWords(rep.Report), false, cfg.stdout)
}

// outcomeError prints the closing line of a run or a dry run and returns the
// error that carries its exit code: a successful outcome (exit 0) is a line on
// stdout, any other is "ralph: <message>" on stderr with its code.
func outcomeError(o loop.Outcome, code int, msg string, progressMode bool, stdout io.Writer) error {
	if o == loop.OutcomeNoPlan {
		if progressMode {
			msg += " (the progress file has no '- [ ]' task)"
		} else {
			msg += " (run 'ralph plan' first, or add tasks with 'ralph task add')"
		}
	}
	if code == exitOK {
		fmt.Fprintln(stdout, msg)
		return nil
	}
	return &codedError{code: code, err: errors.New(msg)}
}

// openBuildStore opens the task graph of the project, or the progress file.
// Nothing to work on is exit 2: no .ralph/ (with a hint to init), no
// database, no progress file.
func openBuildStore(c *cli.Context, cfg appConfig, p project, progressFile string) (loop.TaskStore, func(), error) {
	if progressFile != "" {
		st, err := progress.Open(progressFile, progress.Options{Now: cfg.now, Root: p.root})
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nothingToDo("progress file %s not found", progressFile)
		}
		if err != nil {
			return nil, nil, err
		}
		// The store keeps the file's Iteration Log (progress.Recorder).
		return progress.Recorder{Store: st}, func() {}, nil
	}
	if fi, err := os.Stat(p.ralph); err != nil || !fi.IsDir() {
		return nil, nil, nothingToDo("no ralph project in %s (run 'ralph init', then 'ralph plan')", p.root)
	}
	st, _, err := openPlanStore(c, cfg, p, func() error {
		return nothingToDo("no task database at %s (run 'ralph init')", p.dbPath())
	})
	if err != nil {
		return nil, nil, err
	}
	if err := st.SyncFeatureFiles(c.Context, p.root); err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, func() {
		// What the agents wrote into the feature files goes to the plan.
		if err := st.SyncFeatureFiles(context.WithoutCancel(c.Context), p.root); err != nil {
			fmt.Fprintf(cfg.stderr, "ralph: feature files not stored with the plan: %v\n", err)
		}
		st.Close()
	}, nil
}

// dryRun prints what the next iteration would do.
func dryRun(ctx context.Context, cfg appConfig, lc loop.Config, store loop.TaskStore) error {
	plan, err := loop.DryRun(ctx, lc, store)
	if err != nil {
		if errors.Is(err, loop.ErrConfig) {
			return configError("ralph build", err)
		}
		return err
	}
	if plan.Outcome != "" {
		_, progressMode := store.(progress.Recorder)
		return outcomeError(plan.Outcome, plan.ExitCode(), plan.Message, progressMode, cfg.stdout)
	}
	w := cfg.stdout
	if len(plan.Waiting) > 0 {
		_, err := fmt.Fprintln(w, plan.Message)
		return err
	}
	label := "next task"
	if lc.ClaimMode == loop.ClaimAgent {
		label = "first claimable task (the agent picks)"
	}
	fmt.Fprintf(w, "%s: %s %s\n", label, plan.TaskID, plan.Title)
	fmt.Fprintf(w, "model: %s\n", plan.Model)
	fmt.Fprintf(w, "prompt: %s (%s)\n", plan.PromptName, plan.PromptSource)
	fmt.Fprintf(w, "system prompt: %s (%s)\n", loop.SystemPromptName(plan.PromptName), plan.SystemPromptSource)
	printDryRunTest(w, plan)
	if lc.FinalCmd != "" {
		fmt.Fprintf(w, "final command: %q (--final-cmd; run once the plan is complete)\n", lc.FinalCmd)
	}
	return nil
}

// ralphBin is the absolute path of the running binary, for RALPH_BIN.
func ralphBin() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.Abs(exe)
}

// apiKeyEnv is the part of ralph's environment claude.APIKeysSet looks at, read
// through the app's getenv.
func apiKeyEnv(cfg appConfig) []string {
	var env []string
	for _, k := range []string{claude.EnvAPIKey, claude.EnvAuthToken} {
		if v := cfg.getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// buildView is the live terminal view of a run: the session and where its
// logs go, a header per iteration,
// the agent's events through claude.Formatter, a footer per agent session,
// waits and the loop's notices.
type buildView struct {
	w    io.Writer
	view *claude.Formatter
	// logDir, if set, is where the logs go, as shown to people (relative
	// to the project root); the view names the session's at the start.
	logDir string

	// workers is set for a parallel build: each worker's notes go to a
	// view of its own whose every line starts with "[wK] " (sub), one
	// worker's note at a time (out).
	workers bool
	out     sync.Mutex
	mu      sync.Mutex // guards sub
	sub     map[string]*buildView
	// board, set when stdout is a terminal, shows the workers one line
	// each instead.
	board *board
	// pooled: the build runs several agents (--agent-cli A,B); each
	// session's footer names its agent.
	pooled bool
}

// worker returns the view of worker w (v itself without workers).
func (v *buildView) worker(w string) *buildView {
	if !v.workers || w == "" {
		return v
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.sub == nil {
		v.sub = map[string]*buildView{}
	}
	s := v.sub[w]
	if s == nil {
		pw := &prefixWriter{w: v.w, prefix: "[" + w + "] "}
		s = &buildView{w: pw, view: claude.NewFormatter(pw), pooled: v.pooled}
		v.sub[w] = s
	}
	return s
}

// prefixWriter writes whole lines to w, each starting with prefix; a
// partial line waits for its end.
type prefixWriter struct {
	w       io.Writer
	prefix  string
	pending []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.pending = append(p.pending, b...)
	for {
		i := bytes.IndexByte(p.pending, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := p.pending[:i+1]
		var err error
		if len(bytes.TrimSpace(line)) == 0 {
			_, err = p.w.Write(line)
		} else {
			_, err = fmt.Fprintf(p.w, "%s%s", p.prefix, line)
		}
		p.pending = p.pending[i+1:]
		if err != nil {
			return len(b), err
		}
	}
}

// newBuildView prints to w; the Formatter writes under w's escaping
// (rawOut), for its colours, and escapes what events carry itself.
func newBuildView(w io.Writer) *buildView {
	return &buildView{w: w, view: claude.NewFormatter(rawOut(w))}
}

func (v *buildView) warn(format string, a ...any) {
	fmt.Fprintf(v.w, "note: "+format+"\n", a...)
}

// Observe implements loop.Observer. The loop serialises the calls of one
// run; the workers of a parallel build take turns on out.
func (v *buildView) Observe(n loop.Note) {
	if v.board != nil && n.Worker != "" {
		v.board.Observe(n)
		return
	}
	if v.workers && n.Worker != "" {
		s := v.worker(n.Worker)
		v.out.Lock()
		defer v.out.Unlock()
		s.logDir = v.logDir
		s.Observe(n)
		return
	}
	v.print(n)
}

// print prints note n in v, a run's view or a worker's.
func (v *buildView) print(n loop.Note) {
	switch n.Kind {
	case loop.NoteTransition:
		if n.Event == loop.StateEventStart && v.logDir != "" {
			fmt.Fprintf(v.w, "session %s · logs in %s\n", n.Session, filepath.Join(v.logDir, n.Session))
		}
	case loop.NoteIterationStart:
		if n.Task.ID != "" {
			fmt.Fprintf(v.w, "\n== iteration %d · %s %s · model %s\n", n.Iteration, n.Task.ID, n.Task.Title, n.Model)
		} else {
			fmt.Fprintf(v.w, "\n== iteration %d · peek mode · model %s\n", n.Iteration, n.Model)
		}
	case loop.NoteAgentEvent:
		v.view.Event(n.AgentEvent)
	case loop.NoteReceipt:
		if n.Receipt != nil {
			v.footer(*n.Receipt, n.Result)
		}
	case loop.NoteIterationEnd:
		if n.Status == loop.IterUsageLimit {
			return // the wait note says it
		}
		line := fmt.Sprintf("== iteration %d: %s", n.Iteration, n.Status)
		if n.Message != "" {
			line += ": " + oneLine(n.Message)
		}
		fmt.Fprintln(v.w, line)
	case loop.NoteWait:
		fmt.Fprintf(v.w, "usage limit reached; waiting until %s (%s)\n", n.Until.Format(time.RFC3339), n.Wait.Round(time.Second))
	case loop.NoteWaitAgents:
		fmt.Fprintln(v.w, oneLine(n.Message))
	case loop.NoteNotice:
		if n.Output != "" {
			// A command's output keeps its lines, indented under the note.
			v.warn("%s", oneLine(firstLineOf(noticeWords(n))))
			for line := range strings.Lines(n.Output) {
				fmt.Fprintf(v.w, "    %s\n", strings.TrimRight(line, "\r\n"))
			}
			return
		}
		v.warn("%s", oneLine(noticeWords(n)))
	}
}

// footer prints the footer of the session whose receipt is r: the
// session's own result (the receipt's note carries it), else one rebuilt
// from r; a verifier's verdict first.
func (v *buildView) footer(r loop.Receipt, res *loop.RunResult) {
	if v.pooled && r.Agent != "" {
		fmt.Fprintf(v.w, "-- agent: %s\n", r.Agent)
	}
	if r.Mode == string(loop.ModeVerify) {
		fmt.Fprintf(v.w, "-- verifier: %s\n", orDash(r.Verdict))
	}
	if res == nil {
		rebuilt := receiptResult(r)
		res = &rebuilt
	}
	v.view.Footer(*res)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// receiptResult is the RunResult the footer needs, rebuilt from a receipt
// (the loop reports receipts, not results).
func receiptResult(r loop.Receipt) loop.RunResult {
	return loop.RunResult{
		Duration: r.Duration,
		Turns:    r.Turns,
		CostUSD:  r.CostUSD,
		Usage: loop.Usage{InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
			CacheReadTokens: r.CacheReadTokens, CacheWriteTokens: r.CacheWriteTokens},
		Class: loop.ErrorClass(r.ExitReason),
	}
}
