package forgetest_test

import (
	"errors"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v75/github"

	"github.com/ralph-dev/ralph/forge/forgetest"
)

const (
	owner = "acme"
	repo  = "widgets"
	token = "s3cret"
)

// setup starts a fake and a client of it authenticated with tok ("" for
// none); the test fails if the client calls a route the fake does not serve.
func setup(t *testing.T, tok string) (*forgetest.GitHub, *github.Client) {
	t.Helper()
	g := forgetest.New(t, owner, repo, token)
	t.Cleanup(func() {
		if u := g.Unknown(); len(u) > 0 {
			t.Errorf("requests to unknown routes: %q", u)
		}
	})
	return g, client(t, g, tok)
}

func client(t *testing.T, g *forgetest.GitHub, tok string) *github.Client {
	t.Helper()
	c := github.NewClient(nil)
	if tok != "" {
		c = c.WithAuthToken(tok)
	}
	u, err := url.Parse(g.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	c.BaseURL = u
	return c
}

// errorResponse returns err as a *github.ErrorResponse with status code,
// failing the test if it is not one.
func errorResponse(t *testing.T, err error, code int) *github.ErrorResponse {
	t.Helper()
	var e *github.ErrorResponse
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *github.ErrorResponse", err, err)
	}
	if e.Response.StatusCode != code {
		t.Fatalf("status %d, want %d: %v", e.Response.StatusCode, code, err)
	}
	return e
}

