package dag

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/ralph-dev/ralph/loop"
)

// beads1Plan is what testdata/beads1/bd-export.jsonl and the same plan's
// bd list --json maps to (README, "Moving from beads"): statuses open and
// hooked → pending, blocked → blocked, closed → done, pinned → no task;
// priority kept; blocks and waits-for → blocked_by; parent-child → parent;
// conditional-blocks → blocked, said in the description; design,
// acceptance criteria and notes appended to the description.
var beads1Plan = []ImportTask{
	{ID: "rich-7", Title: "Being worked", Priority: 0, Status: loop.StatusPending},
	{ID: "rich-3", Title: "Epic: accounts", Priority: 1, Status: loop.StatusPending},
	{ID: "rich-1", Title: "Set up the schema", Priority: 1, Status: loop.StatusPending, BlockedBy: []string{"rich-2"},
		Description: "Tables for users and sessions\n\n## Design\n\nTwo tables, one index\n\n## Acceptance criteria\n\nmigrations run twice without error\n\n## Notes\n\nsee the old schema"},
	{ID: "rich-3.1", Title: "Password reset", Priority: 2, Status: loop.StatusPending, ParentID: "rich-3"},
	{ID: "rich-9", Title: "Done already", Priority: 2, Status: loop.StatusDone},
	{ID: "rich-8", Title: "Waiting on vendor", Priority: 2, Status: loop.StatusBlocked},
	{ID: "rich-5", Title: "Roll back if the schema fails", Priority: 2, Status: loop.StatusBlocked,
		Description: "(beads: to run only if rich-1 fails)"},
	{ID: "rich-2", Title: "Login form", Description: "The form", Priority: 2, Status: loop.StatusPending, BlockedBy: []string{"rich-9"}},
	{ID: "rich-4", Title: "Fan-in after reset", Priority: 3, Status: loop.StatusPending, BlockedBy: []string{"rich-3.1"}},
}

func readFixture(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "beads1", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestBeads1Formats reads what beads 1.x writes (testdata/beads1, from
// its repository and from bd built from it): bd export's lines, bd list
// --json's array and its envelope give the same plan, every mapped field
// as the README says, the pinned issue dropped; and the plan imports.
func TestBeads1Formats(t *testing.T) {
	ignoreLine := cmpopts.IgnoreFields(ImportTask{}, "Line")
	exported, err := ReadJSONL(readFixture(t, "bd-export.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(beads1Plan, exported, ignoreLine, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("bd export (-want +got):\n%s", diff)
	}
	for _, name := range []string{"bd-list-all.json", "bd-list-all-envelope.json"} {
		doc, err := ReadBeadsJSON(readFixture(t, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []ImportTask
		for task, err := range doc.Tasks() {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, task)
		}
		if diff := cmp.Diff(beads1Plan, got, ignoreLine, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff([]string{"rich-6"}, doc.Dropped()); diff != "" {
			t.Errorf("%s: dropped (-want +got):\n%s", name, diff)
		}
	}

	s := newTestStore(t, time.Now)
	src, err := NewJSONLSource(readFixture(t, "bd-export.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.ImportFrom(t.Context(), ImportParams{Source: src}); err != nil || n != len(beads1Plan) {
		t.Fatalf("ImportFrom = %d, %v; want %d tasks", n, err, len(beads1Plan))
	}
	if diff := cmp.Diff([]string{"rich-6"}, src.Dropped()); diff != "" {
		t.Errorf("bd export: dropped (-want +got):\n%s", diff)
	}
	ready, err := s.Ready(t.Context(), loop.Scope{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// rich-2's blocker is done; rich-1 waits for rich-2, rich-4 for
	// rich-3.1, rich-3 for its child; rich-5 and rich-8 are blocked.
	var ids []string
	for _, r := range ready {
		ids = append(ids, r.ID)
	}
	if diff := cmp.Diff([]string{"rich-7", "rich-3.1", "rich-2"}, ids, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("ready after the import (-want +got):\n%s", diff)
	}
	checkCounts(t, s)
}

// TestBeads1Lines: lines beads 1.x writes that hold no task are passed
// over (a memory), lines of real exports from beads' repository import,
// and bd show --json's dependencies (the issues depended on) map as
// edges do.
func TestBeads1Lines(t *testing.T) {
	got, err := ReadJSONL(readFixture(t, "bd-export-memories.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Errorf("bd export --include-memories: %d tasks; want the 5 issues, the memory passed over", len(got))
	}
	for _, name := range []string{"beads-repo-issues.jsonl", "beads-repo-import.jsonl"} {
		got, err := ReadJSONL(readFixture(t, name))
		if err != nil || len(got) != 1 || got[0].ID == "" || got[0].Title == "" {
			t.Errorf("%s: %+v, %v; want its one issue", name, got, err)
		}
	}
	doc, err := ReadBeadsJSON(readFixture(t, "bd-show.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []ImportTask{{ID: "rich-2", Title: "Login form", Description: "The form", Priority: 2, Status: loop.StatusPending, BlockedBy: []string{"rich-9"}}}
	var shown []ImportTask
	for task := range doc.Tasks() {
		shown = append(shown, task)
	}
	if diff := cmp.Diff(want, shown); diff != "" {
		t.Errorf("bd show --json (-want +got):\n%s", diff)
	}
}
