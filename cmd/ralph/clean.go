package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/parallel"
)

// cleanCommand is `ralph clean [--dry-run]` (DESIGN §15 "Clean-up"): what
// parallel builds left in the repository and that holds no work not
// landed goes — see parallel.Clean —, the rest is listed with why it is
// kept. Only the repository: with --remote, the remote's branches and
// fences are not touched.
func cleanCommand(cfg appConfig) *cli.Command {
	return &cli.Command{
		Name:      "clean",
		Usage:     "remove the worktrees, task and attempt branches and claim fences of builds whose work landed",
		UsageText: "ralph clean [--dry-run]",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be removed and what is kept; remove nothing"},
		},
		Action: withStore(cfg, func(c *cli.Context, p project, st *dag.Store) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			ctx := c.Context
			g := &parallel.ExecGit{Root: p.root}
			if err := g.Check(ctx); err != nil {
				if errors.Is(err, parallel.ErrNotRepository) {
					return fmt.Errorf("%s is not in a git repository: ralph clean has nothing to clean there", p.root)
				}
				return err
			}
			into, ok, err := st.PlanSetting(ctx, parallel.SettingInto)
			if err != nil {
				return err
			}
			if !ok {
				_, err := fmt.Fprintln(cfg.stdout, "clean: nothing to do: no parallel build of this plan recorded an integration branch")
				return err
			}
			busy := map[string]bool{}
			err = st.ListTasks(ctx, loop.ListQuery{Status: loop.StatusInProgress}, func(t loop.Task) error {
				busy[t.ID] = true
				return nil
			})
			if err != nil {
				return err
			}
			dry := c.Bool("dry-run")
			rep, err := parallel.Clean(ctx, parallel.CleanConfig{Root: p.root, Git: g, Into: into, InProgress: busy, DryRun: dry})
			printClean(cfg, p, rep, dry)
			return err
		}),
	}
}

// printClean prints one line a ref or tree, then the counts.
func printClean(cfg appConfig, p project, rep parallel.CleanReport, dry bool) {
	removed, kept := "removed", "kept"
	if dry {
		removed = "would remove"
	}
	for _, it := range rep.Items {
		name := it.Name
		if it.What == "worktree" {
			name = p.rel(name)
		}
		if it.Removed {
			fmt.Fprintf(cfg.stdout, "%s %s %s\n", removed, it.What, name)
		} else {
			fmt.Fprintf(cfg.stdout, "%s %s %s: %s\n", kept, it.What, name, it.Reason)
		}
	}
	n := rep.Removed()
	summary := fmt.Sprintf("clean: %s %d, %s %d", removed, n, kept, len(rep.Items)-n)
	if dry {
		summary += " (dry run: nothing removed)"
	}
	fmt.Fprintln(cfg.stdout, strings.TrimSpace(summary))
}