func createPull(t *testing.T, c *github.Client, head, base string) *github.PullRequest {
	t.Helper()
	pr, _, err := c.PullRequests.Create(t.Context(), owner, repo, &github.NewPullRequest{
		Title: github.Ptr("Do " + head), Body: github.Ptr("Closes nothing."),
		Head: github.Ptr(head), Base: github.Ptr(base),
	})
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

func numbers(issues []*github.Issue) []int {
	var ns []int
	for _, i := range issues {
		ns = append(ns, i.GetNumber())
	}
	return ns
}

func TestListIssuesByLabelAcrossPages(t *testing.T) {
	g, c := setup(t, token)
	for range 5 {
		g.AddIssue(forgetest.Issue{Title: "task", Labels: []string{"ralph", "ready"}})
	}
	g.AddIssue(forgetest.Issue{Title: "not ready", Labels: []string{"ralph"}})
	g.AddIssue(forgetest.Issue{Title: "done", Labels: []string{"ralph", "ready"}, State: "closed"})

	opts := &github.IssueListByRepoOptions{Labels: []string{"ralph", "ready"}, ListOptions: github.ListOptions{PerPage: 2}}
	var got []int
	var pages, last int
	for {
		issues, resp, err := c.Issues.ListByRepo(t.Context(), owner, repo, opts)
		if err != nil {
			t.Fatal(err)
		}
		if pages == 0 {
			last = resp.LastPage
		}
		pages++
		got = append(got, numbers(issues)...)
		if resp.NextPage == 0 {
			break
		}
		opts.ListOptions.Page = resp.NextPage
	}
	if diff := cmp.Diff([]int{5, 4, 3, 2, 1}, got); diff != "" {
		t.Errorf("issue numbers (-want +got):\n%s", diff)
	}
	if pages != 3 || last != 3 {
		t.Errorf("pages = %d, LastPage = %d; want 3 and 3", pages, last)
	}
	want := []string{
		"GET /repos/acme/widgets/issues?labels=ralph%2Cready&per_page=2",
		"GET /repos/acme/widgets/issues?labels=ralph%2Cready&page=2&per_page=2",
		"GET /repos/acme/widgets/issues?labels=ralph%2Cready&page=3&per_page=2",
	}
	if diff := cmp.Diff(want, g.Requests()); diff != "" {
		t.Errorf("Requests (-want +got):\n%s", diff)
	}
}

func TestListIssuesIncludesPulls(t *testing.T) {
	g, c := setup(t, token)
	g.AddIssue(forgetest.Issue{Title: "task"})
	pr := createPull(t, c, "ralph/task-1", "main")
	if pr.GetNumber() != 2 {
		t.Errorf("pull request number = %d, want 2 (shared with issues)", pr.GetNumber())
	}
	issues, _, err := c.Issues.ListByRepo(t.Context(), owner, repo, &github.IssueListByRepoOptions{State: "all"})
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for _, i := range issues {
		got = append(got, i.IsPullRequest())
	}
	if diff := cmp.Diff([]int{2, 1}, numbers(issues)); diff != "" {
		t.Errorf("numbers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]bool{true, false}, got); diff != "" {
		t.Errorf("IsPullRequest (-want +got):\n%s", diff)
	}
}

func TestGetIssue(t *testing.T) {
	g, c := setup(t, token)
	n := g.AddIssue(forgetest.Issue{Title: "Add a flag", Body: "Details.", Labels: []string{"ralph"}})
	i, _, err := c.Issues.Get(t.Context(), owner, repo, n)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{i.GetNumber(), i.GetTitle(), i.GetBody(), i.GetState(), i.Labels[0].GetName(), i.GetUser().GetLogin(), i.GetCreatedAt().Time}
	want := []any{1, "Add a flag", "Details.", "open", "ralph", owner, time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("issue (-want +got):\n%s", diff)
	}

	_, _, err = c.Issues.Get(t.Context(), owner, repo, 42)
	if e := errorResponse(t, err, http.StatusNotFound); e.Message != "Not Found" {
		t.Errorf("message = %q, want Not Found", e.Message)
	}
}

func TestEditIssue(t *testing.T) {
	g, c := setup(t, token)
	n := g.AddIssue(forgetest.Issue{Title: "task", Body: "old"})
	i, _, err := c.Issues.Edit(t.Context(), owner, repo, n, &github.IssueRequest{State: github.Ptr("closed"), Body: github.Ptr("new")})
	if err != nil {
		t.Fatal(err)
	}
	if i.ClosedAt == nil {
		t.Error("closed_at not set")
	}
	if diff := cmp.Diff(forgetest.Issue{Number: n, Title: "task", Body: "new", State: "closed"}, g.Issue(n)); diff != "" {
		t.Errorf("Issue (-want +got):\n%s", diff)
	}
	for state, want := range map[string][]int{"": nil, "closed": {n}} {
		issues, _, err := c.Issues.ListByRepo(t.Context(), owner, repo, &github.IssueListByRepoOptions{State: state})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, numbers(issues)); diff != "" {
			t.Errorf("state %q (-want +got):\n%s", state, diff)
		}
	}
	_, _, err = c.Issues.Edit(t.Context(), owner, repo, n, &github.IssueRequest{State: github.Ptr("gone")})
	errorResponse(t, err, http.StatusUnprocessableEntity)
}

func TestSubIssues(t *testing.T) {
	g, c := setup(t, token)
	parent := g.AddIssue(forgetest.Issue{Title: "epic"})
	a := g.AddIssue(forgetest.Issue{Title: "a", Parent: parent})
	g.AddIssue(forgetest.Issue{Title: "unrelated"})
	b := g.AddIssue(forgetest.Issue{Title: "b", Parent: parent, State: "closed"})

	opts := &github.IssueListOptions{ListOptions: github.ListOptions{PerPage: 1}}
	var got []int
	for {
		subs, resp, err := c.SubIssue.ListByIssue(t.Context(), owner, repo, int64(parent), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range subs {
			got = append(got, (*github.Issue)(s).GetNumber())
		}
		if resp.NextPage == 0 {
			break
		}
		opts.ListOptions.Page = resp.NextPage
	}
	if diff := cmp.Diff([]int{a, b}, got); diff != "" {
		t.Errorf("sub-issues (-want +got):\n%s", diff)
	}
	_, _, err := c.SubIssue.ListByIssue(t.Context(), owner, repo, 99, nil)
	errorResponse(t, err, http.StatusNotFound)
}

func TestComments(t *testing.T) {
	g, c := setup(t, token)
	n := g.AddIssue(forgetest.Issue{Title: "task"})
	pr := createPull(t, c, "ralph/task-1", "main").GetNumber()
	g.AddComment(n, "alice", "Please also do X.")
	for _, num := range []int{n, pr} {
		_, _, err := c.Issues.CreateComment(t.Context(), owner, repo, num, &github.IssueComment{Body: github.Ptr("Working on it.")})
		if err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := c.Issues.CreateComment(t.Context(), owner, repo, n, &github.IssueComment{})
	errorResponse(t, err, http.StatusUnprocessableEntity)

	list, _, err := c.Issues.ListComments(t.Context(), owner, repo, n, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []forgetest.Comment
	for _, cm := range list {
		got = append(got, forgetest.Comment{ID: cm.GetID(), User: cm.GetUser().GetLogin(), Body: cm.GetBody()})
	}
	if diff := cmp.Diff(g.Comments(n), got); diff != "" {
		t.Errorf("listed comments differ from Comments (-Comments +listed):\n%s", diff)
	}
	want := []string{"alice: Please also do X.", "ralph-bot: Working on it."}
	var lines []string
	for _, cm := range g.Comments(n) {
		lines = append(lines, cm.User+": "+cm.Body)
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("Comments(%d) (-want +got):\n%s", n, diff)
	}
	if got := g.Comments(pr); len(got) != 1 || got[0].Body != "Working on it." {
		t.Errorf("Comments(%d) = %+v, want one", pr, got)
	}
}

func TestPulls(t *testing.T) {
	g, c := setup(t, token)
	ctx := t.Context()
	pr, _, err := c.PullRequests.Create(ctx, owner, repo, &github.NewPullRequest{
		Title: github.Ptr("Task 1"), Body: github.Ptr("Body."), Head: github.Ptr("ralph/task-1"),
		Base: github.Ptr("main"), Draft: github.Ptr(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{pr.GetNumber(), pr.GetState(), pr.GetDraft(), pr.GetHead().GetRef(), pr.GetHead().GetLabel(), pr.GetBase().GetRef(), pr.GetUser().GetLogin()}
	want := []any{1, "open", true, "ralph/task-1", "acme:ralph/task-1", "main", "ralph-bot"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("created (-want +got):\n%s", diff)
	}

	_, _, err = c.PullRequests.Create(ctx, owner, repo, &github.NewPullRequest{
		Title: github.Ptr("Again"), Head: github.Ptr("acme:ralph/task-1"), Base: github.Ptr("main"),
	})
	e := errorResponse(t, err, http.StatusUnprocessableEntity)
	wantErrs := []github.Error{{Resource: "PullRequest", Code: "custom", Message: "A pull request already exists for acme:ralph/task-1."}}
	if diff := cmp.Diff(wantErrs, e.Errors); e.Message != "Validation Failed" || diff != "" {
		t.Errorf("message %q, errors (-want +got):\n%s", e.Message, diff)
	}

	createPull(t, c, "ralph/task-2", "main")
	for _, tc := range []struct {
		name string
		opts github.PullRequestListOptions
		want []int
	}{
		{"open", github.PullRequestListOptions{}, []int{2, 1}},
		{"head", github.PullRequestListOptions{Head: "acme:ralph/task-1"}, []int{1}},
		{"bare head is ignored", github.PullRequestListOptions{Head: "ralph/task-1"}, []int{2, 1}},
		{"base", github.PullRequestListOptions{Base: "release"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prs, _, err := c.PullRequests.List(ctx, owner, repo, &tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, p := range prs {
				got = append(got, p.GetNumber())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("numbers (-want +got):\n%s", diff)
			}
		})
	}

	_, _, err = c.PullRequests.Edit(ctx, owner, repo, 1, &github.PullRequest{Title: github.Ptr("Task 1, done"), State: github.Ptr("closed")})
	if err != nil {
		t.Fatal(err)
	}
	got2, _, err := c.PullRequests.Get(ctx, owner, repo, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got2.GetTitle() != "Task 1, done" || got2.GetState() != "closed" || got2.ClosedAt == nil {
		t.Errorf("after edit: title %q, state %q, closed_at %v", got2.GetTitle(), got2.GetState(), got2.ClosedAt)
	}
	createPull(t, c, "ralph/task-1", "main") // no longer a duplicate
	wantPulls := []forgetest.Pull{
		{Number: 1, Title: "Task 1, done", Body: "Body.", Head: "ralph/task-1", Base: "main", State: "closed", Draft: true},
		{Number: 2, Title: "Do ralph/task-2", Body: "Closes nothing.", Head: "ralph/task-2", Base: "main", State: "open"},
		{Number: 3, Title: "Do ralph/task-1", Body: "Closes nothing.", Head: "ralph/task-1", Base: "main", State: "open"},
	}
	if diff := cmp.Diff(wantPulls, g.Pulls()); diff != "" {
		t.Errorf("Pulls (-want +got):\n%s", diff)
	}
	_, _, err = c.PullRequests.Get(ctx, owner, repo, 9)
	errorResponse(t, err, http.StatusNotFound)
}

func TestReviews(t *testing.T) {
	g, c := setup(t, token)
	pr := createPull(t, c, "ralph/task-1", "main")
	id := g.AddReview(pr.GetNumber(), forgetest.Review{User: "alice", State: "CHANGES_REQUESTED", Body: "Needs tests."})
	g.AddReview(pr.GetNumber(), forgetest.Review{User: "bob", State: "APPROVED", CommitID: "abc"})
	cid := g.AddReviewComment(pr.GetNumber(), forgetest.ReviewComment{ReviewID: id, User: "alice", Body: "Off by one.", Path: "main.go", Line: 12})

	reviews, _, err := c.PullRequests.ListReviews(t.Context(), owner, repo, pr.GetNumber(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]any
	for _, r := range reviews {
		got = append(got, []any{r.GetUser().GetLogin(), r.GetState(), r.GetBody(), r.GetCommitID(), r.SubmittedAt != nil})
	}
	want := [][]any{
		{"alice", "CHANGES_REQUESTED", "Needs tests.", pr.GetHead().GetSHA(), true},
		{"bob", "APPROVED", "", "abc", true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("reviews (-want +got):\n%s", diff)
	}
	if reviews[0].GetID() != id {
		t.Errorf("review ID = %d, want %d", reviews[0].GetID(), id)
	}

	comments, _, err := c.PullRequests.ListComments(t.Context(), owner, repo, pr.GetNumber(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(comments) != 1 {
		t.Fatalf("got %d review comments, want 1", len(comments))
	}
	rc := comments[0]
	gotC := []any{rc.GetID(), rc.GetPullRequestReviewID(), rc.GetUser().GetLogin(), rc.GetBody(), rc.GetPath(), rc.GetLine(), rc.CreatedAt != nil}
	if diff := cmp.Diff([]any{cid, id, "alice", "Off by one.", "main.go", 12, true}, gotC); diff != "" {
		t.Errorf("review comment (-want +got):\n%s", diff)
	}
}

func TestCheckRuns(t *testing.T) {
	g, c := setup(t, token)
	g.SetCheckRuns("abc123",
		forgetest.CheckRun{Name: "test", Conclusion: "failure", Title: "1 failed", Summary: "TestX", Text: "--- FAIL: TestX"},
		forgetest.CheckRun{Name: "lint", Status: "in_progress"},
	)
	res, _, err := c.Checks.ListCheckRunsForRef(t.Context(), owner, repo, "abc123", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]any
	for _, r := range res.CheckRuns {
		o := r.GetOutput()
		got = append(got, []any{r.GetName(), r.GetHeadSHA(), r.GetStatus(), r.GetConclusion(), o.GetTitle(), o.GetSummary(), o.GetText(), r.GetID() != 0, r.GetHTMLURL() != ""})
	}
	want := [][]any{
		{"test", "abc123", "completed", "failure", "1 failed", "TestX", "--- FAIL: TestX", true, true},
		{"lint", "abc123", "in_progress", "", "", "", "", true, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("check runs (-want +got):\n%s", diff)
	}
	if res.GetTotal() != 2 {
		t.Errorf("total_count = %d, want 2", res.GetTotal())
	}

	res, _, err = c.Checks.ListCheckRunsForRef(t.Context(), owner, repo, "def456", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.GetTotal() != 0 || len(res.CheckRuns) != 0 {
		t.Errorf("unknown sha: %d runs, want none", res.GetTotal())
	}
}

func TestBadCredentials(t *testing.T) {
	g, _ := setup(t, token)
	g.AddIssue(forgetest.Issue{Title: "task"})
	for name, tok := range map[string]string{"none": "", "wrong": "nope"} {
		t.Run(name, func(t *testing.T) {
			_, _, err := client(t, g, tok).Issues.Get(t.Context(), owner, repo, 1)
			if e := errorResponse(t, err, http.StatusUnauthorized); e.Message != "Bad credentials" {
				t.Errorf("message = %q, want Bad credentials", e.Message)
			}
		})
	}
}

func TestNotServed(t *testing.T) {
	g := forgetest.New(t, owner, repo, token)
	c := client(t, g, token)
	g.AddIssue(forgetest.Issue{Title: "task"})

	_, _, err := c.Issues.Get(t.Context(), owner, "other", 1)
	errorResponse(t, err, http.StatusNotFound)
	_, _, err = c.Repositories.Get(t.Context(), owner, repo)
	errorResponse(t, err, http.StatusNotFound)
	_, err = c.Issues.DeleteComment(t.Context(), owner, repo, 1)
	errorResponse(t, err, http.StatusNotFound)
	_, _, err = c.Repositories.GetCommit(t.Context(), owner, repo, "abc123", nil)
	errorResponse(t, err, http.StatusNotFound)

	want := []string{
		"GET /repos/acme/widgets",
		"DELETE /repos/acme/widgets/issues/comments/1",
		"GET /repos/acme/widgets/commits/abc123",
	}
	if diff := cmp.Diff(want, g.Unknown()); diff != "" {
		t.Errorf("Unknown (-want +got):\n%s", diff)
	}
}

func TestConcurrentComments(t *testing.T) {
	g, c := setup(t, token)
	n := g.AddIssue(forgetest.Issue{Title: "task"})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, _, err := c.Issues.CreateComment(t.Context(), owner, repo, n, &github.IssueComment{Body: github.Ptr("hi")})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := len(g.Comments(n)); got != 20 {
		t.Errorf("%d comments, want 20", got)
	}
}
