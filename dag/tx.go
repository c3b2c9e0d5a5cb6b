package dag

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// taskCols are the columns scanTask reads, in order.
const taskCols = `id, title, description, status, priority, coalesce(parent_id, ''),
	coalesce(feature, ''), claimed_by, claimed_at, lease_expires_at, retry_count,
	verification_status, created_at, updated_at, claim_mode, holder_host, holder_pid,
	holder_start, generation, blocker_count, check_cmd, check_by`

// readyCond is the ready predicate; it matches the WHERE clause of the
// partial indexes tasks_ready and tasks_ready_feature word for word, so that
// SQLite uses them.
const readyCond = `status = 'pending' AND child_count = 0 AND unmet_blockers = 0 AND parent_failed = 0`

// readyFrom names the table of a ready query with the partial index that
// serves it. Without statistics SQLite has been seen to prefer another
// index and sort every pending task; naming the index also makes a query
// that no longer matches the index's WHERE clause fail loudly.
func readyFrom(scope loop.Scope) string {
	switch {
	case scope.Feature != "":
		return "tasks INDEXED BY tasks_ready_feature"
	case scope.TaskID != "":
		return "tasks"
	}
	return "tasks INDEXED BY tasks_ready"
}

type scanner interface{ Scan(dest ...any) error }

