package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/loop"
)

// planCommand is `ralph plan [N]`: the plan loop (ARCHITECTURE.md §3.3). The
// policy is loop.Plan's; this file turns flags into a loop.Config, opens the
// task graph, prints the run and maps its Report to the exit code.
//
// Decisions of the command: N is a positive number of sessions (default
// loop.DefaultPlanIterations, 5). "Nothing to do" (exit 2) is decided
// before the agent is looked for, and writes nothing: no .ralph/ (with a
// hint to init and write specs), no database, neither a spec in
// specs/*.md nor a feature with a spec (without --feature the features'
// specs are planned too, loop.PlanSpecs), or a --feature whose spec is
// empty or the heading stub `feature add` writes (the message says where
// specs go, naming the spec files of features that have none yet). An unknown --feature is exit 1. The
// planner needs RALPH_BIN, so a binary path that cannot be found is an
// error rather than the warning build gives. Flags that make no sense
// without a task to work on (--verify, --test-cmd, --claim, --task,
// --once, --dry-run) are not offered.
func planCommand(cfg appConfig) *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "let the agent turn the specs (specs/*.md and the features' specs) into tasks",
		UsageText: fmt.Sprintf("ralph plan [N] [options]\n\nN bounds the planning sessions (default %d); the run ends sooner when the agent says <promise>COMPLETE</promise>.", loop.DefaultPlanIterations),
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "feature", Usage: "plan only feature `F`, from its spec (see 'ralph feature add')"},
			&cli.StringFlag{Name: "model", Usage: "model `M` (opus, sonnet, haiku or a full id); without --strategy it means --strategy fixed"},
			&cli.StringFlag{Name: "strategy", Usage: "model strategy `S`: " + strings.Join(loop.StrategyNames(), ", "), DefaultText: "fixed with --model, else cost-optimized"},
			&cli.IntFlag{Name: "max-retries", Value: loop.DefaultMaxRetries, Usage: "agent or git failures in a row tolerated, `N`"},
			&cli.BoolFlag{Name: "commit", Usage: "commit the files a session changed (the tasks themselves live in .ralph/, never committed)"},
			&cli.Float64Flag{Name: "max-cost", Usage: "stop before a session once this run has spent `USD` (0: no budget)"},
		}, agentFlags()...),
		Action: func(c *cli.Context) error { return plan(c, cfg) },
	}
}

// agentFlags are the flags of plan and prompt that shape every agent
// session (build has the same ones).
func agentFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.DurationFlag{Name: "timeout", Value: loop.DefaultTimeout, Usage: "wall-clock limit of one agent session, a `DURATION` (0: none)"},
		&cli.DurationFlag{Name: "idle-timeout", Value: loop.DefaultIdleTimeout, Usage: "stop a session that prints nothing for this `DURATION` (0: never)"},
		&cli.StringFlag{Name: "on-usage-limit", Value: string(loop.UsageLimitWait), Usage: "on a usage limit, `wait` for the reset or stop (exit 10)"},
		&cli.DurationFlag{Name: "max-wait", Value: loop.DefaultMaxWait, Usage: "longest usage-limit wait, a `DURATION`; a later reset stops the run"},
		&cli.BoolFlag{Name: "use-api-key", Usage: "keep the API key in the agent's environment (per-token billing): ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN for Claude Code, OPENAI_API_KEY and CODEX_API_KEY for Codex"},
		otelFlag(),
		notifyFlag(),
	}, agentCLIFlags()...)
}

// agentConfig copies the agentFlags into lc.
func agentConfig(c *cli.Context, cfg appConfig, p project, lc *loop.Config) {
	lc.Timeout = c.Duration("timeout")
	lc.IdleTimeout = c.Duration("idle-timeout")
	lc.OnUsageLimit = loop.UsageLimitPolicy(c.String("on-usage-limit"))
	lc.MaxWait = c.Duration("max-wait")
	// --max-wait 0 would mean the default to the loop; for a user it means
	// "do not wait" (as in build).
	if c.IsSet("max-wait") && lc.MaxWait == 0 {
		lc.OnUsageLimit = loop.UsageLimitStop
	}
	lc.UseAPIKey = c.Bool("use-api-key")
	lc.Now = cfg.now
	lc.LogDir = filepath.Join(p.ralph, "logs")
	// The agent's own `ralph task …` calls reach the plan wherever it
	// lives; an error here is the store's to report when it opens.
	if d, err := resolveDB(c, p); err == nil {
		lc.Env = append(lc.Env, serverEnv(d)...)
	}
}

