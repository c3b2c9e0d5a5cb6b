package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// featureName is what a feature may be called: it names a directory.
var featureName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func featureCommand(cfg appConfig) *cli.Command {
	return &cli.Command{
		Name:   "feature",
		Usage:  "group tasks into features with a spec and a plan",
		Action: groupAction,
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "add a feature: .ralph/features/NAME/spec.md and plan.md",
				ArgsUsage: "NAME",
				// --plan is the command's own flag here, whatever its place
				// on the line: the plan's name on a server goes before the
				// command, or in $RALPH_PLAN (resolveDB reads the app's).
				Description: "After 'feature add', --plan FILE is the feature's plan to copy. The plan's name on a\n" +
					"--db server goes before the command: ralph --plan NAME feature add ... (or $RALPH_PLAN).",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "spec", Usage: "copy the spec from `FILE`"},
					&cli.StringFlag{Name: "plan", Usage: "copy the plan from `FILE`"},
				},
				Action: withStore(cfg, featureAdd(cfg)),
			},
			{
				Name:   "list",
				Usage:  "list the features",
				Flags:  []cli.Flag{jsonFlag()},
				Action: withStore(cfg, featureList(cfg)),
			},
		},
	}
}

// featureAdd reads the files to copy and checks the name first, then
// writes the feature's files, then records it; if recording fails the files
// it created are removed again.
func featureAdd(cfg appConfig) storeAction {
	return func(c *cli.Context, p project, st *dag.Store) error {
		a, err := args(c, 1, 1, "NAME")
		if err != nil {
			return err
		}
		name := a[0]
		if !featureName.MatchString(name) {
			return fmt.Errorf("feature name %q: use letters, digits, '.', '_' and '-', starting with a letter or digit", name)
		}
		if _, err := st.Feature(c.Context, name); err == nil {
			return fmt.Errorf("feature %s: %w", name, dag.ErrFeatureExists)
		} else if !errors.Is(err, loop.ErrFeatureNotFound) {
			return err
		}
		dir := filepath.Join(p.ralph, "features", name)
		files := []struct {
			path, from, template string
		}{
			{filepath.Join(dir, "spec.md"), c.String("spec"), loop.FeatureSpecStub(name)},
			{filepath.Join(dir, "plan.md"), c.String("plan"), loop.FeaturePlanStub(name)},
		}
		contents := make([][]byte, len(files))
		for i, f := range files {
			contents[i] = []byte(f.template)
			if f.from != "" {
				if contents[i], err = os.ReadFile(f.from); err != nil {
					return err
				}
			}
		}

		var created []string
		undo := func() {
			for i := len(created) - 1; i >= 0; i-- {
				os.Remove(created[i])
			}
		}
		if !fileExists(dir) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			created = append(created, dir)
		}
		for i, f := range files {
			// A file already there (written by hand before the feature
			// was added) is kept unless the user asked to copy one.
			if fileExists(f.path) && f.from == "" {
				continue
			}
			existed := fileExists(f.path)
			if err := writeFileAtomic(f.path, contents[i], 0o644); err != nil {
				undo()
				return err
			}
			if !existed {
				created = append(created, f.path)
			}
		}
		if _, err := st.AddFeature(c.Context, dag.FeatureParams{
			Name:     name,
			SpecPath: p.rel(files[0].path),
			PlanPath: p.rel(files[1].path),
		}); err != nil {
			undo()
			return err
		}
		if err := st.SyncFeatureFiles(c.Context, p.root); err != nil {
			return err
		}
		_, err = fmt.Fprintf(cfg.stdout, "%s\n%s\n", p.rel(files[0].path), p.rel(files[1].path))
		return err
	}
}

type featureJSON struct {
	Name      string `json:"name"`
	Spec      string `json:"spec"`
	Plan      string `json:"plan"`
	CreatedAt string `json:"created_at"`
}

func featureList(cfg appConfig) storeAction {
	return func(c *cli.Context, _ project, st *dag.Store) error {
		if _, err := args(c, 0, 0, ""); err != nil {
			return err
		}
		fs, err := st.Features(c.Context)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			out := make([]featureJSON, 0, len(fs))
			for _, f := range fs {
				out = append(out, featureJSON{Name: f.Name, Spec: f.SpecPath, Plan: f.PlanPath, CreatedAt: jsonTime(f.CreatedAt)})
			}
			return writeJSON(cfg.stdout, out)
		}
		if len(fs) == 0 {
			return nil
		}
		tw := tabwriter.NewWriter(cfg.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tSPEC\tPLAN")
		for _, f := range fs {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", f.Name, f.SpecPath, f.PlanPath)
		}
		return tw.Flush()
	}
}
