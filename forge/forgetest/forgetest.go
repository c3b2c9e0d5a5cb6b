// Package forgetest provides a scripted fake of the parts of the GitHub REST
// API that a forge client built on go-github uses: issues and their
// sub-issues and comments, pull requests with their reviews and review
// comments, and the check runs of a commit.
//
// New serves one repository on 127.0.0.1. A test seeds it (AddIssue,
// AddReview, SetCheckRuns, …), points a go-github client at its URL and reads
// back what the client did (Issue, Comments, Pulls, Requests). The fake
// answers the way GitHub does where the client can tell: status codes, error
// bodies, the "Link" header of paginated lists, pull requests listed among
// the issues, and one number sequence shared by issues and pull requests.
// Query parameters it does not model (milestone, assignee, since, …) are
// ignored. Timestamps come from a clock that starts at 2026-01-01T00:00:00Z
// and moves one second per change, so answers are the same on every run.
//
// A GitHub is safe for concurrent use.
package forgetest

import (
	"cmp"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// botUser is the login of everything created through the API.
const botUser = "ralph-bot"

const docsURL = "https://docs.github.com/rest"

// GitHub is a fake GitHub serving one repository. Create one with New.
type GitHub struct {
	// URL is the base URL of the API, without a trailing slash.
	URL string

	t                  testing.TB
	owner, repo, token string
	mux                *http.ServeMux

	mu       sync.Mutex
	now      time.Time
	lastNum  int   // last issue or pull request number
	lastID   int64 // last id of any object
	items    map[int]*item
	checks   map[string][]checkRun
	requests []string
	unknown  []string
}

// Issue is an issue as a test seeds or reads it. Issues added with AddIssue
// are by the repository owner.
type Issue struct {
	Number      int
	Title, Body string
	Labels      []string
	State       string // "open" (the default) or "closed"
	Parent      int    // 0, or the number of the issue this one is a sub-issue of
}

// Comment is a conversation comment on an issue or a pull request.
type Comment struct {
	ID         int64
	User, Body string
}

// Pull is a pull request. Head is the branch name, or "user:branch" when
// the branch is in another user's fork; Base is a branch of the repository.
// The fake reports as head.sha of a pull request the hex SHA-1 of
// "user:branch", since it knows no commits.
type Pull struct {
	Number                         int
	Title, Body, Head, Base, State string // State is "open" or "closed"
	Draft                          bool
}

// CheckRun is a check run on a commit. An empty Status means "completed"
// when Conclusion is set and "queued" otherwise.
type CheckRun struct {
	ID                   int64
	Name                 string
	Status               string // "queued", "in_progress" or "completed"
	Conclusion           string // "success", "failure", …; ignored until completed
	Title, Summary, Text string // the output
}

// Review is a submitted review of a pull request. An empty User means the
// repository owner, an empty State "COMMENTED", an empty CommitID the head
// of the pull request.
type Review struct {
	ID                int64
	User, State, Body string // State is "APPROVED", "CHANGES_REQUESTED" or "COMMENTED"
	CommitID          string
}

// ReviewComment is a comment on a line of a pull request's diff, part of
// the review ReviewID (0 for none). An empty User means the repository owner.
type ReviewComment struct {
	ID, ReviewID     int64
	User, Body, Path string
	Line             int
}

// item is an issue or, when pull is set, a pull request.
type item struct {
	Issue
	id                       int64
	user                     string
	created, updated, closed time.Time
	pull                     *pullInfo
	comments                 []stamped[Comment]
	reviews                  []stamped[Review]
	reviewComments           []stamped[ReviewComment]
}

type pullInfo struct {
	headUser, head, base string
	draft                bool
}

type stamped[T any] struct {
	v  T
	at time.Time
}

type checkRun = stamped[CheckRun]

// New starts a fake GitHub for repository owner/repo that accepts token;
// it is closed when t's test ends.
func New(t testing.TB, owner, repo, token string) *GitHub {
	t.Helper()
	g := &GitHub{
		t: t, owner: owner, repo: repo, token: token,
		now:    time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		items:  make(map[int]*item),
		checks: make(map[string][]checkRun),
		mux:    http.NewServeMux(),
	}
	const r = "/repos/{owner}/{repo}"
	g.route("GET "+r+"/issues", g.listIssues)
	g.route("GET "+r+"/issues/{n}", g.getIssue)
	g.route("PATCH "+r+"/issues/{n}", g.editIssue)
	g.route("GET "+r+"/issues/{n}/sub_issues", g.listSubIssues)
	g.route("GET "+r+"/issues/{n}/comments", g.listComments)
	g.route("POST "+r+"/issues/{n}/comments", g.createComment)
	g.route("GET "+r+"/pulls", g.listPulls)
	g.route("POST "+r+"/pulls", g.createPull)
	g.route("GET "+r+"/pulls/{n}", g.getPull)
	g.route("PATCH "+r+"/pulls/{n}", g.editPull)
	g.route("GET "+r+"/pulls/{n}/reviews", g.listReviews)
	g.route("GET "+r+"/pulls/{n}/comments", g.listReviewComments)
	g.route("GET "+r+"/commits/{ref...}", g.listCheckRuns)
	srv := httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(srv.Close)
	g.URL = srv.URL
	return g
}

// AddIssue adds an issue and returns its number; i.Number is ignored.
func (g *GitHub) AddIssue(i Issue) int {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if i.State == "" {
		i.State = "open"
	}
	if i.State != "open" && i.State != "closed" {
		g.t.Fatalf("forgetest: AddIssue: state %q", i.State)
	}
	if i.Parent != 0 && g.items[i.Parent] == nil {
		g.t.Fatalf("forgetest: AddIssue: no parent issue #%d", i.Parent)
	}
	g.lastNum++
	i.Number = g.lastNum
	i.Labels = slices.Clone(i.Labels)
	it := &item{Issue: i, id: g.nextID(0), user: g.owner, created: g.tick()}
	it.updated = it.created
	if i.State == "closed" {
		it.closed = it.created
	}
	g.items[i.Number] = it
	return i.Number
}

// Issue returns issue or pull request n as it is now.
func (g *GitHub) Issue(n int) Issue {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	i := g.mustItem(n, false).Issue
	i.Labels = slices.Clone(i.Labels)
	return i
}

// Comments returns the conversation comments of issue or pull request n,
// oldest first.
func (g *GitHub) Comments(n int) []Comment {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	var cs []Comment
	for _, c := range g.mustItem(n, false).comments {
		cs = append(cs, c.v)
	}
	return cs
}

// AddComment adds a conversation comment by user to issue or pull request n.
func (g *GitHub) AddComment(n int, user, body string) {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	it := g.mustItem(n, false)
	it.comments = append(it.comments, stamped[Comment]{Comment{g.nextID(0), g.userOr(user), body}, g.tick()})
	it.updated = g.now
}

// Pulls returns every pull request, by number.
func (g *GitHub) Pulls() []Pull {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ps []Pull
	for _, it := range g.sorted("", "asc") {
		if p := it.pull; p != nil {
			head := p.head
			if p.headUser != g.owner {
				head = p.headUser + ":" + p.head
			}
			ps = append(ps, Pull{it.Number, it.Title, it.Body, head, p.base, it.State, p.draft})
		}
	}
	return ps
}

// SetCheckRuns replaces the check runs of commit sha; runs with a zero ID
// are given one.
func (g *GitHub) SetCheckRuns(sha string, runs ...CheckRun) {
	g.mu.Lock()
	defer g.mu.Unlock()
	at := g.tick()
	var rs []checkRun
	for _, r := range runs {
		r.ID = g.nextID(r.ID)
		if r.Status == "" {
			r.Status = "queued"
			if r.Conclusion != "" {
				r.Status = "completed"
			}
		}
		rs = append(rs, checkRun{r, at})
	}
	g.checks[sha] = rs
}

// AddReview adds a submitted review to pull request pull and returns its ID.
func (g *GitHub) AddReview(pull int, r Review) int64 {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	it := g.mustItem(pull, true)
	r.ID = g.nextID(r.ID)
	r.User = g.userOr(r.User)
	if r.State == "" {
		r.State = "COMMENTED"
	}
	if r.CommitID == "" {
		r.CommitID = g.headSHA(it)
	}
	it.reviews = append(it.reviews, stamped[Review]{r, g.tick()})
	return r.ID
}

// AddReviewComment adds a review comment to pull request pull and returns
// its ID.
func (g *GitHub) AddReviewComment(pull int, c ReviewComment) int64 {
	g.t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	it := g.mustItem(pull, true)
	if c.ReviewID != 0 && !slices.ContainsFunc(it.reviews, func(r stamped[Review]) bool { return r.v.ID == c.ReviewID }) {
		g.t.Fatalf("forgetest: AddReviewComment: no review %d on #%d", c.ReviewID, pull)
	}
	c.ID = g.nextID(c.ID)
	c.User = g.userOr(c.User)
	it.reviewComments = append(it.reviewComments, stamped[ReviewComment]{c, g.tick()})
	return c.ID
}

// Requests returns "METHOD /path?query" for every request so far, in order.
func (g *GitHub) Requests() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.requests)
}

