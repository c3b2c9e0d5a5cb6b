package forge

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-github/v75/github"
)

// Issue is a GitHub issue as an import reads it.
type Issue struct {
	Number int
	Title  string
	Body   string
	URL    string
	Open   bool
	Labels []string
}

// perPage is the page size of the listings (GitHub's largest).
const perPage = 100

func issueOf(i *github.Issue) Issue {
	is := Issue{Number: i.GetNumber(), Title: i.GetTitle(), Body: i.GetBody(), URL: i.GetHTMLURL(), Open: i.GetState() != "closed"}
	for _, l := range i.Labels {
		is.Labels = append(is.Labels, l.GetName())
	}
	return is
}

// OpenIssues lists the repository's open issues that have label (any
// when ""), oldest first, pull requests left out.
func (c *Client) OpenIssues(ctx context.Context, label string) ([]Issue, error) {
	opts := &github.IssueListByRepoOptions{State: "open", Sort: "created", Direction: "asc", ListOptions: github.ListOptions{PerPage: perPage}}
	if label != "" {
		opts.Labels = []string{label}
	}
	var out []Issue
	for {
		page, resp, err := c.gh.Issues.ListByRepo(ctx, c.repo.Owner, c.repo.Name, opts)
		if err != nil {
			return nil, c.apiErr("list the issues of", err)
		}
		for _, i := range page {
			if !i.IsPullRequest() {
				out = append(out, issueOf(i))
			}
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.ListOptions.Page = resp.NextPage
	}
}

// Issue reads issue n; found is false when the repository has no issue
// n (or n is a pull request).
func (c *Client) Issue(ctx context.Context, n int) (is Issue, found bool, err error) {
	i, _, err := c.gh.Issues.Get(ctx, c.repo.Owner, c.repo.Name, n)
	switch {
	case notFound(err):
		return Issue{}, false, nil
	case err != nil:
		return Issue{}, false, c.apiErr(fmt.Sprintf("read issue #%d of", n), err)
	case i.IsPullRequest():
		return Issue{}, false, nil
	}
	return issueOf(i), true, nil
}

// SubIssues lists issue n's sub-issues.
func (c *Client) SubIssues(ctx context.Context, n int) ([]Issue, error) {
	opts := &github.IssueListOptions{ListOptions: github.ListOptions{PerPage: perPage}}
	var out []Issue
	for {
		page, resp, err := c.gh.SubIssue.ListByIssue(ctx, c.repo.Owner, c.repo.Name, int64(n), opts)
		if err != nil {
			return nil, c.apiErr(fmt.Sprintf("list the sub-issues of #%d of", n), err)
		}
		for _, s := range page {
			out = append(out, issueOf((*github.Issue)(s)))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.ListOptions.Page = resp.NextPage
	}
}

// dependsRE finds "depends on #3", "Blocked by: #4, #5".
var (
	dependsRE = regexp.MustCompile(`(?i)\b(?:depends\s+on|blocked\s+by)\s*:?\s*((?:#\d+)(?:\s*(?:,|and)\s*#\d+)*)`)
	numberRE  = regexp.MustCompile(`#(\d+)`)
)

// DependsOn lists the issue numbers body says the issue depends on, in
// the order written, each once.
func DependsOn(body string) []int {
	var out []int
	for _, m := range dependsRE.FindAllStringSubmatch(body, -1) {
		for _, n := range numberRE.FindAllStringSubmatch(m[1], -1) {
			if v, err := strconv.Atoi(n[1]); err == nil && v > 0 && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	return out
}

// Task is a task an import adds for an issue.
type Task struct {
	Issue
	ID          string
	Description string
	// ParentID is the task of the issue this one is a sub-issue of.
	ParentID  string
	BlockedBy []string
	// Pulled says the issue lacks the label: it came in as a blocker or a
	// sub-issue of one that has it.
	Pulled bool
}

// Import is what ImportIssues found.
type Import struct {
	// Tasks are the tasks to add, in the order of the issues (a parent
	// before its sub-issues).
	Tasks []Task
	// Present counts the issues whose task the plan has already.
	Present int
	// Notes say what was left out, and why.
	Notes []string
}

// ImportIssues reads the open issues with label (any when "") and what
// they need — their open blockers and sub-issues — as the tasks to add
// to a plan; has says whether the plan has a task already (those are
// left as they are). See the package doc for the rules.
func (c *Client) ImportIssues(ctx context.Context, label string, has func(id string) (bool, error)) (Import, error) {
	labelled, err := c.OpenIssues(ctx, label)
	if err != nil {
		return Import{}, err
	}
	var im Import
	var queue, order []Task
	seen := map[int]bool{}   // queued, or settled as a blocker
	noEdge := map[int]bool{} // a blocker that is closed, or no issue
	parent := map[int]int{}
	enqueue := func(is Issue, pulled bool) {
		seen[is.Number] = true
		queue = append(queue, Task{Issue: is, ID: TaskID(is.Number), Pulled: pulled})
	}
	for _, is := range labelled {
		enqueue(is, false)
	}
	for len(queue) > 0 {
		t := queue[0]
		queue = queue[1:]
		order = append(order, t)
		subs, err := c.SubIssues(ctx, t.Number)
		if err != nil {
			return Import{}, err
		}
		for _, s := range subs {
			if !s.Open {
				continue
			}
			if _, ok := parent[s.Number]; !ok {
				parent[s.Number] = t.Number
			}
			if !seen[s.Number] {
				enqueue(s, true)
			}
		}
		for _, d := range DependsOn(t.Body) {
			if seen[d] {
				continue
			}
			seen[d] = true
			if ok, err := has(TaskID(d)); err != nil {
				return Import{}, err
			} else if ok {
				im.Present++ // imported before: left as it is
				continue
			}
			dep, found, err := c.Issue(ctx, d)
			switch {
			case err != nil:
				return Import{}, err
			case !found:
				noEdge[d] = true
				im.Notes = append(im.Notes, fmt.Sprintf("#%d depends on #%d, which is no issue of %s: not a blocker", t.Number, d, c.repo))
			case !dep.Open:
				noEdge[d] = true
			default:
				enqueue(dep, true)
			}
		}
	}
	for _, t := range order {
		if p, ok := parent[t.Number]; ok {
			t.ParentID = TaskID(p)
		}
		for _, d := range DependsOn(t.Body) {
			if !noEdge[d] {
				t.BlockedBy = append(t.BlockedBy, TaskID(d))
			}
		}
		t.Description = describe(t.Issue)
		ok, err := has(t.ID)
		if err != nil {
			return Import{}, err
		}
		if ok {
			im.Present++
			continue
		}
		im.Tasks = append(im.Tasks, t)
	}
	return im, nil
}

// describe is the task's description: the issue's body and where the
// issue is.
func describe(is Issue) string {
	var b strings.Builder
	if body := strings.TrimSpace(is.Body); body != "" {
		b.WriteString(body)
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "GitHub issue #%d", is.Number)
	if is.URL != "" {
		b.WriteString(": " + is.URL)
	}
	return b.String()
}

// Comment writes body as a comment on issue (or pull request) n.
func (c *Client) Comment(ctx context.Context, n int, body string) error {
	_, _, err := c.gh.Issues.CreateComment(ctx, c.repo.Owner, c.repo.Name, n, &github.IssueComment{Body: github.Ptr(body)})
	if err != nil {
		return c.apiErr(fmt.Sprintf("comment on #%d of", n), err)
	}
	return nil
}