// plan is the action of `ralph plan`.
func plan(c *cli.Context, cfg appConfig) (err error) {
	a, err := args(c, 0, 1, "at most one argument (N)")
	if err != nil {
		return err
	}
	usage := func(format string, v ...any) error {
		return &usageError{cmd: "ralph plan", err: fmt.Errorf(format, v...)}
	}
	p, err := projectRoot(c)
	if err != nil {
		return err
	}
	if _, err := applyConfig(c, cfg, p); err != nil {
		return err
	}
	lc := loop.PlanConfig(p.root)
	if len(a) == 1 {
		n, err := strconv.Atoi(a[0])
		if err != nil || n < 1 {
			return usage("N must be a positive number of sessions, not %q", a[0])
		}
		lc.MaxIterations = n
	}
	feature := strings.TrimSpace(c.String("feature"))
	lc.Scope = loop.Scope{Feature: feature}
	lc.Model = strings.TrimSpace(c.String("model"))
	lc.Strategy = strings.TrimSpace(c.String("strategy"))
	lc.MaxRetries = c.Int("max-retries")
	lc.Commit = c.Bool("commit")
	lc.MaxCost = c.Float64("max-cost")
	agentConfig(c, cfg, p, &lc)

	// Nothing to plan comes before anything else: no project, no specs.
	if fi, err := os.Stat(p.ralph); err != nil || !fi.IsDir() {
		return nothingToDo("no ralph project in %s (run 'ralph init', then write specs in specs/*.md)", p.root)
	}
	st, _, err := openPlanStore(c, cfg, p, func() error {
		return nothingToDo("no task database at %s (run 'ralph init')", p.dbPath())
	})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.SyncFeatureFiles(c.Context, p.root); err != nil {
		return err
	}
	defer func() {
		// The plans the agent wrote go to the plan's database.
		if err := st.SyncFeatureFiles(context.WithoutCancel(c.Context), p.root); err != nil {
			fmt.Fprintf(cfg.stderr, "ralph: feature files not stored with the plan: %v\n", err)
		}
	}()
	if _, _, err := loop.PlanSpecs(c.Context, p.root, feature, st); err != nil {
		if errors.Is(err, loop.ErrNoSpecs) {
			return &codedError{code: exitNothing, err: noSpecsError(err)}
		}
		return err
	}
	run := newRun(c.Context, cfg, st, loop.RunKindPlan, lc.Scope)
	defer func() { run.end(c.Context, err) }()
	if run.notify, err = newNotifier(c, cfg, p, loop.RunKindPlan); err != nil {
		return err
	}

	runner, agents, err := findAgents(c, cfg, p.root, lc.UseAPIKey)
	if err != nil {
		return err
	}
	lc.Agent = agents[0].name
	// The planner adds tasks through $RALPH_BIN: without it, it cannot.
	if lc.RalphBin, err = ralphBin(); err != nil {
		return fmt.Errorf("plan mode needs the path of the ralph binary for the agent: %w", err)
	}
	traces, stopTraces := startTraces(c, cfg, 0)
	defer stopTraces()
	lc.Observer = run.observe(withTraces(&modeView{buildView: newBuildView(cfg.stdout), label: "plan"}, traces))
	sweepLeftovers(c.Context, cfg)

	rep, err := loop.Plan(c.Context, lc, st, runner)
	run.rep = &rep
	if err != nil {
		if errors.Is(err, loop.ErrConfig) {
			return configError("ralph plan", err)
		}
		return err
	}
	printTotals(cfg.stdout, "plan", rep)
	printSessionLog(cfg.stdout, p, lc.LogDir, rep.Session)
	return closing(rep, reportWords(rep), cfg.stdout)
}

// modeView is the build view with the iteration header of plan and prompt
// mode, which have no task.
type modeView struct {
	*buildView
	label string
}

// Observe implements loop.Observer.
func (v *modeView) Observe(n loop.Note) {
	if n.Kind == loop.NoteIterationStart {
		fmt.Fprintf(v.w, "\n== %s · iteration %d · model %s\n", v.label, n.Iteration, n.Model)
		return
	}
	v.buildView.Observe(n)
}

// printSessionLog names the session log, when the run wrote one.
func printSessionLog(w io.Writer, p project, logDir, session string) {
	if session == "" {
		return
	}
	path := loop.SessionLogPath(logDir, session)
	if _, err := os.Stat(path); err == nil {
		fmt.Fprintf(w, "session log: %s\n", p.rel(path))
	}
}

// closing prints the run's last line, msg (rep.Message in the CLI's
// words), and returns the error carrying its exit code: exit 0 is a line
// on stdout, anything else "ralph: <message>" on stderr.
func closing(rep loop.Report, msg string, stdout io.Writer) error {
	if rep.ExitCode() == exitOK {
		fmt.Fprintln(stdout, msg)
		return nil
	}
	return &codedError{code: rep.ExitCode(), err: errors.New(msg)}
}

// printTotals prints a run's totals before its closing line: the plan's
// counts at the end, the cost and sessions, and the command to run next —
// "run: 3 done, 1 failed, 2 remain · $0.4012 over 16 agent sessions ·
// next: ralph task list --status failed" (nextCommand; cmd is the run's
// command, "build" or "plan"). Nothing when the run never counted the
// plan, or the plan is empty.
func printTotals(w io.Writer, cmd string, rep loop.Report) {
	c := rep.Counts
	if rep.Remaining < 0 || c.Total() == 0 {
		return
	}
	remain := "remain"
	if rep.Remaining == 1 {
		remain = "remains"
	}
	fmt.Fprintf(w, "run: %d done, %d failed, %d %s · $%.4f over %d agent session%s · next: %s\n",
		c.Done, c.Failed, max(rep.Remaining, 0), remain, rep.CostUSD, len(rep.Receipts), plural(len(rep.Receipts)), nextCommand(cmd, rep))
}

// nextCommand is what a person runs after a run of command cmd ("build",
// "plan") that ended as rep did: the same command to go on, ralph build
// once a plan is written.
func nextCommand(cmd string, rep loop.Report) string {
	if rep.Counts.Failed > 0 && cmd == "build" {
		return "ralph task list --status failed (then ralph task show ID; ralph task reset ID to try again)"
	}
	switch rep.Outcome {
	case loop.OutcomeLimitReached, loop.OutcomeCancelled, loop.OutcomeBudgetExhausted:
		return "ralph " + cmd + " (it goes on where this run stopped)"
	case loop.OutcomeUsageLimit:
		return "ralph " + cmd + " once the usage limit resets"
	case loop.OutcomeTestGateFailed, loop.OutcomeAgentFailed, loop.OutcomeGitFailed, loop.OutcomeFailure:
		return "fix what the run's last line says, then ralph " + cmd
	case loop.OutcomeBlocked:
		return "ralph status (what holds the tasks that remain)"
	case loop.OutcomeComplete:
		if cmd == "plan" {
			return "ralph build (the plan is written)"
		}
	}
	return "ralph status"
}
