package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/forge"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/parallel"
)

// prFlags are the flags of build's pull request (DESIGN §16).
func prFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "pr", Usage: "with workers: when the plan (or --feature) is complete, push the integration branch and open or update its GitHub pull request onto the base branch (token: $GH_TOKEN, $GITHUB_TOKEN or gh auth token; API: $GITHUB_API_URL)"},
		&cli.BoolFlag{Name: "pr-follow", Usage: "with --pr: turn the pull request's failed check runs and reviews that request changes into tasks, build and push them, until the checks pass and no review asks for changes (at most --pr-rounds times, else exit 3)"},
		&cli.StringFlag{Name: "github-repo", Usage: "with --pr: the GitHub repository `OWNER/REPO`", DefaultText: "the push remote's, when it is on GitHub"},
		&cli.IntFlag{Name: "pr-rounds", Value: defaultPRRounds, Usage: "with --pr-follow: at most `N` rounds of fixes"},
		&cli.DurationFlag{Name: "pr-wait", Value: defaultPRWait, Usage: "with --pr-follow: how long to wait for the check runs of a push to finish, a `DURATION`"},
	}
}

// pullRequest is build's --pr: what it needs, resolved before the build
// runs, so that a bad repository, a missing token or remote is said
// before anything is claimed.
type pullRequest struct {
	client *forge.Client
	git    *parallel.ExecGit
	remote string // where the integration branch is pushed
	own    bool   // the build pushes it there itself (--remote)
	follow *prFollow
}

// prepPR resolves --pr's repository, token and remote; nil without --pr.
func prepPR(c *cli.Context, cfg appConfig, p project) (*pullRequest, error) {
	if !c.Bool("pr") {
		for _, f := range []string{"pr-follow", "github-repo", "pr-rounds", "pr-wait"} {
			if c.IsSet(f) {
				return nil, buildUsage("--%s goes with --pr", f)
			}
		}
		return nil, nil
	}
	if !c.Bool("pr-follow") && (c.IsSet("pr-rounds") || c.IsSet("pr-wait")) {
		return nil, buildUsage("--pr-rounds and --pr-wait go with --pr-follow")
	}
	if c.Int("pr-rounds") < 1 {
		return nil, buildUsage("--pr-rounds %d: want 1 or more", c.Int("pr-rounds"))
	}
	pr := &pullRequest{git: &parallel.ExecGit{Root: p.root}, remote: strings.TrimSpace(c.String("remote"))}
	pr.own = pr.remote != ""
	if pr.remote == "" {
		pr.remote = "origin"
	}
	remoteURL, err := pr.git.RemoteURL(c.Context, pr.remote)
	if err != nil {
		return nil, fmt.Errorf("--pr pushes the integration branch to remote %s: %w", pr.remote, err)
	}
	var repo forge.Repo
	if name := strings.TrimSpace(c.String("github-repo")); name != "" {
		if repo, err = forge.ParseRepo(name); err != nil {
			return nil, buildUsage("--github-repo: %v", err)
		}
	} else {
		var ok bool
		if repo, ok = forge.RepoFromRemote(remoteURL, githubHost(cfg)); !ok {
			return nil, buildUsage("--pr: remote %s (%s) is not on GitHub: name the repository with --github-repo OWNER/REPO", pr.remote, withoutSecret(remoteURL))
		}
	}
	if pr.client, err = githubClient(c.Context, cfg, repo); err != nil {
		return nil, fmt.Errorf("--pr: %w", err)
	}
	if c.Bool("pr-follow") {
		pr.follow = &prFollow{rounds: c.Int("pr-rounds"), wait: c.Duration("pr-wait")}
	}
	return pr, nil
}

// githubHost is the host of GitHub's web URLs: github.com, or, for
// $GITHUB_API_URL https://HOST/api/v3 (GitHub Enterprise Server), HOST.
func githubHost(cfg appConfig) string {
	api := strings.TrimSpace(cfg.getenv("GITHUB_API_URL"))
	if api == "" || strings.HasPrefix(api, forge.DefaultAPIURL) {
		return ""
	}
	host := strings.TrimPrefix(strings.TrimPrefix(api, "https://"), "http://")
	host, _, _ = strings.Cut(host, "/")
	return strings.TrimPrefix(host, "api.")
}

