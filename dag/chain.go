package dag

import "fmt"

// The order of ready tasks (DESIGN §17) is priority, then a task that lost
// a race to land (raced), then the longest chain of work waiting on it
// (chain), then age (seq): readyOrder, which the partial indexes
// tasks_ready and tasks_ready_feature follow column for column.
//
// chain counts the tasks on the longest path that starts at the task and
// follows what waits for it — its dependents and its parent (a parent waits
// for its children) — itself included: 1 for a task nothing waits for. The
// choice is a count, not a weight: ralph knows no task's duration before
// it runs, and a count is what a plan written by an agent can be trusted
// to get right. It is a property of the graph alone (for a ready task
// everything waiting on it is still to do), so only writes that change
// the graph change it: a dependency added or removed, a task added with a
// parent, an import. Each updates the tasks whose chain may have changed,
// and only while it changes (updateChains); an import computes its batch's
// in memory (importer.chains) and updates the existing tasks it hangs
// below.
const readyOrder = `priority, raced DESC, chain DESC, seq`

// chainOf is a task's chain as its successors give it now.
const chainOf = `SELECT 1 + coalesce(max(c), 0) FROM (
		SELECT d.chain AS c FROM deps JOIN tasks d ON d.id = deps.blocked_id WHERE deps.blocker_id = ?1
		UNION ALL
		SELECT p.chain FROM tasks t JOIN tasks p ON p.id = t.parent_id WHERE t.id = ?1) AS succ`

// maxChainSteps bounds updateChains' walk: only a cycle, which no write
// lets in, would make it longer.
const maxChainSteps = 1 << 24

// updateChains brings the chain of the tasks ids, and of everything that
// leads to them, up to date with the graph: a task whose chain changes
// passes the change on to its predecessors (its blockers and its
// children). The graph has no cycle, so this ends; it touches the tasks
// whose chain changes and their direct predecessors only.
func (t *txn) updateChains(ids ...string) error {
	work := append([]string(nil), ids...)
	for steps := 0; len(work) > 0; steps++ {
		if steps > maxChainSteps {
			return fmt.Errorf("dag: the chains of work do not settle: the graph has a cycle through %s", work[len(work)-1])
		}
		id := work[len(work)-1]
		work = work[:len(work)-1]
		var now, want int
		if err := t.row(`SELECT chain, (`+chainOf+`) FROM tasks WHERE id = ?1`, id).Scan(&now, &want); err != nil {
			return err
		}
		if now == want {
			continue
		}
		if _, err := t.exec(`UPDATE tasks SET chain = ? WHERE id = ?`, want, id); err != nil {
			return err
		}
		preds, err := t.ids(`SELECT blocker_id FROM deps WHERE blocked_id = ?1
			UNION ALL SELECT id FROM tasks WHERE parent_id = ?1`, id)
		if err != nil {
			return err
		}
		work = append(work, preds...)
	}
	return nil
}