// Unknown returns the requests, in the form of Requests, to routes the fake
// does not serve.
func (g *GitHub) Unknown() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.unknown)
}

func (g *GitHub) tick() time.Time {
	g.now = g.now.Add(time.Second)
	return g.now
}

// nextID returns id, or a new id if id is 0.
func (g *GitHub) nextID(id int64) int64 {
	if id == 0 {
		g.lastID++
		return g.lastID
	}
	g.lastID = max(g.lastID, id)
	return id
}

func (g *GitHub) userOr(user string) string {
	if user == "" {
		return g.owner
	}
	return user
}

func (g *GitHub) mustItem(n int, pull bool) *item {
	g.t.Helper()
	it := g.items[n]
	if it == nil || pull && it.pull == nil {
		g.t.Fatalf("forgetest: no issue or pull request #%d", n)
	}
	return it
}

// serve records the request, checks the token and routes it.
func (g *GitHub) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	req := r.Method + " " + r.URL.RequestURI()
	g.requests = append(g.requests, req)
	_, pattern := g.mux.Handler(r)
	if pattern == "" {
		g.unknown = append(g.unknown, req)
	}
	g.mu.Unlock()
	if !g.authorized(r) {
		writeError(w, http.StatusUnauthorized, "Bad credentials")
		return
	}
	if pattern == "" {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	g.mux.ServeHTTP(w, r)
}

