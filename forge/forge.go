// Package forge is where a plan's work comes from and where it goes on
// GitHub (DESIGN §16): open issues imported as tasks (ImportIssues),
// comments on an issue when its task is claimed, done or failed
// (IssueComments), and the pull request of a finished plan with its
// follow-through (pulls.go).
//
// The client is go-github's (github.com/google/go-github): typed requests
// and answers, pagination and GitHub's error bodies without writing them
// again. Client wraps it for one repository. Tests run it against
// forgetest, a fake of the REST API on 127.0.0.1.
//
// Choices, written here since the design leaves them open:
//   - A task imported from issue #N has the id gh-N (TaskID, IssueNumber).
//     A plan takes its issues from one repository, recorded with the plan
//     by its first import; importing from another is refused.
//   - An import is idempotent by issue number: an issue whose task the
//     plan has already (as the caller knows it: the CLI by its record of
//     the imports, never by a task's id alone) is left as the plan has it
//     (its status, title and blockers), and counted as already present.
//   - "depends on #N" or "blocked by #N" in an issue's body (one or several
//     numbers, comma-separated) make #N a blocker. A blocker that is closed
//     is done: no edge. A blocker that is open but lacks the label is
//     imported too, as is an open sub-issue of an imported issue (its
//     parent the imported issue); a reference to something that is no
//     issue of the repository is dropped and said.
//   - Issues are read, never written, by an import; comments are written
//     by a build, one per move, and a failure to write one is a notice,
//     never the end of the build.
package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v75/github"
)

// DefaultAPIURL is GitHub's REST API, used when GITHUB_API_URL is not set.
const DefaultAPIURL = "https://api.github.com"

// ErrNoToken: no GitHub token was found.
var ErrNoToken = errors.New("forge: no GitHub token: set GH_TOKEN or GITHUB_TOKEN, or log in with gh auth login")

// Repo is a GitHub repository.
type Repo struct{ Owner, Name string }

func (r Repo) String() string { return r.Owner + "/" + r.Name }

var repoPart = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// ParseRepo reads "OWNER/REPO" (a "github:" before it is allowed).
func ParseRepo(s string) (Repo, error) {
	owner, name, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(s), "github:"), "/")
	name = strings.TrimSuffix(name, ".git")
	if !ok || !repoPart.MatchString(owner) || !repoPart.MatchString(name) || name == "." || name == ".." {
		return Repo{}, fmt.Errorf("forge: %q is not a GitHub repository: want OWNER/REPO", s)
	}
	return Repo{Owner: owner, Name: name}, nil
}

// RepoFromRemote reads the repository of a git remote's URL on GitHub
// (https://github.com/o/r.git, git@github.com:o/r.git,
// ssh://git@github.com/o/r); host is GitHub's host, "" for github.com.
// ok is false for a URL of another host or a local path.
func RepoFromRemote(remote, host string) (Repo, bool) {
	if host == "" {
		host = "github.com"
	}
	path := ""
	switch {
	case strings.Contains(remote, "://"):
		u, err := url.Parse(remote)
		if err != nil || u.Hostname() != host {
			return Repo{}, false
		}
		path = u.Path
	default:
		// scp-like: [user@]host:owner/repo
		at, rest, ok := strings.Cut(remote, ":")
		if !ok {
			return Repo{}, false
		}
		if i := strings.LastIndex(at, "@"); i >= 0 {
			at = at[i+1:]
		}
		if at != host {
			return Repo{}, false
		}
		path = rest
	}
	r, err := ParseRepo(strings.Trim(path, "/"))
	return r, err == nil
}

// Token is the GitHub token: $GH_TOKEN, else $GITHUB_TOKEN, else what
// `gh auth token` prints (when gh is installed and logged in); ErrNoToken
// when there is none.
func Token(ctx context.Context, getenv func(string) string) (string, error) {
	for _, v := range []string{"GH_TOKEN", "GITHUB_TOKEN"} {
		if t := strings.TrimSpace(getenv(v)); t != "" {
			return t, nil
		}
	}
	gh, err := exec.LookPath("gh")
	if err != nil {
		return "", ErrNoToken
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, gh, "auth", "token").Output()
	if t := strings.TrimSpace(string(out)); err == nil && t != "" {
		return t, nil
	}
	return "", ErrNoToken
}

// Config says which GitHub a Client talks to.
type Config struct {
	Repo  Repo
	Token string
	// APIURL is the REST API's base ($GITHUB_API_URL); "" is
	// DefaultAPIURL.
	APIURL string
	// HTTPClient, if not nil, makes the requests.
	HTTPClient *http.Client
}

// Client is GitHub for one repository.
type Client struct {
	repo Repo
	gh   *github.Client
}

// New returns the client of cfg.
func New(cfg Config) (*Client, error) {
	if cfg.Token == "" {
		return nil, ErrNoToken
	}
	base := strings.TrimSpace(cfg.APIURL)
	if base == "" {
		base = DefaultAPIURL
	}
	u, err := url.Parse(strings.TrimSuffix(base, "/") + "/")
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("forge: GitHub API URL %q: want https://HOST[/PATH]", base)
	}
	gh := github.NewClient(cfg.HTTPClient).WithAuthToken(cfg.Token)
	gh.BaseURL = u
	return &Client{repo: cfg.Repo, gh: gh}, nil
}

// Repo is the client's repository.
func (c *Client) Repo() Repo { return c.repo }

// TaskID is the id of the task imported from issue n: gh-N.
func TaskID(n int) string { return "gh-" + strconv.Itoa(n) }

// IssueNumber is the issue a task id names (TaskID); ok false for any
// other id.
func IssueNumber(id string) (n int, ok bool) {
	s, found := strings.CutPrefix(id, "gh-")
	if !found || s == "" || s[0] == '0' {
		return 0, false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, false
	}
	return n, true
}

// apiErr words an error of a GitHub call: what was asked, and GitHub's
// status and message.
func (c *Client) apiErr(what string, err error) error {
	var gerr *github.ErrorResponse
	if errors.As(err, &gerr) && gerr.Response != nil {
		msg := gerr.Message
		if msg == "" {
			msg = http.StatusText(gerr.Response.StatusCode)
		}
		hint := ""
		switch gerr.Response.StatusCode {
		case http.StatusUnauthorized:
			hint = " (the token was refused: check GH_TOKEN or GITHUB_TOKEN)"
		case http.StatusNotFound:
			hint = " (no such repository, or the token cannot see it)"
		}
		return fmt.Errorf("forge: %s %s: GitHub answered %d: %s%s", what, c.repo, gerr.Response.StatusCode, msg, hint)
	}
	return fmt.Errorf("forge: %s %s: %w", what, c.repo, err)
}

// notFound reports whether err is GitHub's 404.
func notFound(err error) bool {
	var gerr *github.ErrorResponse
	return errors.As(err, &gerr) && gerr.Response != nil && gerr.Response.StatusCode == http.StatusNotFound
}
