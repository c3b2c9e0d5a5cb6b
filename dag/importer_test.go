package dag_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// jsonl writes tasks as ralph's JSON Lines.
func jsonl(t testing.TB, tasks []dag.ImportTask) string {
	t.Helper()
	var b strings.Builder
	if err := dag.WriteJSONL(&b, tasks); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func importJSONL(t testing.TB, s *dag.Store, input string, dryRun bool, added func(dag.ImportTask) error) (int, error) {
	t.Helper()
	src, err := dag.NewJSONLSource(strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	return s.ImportFrom(context.Background(), dag.ImportParams{Source: src, DryRun: dryRun, Added: added})
}

// TestImportStreamBadLine: a bad line anywhere — the last of many, after
// lines whose tasks the second pass would already have written — leaves
// the database exactly as it was, and the error names the line.
func TestImportStreamBadLine(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		s := o.open(t, newClock(testStart).Now)
		mustAdd(t, s, dag.AddParams{ID: "old"})
		tasks := dag.Fixture(3000)
		good := jsonl(t, tasks)
		before := dag.Dump(t, s)
		for _, tt := range []struct {
			name, input, want string
			is                error
		}{
			{"bad JSON on the last line", good + `{"id":"x","title":` + "\n", "line 3001: invalid JSON", nil},
			{"unknown blocker on the last line", good + `{"id":"x","title":"x","blocked_by":["nope"]}`, "line 3001: task x: blocker nope does not exist", loop.ErrNotFound},
			{"an existing id on the last line", good + `{"id":"old","title":"x"}`, "line 3001: task old", dag.ErrDuplicateID},
			{"a repeated id on the last line", good + `{"id":"t-7","title":"x"}`, "line 3001: task t-7: dag: task id already exists (also line 7: task t-7)", dag.ErrDuplicateID},
			{"a cycle closed by the last line", good + `{"id":"t-1","title":"x"}`, "already exists", dag.ErrDuplicateID},
			{"blank title on the last line", good + `{"id":"x","title":" "}`, "line 3001: task x: missing title", nil},
		} {
			t.Run(tt.name, func(t *testing.T) {
				_, err := importJSONL(t, s, tt.input, false, nil)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("import = %v, want an error with %q", err, tt.want)
				}
				if tt.is != nil && !errors.Is(err, tt.is) {
					t.Errorf("import = %v, want %v", err, tt.is)
				}
				if diff := cmp.Diff(before, dag.Dump(t, s)); diff != "" {
					t.Errorf("a failed import changed the database (-before +after):\n%s", diff)
				}
			})
		}
		// And the same file without the bad line imports, counters right.
		if n, err := importJSONL(t, s, good, false, nil); err != nil || n != 3000 {
			t.Fatalf("import = %d, %v", n, err)
		}
		dag.CheckCounts(t, s)
	})
}

// TestImportStreamReferences: forward references to parents and blockers
// further down the file resolve; a cycle anywhere in the file, through
// parents and blockers, is refused; parents are inserted before their
// children; a dry run checks the same and changes nothing.
func TestImportStreamReferences(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		input := `{"id":"a","title":"A","blocked_by":["z"],"parent":"epic"}
{"id":"b","title":"B","blocked_by":["a","z","a"]}

{"id":"c","title":"C","parent":"sub"}
{"id":"sub","title":"Sub","parent":"epic","status":"done"}
{"id":"epic","title":"Epic"}
{"id":"z","title":"Z","status":"done"}
`
		s := o.open(t, newClock(testStart).Now)
		before := dag.Dump(t, s)
		var added []string
		n, err := importJSONL(t, s, input, true, func(task dag.ImportTask) error {
			added = append(added, fmt.Sprintf("%s<%s>%v@%d", task.ID, task.ParentID, task.BlockedBy, task.Line))
			return nil
		})
		if err != nil || n != 6 {
			t.Fatalf("dry run = %d, %v", n, err)
		}
		want := []string{"epic<>[]@6", "a<epic>[z]@1", "b<>[a z]@2", "sub<epic>[]@5", "c<sub>[]@4", "z<>[]@7"}
		if diff := cmp.Diff(want, added); diff != "" {
			t.Errorf("dry run's tasks, in insertion order (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(before, dag.Dump(t, s)); diff != "" {
			t.Errorf("a dry run changed the database (-before +after):\n%s", diff)
		}
		if _, err := importJSONL(t, s, input, false, nil); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, task := range mustList(t, s) {
			ids = append(ids, task.ID)
		}
		if diff := cmp.Diff([]string{"epic", "a", "b", "sub", "c", "z"}, ids); diff != "" {
			t.Errorf("insertion order (-want +got):\n%s", diff)
		}
		// c first: its chain is three (c, then sub, then epic), a's two.
		if diff := cmp.Diff([]string{"c", "a"}, readyIDs(t, s)); diff != "" {
			t.Errorf("ready (-want +got):\n%s", diff)
		}
		dag.CheckCounts(t, s)

		mustAdd(t, s, dag.AddParams{ID: "w", BlockedBy: []string{"epic"}})
		for _, tt := range []struct{ name, input, want string }{
			{"blockers", `{"id":"p","title":"p","blocked_by":["r"]}
{"id":"q","title":"q","blocked_by":["p"]}
{"id":"r","title":"r","blocked_by":["q"]}`, "line 2: task q: waits for p, which waits for it"},
			{"a child blocked by its parent further down", `{"id":"k","title":"k","parent":"m","blocked_by":["m"]}
{"id":"m","title":"m"}`, "line 2: task m: waits for k, which waits for it"},
			{"parents", `{"id":"p","title":"p","parent":"q"}
{"id":"q","title":"q","parent":"p"}`, "waits for"},
			{"through existing tasks", `{"id":"x","title":"x","parent":"epic","blocked_by":["w"]}`, "line 1: task x: blocker w waits for it through existing tasks"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				before := dag.Dump(t, s)
				_, err := importJSONL(t, s, tt.input, false, nil)
				if !errors.Is(err, dag.ErrCycle) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("import = %v, want a cycle error with %q", err, tt.want)
				}
				if diff := cmp.Diff(before, dag.Dump(t, s)); diff != "" {
					t.Errorf("a refused import changed the database (-before +after):\n%s", diff)
				}
			})
		}
	})
}

