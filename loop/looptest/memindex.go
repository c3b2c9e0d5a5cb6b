package looptest

import (
	"cmp"
	"slices"

	"github.com/ralph-dev/ralph/loop"
)

// MemStore keeps readiness on write, as dag does for SQLite:
// each task counts its unmet blockers, the ready tasks are kept sorted in
// claim order, and the in_progress tasks and the per-status counts are kept
// too. Every status change goes through changeStatus, which updates them
// for the task and for the neighbours whose readiness depends on it: its
// dependents (when it enters or leaves done) and its children (when it
// enters or leaves failed).

// claimOrder is DESIGN §17's order: priority, then a task that lost a
// race to land, then the longest chain of work waiting on it, then
// insertion.
func claimOrder(a, b *memTask) int {
	if c := cmp.Compare(a.task.Priority, b.task.Priority); c != 0 {
		return c
	}
	if a.raced != b.raced {
		if a.raced {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(b.chain, a.chain); c != 0 {
		return c
	}
	return cmp.Compare(a.seq, b.seq)
}

// rekey applies change, which alters mt's place in claimOrder, keeping the
// ready index sorted.
func (s *MemStore) rekey(mt *memTask, change func()) {
	if !mt.inReady {
		change()
		return
	}
	if i, found := slices.BinarySearchFunc(s.ready, mt, claimOrder); found {
		s.ready = slices.Delete(s.ready, i, i+1)
	}
	change()
	i, _ := slices.BinarySearchFunc(s.ready, mt, claimOrder)
	s.ready = slices.Insert(s.ready, i, mt)
}

// updateChains brings the chain of mts, and of what leads to them, up to
// date with the graph (as dag's updateChains): a task whose chain changes
// passes the change on to its blockers and children. The graph has no
// cycle (Add and AddDependency refuse one), so this ends.
func (s *MemStore) updateChains(mts ...*memTask) {
	work := slices.Clone(mts)
	for len(work) > 0 {
		mt := work[len(work)-1]
		work = work[:len(work)-1]
		want := 1
		for _, d := range mt.dependents {
			want = max(want, 1+d.chain)
		}
		if mt.parent != nil {
			want = max(want, 1+mt.parent.chain)
		}
		if want == mt.chain {
			continue
		}
		s.rekey(mt, func() { mt.chain = want })
		work = append(work, mt.blockers...)
		work = append(work, mt.children...)
	}
}

// changeStatus sets mt's status and updates the indexes.
func (s *MemStore) changeStatus(mt *memTask, to loop.Status) {
	from := mt.task.Status
	if from == to {
		return
	}
	mt.task.Status = to
	count(&s.counts, from, -1)
	count(&s.counts, to, 1)
	if to == loop.StatusInProgress {
		s.claimed[mt] = struct{}{}
	} else if from == loop.StatusInProgress {
		delete(s.claimed, mt)
	}
	s.refresh(mt)
	if from == loop.StatusDone || to == loop.StatusDone {
		delta := 1 // a blocker left done
		if to == loop.StatusDone {
			delta = -1
		}
		for _, d := range mt.dependents {
			d.unmet += delta
			s.refresh(d)
		}
	}
	if from == loop.StatusFailed || to == loop.StatusFailed {
		for _, c := range mt.children {
			s.refresh(c)
		}
	}
}

// indexAdded indexes tasks just appended to s.order and linked.
func (s *MemStore) indexAdded(added []*memTask) {
	for _, mt := range added {
		count(&s.counts, mt.task.Status, 1)
		if mt.task.Status == loop.StatusInProgress {
			s.claimed[mt] = struct{}{}
		}
		for _, b := range mt.blockers {
			if b.task.Status != loop.StatusDone {
				mt.unmet++
			}
		}
	}
	for _, mt := range added {
		s.refresh(mt)
		if mt.parent != nil {
			s.refresh(mt.parent) // it may have just become a parent
		}
	}
}

// refresh puts mt in or out of the ready index as its readiness says.
func (s *MemStore) refresh(mt *memTask) {
	ready := s.isReady(mt)
	if ready == mt.inReady {
		return
	}
	i, found := slices.BinarySearchFunc(s.ready, mt, claimOrder)
	if ready {
		s.ready = slices.Insert(s.ready, i, mt)
	} else if found {
		s.ready = slices.Delete(s.ready, i, i+1)
	}
	mt.inReady = ready
}

func count(c *loop.Counts, st loop.Status, delta int) {
	switch st {
	case loop.StatusPending:
		c.Pending += delta
	case loop.StatusInProgress:
		c.InProgress += delta
	case loop.StatusDone:
		c.Done += delta
	case loop.StatusFailed:
		c.Failed += delta
	case loop.StatusBlocked:
		c.Blocked += delta
	}
}

// findCycle walks edges depth first from each start (edges calls visit on
// each neighbour of a node and stops when visit returns true) and returns
// a cycle as a path of ids ending where it starts, or nil. Nodes are
// visited once across all starts: O(nodes + edges).
func findCycle(starts []string, edges func(id string, visit func(string) bool) bool) []string {
	const (
		unseen = iota
		onPath
		finished
	)
	state := map[string]int{}
	var path []string
	var walk func(id string) bool
	walk = func(id string) bool {
		state[id] = onPath
		path = append(path, id)
		if edges(id, func(next string) bool {
			switch state[next] {
			case onPath:
				i := slices.Index(path, next)
				path = append(path[i:], next)
				return true
			case unseen:
				return walk(next)
			}
			return false
		}) {
			return true
		}
		path = path[:len(path)-1]
		state[id] = finished
		return false
	}
	for _, id := range starts {
		if state[id] == unseen && walk(id) {
			return path
		}
	}
	return nil
}
