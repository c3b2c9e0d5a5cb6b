package loop_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
)

func TestWritePeek(t *testing.T) {
	now := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		p    loop.PeekParams
		want string
	}{
		{
			name: "nothing claimable prints nothing even with active tasks",
			p: loop.PeekParams{
				Active: []loop.Task{{ID: "a", Title: "busy", ClaimedBy: "agent-1", ClaimedAt: now.Add(-time.Minute)}},
				Now:    now,
			},
			want: "",
		},
		{
			name: "minimal task",
			p: loop.PeekParams{
				Claimable: []loop.Task{{ID: "t1", Title: "Fix login", Priority: 2}},
				Now:       now,
			},
			want: "# Claimable tasks (1)\n\n## t1: Fix login\n\n- priority: 2\n",
		},
		{
			name: "full task with summaries and active",
			p: loop.PeekParams{
				Claimable: []loop.Task{
					{
						ID: "t2", Title: "Add\nlogout  button", Priority: 1, ParentID: "p1",
						Feature: "auth", RetryCount: 1, BlockedBy: []string{"b1", "b2"},
						Description: "  Put it in the header.\n\nUse the icon.\n",
					},
					{ID: "t3", Title: "Docs", Priority: 3},
				},
				Active: []loop.Task{
					{ID: "a1", Title: "Schema", ClaimedBy: "agent-1a2b3c4d", ClaimedAt: now.Add(-90*time.Second - 300*time.Millisecond)},
					{ID: "a2", Title: "Clock skew", ClaimedBy: "", ClaimedAt: now.Add(time.Minute)},
					{ID: "a3", Title: "No claim time", ClaimedBy: "agent-x"},
				},
				Now:              now,
				BlockerSummaries: map[string]string{"b1": "login form\nhas a slot"},
			},
			want: `# Claimable tasks (2)

## t2: Add logout button

- priority: 1
- parent: p1
- feature: auth
- retries so far: 1
- blocked by (all done): b1, b2
  - b1: login form has a slot

Put it in the header.

Use the icon.

## t3: Docs

- priority: 3

# Active tasks (3)

- a1: Schema (claimed by agent-1a2b3c4d, 1m30s ago)
- a2: Clock skew (claimed by unknown agent, 0s ago)
- a3: No claim time (claimed by agent-x)
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := loop.WritePeek(&b, tt.p); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, b.String()); diff != "" {
				t.Errorf("WritePeek (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFormatPeekMatchesWritePeek(t *testing.T) {
	now := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	claimable := []loop.Task{{ID: "t1", Title: "One", Priority: 2, BlockedBy: []string{"b"}}}
	active := []loop.Task{{ID: "a", Title: "Two", ClaimedBy: "agent-1", ClaimedAt: now.Add(-time.Hour)}}
	var got, want strings.Builder
	if err := loop.FormatPeek(&got, claimable, active, now); err != nil {
		t.Fatal(err)
	}
	if err := loop.WritePeek(&want, loop.PeekParams{Claimable: claimable, Active: active, Now: now}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.String(), got.String()); diff != "" {
		t.Errorf("FormatPeek (-want +got):\n%s", diff)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestFormatPeekReportsWriteError(t *testing.T) {
	err := loop.FormatPeek(failWriter{}, []loop.Task{{ID: "t1", Title: "One"}}, nil, time.Now())
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("FormatPeek error = %v, want the writer's error", err)
	}
}

func BenchmarkFormatPeek(b *testing.B) {
	now := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	var claimable []loop.Task
	for i := range 10 {
		claimable = append(claimable, loop.Task{
			ID: "t" + string(rune('a'+i)), Title: "A task title", Priority: i % 4,
			Description: strings.Repeat("Some words. ", 40), BlockedBy: []string{"x", "y"},
		})
	}
	for b.Loop() {
		if err := loop.FormatPeek(io.Discard, claimable, nil, now); err != nil {
			b.Fatal(err)
		}
	}
}

func ExampleFormatPeek() {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	claimable := []loop.Task{
		{ID: "t-2", Title: "Login form", Priority: 1, BlockedBy: []string{"t-1"}, Description: "Email and password."},
	}
	active := []loop.Task{
		{ID: "t-3", Title: "Session cookie", ClaimedBy: "agent-1a2b3c4d", ClaimedAt: now.Add(-4 * time.Minute)},
	}
	if err := loop.FormatPeek(os.Stdout, claimable, active, now); err != nil {
		fmt.Println(err)
	}
	// Output:
	// # Claimable tasks (1)
	//
	// ## t-2: Login form
	//
	// - priority: 1
	// - blocked by (all done): t-1
	//
	// Email and password.
	//
	// # Active tasks (1)
	//
	// - t-3: Session cookie (claimed by agent-1a2b3c4d, 4m0s ago)
}
