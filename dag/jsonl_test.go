package dag_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

func TestReadJSONL(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  []dag.ImportTask
	}{
		{
			name:  "empty input",
			input: "",
			want:  nil,
		},
		{
			name: "ralph format with defaults, null and empty parent, forward blocker, blank lines",
			input: `{"id":"a","title":"First","description":"d","priority":1,"parent":null,"blocked_by":["b"],"status":"pending"}

{"id":"b","title":"Second","parent":""}
  {"id":"c","title":"Third","parent":"a","priority":0,"status":"in_progress","blocked_by":[]}
{"id":"d","title":"Fourth","status":"done"}
{"id":"e","title":"Fifth","status":"failed"}
{"id":"f","title":"Sixth","status":"blocked"}
{"id":"g","title":"Seventh","status":"closed","feature":"auth"}`,
			want: []dag.ImportTask{
				{Line: 1, ID: "a", Title: "First", Description: "d", Priority: 1, BlockedBy: []string{"b"}, Status: loop.StatusPending},
				{Line: 3, ID: "b", Title: "Second", Priority: dag.DefaultPriority, Status: loop.StatusPending},
				{Line: 4, ID: "c", Title: "Third", ParentID: "a", Priority: 0, BlockedBy: []string{}, Status: loop.StatusPending},
				{Line: 5, ID: "d", Title: "Fourth", Priority: dag.DefaultPriority, Status: loop.StatusDone},
				{Line: 6, ID: "e", Title: "Fifth", Priority: dag.DefaultPriority, Status: loop.StatusFailed},
				{Line: 7, ID: "f", Title: "Sixth", Priority: dag.DefaultPriority, Status: loop.StatusBlocked},
				{Line: 8, ID: "g", Title: "Seventh", Priority: dag.DefaultPriority, Status: loop.StatusDone, Feature: "auth"},
			},
		},
		{
			name: "checks: ralph format with and without who wrote them, a check_by alone dropped, a beads line",
			input: `{"id":"a","title":"A","check":"go test ./parser/...","check_by":"agent-1a2b3c4d"}
{"id":"b","title":"B","check":" make lint "}
{"id":"c","title":"C","check_by":"agent-1a2b3c4d"}
{"id":"bd-1","title":"D","issue_type":"task","check":"pytest -q tests/test_d.py"}`,
			want: []dag.ImportTask{
				{Line: 1, ID: "a", Title: "A", Priority: dag.DefaultPriority, Status: loop.StatusPending, Check: "go test ./parser/...", CheckBy: "agent-1a2b3c4d"},
				{Line: 2, ID: "b", Title: "B", Priority: dag.DefaultPriority, Status: loop.StatusPending, Check: "make lint"},
				{Line: 3, ID: "c", Title: "C", Priority: dag.DefaultPriority, Status: loop.StatusPending},
				{Line: 4, ID: "bd-1", Title: "D", Priority: dag.DefaultPriority, Status: loop.StatusPending, Check: "pytest -q tests/test_d.py"},
			},
		},
		{
			name: "beads export",
			input: `{"id":"bd-1","title":"Epic","description":"big","status":"open","priority":1,"issue_type":"epic","created_at":"2025-10-01T10:00:00Z","labels":["x"]}
{"id":"bd-1.1","title":"Child","status":"closed","priority":0,"issue_type":"task","design":"use a map","acceptance_criteria":"tests pass","dependencies":[{"issue_id":"bd-1.1","depends_on_id":"bd-1","type":"parent-child"},{"issue_id":"bd-1.1","depends_on_id":"bd-3","type":"blocks"},{"issue_id":"bd-1.1","depends_on_id":"bd-4","type":"related"}]}
{"id":"bd-3","title":"Blocker","status":"in_progress","issue_type":"bug","dependencies":[{"depends_on_id":"bd-4","type":"blocks"},{"issue_id":"bd-9","depends_on_id":"bd-3","type":"blocks"}]}
{"id":"bd-4","title":"Waiting","status":"blocked","priority":4,"issue_type":"task","notes":"ask Bob"}
{"id":"bd-5","title":"Gone","status":"tombstone","issue_type":"task"}
{"id":"bd-6","title":"Later","status":"deferred","issue_type":"task","dependencies":[{"depends_on_id":"bd-5","type":"blocks"},{"depends_on_id":"bd-4","type":"blocks"},{"depends_on_id":"bd-5","type":"parent-child"}]}`,
			want: []dag.ImportTask{
				{Line: 1, ID: "bd-1", Title: "Epic", Description: "big", Priority: 1, Status: loop.StatusPending},
				{Line: 2, ID: "bd-1.1", Title: "Child", Description: "## Design\n\nuse a map\n\n## Acceptance criteria\n\ntests pass",
					Priority: 0, ParentID: "bd-1", BlockedBy: []string{"bd-3"}, Status: loop.StatusDone},
				{Line: 3, ID: "bd-3", Title: "Blocker", Priority: dag.DefaultPriority, BlockedBy: []string{"bd-4"}, Status: loop.StatusPending},
				{Line: 4, ID: "bd-4", Title: "Waiting", Description: "## Notes\n\nask Bob", Priority: 4, Status: loop.StatusBlocked},
				{Line: 6, ID: "bd-6", Title: "Later", Priority: dag.DefaultPriority, BlockedBy: []string{"bd-4"}, Status: loop.StatusBlocked},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dag.ReadJSONL(strings.NewReader(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReadJSONL (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadJSONLErrors(t *testing.T) {
	ok := `{"id":"a","title":"fine"}` + "\n"
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"syntax", ok + `{"id":"b","title":}`, "line 2: invalid JSON at byte 19: invalid character '}' looking for beginning of value"},
		{"truncated", ok + ok + `{"id":"b"`, "line 3: invalid JSON: unexpected end of line"},
		{"not an object", `["a"]`, "line 1: not a JSON object (want one task a line)"},
		{"two values", `{"id":"a","title":"x"} {"id":"b","title":"y"}`, "line 1: more than one JSON value on the line"},
		{"unknown key", ok + `{"id":"b","title":"x","blocked-by":["a"]}`, `line 2: unknown field "blocked-by"`},
		{"wrong type", `{"id":"b","title":"x","priority":"high"}`, `line 1: field "priority": want int, got JSON string`},
		{"blocked_by not a list", `{"id":"b","title":"x","blocked_by":"a"}`, `line 1: field "blocked_by": want []string, got JSON string`},
		{"missing id", `{"title":"x"}`, "line 1: missing id"},
		{"missing title", `{"id":"b","title":"  "}`, "line 1: task b: missing title"},
		{"empty blocker", `{"id":"b","title":"x","blocked_by":[""]}`, "line 1: task b: empty id in blocked_by"},
		{"bad status", `{"id":"b","title":"x","status":"doing"}`, `line 1: unknown status "doing" (want pending, in_progress, done, failed or blocked)`},
		{"beads custom status", `{"id":"bd-1","title":"x","status":"review","issue_type":"task"}`,
			`line 1: beads issue bd-1: status "review" has no ralph equivalent (want open, in_progress, hooked, blocked, deferred, closed, pinned or tombstone; set it to one of them with bd update)`},
		{"beads two parents", `{"id":"bd-1","title":"x","dependencies":[{"depends_on_id":"p","type":"parent-child"},{"depends_on_id":"q","type":"parent-child"}]}`,
			"line 1: beads issue bd-1: two parents (p and q)"},
		{"beads wrong type", `{"id":"bd-1","title":"x","issue_type":"task","priority":"p1"}`,
			`line 1: beads issue: field "priority": want int, got JSON string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dag.ReadJSONL(strings.NewReader(tt.input))
			if err == nil {
				t.Fatalf("ReadJSONL = %v, want error %q", got, tt.want)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteJSONL(t *testing.T) {
	tasks := []dag.ImportTask{
		{ID: "a", Title: "First <b>&", Description: "line1\nline2", Priority: 1, Status: loop.StatusPending},
		{ID: "b", Title: "Second", Priority: 0, ParentID: "a", BlockedBy: []string{"c", "d"}, Status: loop.StatusDone, Feature: "auth"},
		{ID: "c", Title: "Third", Priority: 2, BlockedBy: []string{}, Status: loop.StatusPending, Check: `go test -run "TestX" ./...`, CheckBy: "agent-1a2b3c4d"},
	}
	var buf bytes.Buffer
	if err := dag.WriteJSONL(&buf, tasks); err != nil {
		t.Fatal(err)
	}
	want := `{"id":"a","title":"First <b>&","description":"line1\nline2","priority":1,"parent":null,"blocked_by":[],"status":"pending"}
{"id":"b","title":"Second","description":"","priority":0,"parent":"a","blocked_by":["c","d"],"status":"done","feature":"auth"}
{"id":"c","title":"Third","description":"","priority":2,"parent":null,"blocked_by":[],"status":"pending","check":"go test -run \"TestX\" ./...","check_by":"agent-1a2b3c4d"}
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Fatalf("WriteJSONL (-want +got):\n%s", diff)
	}

	back, err := dag.ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for i := range back {
		back[i].Line = 0
	}
	tasks[0].BlockedBy = []string{} // written as [], read back as an empty list
	if diff := cmp.Diff(tasks, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestReadJSONLLongLine(t *testing.T) {
	desc := strings.Repeat("x", 1<<20) // longer than any fixed scanner buffer
	input := fmt.Sprintf(`{"id":"a","title":"t","description":%q}`, desc)
	got, err := dag.ReadJSONL(strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Description != desc {
		t.Fatalf("long description not read back intact (got %d tasks)", len(got))
	}
}

func BenchmarkReadJSONL(b *testing.B) {
	var buf bytes.Buffer
	var tasks []dag.ImportTask
	for i := range 1000 {
		t := dag.ImportTask{ID: fmt.Sprintf("t%d", i), Title: "A task", Description: "Some words here.", Priority: i % 4, Status: loop.StatusPending}
		if i > 0 && i%3 == 0 {
			t.BlockedBy = []string{fmt.Sprintf("t%d", i-1)}
		}
		tasks = append(tasks, t)
	}
	if err := dag.WriteJSONL(&buf, tasks); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := dag.ReadJSONL(bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
	}
}

func ExampleReadJSONL() {
	in := `{"id":"schema","title":"Set up the schema","priority":1}
{"id":"login","title":"Login form","parent":null,"blocked_by":["schema"]}
{"id":"bd-7","title":"From beads","status":"closed","issue_type":"task","dependencies":[{"depends_on_id":"schema","type":"blocks"}]}
`
	tasks, err := dag.ReadJSONL(strings.NewReader(in))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range tasks {
		fmt.Printf("line %d: %s %q priority=%d status=%s blocked_by=%v\n", t.Line, t.ID, t.Title, t.Priority, t.Status, t.BlockedBy)
	}
	if err := dag.WriteJSONL(os.Stdout, tasks[1:2]); err != nil {
		fmt.Println(err)
	}
	// Output:
	// line 1: schema "Set up the schema" priority=1 status=pending blocked_by=[]
	// line 2: login "Login form" priority=2 status=pending blocked_by=[schema]
	// line 3: bd-7 "From beads" priority=2 status=done blocked_by=[schema]
	// {"id":"login","title":"Login form","description":"","priority":2,"parent":null,"blocked_by":["schema"],"status":"pending"}
}

// FuzzReadJSONL: ReadJSONL never panics, and whatever it accepts survives
// WriteJSONL and a second ReadJSONL unchanged.
func FuzzReadJSONL(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","title":"t","priority":1,"parent":null,"blocked_by":["b"],"status":"done"}`,
		`{"id":"a","title":"t","feature":"f"}` + "\n\n" + `{"id":"b","title":"u","parent":"a"}`,
		`{"id":"bd-1","title":"x","status":"closed","issue_type":"task","dependencies":[{"depends_on_id":"p","type":"parent-child"}]}`,
		`{"id":"bd-2","title":"x","status":"tombstone","issue_type":"task"}`,
		`{"id":"a","title":"t"} {"id":"b"}`,
		`{"id":"a","title":`,
		"not json",
	} {
		f.Add(s)
	}
	norm := func(ts []dag.ImportTask) []dag.ImportTask {
		for i := range ts {
			ts[i].Line = 0
			if ts[i].BlockedBy == nil {
				ts[i].BlockedBy = []string{}
			}
		}
		return ts
	}
	f.Fuzz(func(t *testing.T, in string) {
		tasks, err := dag.ReadJSONL(strings.NewReader(in))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := dag.WriteJSONL(&buf, tasks); err != nil {
			t.Fatal(err)
		}
		back, err := dag.ReadJSONL(&buf)
		if err != nil {
			t.Fatalf("re-reading what WriteJSONL wrote: %v\n%s", err, buf.String())
		}
		if diff := cmp.Diff(norm(tasks), norm(back)); diff != "" {
			t.Errorf("round trip (-first +second):\n%s", diff)
		}
	})
}
