package forge

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v75/github"

	"github.com/ralph-dev/ralph/loop"
)

// Pull is a pull request.
type Pull struct {
	Number int
	URL    string
	Head   string // the branch
	Base   string
}

// OpenPull opens the pull request of branch head onto base with title and
// body, or, when one is open already, gives it title and body; created
// says which.
func (c *Client) OpenPull(ctx context.Context, head, base, title, body string) (p Pull, created bool, err error) {
	opts := &github.PullRequestListOptions{State: "open", Head: c.repo.Owner + ":" + head, Base: base}
	open, _, err := c.gh.PullRequests.List(ctx, c.repo.Owner, c.repo.Name, opts)
	if err != nil {
		return Pull{}, false, c.apiErr("list the pull requests of", err)
	}
	if len(open) > 0 {
		n := open[0].GetNumber()
		pr, _, err := c.gh.PullRequests.Edit(ctx, c.repo.Owner, c.repo.Name, n, &github.PullRequest{Title: github.Ptr(title), Body: github.Ptr(body)})
		if err != nil {
			return Pull{}, false, c.apiErr(fmt.Sprintf("update pull request #%d of", n), err)
		}
		return pullOf(pr, head, base), false, nil
	}
	pr, _, err := c.gh.PullRequests.Create(ctx, c.repo.Owner, c.repo.Name, &github.NewPullRequest{
		Title: github.Ptr(title), Body: github.Ptr(body), Head: github.Ptr(head), Base: github.Ptr(base)})
	if err != nil {
		return Pull{}, false, c.apiErr(fmt.Sprintf("open a pull request of %s onto %s in", head, base), err)
	}
	return pullOf(pr, head, base), true, nil
}

func pullOf(pr *github.PullRequest, head, base string) Pull {
	return Pull{Number: pr.GetNumber(), URL: pr.GetHTMLURL(), Head: head, Base: base}
}

// PullBody is a pull request's body for a plan's tasks (those in scope:
// the ones the pull request carries) and the plan's receipts: a table of
// the tasks with their status, verdict, check and cost, the cost per
// verified task, and a "Closes #N" line for each done task gh-N whose
// issue #N imported says the plan imported (never for an id an agent
// chose).
func PullBody(what string, tasks []loop.Task, receipts []loop.Receipt, imported func(n int) bool) string {
	cost := map[string]float64{}
	for _, t := range tasks {
		cost[t.ID] = 0
	}
	var total float64
	sessions := 0
	for _, r := range receipts {
		if _, ours := cost[r.TaskID]; !ours {
			continue
		}
		cost[r.TaskID] += r.CostUSD
		total += r.CostUSD
		sessions++
	}
	var b strings.Builder
	done, verified := 0, 0
	for _, t := range tasks {
		if t.Status == loop.StatusDone {
			done++
			if t.VerificationStatus == "pass" {
				verified++
			}
		}
	}
	fmt.Fprintf(&b, "ralph's work on %s: %d of %d task%s done.\n\n", what, done, len(tasks), plural(len(tasks)))
	b.WriteString("| task | title | status | verdict | check | cost |\n|---|---|---|---|---|---|\n")
	for _, t := range tasks {
		check := "—"
		if t.Check != "" {
			check = "`" + cell(t.Check) + "`"
		}
		verdict := t.VerificationStatus
		if verdict == "" {
			verdict = "—"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | $%.4f |\n", t.ID, cell(t.Title), t.Status, verdict, check, cost[t.ID])
	}
	fmt.Fprintf(&b, "\nCost: $%.4f over %d agent session%s", total, sessions, plural(sessions))
	if verified > 0 {
		fmt.Fprintf(&b, "; $%.4f per verified task (%d verified).\n", total/float64(verified), verified)
	} else {
		b.WriteString("; no task was verified (ralph build --verify).\n")
	}
	var closes []string
	for _, t := range tasks {
		if n, ok := IssueNumber(t.ID); ok && t.Status == loop.StatusDone && imported(n) {
			closes = append(closes, fmt.Sprintf("Closes #%d", n))
		}
	}
	if len(closes) > 0 {
		b.WriteString("\n" + strings.Join(closes, "\n") + "\n")
	}
	return b.String()
}

// cell is s on one line, safe in a Markdown table cell.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