func (g *GitHub) authorized(r *http.Request) bool {
	h := r.Header.Get("Authorization")
	for _, scheme := range []string{"Bearer ", "token "} {
		if tok, ok := strings.CutPrefix(h, scheme); ok && tok != "" && tok == g.token {
			return true
		}
	}
	return false
}

// route registers h for pattern, answering 404 for other repositories and
// calling h with g.mu held.
func (g *GitHub) route(pattern string, h http.HandlerFunc) {
	g.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.PathValue("owner"), g.owner) || !strings.EqualFold(r.PathValue("repo"), g.repo) {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		h(w, r)
	})
}

// item returns the issue (or, if pull, the pull request) named by the path,
// or answers 404 and returns nil.
func (g *GitHub) item(w http.ResponseWriter, r *http.Request, pull bool) *item {
	n, err := strconv.Atoi(r.PathValue("n"))
	it := g.items[n]
	if err != nil || it == nil || pull && it.pull == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return nil
	}
	return it
}

// sorted returns every item ordered by the sort and direction query
// parameters (created, updated or comments; asc or desc).
func (g *GitHub) sorted(by, dir string) []*item {
	var its []*item
	for _, it := range g.items {
		its = append(its, it)
	}
	slices.SortFunc(its, func(a, b *item) int {
		switch by {
		case "updated":
			return cmp.Or(a.updated.Compare(b.updated), a.Number-b.Number)
		case "comments", "popularity":
			return cmp.Or(len(a.comments)-len(b.comments), a.Number-b.Number)
		}
		return a.Number - b.Number
	})
	if dir == "desc" {
		slices.Reverse(its)
	}
	return its
}

