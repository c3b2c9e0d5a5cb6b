package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/forge"
	"github.com/ralph-dev/ralph/loop"
)

// githubRepoSetting is the plan setting that records the GitHub
// repository a plan's issues come from (its first `task import github:`).
const githubRepoSetting = "github_repo"

// githubClient is the GitHub client of repo: the token from GH_TOKEN,
// GITHUB_TOKEN or `gh auth token`, the API from GITHUB_API_URL.
func githubClient(ctx context.Context, cfg appConfig, repo forge.Repo) (*forge.Client, error) {
	token, err := forge.Token(ctx, cfg.getenv)
	if err != nil {
		return nil, err
	}
	return forge.New(forge.Config{Repo: repo, Token: token, APIURL: cfg.getenv("GITHUB_API_URL")})
}

// importGitHub is `ralph task import github:OWNER/REPO [--label L]`: the
// repository's open issues (with the label) as tasks gh-N, their
// "depends on #N" as blockers and sub-issues as children, all or
// nothing; the issues the plan has already are left as they are
// (package forge says the rules).
func importGitHub(c *cli.Context, cfg appConfig, st *dag.Store, arg string) error {
	repo, err := forge.ParseRepo(arg)
	if err != nil {
		return &usageError{cmd: "ralph task import", err: err}
	}
	ctx := c.Context
	if was, ok, err := st.PlanSetting(ctx, githubRepoSetting); err != nil {
		return err
	} else if ok && was != repo.String() {
		return fmt.Errorf("this plan's GitHub issues come from %s, not %s: a plan takes its issues from one repository (tasks gh-N name issue #N)", was, repo)
	}
	client, err := githubClient(ctx, cfg, repo)
	if err != nil {
		return err
	}
	label := strings.TrimSpace(c.String("label"))
	// An issue is in the plan when an import recorded it, not when a task
	// has its id: one an agent added as gh-N collides with the import's
	// (an error, said) rather than stand for the issue.
	im, err := client.ImportIssues(ctx, label, func(id string) (bool, error) {
		n, ok := forge.IssueNumber(id)
		if !ok {
			return false, nil
		}
		_, found, err := st.PlanSetting(ctx, issueSetting(n))
		return found, err
	})
	if err != nil {
		return err
	}
	for _, n := range im.Notes {
		fmt.Fprintf(cfg.stderr, "ralph: note: %s\n", n)
	}
	already := ""
	if im.Present > 0 {
		already = fmt.Sprintf(" (%d already present)", im.Present)
	}
	if len(im.Tasks) == 0 {
		if im.Present == 0 {
			what := "open issues"
			if label != "" {
				what = fmt.Sprintf("open issues labelled %q", label)
			}
			return nothingToDo("github:%s: no %s to import", repo, what)
		}
		fmt.Fprintf(cfg.stdout, "imported 0 tasks%s\n", already)
		return nil
	}
	var tasks []dag.ImportTask
	for _, t := range im.Tasks {
		tasks = append(tasks, dag.ImportTask{ID: t.ID, Title: t.Title, Description: t.Description, Priority: 2,
			ParentID: t.ParentID, BlockedBy: t.BlockedBy})
	}
	dry := c.Bool("dry-run")
	verb := "added"
	if dry {
		verb = "would add"
	}
	p := dag.ImportParams{Source: dag.TaskSlice(tasks), DryRun: dry, Added: func(t dag.ImportTask) error {
		line := fmt.Sprintf("%s %s %s", verb, t.ID, t.Title)
		if t.ParentID != "" {
			line += " (parent " + t.ParentID + ")"
		}
		if len(t.BlockedBy) > 0 {
			line += " (after " + strings.Join(t.BlockedBy, ", ") + ")"
		}
		_, err := fmt.Fprintln(cfg.stdout, line)
		return err
	}}
	n, err := st.ImportFrom(ctx, p)
	if errors.Is(err, dag.ErrDuplicateID) {
		return fmt.Errorf("github:%s: %w (a task with an issue's id gh-N that no import of the issue made is in the plan: delete it or give it another id)", repo, err)
	}
	if err != nil {
		return fmt.Errorf("github:%s: %w", repo, err)
	}
	for _, t := range im.Tasks {
		if t.Pulled && label != "" {
			fmt.Fprintf(cfg.stdout, "%s (#%d) has no label %q: imported as a blocker or sub-issue of one that has\n", t.ID, t.Number, label)
		}
	}
	if dry {
		fmt.Fprintf(cfg.stdout, "would import %d task%s%s; nothing changed\n", n, plural(n), already)
		return nil
	}
	if _, err := st.RecordPlanSetting(ctx, githubRepoSetting, repo.String()); err != nil {
		return err
	}
	for _, t := range im.Tasks {
		if _, err := st.RecordPlanSetting(ctx, issueSetting(t.Number), t.ID); err != nil {
			return err
		}
	}
	fmt.Fprintf(cfg.stdout, "imported %d task%s%s from github:%s\n", n, plural(n), already, repo)
	return nil
}

// issueComments is the commenter on the GitHub issues of a plan that
// imported them (its github_repo setting): nil for a plan that has none.
// Without a token it says that no comments will be written and the build
// goes on.
func issueComments(ctx context.Context, cfg appConfig, store loop.TaskStore) *forge.IssueComments {
	ss, ok := store.(loop.SettingStore)
	if !ok {
		return nil
	}
	name, ok, err := ss.PlanSetting(ctx, githubRepoSetting)
	if err != nil || !ok {
		return nil
	}
	repo, err := forge.ParseRepo(name)
	if err == nil {
		var client *forge.Client
		if client, err = githubClient(ctx, cfg, repo); err == nil {
			return forge.NewIssueComments(client, importedIssues(ctx, store), func(err error) {
				fmt.Fprintf(cfg.stderr, "ralph: warning: %v\n", err)
			})
		}
	}
	fmt.Fprintf(cfg.stderr, "ralph: warning: the plan's tasks gh-N come from GitHub issues of %s, but no comments will be written on them: %v\n", name, err)
	return nil
}