// TestImportStreamTombstones: references to beads issues deleted further
// down the file are dropped, as dag.ReadJSONL drops them.
func TestImportStreamTombstones(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		input := `{"id":"bd-1","title":"One","issue_type":"task","dependencies":[{"depends_on_id":"bd-9","type":"blocks"},{"depends_on_id":"bd-9","type":"parent-child"},{"depends_on_id":"bd-2","type":"blocks"}]}
{"id":"bd-2","title":"Two","issue_type":"task"}
{"id":"bd-9","title":"Gone","status":"tombstone","issue_type":"task"}
`
		s := o.open(t, newClock(testStart).Now)
		if n, err := importJSONL(t, s, input, false, nil); err != nil || n != 2 {
			t.Fatalf("import = %d, %v", n, err)
		}
		task, err := s.Get(context.Background(), "bd-1")
		if err != nil {
			t.Fatal(err)
		}
		if task.ParentID != "" || !cmp.Equal(task.BlockedBy, []string{"bd-2"}) {
			t.Errorf("bd-1: parent %q, blockers %v; want none and [bd-2]", task.ParentID, task.BlockedBy)
		}
		dag.CheckCounts(t, s)
	})
}

// changing is a source whose second pass differs from its first.
type changing struct{ pass int }

func (c *changing) Tasks() iter.Seq2[dag.ImportTask, error] {
	c.pass++
	tasks := dag.TaskSlice{{ID: "a", Title: "a"}, {ID: "b", Title: "b"}}
	if c.pass > 1 {
		tasks[1].ID = "c"
	}
	return tasks.Tasks()
}

func (c *changing) Dropped() []string { return nil }

// TestImportStreamChangedInput: a source that reads differently the second
// time is refused, and nothing is written.
func TestImportStreamChangedInput(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		s := o.open(t, newClock(testStart).Now)
		before := dag.Dump(t, s)
		_, err := s.ImportFrom(context.Background(), dag.ImportParams{Source: &changing{}})
		if err == nil || !strings.Contains(err.Error(), "changed") {
			t.Errorf("import of a changing source = %v", err)
		}
		if diff := cmp.Diff(before, dag.Dump(t, s)); diff != "" {
			t.Errorf("changed the database (-before +after):\n%s", diff)
		}
	})
}

// TestImportStreamDuplicateInStatement: a batch's id already in the
// database is found where it is, though the rows before it in the same
// multi-row statement were written (OR FAIL), and the write is undone;
// the store works normally after a bulk import fails (foreign keys and
// CHECK constraints are back on: on SQLite's writer, see also
// TestBulkImportFailureRestoresWriter).
func TestImportStreamDuplicateInStatement(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		s := o.open(t, newClock(testStart).Now)
		mustAdd(t, s, dag.AddParams{ID: "x"})
		before := dag.Dump(t, s)
		batch := dag.Fixture(100)
		batch[69].ID = "x"
		for i := range batch {
			if batch[i].ParentID == "t-70" {
				batch[i].ParentID = ""
			}
			batch[i].BlockedBy = slicesWithout(batch[i].BlockedBy, "t-70")
		}
		_, err := s.Import(context.Background(), batch)
		if !errors.Is(err, dag.ErrDuplicateID) || !strings.Contains(err.Error(), "line 70: task x") {
			t.Errorf("import = %v, want the duplicate at line 70", err)
		}
		if diff := cmp.Diff(before, dag.Dump(t, s)); diff != "" {
			t.Errorf("changed the database (-before +after):\n%s", diff)
		}
		if _, err := s.Add(context.Background(), dag.AddParams{Title: "t", ParentID: "nope"}); !errors.Is(err, loop.ErrNotFound) {
			t.Errorf("Add with a missing parent after a failed import: %v", err)
		}
	})
}