func stateMatches(want, state string) bool {
	return want == "all" || state == want || want == "" && state == "open"
}

func (g *GitHub) listIssues(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var labels []string
	if l := q.Get("labels"); l != "" {
		labels = strings.Split(l, ",")
	}
	var out []any
	for _, it := range g.sorted(q.Get("sort"), cmp.Or(q.Get("direction"), "desc")) {
		if stateMatches(q.Get("state"), it.State) && hasLabels(it.Labels, labels) {
			out = append(out, g.issueJSON(it))
		}
	}
	writeJSON(w, http.StatusOK, g.page(w, r, out))
}

func hasLabels(have, want []string) bool {
	for _, l := range want {
		if !slices.ContainsFunc(have, func(h string) bool { return strings.EqualFold(h, strings.TrimSpace(l)) }) {
			return false
		}
	}
	return true
}

func (g *GitHub) getIssue(w http.ResponseWriter, r *http.Request) {
	if it := g.item(w, r, false); it != nil {
		writeJSON(w, http.StatusOK, g.issueJSON(it))
	}
}

func (g *GitHub) editIssue(w http.ResponseWriter, r *http.Request) {
	it := g.item(w, r, false)
	var req struct {
		Title, Body, State *string
		Labels             *[]string
	}
	if it == nil || !decode(w, r, &req) || !g.checkState(w, it, req.State) {
		return
	}
	setIf(&it.Title, req.Title)
	setIf(&it.Body, req.Body)
	if req.Labels != nil {
		it.Labels = slices.Clone(*req.Labels)
	}
	g.update(it, req.State)
	writeJSON(w, http.StatusOK, g.issueJSON(it))
}

// checkState reports whether state (nil for no change) is a valid new state
// for it, or answers 422 and returns false: for an unknown state, or for
// reopening a pull request when another is open for the same head and base.
func (g *GitHub) checkState(w http.ResponseWriter, it *item, state *string) bool {
	switch {
	case state == nil || *state == it.State:
		return true
	case *state != "open" && *state != "closed":
		validationFailed(w, "Issue", "state", "invalid", "")
		return false
	case *state == "open" && it.pull != nil && g.openPull(it.pull.headUser, it.pull.head, it.pull.base) != nil:
		validationFailed(w, "PullRequest", "", "custom", "A pull request already exists for "+it.pull.headUser+":"+it.pull.head+".")
		return false
	}
	return true
}

// update records a change to it made now, to state if that is not nil.
func (g *GitHub) update(it *item, state *string) {
	it.updated = g.tick()
	if state != nil && *state != it.State {
		it.State = *state
		it.closed = time.Time{}
		if it.State == "closed" {
			it.closed = it.updated
		}
	}
}

func setIf(dst *string, src *string) {
	if src != nil {
		*dst = *src
	}
}

func (g *GitHub) listSubIssues(w http.ResponseWriter, r *http.Request) {
	parent := g.item(w, r, false)
	if parent == nil {
		return
	}
	var out []any
	for _, it := range g.sorted("", "asc") {
		if it.Parent == parent.Number {
			out = append(out, g.issueJSON(it))
		}
	}
	writeJSON(w, http.StatusOK, g.page(w, r, out))
}

func (g *GitHub) listComments(w http.ResponseWriter, r *http.Request) {
	it := g.item(w, r, false)
	if it == nil {
		return
	}
	var out []any
	for _, c := range it.comments {
		out = append(out, g.commentJSON(it, c))
	}
	writeJSON(w, http.StatusOK, g.page(w, r, out))
}

