package serve

import (
	"cmp"
	"slices"
)

// Layout geometry, in SVG user units: a node is NodeW×NodeH; layers are
// columns ColGap apart, nodes in a column RowGap apart. A layer with more
// than MaxColumn nodes is wrapped into several columns side by side.
const (
	NodeW     = 200
	NodeH     = 28
	ColGap    = 60
	RowGap    = 10
	MaxColumn = 40
	// sweeps is how many barycenter passes (down, then up, …) order the
	// nodes of each layer.
	sweeps = 4
)

// layoutNode is what the layout needs of a task.
type layoutNode struct {
	id       string
	parent   string
	feature  string
	blockers []string
}

// placement is a node's place: its layer (depth by blockers) and the
// top-left corner of its box.
type placement struct {
	layer int
	x, y  int
}

// layout places the nodes in layers by their blockers (a task's layer is
// one more than its deepest blocker's; blockers outside the set count as
// none), orders each layer by feature, then parent, then the input order,
// and then by barycenter sweeps over the blocker edges, which pull a task
// near its blockers and dependents. The result depends only on the input:
// ties keep the previous order (stable sorts), so the same plan always
// gives the same picture. nodes must not have cyclic blockers (the plan
// refuses cycles); a cycle would only make its tasks share a layer.
func layout(nodes []layoutNode) []placement {
	n := len(nodes)
	index := make(map[string]int, n)
	for i, nd := range nodes {
		index[nd.id] = i
	}
	// Edges blocker → dependent, by index.
	preds := make([][]int, n)
	succs := make([][]int, n)
	indeg := make([]int, n)
	for i, nd := range nodes {
		for _, b := range nd.blockers {
			j, ok := index[b]
			if !ok || j == i {
				continue
			}
			preds[i] = append(preds[i], j)
			succs[j] = append(succs[j], i)
			indeg[i]++
		}
	}
	// Longest path from the sources (Kahn's order).
	layer := make([]int, n)
	queue := make([]int, 0, n)
	for i := range n {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for k := 0; k < len(queue); k++ {
		i := queue[k]
		for _, j := range succs[i] {
			layer[j] = max(layer[j], layer[i]+1)
			if indeg[j]--; indeg[j] == 0 {
				queue = append(queue, j)
			}
		}
	}
	depth := 0
	for _, l := range layer {
		depth = max(depth, l)
	}
	layers := make([][]int, depth+1)
	for i := range n {
		layers[layer[i]] = append(layers[layer[i]], i)
	}
	// First order: feature, parent, input order.
	for _, l := range layers {
		slices.SortStableFunc(l, func(a, b int) int {
			if c := cmp.Compare(nodes[a].feature, nodes[b].feature); c != 0 {
				return c
			}
			return cmp.Compare(nodes[a].parent, nodes[b].parent)
		})
	}
	pos := make([]float64, n)
	setPos := func() {
		for _, l := range layers {
			for k, i := range l {
				pos[i] = float64(k)
			}
		}
	}
	setPos()
	bary := make([]float64, n)
	for s := range sweeps {
		down := s%2 == 0
		for li := range layers {
			if !down {
				li = len(layers) - 1 - li
			}
			l := layers[li]
			for _, i := range l {
				nb := preds[i]
				if !down {
					nb = succs[i]
				}
				if len(nb) == 0 {
					bary[i] = pos[i] // no neighbours that way: keep its place
					continue
				}
				sum := 0.0
				for _, j := range nb {
					sum += pos[j]
				}
				bary[i] = sum / float64(len(nb))
			}
			slices.SortStableFunc(l, func(a, b int) int { return cmp.Compare(bary[a], bary[b]) })
			for k, i := range l {
				pos[i] = float64(k)
			}
		}
	}
	out := make([]placement, n)
	x := 0
	for li, l := range layers {
		cols := max(1, (len(l)+MaxColumn-1)/MaxColumn)
		for k, i := range l {
			col, row := k/MaxColumn, k%MaxColumn
			out[i] = placement{layer: li, x: x + col*(NodeW+ColGap/2), y: row * (NodeH + RowGap)}
		}
		x += cols*(NodeW+ColGap/2) + ColGap/2
	}
	return out
}