// publish pushes the integration branch of rep and opens or updates its
// pull request onto rep.Base; scope is the build's (a feature's tasks, or
// the plan's). It returns the pull request.
func (pr *pullRequest) publish(ctx context.Context, cfg appConfig, store loop.TaskStore, scope loop.Scope, rep parallel.Report) (forge.Pull, error) {
	if rep.Base == "" {
		return forge.Pull{}, errors.New("--pr: the integration branch follows no base branch to open the pull request onto: give --base BRANCH")
	}
	if err := pr.push(ctx, rep.Into); err != nil {
		return forge.Pull{}, err
	}
	lister, ok := store.(interface {
		List(context.Context, dag.ListParams) ([]loop.Task, error)
	})
	if !ok {
		return forge.Pull{}, errors.New("--pr needs the task database")
	}
	tasks, err := lister.List(ctx, dag.ListParams{Feature: scope.Feature})
	if err != nil {
		return forge.Pull{}, err
	}
	var receipts []loop.Receipt
	if rs, ok := store.(loop.ReceiptStore); ok {
		if receipts, err = rs.Receipts(ctx, 0); err != nil {
			return forge.Pull{}, err
		}
	}
	what, title := "the plan", "ralph: the plan"
	if scope.Feature != "" {
		what, title = "feature "+scope.Feature, "ralph: "+scope.Feature
	}
	body := forge.PullBody(what, tasks, receipts, importedIssues(ctx, store))
	pull, created, err := pr.client.OpenPull(ctx, rep.Into, rep.Base, title, body)
	if err != nil {
		return forge.Pull{}, err
	}
	verb := "updated"
	if created {
		verb = "opened"
	}
	fmt.Fprintf(cfg.stdout, "pull request #%d %s: %s (%s onto %s)\n", pull.Number, verb, pull.URL, rep.Into, rep.Base)
	return pull, nil
}

// push pushes the integration branch into to the remote, unless the
// build keeps it there itself (--remote: it lands there by push).
func (pr *pullRequest) push(ctx context.Context, into string) error {
	ref := "refs/heads/" + into
	tip, ok, err := pr.git.Resolve(ctx, ref)
	if err != nil || !ok {
		return fmt.Errorf("--pr: the integration branch %s: %v", into, cmpErr(err, "not found"))
	}
	if pr.own {
		return nil
	}
	old, _, err := pr.git.Fetch(ctx, pr.remote, ref)
	if err != nil {
		return fmt.Errorf("--pr: fetch %s from %s: %w", into, pr.remote, err)
	}
	if err := pr.git.Push(ctx, parallel.PushParams{Remote: pr.remote, Ref: ref, Commit: tip, Old: old}); err != nil {
		return fmt.Errorf("--pr: push %s to %s: %w", into, pr.remote, err)
	}
	return nil
}

func cmpErr(err error, otherwise string) string {
	if err != nil {
		return err.Error()
	}
	return otherwise
}

// importedIssues reports whether issue n was imported into the plan by
// `ralph task import github:` (its plan setting): only those issues are
// commented on, and closed by the pull request — a task an agent added
// with an id gh-N names no issue of the user's.
func importedIssues(ctx context.Context, store loop.TaskStore) func(n int) bool {
	ss, ok := store.(loop.SettingStore)
	return func(n int) bool {
		if !ok {
			return false
		}
		_, found, err := ss.PlanSetting(ctx, issueSetting(n))
		return err == nil && found
	}
}

// issueSetting is the plan setting that records issue n's import.
func issueSetting(n int) string { return fmt.Sprintf("github_issue_%d", n) }

// The bound of --pr-follow: its rounds, and how long a push's checks may
// run; past it the build exits 3, as a gate that failed beyond retries.
const (
	defaultPRRounds = 3
	defaultPRWait   = 30 * time.Minute
	exitPRFollow    = 3
)

// prFollow is --pr-follow's bound.
type prFollow struct {
	rounds int
	wait   time.Duration
}

// followPR keeps the pull request going after the build that opened it
// (forge.Follow): its findings become tasks of the build's scope, built
// by build and pushed. The bound reached is exit 3.
func (pr *pullRequest) followPR(ctx context.Context, cfg appConfig, store loop.TaskStore, scope loop.Scope, pull forge.Pull, into string, build func(context.Context) error) error {
	findings, err := newPRFindings(store, scope)
	if err != nil {
		return err
	}
	err = pr.client.Follow(ctx, forge.FollowParams{
		Pull: pull,
		Head: func(ctx context.Context) (string, error) {
			tip, ok, err := pr.git.Resolve(ctx, "refs/heads/"+into)
			if err == nil && !ok {
				err = fmt.Errorf("the integration branch %s is gone", into)
			}
			return tip, err
		},
		Has:    findings.has,
		Add:    findings.add,
		Build:  build,
		Rounds: pr.follow.rounds,
		Wait:   pr.follow.wait,
		Poll:   prPoll(cfg),
		Say:    func(format string, args ...any) { fmt.Fprintf(cfg.stdout, format+"\n", args...) },
	})
	if errors.Is(err, forge.ErrFollowBound) {
		return &codedError{code: exitPRFollow, err: err}
	}
	return err
}

