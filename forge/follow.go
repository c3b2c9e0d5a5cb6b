package forge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v75/github"
)

// Finding is something a pull request asks for, as the task that answers
// it: a failed check run (the check's output as its context) or a review
// that requests changes (the review and its comments). Its ID is the
// task's: pr-check-<check run id>, pr-review-<review id>, so that each is
// asked for once.
type Finding struct {
	ID, Title, Description string
}

// contextLimit bounds the text of a finding's description.
const contextLimit = 20000

// Checks is what the check runs of a commit say.
type Checks struct {
	// Runs counts the check runs; Pending names those not completed.
	Runs    int
	Pending []string
	// Failed are the findings of the runs that completed without success
	// (failure, timed out, cancelled, action required).
	Failed []Finding
}

// Checks reads the check runs of commit sha.
func (c *Client) Checks(ctx context.Context, sha string) (Checks, error) {
	opts := &github.ListCheckRunsOptions{Filter: github.Ptr("latest"), ListOptions: github.ListOptions{PerPage: perPage}}
	var out Checks
	for {
		res, resp, err := c.gh.Checks.ListCheckRunsForRef(ctx, c.repo.Owner, c.repo.Name, sha, opts)
		if err != nil {
			return Checks{}, c.apiErr("read the check runs of "+short(sha)+" in", err)
		}
		for _, r := range res.CheckRuns {
			out.Runs++
			switch {
			case r.GetStatus() != "completed":
				out.Pending = append(out.Pending, r.GetName())
			case slices.Contains([]string{"failure", "timed_out", "cancelled", "action_required", "startup_failure"}, r.GetConclusion()):
				out.Failed = append(out.Failed, checkFinding(r, sha))
			}
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

func checkFinding(r *github.CheckRun, sha string) Finding {
	var b strings.Builder
	fmt.Fprintf(&b, "The check run %q of the pull request failed (%s) on commit %s", r.GetName(), r.GetConclusion(), sha)
	if u := r.GetHTMLURL(); u != "" {
		fmt.Fprintf(&b, ": %s", u)
	}
	b.WriteString(".\nMake it pass. What the check said:\n")
	out := r.GetOutput()
	for _, s := range []string{out.GetTitle(), out.GetSummary(), out.GetText()} {
		if s = strings.TrimSpace(s); s != "" {
			b.WriteString("\n" + s + "\n")
		}
	}
	return Finding{ID: fmt.Sprintf("pr-check-%d", r.GetID()), Title: "Fix the failing check " + r.GetName(), Description: cut(b.String())}
}

// ChangesRequested lists the reviews of pull request n that request
// changes — each reviewer's latest review that is not a comment — with
// their comments.
func (c *Client) ChangesRequested(ctx context.Context, n int) ([]Finding, error) {
	reviews, err := paged(func(o *github.ListOptions) ([]*github.PullRequestReview, *github.Response, error) {
		return c.gh.PullRequests.ListReviews(ctx, c.repo.Owner, c.repo.Name, n, o)
	})
	if err != nil {
		return nil, c.apiErr(fmt.Sprintf("read the reviews of #%d of", n), err)
	}
	latest := map[string]*github.PullRequestReview{}
	var order []string
	for _, r := range reviews {
		user := r.GetUser().GetLogin()
		if r.GetState() == "COMMENTED" || r.GetState() == "PENDING" {
			continue
		}
		if latest[user] == nil {
			order = append(order, user)
		}
		latest[user] = r
	}
	var asking []*github.PullRequestReview
	for _, u := range order {
		if r := latest[u]; r.GetState() == "CHANGES_REQUESTED" {
			asking = append(asking, r)
		}
	}
	if len(asking) == 0 {
		return nil, nil
	}
	comments, err := paged(func(o *github.ListOptions) ([]*github.PullRequestComment, *github.Response, error) {
		return c.gh.PullRequests.ListComments(ctx, c.repo.Owner, c.repo.Name, n, &github.PullRequestListCommentsOptions{ListOptions: *o})
	})
	if err != nil {
		return nil, c.apiErr(fmt.Sprintf("read the review comments of #%d of", n), err)
	}
	var out []Finding
	for _, r := range asking {
		var b strings.Builder
		fmt.Fprintf(&b, "%s reviewed the pull request and requested changes", r.GetUser().GetLogin())
		if u := r.GetHTMLURL(); u != "" {
			fmt.Fprintf(&b, " (%s)", u)
		}
		b.WriteString(". Make them.\n")
		if body := strings.TrimSpace(r.GetBody()); body != "" {
			b.WriteString("\n" + body + "\n")
		}
		for _, cm := range comments {
			if cm.GetPullRequestReviewID() != r.GetID() {
				continue
			}
			fmt.Fprintf(&b, "\n%s", cm.GetPath())
			if l := cm.GetLine(); l > 0 {
				fmt.Fprintf(&b, ":%d", l)
			}
			fmt.Fprintf(&b, ": %s\n", strings.TrimSpace(cm.GetBody()))
		}
		out = append(out, Finding{ID: fmt.Sprintf("pr-review-%d", r.GetID()),
			Title: "Address the review of " + r.GetUser().GetLogin(), Description: cut(b.String())})
	}
	return out, nil
}

// paged reads every page of a listing.
func paged[T any](list func(*github.ListOptions) ([]T, *github.Response, error)) ([]T, error) {
	opts := &github.ListOptions{PerPage: perPage}
	var out []T
	for {
		page, resp, err := list(opts)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

func cut(s string) string {
	if len(s) <= contextLimit {
		return s
	}
	return s[:contextLimit] + "\n… (cut)"
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// ErrFollowBound: --pr-follow's bound was reached — its rounds used up
// while the pull request still asks for something, or a push's checks
// not finished in time.
var ErrFollowBound = errors.New("forge: the pull request still asks for changes")

// FollowParams are what Follow needs of its caller.
type FollowParams struct {
	Pull Pull
	// Head is the commit the pull request's branch is at now.
	Head func(ctx context.Context) (string, error)
	// Has reports whether the finding id was turned into a task before
	// (by the caller's own record: a task id alone could be an agent's).
	Has func(ctx context.Context, id string) (bool, error)
	// Add adds the findings' tasks to the plan.
	Add func(ctx context.Context, fs []Finding) error
	// Build builds the plan and pushes its work to the pull request.
	Build func(ctx context.Context) error
	// Rounds bounds the rounds of findings built.
	Rounds int
	// Wait bounds how long a push's checks may run; Poll is how often
	// they are read while some run (0: 15 s).
	Wait, Poll time.Duration
	// Say tells the person what happens.
	Say func(format string, args ...any)
}

// noChecksGrace is how long Follow waits for a push's first check run
// before it takes the repository to have none.
const noChecksGrace = time.Minute

// Follow keeps a pull request going: it waits for the check runs of its
// head, turns the failed ones and the reviews that request changes into
// tasks (once each: a finding Has knows was asked for), has
// them built and pushed, and begins again, until the checks pass and
// nothing new is asked — or p.Rounds rounds were built, or a push's checks
// ran past p.Wait: ErrFollowBound.
func (c *Client) Follow(ctx context.Context, p FollowParams) error {
	if p.Poll <= 0 {
		p.Poll = 15 * time.Second
	}
	for round := 1; ; round++ {
		sha, err := p.Head(ctx)
		if err != nil {
			return err
		}
		checks, err := c.settled(ctx, sha, p)
		if err != nil {
			return err
		}
		reviews, err := c.ChangesRequested(ctx, p.Pull.Number)
		if err != nil {
			return err
		}
		var fresh []Finding
		for _, f := range append(checks.Failed, reviews...) {
			has, err := p.Has(ctx, f.ID)
			if err != nil {
				return err
			}
			if !has {
				fresh = append(fresh, f)
			}
		}
		if len(checks.Failed) == 0 && len(fresh) == 0 {
			asked := "no review asks for changes"
			if len(reviews) > 0 {
				asked = "the reviews that asked for changes have their tasks done"
			}
			p.Say("pull request #%d: %d check run%s passed on %s; %s", p.Pull.Number, checks.Runs, plural(checks.Runs), short(sha), asked)
			return nil
		}
		if len(fresh) == 0 {
			return fmt.Errorf("%w: #%d: %d check run%s failed on %s and their tasks were built", ErrFollowBound, p.Pull.Number, len(checks.Failed), plural(len(checks.Failed)), short(sha))
		}
		if round > p.Rounds {
			return fmt.Errorf("%w: #%d still asks for %d change%s after %d round%s (--pr-rounds)", ErrFollowBound, p.Pull.Number, len(fresh), plural(len(fresh)), p.Rounds, plural(p.Rounds))
		}
		for _, f := range fresh {
			p.Say("pull request #%d asks: %s (task %s)", p.Pull.Number, f.Title, f.ID)
		}
		if err := p.Add(ctx, fresh); err != nil {
			return err
		}
		if err := p.Build(ctx); err != nil {
			return err
		}
	}
}

// settled waits until the check runs of sha are completed, or there are
// none after noChecksGrace, or p.Wait is over (ErrFollowBound).
func (c *Client) settled(ctx context.Context, sha string, p FollowParams) (Checks, error) {
	start := time.Now()
	for {
		checks, err := c.Checks(ctx, sha)
		if err != nil {
			return Checks{}, err
		}
		waited := time.Since(start)
		switch {
		case checks.Runs > 0 && len(checks.Pending) == 0:
			return checks, nil
		case checks.Runs == 0 && waited >= min(noChecksGrace, p.Wait):
			return checks, nil
		case waited >= p.Wait:
			return Checks{}, fmt.Errorf("%w: the checks of %s still run after %v: %s", ErrFollowBound, short(sha), p.Wait, strings.Join(checks.Pending, ", "))
		}
		t := time.NewTimer(p.Poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return Checks{}, ctx.Err()
		case <-t.C:
		}
	}
}