func (g *GitHub) createComment(w http.ResponseWriter, r *http.Request) {
	it := g.item(w, r, false)
	var req struct{ Body string }
	if it == nil || !decode(w, r, &req) {
		return
	}
	if req.Body == "" {
		validationFailed(w, "IssueComment", "body", "missing_field", "")
		return
	}
	c := stamped[Comment]{Comment{g.nextID(0), botUser, req.Body}, g.tick()}
	it.comments = append(it.comments, c)
	it.updated = c.at
	writeJSON(w, http.StatusCreated, g.commentJSON(it, c))
}

// listPulls lists pull requests. Like GitHub, it ignores a head filter
// without the "user:" prefix.
func (g *GitHub) listPulls(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	dir := "asc"
	if s := q.Get("sort"); s == "" || s == "created" {
		dir = "desc"
	}
	headUser, head, byHead := strings.Cut(q.Get("head"), ":")
	var out []any
	for _, it := range g.sorted(q.Get("sort"), cmp.Or(q.Get("direction"), dir)) {
		p := it.pull
		if p == nil || !stateMatches(q.Get("state"), it.State) ||
			byHead && (!strings.EqualFold(p.headUser, headUser) || p.head != head) ||
			q.Get("base") != "" && p.base != q.Get("base") {
			continue
		}
		out = append(out, g.pullJSON(it))
	}
	writeJSON(w, http.StatusOK, g.page(w, r, out))
}

func (g *GitHub) openPull(headUser, head, base string) *item {
	for _, it := range g.items {
		if p := it.pull; p != nil && it.State == "open" && strings.EqualFold(p.headUser, headUser) && p.head == head && p.base == base {
			return it
		}
	}
	return nil
}

func (g *GitHub) createPull(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Title, Body, Head, Base string
		Draft                   bool
	}
	if !decode(w, r, &req) {
		return
	}
	for _, f := range []struct{ name, v string }{{"title", req.Title}, {"head", req.Head}, {"base", req.Base}} {
		if f.v == "" {
			validationFailed(w, "PullRequest", f.name, "missing_field", "")
			return
		}
	}
	headUser, head, ok := strings.Cut(req.Head, ":")
	if !ok {
		headUser, head = g.owner, req.Head
	}
	if g.openPull(headUser, head, req.Base) != nil {
		validationFailed(w, "PullRequest", "", "custom", "A pull request already exists for "+headUser+":"+head+".")
		return
	}
	g.lastNum++
	it := &item{
		Issue: Issue{Number: g.lastNum, Title: req.Title, Body: req.Body, State: "open"},
		id:    g.nextID(0), user: botUser, created: g.tick(),
		pull: &pullInfo{headUser: headUser, head: head, base: req.Base, draft: req.Draft},
	}
	it.updated = it.created
	g.items[it.Number] = it
	writeJSON(w, http.StatusCreated, g.pullJSON(it))
}

func (g *GitHub) getPull(w http.ResponseWriter, r *http.Request) {
	if it := g.item(w, r, true); it != nil {
		writeJSON(w, http.StatusOK, g.pullJSON(it))
	}
}

func (g *GitHub) editPull(w http.ResponseWriter, r *http.Request) {
	it := g.item(w, r, true)
	var req struct{ Title, Body, State, Base *string }
	if it == nil || !decode(w, r, &req) || !g.checkState(w, it, req.State) {
		return
	}
	setIf(&it.Title, req.Title)
	setIf(&it.Body, req.Body)
	setIf(&it.pull.base, req.Base)
	g.update(it, req.State)
	writeJSON(w, http.StatusOK, g.pullJSON(it))
}

func (g *GitHub) listReviews(w http.ResponseWriter, r *http.Request) {
	it := g.item(w, r, true)
	if it == nil {
		return
	}
	var out []any
	for _, rv := range it.reviews {
		out = append(out, map[string]any{
			"id": rv.v.ID, "user": userJSON(rv.v.User), "body": rv.v.Body, "state": rv.v.State,
			"submitted_at": rv.at, "commit_id": rv.v.CommitID,
			"html_url":         fmt.Sprintf("%s#pullrequestreview-%d", g.htmlURL(it), rv.v.ID),
			"pull_request_url": g.apiURL("pulls", it.Number),
		})
	}
	writeJSON(w, http.StatusOK, g.page(w, r, out))
}