func slicesWithout(ss []string, x string) []string {
	var out []string
	for _, s := range ss {
		if s != x {
			out = append(out, s)
		}
	}
	return out
}

// oldFindCycle is the search of the in-memory import, over adjacency
// lists built as it built them: the reference for importer.findCycle.
func oldFindCycle(batch []dag.ImportTask) (int, int) {
	byID := map[string]int{}
	for i, p := range batch {
		byID[p.ID] = i
	}
	adj := make([][]int32, len(batch))
	for i, p := range batch {
		if j, ok := byID[p.ParentID]; ok && p.ParentID != "" {
			adj[j] = append(adj[j], int32(i))
		}
		seen := map[string]bool{}
		for _, b := range p.BlockedBy {
			if seen[b] {
				continue
			}
			seen[b] = true
			if j, ok := byID[b]; ok {
				adj[i] = append(adj[i], int32(j))
			}
		}
	}
	color := make([]byte, len(adj))
	type frame struct{ node, next int32 }
	var stack []frame
	for root := range adj {
		if color[root] != 0 {
			continue
		}
		color[root] = 1
		stack = append(stack[:0], frame{int32(root), 0})
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if int(f.next) == len(adj[f.node]) {
				color[f.node] = 2
				stack = stack[:len(stack)-1]
				continue
			}
			j := adj[f.node][f.next]
			f.next++
			switch color[j] {
			case 1:
				return int(f.node), int(j)
			case 0:
				color[j] = 1
				stack = append(stack, frame{j, 0})
			}
		}
	}
	return -1, -1
}

// TestImportCycleAsBefore: on random batches, with and without cycles,
// the streamed import refuses exactly those the in-memory one refused, and
// names the same edge.
func TestImportCycleAsBefore(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		r := rand.New(rand.NewPCG(3, 4))
		s := o.open(t, nil)
		cycles := 0
		for round := range 300 {
			n := 2 + r.IntN(12)
			batch := make([]dag.ImportTask, n)
			for i := range batch {
				batch[i] = dag.ImportTask{Line: i + 1, ID: fmt.Sprintf("k%d", i), Title: "x"}
			}
			for i := range batch {
				if r.IntN(3) == 0 {
					if j := r.IntN(n); j != i {
						batch[i].ParentID = batch[j].ID
					}
				}
				for range r.IntN(3) {
					if j := r.IntN(n); j != i {
						batch[i].BlockedBy = append(batch[i].BlockedBy, batch[j].ID)
					}
				}
			}
			want := ""
			if i, j := oldFindCycle(batch); i >= 0 {
				cycles++
				want = fmt.Sprintf("line %d: task %s: waits for %s, which waits for it", i+1, batch[i].ID, batch[j].ID)
			}
			_, err := s.ImportFrom(context.Background(), dag.ImportParams{Source: dag.TaskSlice(batch), DryRun: true})
			switch {
			case want == "" && err != nil:
				t.Fatalf("round %d: import = %v, want success", round, err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Fatalf("round %d: import = %v, want %q", round, err, want)
			}
		}
		if cycles < 50 || cycles > 250 {
			t.Errorf("%d of 300 batches had a cycle: the test does not test both sides", cycles)
		}
	})
}

// TestExportJSONL: the streamed export writes what dag.WriteJSONL writes of
// Export, and reads back as the plan.
func TestExportJSONL(t *testing.T) {
	forEachStore(t, func(t *testing.T, o *opener) {
		s := o.open(t, newClock(testStart).Now)
		if _, err := s.Import(context.Background(), dag.Fixture(500)); err != nil {
			t.Fatal(err)
		}
		tasks, err := s.Export(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var streamed strings.Builder
		if err := s.ExportJSONL(context.Background(), &streamed); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(jsonl(t, tasks), streamed.String()); diff != "" {
			t.Errorf("ExportJSONL (-dag.WriteJSONL +streamed):\n%s", diff)
		}
		back, err := dag.ReadJSONL(strings.NewReader(streamed.String()))
		if err != nil || len(back) != 500 {
			t.Fatalf("read back %d tasks, %v", len(back), err)
		}
	})
}