// prPoll is how often --pr-follow reads running checks: 15 s, or
// $RALPH_PR_POLL (a duration, for tests and impatient people).
func prPoll(cfg appConfig) time.Duration {
	if d, err := time.ParseDuration(cfg.getenv("RALPH_PR_POLL")); err == nil && d > 0 {
		return d
	}
	return 15 * time.Second
}

// finish is --pr after a parallel build that ended with rep: when the
// build completed its scope, the pull request opened or updated and, with
// --pr-follow, followed, each round built by rebuild (which returns the
// round's report, nil with its error when it did not complete).
func (pr *pullRequest) finish(ctx context.Context, cfg appConfig, store loop.TaskStore, scope loop.Scope, rep parallel.Report, rebuild func(context.Context) (*parallel.Report, error)) error {
	if rep.Outcome != loop.OutcomeComplete {
		fmt.Fprintf(cfg.stdout, "no pull request: the build did not complete (%s)\n", rep.Outcome)
		return nil
	}
	pull, err := pr.publish(ctx, cfg, store, scope, rep)
	if err != nil || pr.follow == nil {
		return err
	}
	return pr.followPR(ctx, cfg, store, scope, pull, rep.Into, func(ctx context.Context) error {
		next, err := rebuild(ctx)
		if err != nil || next == nil {
			return err
		}
		if next.Outcome != loop.OutcomeComplete {
			return fmt.Errorf("--pr-follow: the build of the pull request's findings did not complete (%s)", next.Outcome)
		}
		_, err = pr.publish(ctx, cfg, store, scope, *next)
		return err
	})
}

// withoutSecret is a remote's URL as it may be shown: without the
// password or token a URL may carry (https://user:TOKEN@host/…).
func withoutSecret(remote string) string {
	u, err := url.Parse(remote)
	if err != nil || u.User == nil {
		return remote
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	} else if strings.Contains(remote, "://") {
		u.User = url.User("xxxxx")
	}
	return u.String()
}

// prFindings are the tasks --pr-follow added for what a pull request
// asked (forge.Finding): each recorded with the plan (pr_finding_<id>)
// when ralph adds it, and known by that record, never by a task's id
// alone — an agent that adds a task pr-review-<id> of its own cannot make
// a review count as answered (its task collides with the one ralph adds:
// an error, said).
type prFindings struct {
	adder    loop.TaskAdder
	settings loop.SettingStore
	scope    loop.Scope
}

func newPRFindings(store loop.TaskStore, scope loop.Scope) (*prFindings, error) {
	adder, ok := store.(loop.TaskAdder)
	settings, ok2 := store.(loop.SettingStore)
	if !ok || !ok2 {
		return nil, errors.New("--pr-follow needs the task database")
	}
	return &prFindings{adder: adder, settings: settings, scope: scope}, nil
}

// has reports whether ralph added the task of finding id before.
func (f *prFindings) has(ctx context.Context, id string) (bool, error) {
	_, ok, err := f.settings.PlanSetting(ctx, "pr_finding_"+id)
	return ok, err
}

// add adds the findings' tasks to the build's scope, ahead of the others,
// blocked by nothing, and records each.
func (f *prFindings) add(ctx context.Context, fs []forge.Finding) error {
	for _, fd := range fs {
		if _, err := f.adder.AddTask(ctx, loop.NewTask{ID: fd.ID, Title: fd.Title, Description: fd.Description, Priority: 1, Feature: f.scope.Feature}); err != nil {
			return fmt.Errorf("--pr-follow: add task %s: %w", fd.ID, err)
		}
		if _, err := f.settings.RecordPlanSetting(ctx, "pr_finding_"+fd.ID, fd.Title); err != nil {
			return fmt.Errorf("--pr-follow: record task %s: %w", fd.ID, err)
		}
	}
	return nil
}
