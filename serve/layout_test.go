package serve

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
)

func TestLayoutLayers(t *testing.T) {
	nodes := []layoutNode{
		{id: "a"},
		{id: "b", blockers: []string{"a"}},
		{id: "c", blockers: []string{"a"}},
		{id: "d", blockers: []string{"b", "c"}},
		{id: "e", blockers: []string{"a", "d"}},
		{id: "f", blockers: []string{"gone"}}, // a blocker outside the set counts as none
	}
	got := layout(nodes)
	var layers []int
	for _, p := range got {
		layers = append(layers, p.layer)
	}
	if diff := cmp.Diff([]int{0, 1, 1, 2, 3, 0}, layers); diff != "" {
		t.Errorf("layers (-want +got):\n%s", diff)
	}
	// A layer is one column: the same x; boxes in it do not overlap.
	if got[1].x != got[2].x || got[1].y == got[2].y {
		t.Errorf("b %+v and c %+v should share a column, apart", got[1], got[2])
	}
	for i, p := range got {
		for j, q := range got[i+1:] {
			if p.x == q.x && p.y == q.y {
				t.Errorf("%s and %s overlap at %d,%d", nodes[i].id, nodes[i+1+j].id, p.x, p.y)
			}
		}
	}
	if got[0].x >= got[1].x || got[1].x >= got[3].x || got[3].x >= got[4].x {
		t.Errorf("layers do not go left to right: %+v", got)
	}
}

// The barycenter sweeps put a task near its blockers: two chains side by
// side do not cross.
func TestLayoutUncrossed(t *testing.T) {
	nodes := []layoutNode{
		{id: "a1"}, {id: "b1"},
		{id: "b2", blockers: []string{"b1"}}, {id: "a2", blockers: []string{"a1"}},
		{id: "b3", blockers: []string{"b2"}}, {id: "a3", blockers: []string{"a2"}},
	}
	got := layout(nodes)
	pos := map[string]placement{}
	for i, p := range got {
		pos[nodes[i].id] = p
	}
	for _, n := range []string{"2", "3"} {
		if pos["a"+n].y > pos["b"+n].y {
			t.Errorf("chains cross at layer %s: a at %d, b at %d", n, pos["a"+n].y, pos["b"+n].y)
		}
	}
}

// Wide layers wrap into columns of MaxColumn.
func TestLayoutWraps(t *testing.T) {
	var nodes []layoutNode
	for i := range MaxColumn*2 + 1 {
		nodes = append(nodes, layoutNode{id: fmt.Sprint(i)})
	}
	xs := map[int]bool{}
	for _, p := range layout(nodes) {
		xs[p.x] = true
		if p.y >= MaxColumn*(NodeH+RowGap) {
			t.Fatalf("a node at y %d: the column is taller than MaxColumn", p.y)
		}
	}
	if len(xs) != 3 {
		t.Errorf("%d columns, want 3", len(xs))
	}
}

func TestLayoutDeterministic(t *testing.T) {
	nodes := randomPlan(2000, 7)
	first := layout(nodes)
	for range 3 {
		if diff := cmp.Diff(first, layout(nodes), cmp.AllowUnexported(placement{})); diff != "" {
			t.Fatalf("the same plan laid out differently:\n%s", diff)
		}
	}
}

// randomPlan is a plan of n tasks in features, with parents and blockers
// among earlier tasks (so no cycles), like a planned project.
func randomPlan(n int, seed uint64) []layoutNode {
	r := rand.New(rand.NewPCG(seed, seed))
	nodes := make([]layoutNode, n)
	for i := range nodes {
		nd := layoutNode{id: fmt.Sprintf("t%d", i), feature: fmt.Sprintf("f%d", i/100)}
		if i > 0 && r.IntN(3) == 0 {
			nd.parent = nodes[r.IntN(i)].id
		}
		for range r.IntN(3) {
			if i > 0 {
				nd.blockers = append(nd.blockers, nodes[max(0, i-1-r.IntN(min(i, 50)))].id)
			}
		}
		nodes[i] = nd
	}
	return nodes
}

func randomTasks(n int) []loop.Task {
	nodes := randomPlan(n, 1)
	tasks := make([]loop.Task, n)
	statuses := []loop.Status{loop.StatusDone, loop.StatusDone, loop.StatusPending, loop.StatusInProgress, loop.StatusFailed}
	for i, nd := range nodes {
		tasks[i] = loop.Task{ID: nd.id, Title: "Task " + nd.id + " does something useful", Status: statuses[i%len(statuses)],
			Priority: 2, ParentID: nd.parent, Feature: nd.feature, BlockedBy: nd.blockers}
	}
	return tasks
}

func BenchmarkLayout(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		nodes := randomPlan(n, 1)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				layout(nodes)
			}
		})
	}
}