func (g *GitHub) listReviewComments(w http.ResponseWriter, r *http.Request) {
	it := g.item(w, r, true)
	if it == nil {
		return
	}
	var out []any
	for _, c := range it.reviewComments {
		var review any
		if c.v.ReviewID != 0 {
			review = c.v.ReviewID
		}
		out = append(out, map[string]any{
			"id": c.v.ID, "pull_request_review_id": review, "user": userJSON(c.v.User), "body": c.v.Body,
			"path": c.v.Path, "line": c.v.Line, "original_line": c.v.Line, "side": "RIGHT",
			"commit_id": g.headSHA(it), "created_at": c.at, "updated_at": c.at,
			"url":              g.apiURL("pulls/comments", c.v.ID),
			"html_url":         fmt.Sprintf("%s#discussion_r%d", g.htmlURL(it), c.v.ID),
			"pull_request_url": g.apiURL("pulls", it.Number),
		})
	}
	writeJSON(w, http.StatusOK, g.page(w, r, out))
}

// listCheckRuns serves /commits/{ref}/check-runs, filtered by check_name
// and status. A ref with no check runs set has none, where GitHub would
// answer 422 for a commit it does not know.
func (g *GitHub) listCheckRuns(w http.ResponseWriter, r *http.Request) {
	ref, ok := strings.CutSuffix(r.PathValue("ref"), "/check-runs")
	if !ok {
		g.unknown = append(g.unknown, r.Method+" "+r.URL.RequestURI())
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	q := r.URL.Query()
	var out []any
	for _, c := range g.checks[ref] {
		if name := q.Get("check_name"); name != "" && c.v.Name != name ||
			q.Get("status") != "" && c.v.Status != q.Get("status") {
			continue
		}
		var conclusion, completed any
		if c.v.Status == "completed" {
			conclusion, completed = c.v.Conclusion, c.at
		}
		out = append(out, map[string]any{
			"id": c.v.ID, "name": c.v.Name, "head_sha": ref, "status": c.v.Status,
			"conclusion": conclusion, "started_at": c.at, "completed_at": completed,
			"output": map[string]any{
				"title": c.v.Title, "summary": c.v.Summary, "text": c.v.Text, "annotations_count": 0,
			},
			"url":         g.apiURL("check-runs", c.v.ID),
			"html_url":    fmt.Sprintf("https://github.com/%s/%s/runs/%d", g.owner, g.repo, c.v.ID),
			"details_url": fmt.Sprintf("https://github.com/%s/%s/runs/%d", g.owner, g.repo, c.v.ID),
		})
	}
	total := len(out)
	writeJSON(w, http.StatusOK, map[string]any{"total_count": total, "check_runs": g.page(w, r, out)})
}

// page returns the page of all that the page and per_page query parameters
// ask for (30 a page by default, at most 100) and sets the Link header.
func (g *GitHub) page(w http.ResponseWriter, r *http.Request, all []any) []any {
	q := r.URL.Query()
	per, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || per < 1 {
		per = 30
	}
	per = min(per, 100)
	p, err := strconv.Atoi(q.Get("page"))
	if err != nil || p < 1 {
		p = 1
	}
	last := max(1, (len(all)+per-1)/per)
	var links []string
	link := func(n int, rel string) {
		q.Set("page", strconv.Itoa(n))
		links = append(links, fmt.Sprintf(`<%s%s?%s>; rel="%s"`, g.URL, r.URL.Path, q.Encode(), rel))
	}
	if p > 1 {
		link(min(p-1, last), "prev")
	}
	if p < last {
		link(p+1, "next")
		link(last, "last")
	}
	if p > 1 {
		link(1, "first")
	}
	if links != nil {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	lo := min((p-1)*per, len(all))
	return append([]any{}, all[lo:min(lo+per, len(all))]...)
}

func labelsJSON(labels []string) []any {
	out := []any{}
	for _, l := range labels {
		out = append(out, map[string]any{"name": l})
	}
	return out
}

func (g *GitHub) issueJSON(it *item) map[string]any {
	m := map[string]any{
		"id": it.id, "number": it.Number, "title": it.Title, "body": it.Body,
		"state": it.State, "labels": labelsJSON(it.Labels), "user": userJSON(it.user),
		"comments": len(it.comments), "created_at": it.created, "updated_at": it.updated,
		"closed_at": timeOrNil(it.closed), "url": g.apiURL("issues", it.Number),
		"html_url":       g.htmlURL(it),
		"repository_url": fmt.Sprintf("%s/repos/%s/%s", g.URL, g.owner, g.repo),
	}
	if it.pull != nil {
		m["draft"] = it.pull.draft
		m["pull_request"] = map[string]any{"url": g.apiURL("pulls", it.Number), "html_url": g.htmlURL(it), "merged_at": nil}
	}
	return m
}

func (g *GitHub) commentJSON(it *item, c stamped[Comment]) map[string]any {
	return map[string]any{
		"id": c.v.ID, "body": c.v.Body, "user": userJSON(c.v.User), "created_at": c.at, "updated_at": c.at,
		"url":       g.apiURL("issues/comments", c.v.ID),
		"html_url":  fmt.Sprintf("%s#issuecomment-%d", g.htmlURL(it), c.v.ID),
		"issue_url": g.apiURL("issues", it.Number),
	}
}

func (g *GitHub) pullJSON(it *item) map[string]any {
	p := it.pull
	branch := func(user, ref string) map[string]any {
		label := user + ":" + ref
		return map[string]any{
			"label": label, "ref": ref, "sha": fakeSHA(label), "user": userJSON(user),
			"repo": map[string]any{"name": g.repo, "full_name": user + "/" + g.repo, "owner": userJSON(user)},
		}
	}
	return map[string]any{
		"id": it.id, "number": it.Number, "title": it.Title, "body": it.Body, "state": it.State,
		"draft": p.draft, "user": userJSON(it.user), "labels": labelsJSON(it.Labels),
		"created_at": it.created, "updated_at": it.updated, "closed_at": timeOrNil(it.closed),
		"merged": false, "merged_at": nil, "comments": len(it.comments), "review_comments": len(it.reviewComments),
		"url": g.apiURL("pulls", it.Number), "html_url": g.htmlURL(it), "issue_url": g.apiURL("issues", it.Number),
		"head": branch(p.headUser, p.head), "base": branch(g.owner, p.base),
	}
}

func (g *GitHub) headSHA(it *item) string {
	return fakeSHA(it.pull.headUser + ":" + it.pull.head)
}

func fakeSHA(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (g *GitHub) apiURL(kind string, id any) string {
	return fmt.Sprintf("%s/repos/%s/%s/%s/%v", g.URL, g.owner, g.repo, kind, id)
}

func (g *GitHub) htmlURL(it *item) string {
	kind := "issues"
	if it.pull != nil {
		kind = "pull"
	}
	return fmt.Sprintf("https://github.com/%s/%s/%s/%d", g.owner, g.repo, kind, it.Number)
}

func userJSON(login string) map[string]any {
	return map[string]any{"login": login, "type": "User"}
}

func timeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// decode reads the JSON request body into v, or answers 400 as GitHub does.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"message": msg, "documentation_url": docsURL, "status": strconv.Itoa(code)})
}

// validationFailed answers 422 with one error in GitHub's form.
func validationFailed(w http.ResponseWriter, resource, field, code, msg string) {
	e := map[string]any{"resource": resource, "code": code}
	if field != "" {
		e["field"] = field
	}
	if msg != "" {
		e["message"] = msg
	}
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message": "Validation Failed", "errors": []any{e}, "documentation_url": docsURL, "status": "422",
	})
}