// queryAll runs q in one read transaction and returns its rows, each read
// by scan, in the query's order. A read the store tries again (a server's
// lost connection) starts the list over.
func queryAll[T any](ctx context.Context, s *Store, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	var out []T
	err := s.read(ctx, func(t *txn) error {
		out = out[:0]
		rows, err := t.query(q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scan(rows)
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return rows.Err()
	})
	return out, err
}

// scanTask reads taskCols, then into extra the columns after them;
// blockers is the task's number of blockers, so that callers can skip the
// look-up in deps when it is zero.
func scanTask(r scanner, extra ...any) (task loop.Task, blockers int, err error) {
	var t loop.Task
	var status, mode string
	var claimedAt, leaseAt, created, updated int64
	err = r.Scan(append([]any{&t.ID, &t.Title, &t.Description, &status, &t.Priority, &t.ParentID,
		&t.Feature, &t.ClaimedBy, &claimedAt, &leaseAt, &t.RetryCount,
		&t.VerificationStatus, &created, &updated, &mode, &t.Holder.Host, &t.Holder.PID,
		&t.Holder.Start, &t.Generation, &blockers, &t.Check, &t.CheckBy}, extra...)...)
	if err != nil {
		return loop.Task{}, 0, err
	}
	t.Status, t.ClaimMode = loop.Status(status), loop.ClaimMode(mode)
	t.ClaimedAt, t.LeaseExpiresAt = fromNanos(claimedAt), fromNanos(leaseAt)
	t.CreatedAt, t.UpdatedAt = fromNanos(created), fromNanos(updated)
	return t, blockers, nil
}

func notFound(id string) error {
	return fmt.Errorf("%w: %q", loop.ErrNotFound, id)
}

// state is what the status machine, and the rules of who may move a
// task, need to know about one task.
type state struct {
	id       string
	status   loop.Status
	parentID string
	children int
	unmet    int
	pfailed  bool
	agent    string
	deps     int // dependents: tasks this one blocks
	// The current claim: who made it, the process keeping it, its number
	// and its lease.
	mode   loop.ClaimMode
	holder loop.Holder
	gen    int64
	lease  int64
}

func (t *txn) state(id string) (state, error) {
	var st state
	var status, mode string
	err := t.row(`SELECT id, status, coalesce(parent_id, ''), child_count, unmet_blockers, parent_failed, claimed_by,
		dependent_count, claim_mode, holder_host, holder_pid, holder_start, generation, lease_expires_at
		FROM tasks WHERE id = ?`+t.forUpdate(), id).
		Scan(&st.id, &status, &st.parentID, &st.children, &st.unmet, &st.pfailed, &st.agent, &st.deps,
			&mode, &st.holder.Host, &st.holder.PID, &st.holder.Start, &st.gen, &st.lease)
	if errors.Is(err, sql.ErrNoRows) {
		return state{}, notFound(id)
	}
	st.status, st.mode = loop.Status(status), loop.ClaimMode(mode)
	return st, err
}

// claim is the part of st that loop.CheckMove reads.
func (st state) claim() loop.Task {
	return loop.Task{ID: st.id, Status: st.status, ClaimedBy: st.agent, ClaimMode: st.mode,
		Holder: st.holder, Generation: st.gen, LeaseExpiresAt: fromNanos(st.lease)}
}

// checkMove applies loop.CheckMove to a move of kind by by on task st.
// The refusal of a stale claim is logged, and that entry is kept although
// the move is not made (a *keptError makes the transaction commit).
func (t *txn) checkMove(st state, kind loop.MoveKind, by loop.Actor) error {
	err := loop.CheckMove(st.claim(), kind, by, fromNanos(t.now))
	if err == nil || !errors.Is(err, loop.ErrStaleClaim) {
		return err
	}
	if lerr := t.logAs(st.id, loop.LogOutcomeRefused, fmt.Sprintf("%s refused: %v", kind, err), by.Name()); lerr != nil {
		return lerr
	}
	return &keptError{err: err}
}

// keptError is an error after which a write transaction commits what it
// did (a log entry of the refusal) instead of rolling it back.
type keptError struct{ err error }

func (e *keptError) Error() string { return e.err.Error() }
func (e *keptError) Unwrap() error { return e.err }

// get reads one task with its blockers.
func (t *txn) get(id string) (loop.Task, error) {
	task, n, err := scanTask(t.row(`SELECT `+taskCols+` FROM tasks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return loop.Task{}, notFound(id)
	}
	if err != nil || n == 0 {
		return task, err
	}
	ts := []loop.Task{task}
	if err := t.fillBlockers(ts); err != nil {
		return loop.Task{}, err
	}
	return ts[0], nil
}

// list runs a query selecting taskCols and fills in the blockers.
func (t *txn) list(q string, args ...any) ([]loop.Task, error) {
	rows, err := t.query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []loop.Task
	blockers := 0
	for rows.Next() {
		task, n, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, task)
		blockers += n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	if blockers == 0 {
		return out, nil
	}
	return out, t.fillBlockers(out)
}

// fillBlockers sets BlockedBy on ts, in the order the dependencies were
// added. Small lists are looked up by id; large ones read the whole table.
func (t *txn) fillBlockers(ts []loop.Task) error {
	if len(ts) == 0 {
		return nil
	}
	idx := make(map[string]int, len(ts))
	for i, task := range ts {
		idx[task.ID] = i
	}
	// The look-ups by id read the covering unique index and sort the few
	// rows here; asking SQLite for ORDER BY seq costs a temporary b-tree.
	var rows rowSet
	var err error
	switch {
	case len(ts) == 1:
		rows, err = t.query(`SELECT seq, blocked_id, blocker_id FROM deps WHERE blocked_id = ?`, ts[0].ID)
	case len(ts) <= 200:
		args := make([]any, len(ts))
		for i, task := range ts {
			args[i] = task.ID
		}
		rows, err = t.query(`SELECT seq, blocked_id, blocker_id FROM deps WHERE blocked_id IN (`+
			placeholders(len(ts))+`)`, args...)
	default:
		rows, err = t.query(`SELECT seq, blocked_id, blocker_id FROM deps`)
	}
	if err != nil {
		return err
	}
	defer rows.Close()
	type dep struct {
		seq     int64
		task    int
		blocker string
	}
	var deps []dep
	for rows.Next() {
		var d dep
		var blocked string
		if err := rows.Scan(&d.seq, &blocked, &d.blocker); err != nil {
			return err
		}
		if i, ok := idx[blocked]; ok {
			d.task = i
			deps = append(deps, d)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	slices.SortFunc(deps, func(a, b dep) int { return cmp.Compare(a.seq, b.seq) })
	for _, d := range deps {
		ts[d.task].BlockedBy = append(ts[d.task].BlockedBy, d.blocker)
	}
	return nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// log appends an entry to task id's history, made by the transaction's
// actor.
func (t *txn) log(id, kind, message string) error {
	return t.logAs(id, kind, message, t.actor)
}

// logAs appends an entry made by actor (ralph's own moves: auto-transitions
// and recoveries). Its time is the transaction's, or the latest of the
// task's history when that is later — another machine's clock ahead of
// this one's — so that a history read in order is in time order too.
func (t *txn) logAs(id, kind, message, actor string) error {
	if actor == "" {
		actor = loop.ActorRalph
	}
	// Nothing waits for the entry: on a server it goes with the next
	// statement, or the COMMIT.
	return t.later(`INSERT INTO task_logs (task_id, seq, at, kind, message, actor)
		SELECT ?1, coalesce(max(seq), 0) + 1, CASE WHEN max(at) > ?2 THEN max(at) ELSE ?2 END, ?3, ?4, ?5
		FROM task_logs WHERE task_id = ?1`,
		id, t.now, kind, message, actor)
}

// clearClaim is the SET clause that forgets a task's claim; the
// generation stays, so that the next claim gets the next number.
const clearClaim = `claimed_by = '', claimed_at = 0, lease_expires_at = 0, claim_mode = '',
	holder_host = '', holder_pid = 0, holder_start = 0`

// setStatus moves task id from one status to another, without checking the
// move (callers do), clearing the claim when leaving in_progress and keeping
// the children's parent_failed flag in step.
func (t *txn) setStatus(id string, from, to loop.Status) error {
	q := `UPDATE tasks SET status = ?, updated_at = ? WHERE id = ?`
	if from == loop.StatusInProgress && to != loop.StatusInProgress {
		q = `UPDATE tasks SET status = ?, updated_at = ?, ` + clearClaim + ` WHERE id = ?`
	}
	if _, err := t.exec(q, string(to), t.now, id); err != nil {
		return err
	}
	if (from == loop.StatusFailed) != (to == loop.StatusFailed) {
		failed := 0
		if to == loop.StatusFailed {
			failed = 1
		}
		_, err := t.exec(`UPDATE tasks SET parent_failed = ? WHERE parent_id = ?`, failed, id)
		return err
	}
	return nil
}

// transition checks and makes one move of the status machine, logging it.
func (t *txn) transition(id string, to loop.Status, kind, message string) (state, error) {
	st, err := t.state(id)
	if err != nil {
		return st, err
	}
	if !loop.CanTransition(st.status, to) {
		return st, &loop.TransitionError{TaskID: id, From: st.status, To: to}
	}
	if err := t.setStatus(id, st.status, to); err != nil {
		return st, err
	}
	if kind != "" {
		if err := t.log(id, kind, message); err != nil {
			return st, err
		}
	}
	return st, nil
}

// done runs the auto-transitions of ARCHITECTURE.md §2 after task id (with
// parent parent, or "", and deps dependents) became done, in this
// transaction: dependents lose an unmet blocker, and explicitly blocked
// ones with none left become pending; a parent whose children are all done
// becomes done, and so on upward.
//
// Beside other completions (txn.shared) each row is locked before it is
// read: the dependents in the order of their ids, so that two
// completions do not wait for each other in a circle over them; the
// parent before its children are counted, so that of two children
// completed at once the second to lock it counts the first's completion
// (READ COMMITTED: each statement sees what committed before it began).
func (t *txn) done(id, parent string, deps int) error {
	dependentsQuery := `SELECT blocked_id FROM deps WHERE blocker_id = ? ORDER BY seq`
	if t.shared {
		dependentsQuery = `SELECT blocked_id FROM deps WHERE blocker_id = ? ORDER BY blocked_id`
	}
	type item struct {
		id, parent string
		deps       int
	}
	for queue := []item{{id, parent, deps}}; len(queue) > 0; {
		x := queue[0]
		queue = queue[1:]
		var dependents []string
		if x.deps > 0 {
			var err error
			if dependents, err = t.ids(dependentsQuery, x.id); err != nil {
				return err
			}
		}
		for _, d := range dependents {
			var status string
			var unmet int
			if err := t.row(`UPDATE tasks SET unmet_blockers = unmet_blockers - 1 WHERE id = ?
				RETURNING status, unmet_blockers`, d).Scan(&status, &unmet); err != nil {
				return err
			}
			if loop.Status(status) != loop.StatusBlocked || unmet > 0 {
				continue
			}
			if err := t.setStatus(d, loop.StatusBlocked, loop.StatusPending); err != nil {
				return err
			}
			if err := t.logAs(d, loop.LogUnblock, "all blockers done (last: "+x.id+")", loop.ActorRalph); err != nil {
				return err
			}
		}
		if x.parent == "" {
			continue
		}
		if t.shared {
			var one int
			if err := t.row(`SELECT 1 FROM tasks WHERE id = ?`+t.forUpdate(), x.parent).Scan(&one); err != nil {
				return err
			}
		}
		var status, grand string
		var open, pdeps int
		if err := t.row(`SELECT status, coalesce(parent_id, ''), dependent_count,
			(SELECT count(*) FROM tasks WHERE parent_id = ?1 AND status <> 'done')
			FROM tasks WHERE id = ?1`, x.parent).Scan(&status, &grand, &pdeps, &open); err != nil {
			return err
		}
		ps := loop.Status(status)
		// An in_progress parent is left to its holder to complete.
		if open > 0 || ps == loop.StatusDone || ps == loop.StatusInProgress {
			continue
		}
		if err := t.setStatus(x.parent, ps, loop.StatusDone); err != nil {
			return err
		}
		if err := t.logAs(x.parent, loop.LogDone, "all children done", loop.ActorRalph); err != nil {
			return err
		}
		queue = append(queue, item{x.parent, grand, pdeps})
	}
	return nil
}

// failUp marks the ancestors of id failed, stopping at the first that is
// already failed or done.
func (t *txn) failUp(id, parent string) error {
	for parent != "" {
		st, err := t.state(parent)
		if err != nil {
			return err
		}
		if st.status == loop.StatusFailed || st.status == loop.StatusDone {
			return nil
		}
		if err := t.setStatus(parent, st.status, loop.StatusFailed); err != nil {
			return err
		}
		if err := t.logAs(parent, loop.LogFail, "child "+id+" failed", loop.ActorRalph); err != nil {
			return err
		}
		id, parent = parent, st.parentID
	}
	return nil
}

// ids runs a query returning one string column.
func (t *txn) ids(q string, args ...any) ([]string, error) {
	rows, err := t.query(q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// scopeCond returns a condition on tasks for scope, and its arguments.
// A task scope with children means the task's descendants.
func (t *txn) scopeCond(scope loop.Scope) (string, []any, error) {
	var conds []string
	var args []any
	if scope.Feature != "" {
		conds = append(conds, "feature = ?")
		args = append(args, scope.Feature)
	}
	if scope.TaskID != "" {
		st, err := t.state(scope.TaskID)
		if err != nil {
			return "", nil, err
		}
		if st.children == 0 {
			conds = append(conds, "id = ?")
		} else {
			conds = append(conds, `id IN (WITH RECURSIVE sub(id) AS (
				SELECT id FROM tasks WHERE parent_id = ?
				UNION ALL SELECT tasks.id FROM tasks JOIN sub ON tasks.parent_id = sub.id)
				SELECT id FROM sub)`)
		}
		args = append(args, scope.TaskID)
	}
	if len(conds) == 0 {
		return "1 = 1", nil, nil
	}
	return strings.Join(conds, " AND "), args, nil
}

func leaseOrDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return loop.DefaultLease
	}
	return d
}
