package forge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/forge"
	"github.com/ralph-dev/ralph/forge/forgetest"
)

func newClient(t *testing.T, g *forgetest.GitHub) *forge.Client {
	t.Helper()
	c, err := forge.New(forge.Config{Repo: forge.Repo{Owner: "octo", Name: "hello"}, Token: "tok", APIURL: g.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestFollowChecks: checks that still run past Wait end the follow at
// its bound; a commit with no check runs at all counts as passing once
// the grace (bounded by Wait) is over; nothing is built either way.
func TestFollowChecks(t *testing.T) {
	for _, tt := range []struct {
		name string
		runs []forgetest.CheckRun
		want error
	}{
		{"still running", []forgetest.CheckRun{{Name: "ci", Status: "in_progress"}}, forge.ErrFollowBound},
		{"no checks", nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := forgetest.New(t, "octo", "hello", "tok")
			g.SetCheckRuns("abc", tt.runs...)
			c := newClient(t, g)
			pull, created, err := c.OpenPull(t.Context(), "feature", "main", "Title", "Body")
			if err != nil || !created {
				t.Fatalf("OpenPull: %v, created %v", err, created)
			}
			var said []string
			err = c.Follow(t.Context(), forge.FollowParams{
				Pull:   pull,
				Head:   func(context.Context) (string, error) { return "abc", nil },
				Has:    func(context.Context, string) (bool, error) { return false, nil },
				Add:    func(context.Context, []forge.Finding) error { t.Error("added tasks"); return nil },
				Build:  func(context.Context) error { t.Error("built"); return nil },
				Rounds: 3, Wait: 200 * time.Millisecond, Poll: 20 * time.Millisecond,
				Say: func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) },
			})
			if !errors.Is(err, tt.want) {
				t.Errorf("Follow: %v, want %v", err, tt.want)
			}
			if tt.want == nil && (len(said) != 1 || !strings.Contains(said[0], "0 check runs passed")) {
				t.Errorf("said %q", said)
			}
		})
	}
}

// TestImportIssuesPages: more open issues than a page holds are all
// read, pull requests left out.
func TestImportIssuesPages(t *testing.T) {
	g := forgetest.New(t, "octo", "hello", "tok")
	for i := range 130 {
		g.AddIssue(forgetest.Issue{Title: fmt.Sprintf("Issue %d", i+1), Labels: []string{"ralph"}})
	}
	im, err := newClient(t, g).ImportIssues(t.Context(), "ralph", func(string) (bool, error) { return false, nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Tasks) != 130 || im.Tasks[0].ID != "gh-1" || im.Tasks[129].ID != "gh-130" {
		t.Errorf("%d tasks, first %s", len(im.Tasks), im.Tasks[0].ID)
	}
}
