package forge_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/forge"
	"github.com/ralph-dev/ralph/loop"
)

func TestParseRepo(t *testing.T) {
	for in, want := range map[string]forge.Repo{
		"github:octo/hello": {"octo", "hello"},
		"octo/hello.git":    {"octo", "hello"},
		" o-1/r_2.x ":       {"o-1", "r_2.x"},
	} {
		got, err := forge.ParseRepo(in)
		if err != nil || got != want {
			t.Errorf("ParseRepo(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "octo", "github:", "octo/", "/hello", "octo/hello/x", "octo/..", "a b/c", "github:o/r;rm"} {
		if _, err := forge.ParseRepo(bad); err == nil {
			t.Errorf("ParseRepo(%q) took it", bad)
		}
	}
}

func TestRepoFromRemote(t *testing.T) {
	for _, tt := range []struct {
		url, host string
		want      forge.Repo
		ok        bool
	}{
		{"https://github.com/octo/hello.git", "", forge.Repo{"octo", "hello"}, true},
		{"https://x-access-token:abc@github.com/octo/hello", "", forge.Repo{"octo", "hello"}, true},
		{"git@github.com:octo/hello.git", "", forge.Repo{"octo", "hello"}, true},
		{"ssh://git@github.com/octo/hello.git", "", forge.Repo{"octo", "hello"}, true},
		{"git@ghe.example.com:octo/hello.git", "ghe.example.com", forge.Repo{"octo", "hello"}, true},
		{"https://gitlab.com/octo/hello.git", "", forge.Repo{}, false},
		{"/srv/git/hello.git", "", forge.Repo{}, false},
		{"../hello.git", "", forge.Repo{}, false},
		{"https://github.com/octo", "", forge.Repo{}, false},
	} {
		got, ok := forge.RepoFromRemote(tt.url, tt.host)
		if ok != tt.ok || got != tt.want {
			t.Errorf("RepoFromRemote(%q, %q) = %v, %v; want %v, %v", tt.url, tt.host, got, ok, tt.want, tt.ok)
		}
	}
}

func TestIssueNumber(t *testing.T) {
	for id, want := range map[string]int{"gh-1": 1, "gh-42": 42, "gh-0": 0, "gh-01": 0, "gh-": 0, "gh-x": 0, "t-1": 0, "gh-1a": 0, "gh--1": 0} {
		n, ok := forge.IssueNumber(id)
		if n != want || ok != (want > 0) {
			t.Errorf("IssueNumber(%q) = %d, %v; want %d", id, n, ok, want)
		}
		if ok && forge.TaskID(n) != id {
			t.Errorf("TaskID(%d) = %q, want %q", n, forge.TaskID(n), id)
		}
	}
}

func TestDependsOn(t *testing.T) {
	for body, want := range map[string][]int{
		"Depends on #3": {3},
		"depends on #3, #4 and #5\nblocked by: #7":      {3, 4, 5, 7},
		"Blocked by #2. Depends on #2.":                 {2},
		"See #9; this depends on nothing":               nil,
		"depends on issue 4":                            nil,
		"Depends on #12 (the parser)\n- [ ] depends on": {12},
	} {
		if diff := cmp.Diff(want, forge.DependsOn(body)); diff != "" {
			t.Errorf("DependsOn(%q) (-want +got):\n%s", body, diff)
		}
	}
}

// TestPullBody: the body lists the tasks with their status, verdict,
// check and cost, the cost per verified task, and closes the issues the
// plan imported whose tasks are done — not a gh-N task an agent added.
func TestPullBody(t *testing.T) {
	tasks := []loop.Task{
		{ID: "gh-3", Title: "Add | pipes", Status: loop.StatusDone, VerificationStatus: "pass", Check: "go test ./..."},
		{ID: "t-1", Title: "Tidy", Status: loop.StatusDone},
		{ID: "gh-4", Title: "Not yet", Status: loop.StatusPending},
		{ID: "gh-9", Title: "An agent's", Status: loop.StatusDone},
	}
	receipts := []loop.Receipt{{TaskID: "gh-3", CostUSD: 0.5}, {TaskID: "gh-3", CostUSD: 0.25}, {TaskID: "t-1", CostUSD: 0.25}, {TaskID: "other", CostUSD: 9}}
	imported := func(n int) bool { return n == 3 || n == 4 }
	got := forge.PullBody("the plan", tasks, receipts, imported)
	want := `ralph's work on the plan: 3 of 4 tasks done.

| task | title | status | verdict | check | cost |
|---|---|---|---|---|---|
| gh-3 | Add \| pipes | done | pass | ` + "`go test ./...`" + ` | $0.7500 |
| t-1 | Tidy | done | — | — | $0.2500 |
| gh-4 | Not yet | pending | — | — | $0.0000 |
| gh-9 | An agent's | done | — | — | $0.0000 |

Cost: $1.0000 over 3 agent sessions; $1.0000 per verified task (1 verified).

Closes #3
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	if strings.Contains(got, "#9") {
		t.Error("the body closes #9, which the plan did not import")
	}
}
