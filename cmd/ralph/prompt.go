package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/loop"
)

// promptCommand is `ralph prompt FILE`: one agent session of an ad-hoc
// prompt. The policy is loop.RunPrompt's.
//
// Decisions of the command: FILE is read relative to the working
// directory, like any file argument (not to --dir). A missing or empty
// FILE is nothing to do (exit 2), checked first. The command needs an
// initialised project (exit 1 otherwise, as for every command
// but build and plan, which exit 2): the session's receipt goes into the
// database, so `ralph status` counts its cost, and its logs into
// .ralph/logs. --model picks the model (no strategy: there is one
// session); --title names the commit (default: the prompt's first line).
func promptCommand(cfg appConfig) *cli.Command {
	return &cli.Command{
		Name:      "prompt",
		Usage:     "run the agent once on an ad-hoc prompt file: no task, no loop, no test gate",
		UsageText: "ralph prompt FILE [options]\n\nFILE is sent as it is (through .ralph/prompts/prompt.md, if you made one).",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "model", Usage: "model `M` (opus, sonnet, haiku or a full id)", DefaultText: "sonnet"},
			&cli.BoolFlag{Name: "commit", Usage: "commit what the session changed, if anything (needs a git repository)"},
			&cli.StringFlag{Name: "title", Usage: "the commit message's `TITLE`", DefaultText: "the prompt's first line"},
		}, agentFlags()...),
		Action: func(c *cli.Context) error { return promptRun(c, cfg) },
	}
}

// promptRun is the action of `ralph prompt`.
func promptRun(c *cli.Context, cfg appConfig) (err error) {
	a, err := args(c, 1, 1, "one argument (FILE)")
	if err != nil {
		return err
	}
	file := a[0]
	text, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nothingToDo("prompt file %s not found", file)
	case err != nil:
		return fmt.Errorf("prompt file: %w", err)
	case strings.TrimSpace(string(text)) == "":
		return nothingToDo("prompt file %s is empty", file)
	}

	p, st, err := openProject(c, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := applyConfig(c, cfg, p); err != nil {
		return err
	}
	run := newRun(c.Context, cfg, st, loop.RunKindPrompt, loop.Scope{})
	defer func() { run.end(c.Context, err) }()
	if run.notify, err = newNotifier(c, cfg, p, loop.RunKindPrompt); err != nil {
		return err
	}
	lc := loop.PromptConfig(p.root)
	lc.Model = strings.TrimSpace(c.String("model"))
	lc.Commit = c.Bool("commit")
	agentConfig(c, cfg, p, &lc)

	runner, agents, err := findAgents(c, cfg, p.root, lc.UseAPIKey)
	if err != nil {
		return err
	}
	lc.Agent = agents[0].name
	if lc.RalphBin, err = ralphBin(); err != nil {
		fmt.Fprintf(cfg.stderr, "ralph: warning: RALPH_BIN is not set for the agent: %v\n", err)
	}
	traces, stopTraces := startTraces(c, cfg, 0)
	defer stopTraces()
	lc.Observer = run.observe(withTraces(&modeView{buildView: newBuildView(cfg.stdout), label: "prompt " + filepath.Base(file)}, traces))
	sweepLeftovers(c.Context, cfg)

	rep, err := loop.RunPrompt(c.Context, lc, loop.PromptParams{Text: string(text), Title: c.String("title"), Receipts: st}, runner)
	run.rep = &rep
	if err != nil {
		if errors.Is(err, loop.ErrConfig) {
			return configError("ralph prompt", err)
		}
		return err
	}
	printSessionLog(cfg.stdout, p, lc.LogDir, rep.Session)
	return closing(rep, reportWords(rep), cfg.stdout)
}
