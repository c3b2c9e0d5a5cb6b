package dag

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// Get implements loop.TaskStore.
func (s *Store) Get(ctx context.Context, id string) (loop.Task, error) {
	var task loop.Task
	err := s.read(ctx, func(t *txn) error {
		var err error
		task, err = t.get(id)
		return err
	})
	return task, err
}

// Ready implements loop.TaskStore. The query walks the partial index of
// ready tasks in claim order, so its cost does not grow with the plan.
func (s *Store) Ready(ctx context.Context, scope loop.Scope, limit int) ([]loop.Task, error) {
	var out []loop.Task
	err := s.read(ctx, func(t *txn) error {
		cond, args, err := t.scopeCond(scope)
		if err != nil {
			return err
		}
		if limit <= 0 {
			limit = math.MaxInt64 // all (LIMIT -1 is SQLite's alone)
		}
		out, err = t.list(`SELECT `+taskCols+` FROM `+readyFrom(scope)+` WHERE `+readyCond+` AND `+cond+
			` ORDER BY `+readyOrder+` LIMIT ?`, append(args, limit)...)
		return err
	})
	return out, err
}

// Active implements loop.TaskStore.
func (s *Store) Active(ctx context.Context, scope loop.Scope) ([]loop.Task, error) {
	var out []loop.Task
	err := s.read(ctx, func(t *txn) error {
		cond, args, err := t.scopeCond(scope)
		if err != nil {
			return err
		}
		out, err = t.list(`SELECT `+taskCols+` FROM tasks WHERE status = 'in_progress' AND `+cond+
			` ORDER BY claimed_at, seq`, args...)
		return err
	})
	return out, err
}

// Counts implements loop.TaskStore.
func (s *Store) Counts(ctx context.Context, scope loop.Scope) (loop.Counts, error) {
	var c loop.Counts
	err := s.read(ctx, func(t *txn) error {
		var rows rowSet
		var err error
		if scope.TaskID == "" {
			// Kept by triggers: a few rows at any plan size. Their
			// 'pending' counts the in_progress tasks too, which are the
			// few entries of tasks_active.
			rows, err = t.query(`SELECT status, sum(n) FROM status_counts
				WHERE ?1 = '' OR feature = ?1 GROUP BY status
				UNION ALL
				SELECT 'in_progress', count(*) FROM tasks INDEXED BY tasks_active
				WHERE status = 'in_progress' AND (?1 = '' OR feature = ?1)`, scope.Feature)
		} else {
			cond, args, cerr := t.scopeCond(scope)
			if cerr != nil {
				return cerr
			}
			rows, err = t.query(`SELECT status, count(*) FROM tasks WHERE `+cond+` GROUP BY status`, args...)
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var status string
			var n int
			if err := rows.Scan(&status, &n); err != nil {
				return err
			}
			switch loop.Status(status) {
			case loop.StatusPending:
				c.Pending = n
			case loop.StatusInProgress:
				c.InProgress = n
			case loop.StatusDone:
				c.Done = n
			case loop.StatusFailed:
				c.Failed = n
			case loop.StatusBlocked:
				c.Blocked = n
			}
		}
		if scope.TaskID == "" {
			c.Pending -= c.InProgress
		}
		return rows.Err()
	})
	return c, err
}

// Claim implements loop.TaskStore: a compare-and-set in one BEGIN IMMEDIATE
// transaction, so of many processes claiming at once exactly one gets each
// task. Expired leases are recovered first, in the same transaction.
func (s *Store) Claim(ctx context.Context, p loop.ClaimParams) (loop.Task, error) {
	if strings.TrimSpace(p.Agent) == "" {
		return loop.Task{}, errors.New("dag: claim needs an agent name")
	}
	switch p.Mode {
	case "", loop.ClaimLoop, loop.ClaimAgent:
	default:
		return loop.Task{}, fmt.Errorf("dag: claim mode %q (want loop, agent or none)", p.Mode)
	}
	lease := leaseOrDefault(p.Lease)
	var task loop.Task
	write := s.writeGuarded
	if p.TaskID == "" && p.Scope.TaskID == "" {
		write = s.writeClaim // one statement takes the task: no plan lock on a server
	}
	err := write(ctx, p.Agent, func(t *txn) error {
		set := `UPDATE tasks SET status = 'in_progress', claimed_by = ?, claimed_at = ?,
			lease_expires_at = ?, updated_at = ?, claim_mode = ?, holder_host = ?, holder_pid = ?,
			holder_start = ?, generation = generation + 1, raced = 0 `
		args := []any{p.Agent, t.now, t.now + int64(lease), t.now, string(p.Mode), p.Holder.Host, p.Holder.PID, p.Holder.Start}
		var err error
		var blockers int
		if p.TaskID == "" && p.Scope.TaskID == "" {
			// Find and take the first ready task in one statement, which
			// takes nothing if a lease has expired: then recover and look
			// again.
			var cond string
			var cargs []any
			if cond, cargs, err = t.scopeCond(p.Scope); err != nil {
				return err
			}
			for {
				guard, gargs := t.leaseGuard()
				// The transaction's id comes back with the task, on a server
				// (dialect.txID): no question of its own before the commit.
				returning, extra := taskCols, []any(nil)
				if x := t.s.d.txID(); x != "" && t.xid == "" {
					returning, extra = taskCols+", "+x, []any{&t.xid}
				}
				task, blockers, err = scanTask(t.row(set+`WHERE seq = (SELECT seq FROM `+readyFrom(p.Scope)+` WHERE `+readyCond+
					` AND `+cond+` ORDER BY `+readyOrder+` LIMIT 1`+t.skipLocked()+`)`+guard+` RETURNING `+returning,
					append(append(slices.Clip(args), cargs...), gargs...)...), extra...)
				if !errors.Is(err, sql.ErrNoRows) {
					break
				}
				if guard == "" {
					return loop.ErrNoReadyTask
				}
				if err := t.ensureRecovered(); err != nil {
					return err
				}
			}
		} else if p.TaskID == "" {
			// A task scope reads the task before any change: recover first.
			if err := t.ensureRecovered(); err != nil {
				return err
			}
			var cond string
			var cargs []any
			if cond, cargs, err = t.scopeCond(p.Scope); err != nil {
				return err
			}
			task, blockers, err = scanTask(t.row(set+`WHERE seq = (SELECT seq FROM `+readyFrom(p.Scope)+` WHERE `+readyCond+
				` AND `+cond+` ORDER BY `+readyOrder+` LIMIT 1) RETURNING `+taskCols, append(args, cargs...)...))
			if errors.Is(err, sql.ErrNoRows) {
				return loop.ErrNoReadyTask
			}
		} else {
			if err := t.ensureRecovered(); err != nil {
				return err
			}
			if err := t.checkReady(p.TaskID); err != nil {
				return err
			}
			task, blockers, err = scanTask(t.row(set+`WHERE id = ? AND `+readyCond+` RETURNING `+taskCols,
				append(args, p.TaskID)...))
		}
		if err != nil {
			return err
		}
		if err := t.log(task.ID, loop.LogClaim, loop.ClaimMessage(p, task.Generation)); err != nil {
			return err
		}
		if blockers == 0 {
			return nil
		}
		ts := []loop.Task{task}
		err = t.fillBlockers(ts)
		task = ts[0]
		return err
	})
	if err == nil && !p.Holder.IsZero() && s.holderGone(p.Holder) {
		s.sawOrphans(1) // a claim for a holder already gone: the next call recovers it
	}
	return task, err
}

// checkReady returns nil if task id is ready, else an error wrapping
// loop.ErrNotReady that says why. A task that is not pending also wraps
// the *loop.TransitionError of the refused claim.
func (t *txn) checkReady(id string) error {
	st, err := t.state(id)
	if err != nil {
		return err
	}
	switch {
	case st.status != loop.StatusPending:
		return &quietError{
			msg:  fmt.Sprintf("%v: task %s is %s", loop.ErrNotReady, id, st.status),
			errs: []error{loop.ErrNotReady, &loop.TransitionError{TaskID: id, From: st.status, To: loop.StatusInProgress}},
		}
	case st.children > 0:
		return fmt.Errorf("%w: task %s has %d children; claim those instead", loop.ErrNotReady, id, st.children)
	case st.pfailed:
		return fmt.Errorf("%w: task %s: its parent %s failed", loop.ErrNotReady, id, st.parentID)
	case st.unmet > 0:
		open, err := t.ids(`SELECT d.blocker_id FROM deps d JOIN tasks b ON b.id = d.blocker_id
			WHERE d.blocked_id = ? AND b.status <> 'done' ORDER BY d.seq`, id)
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: task %s is waiting for %s", loop.ErrNotReady, id, strings.Join(open, ", "))
	}
	return nil
}

// RenewLease implements loop.TaskStore.
func (s *Store) RenewLease(ctx context.Context, id, agent string, lease time.Duration) error {
	lease = leaseOrDefault(lease)
	return s.write(ctx, func(t *txn) error {
		st, err := t.state(id)
		if err != nil {
			return err
		}
		if st.status != loop.StatusInProgress || st.agent != agent {
			return holderErr(st, agent)
		}
		_, err = t.exec(`UPDATE tasks SET lease_expires_at = ? WHERE id = ?`, t.now+int64(lease), id)
		return err
	})
}

func holderErr(st state, agent string) error {
	if st.status != loop.StatusInProgress {
		return fmt.Errorf("%w: task %s is %s, not claimed by %s", loop.ErrNotHolder, st.id, st.status, agent)
	}
	return fmt.Errorf("%w: task %s is claimed by %s, not %s", loop.ErrNotHolder, st.id, st.agent, agent)
}

// Complete implements loop.TaskStore. A move by an agent (the usual case:
// the loop completing its claim) is one statement whose WHERE clause holds
// loop.CheckMove's conditions; only when it changes nothing is the task
// read, for the error. On a server the completions of claims run beside
// each other (writeShared): each locks its task, then what its
// completion moves.
func (s *Store) Complete(ctx context.Context, p loop.MoveParams) error {
	id, by := p.TaskID, p.By
	write := s.writeGuarded
	if by.Agent != "" {
		write = s.writeShared
	}
	return write(ctx, by.Name(), func(t *txn) error {
		var parent string
		var deps int
		err := sql.ErrNoRows
		for by.Agent != "" {
			guard, gargs := t.leaseGuard()
			err = t.row(`UPDATE tasks SET status = 'done', updated_at = ?, `+clearClaim+`
				WHERE id = ? AND status = 'in_progress' AND claimed_by = ? AND (?4 = 0 OR generation = ?4)
				AND (claim_mode <> 'loop' OR ?5)`+guard+`
				RETURNING coalesce(parent_id, ''), dependent_count`,
				append([]any{t.now, id, by.Agent, by.Generation, by.Loop}, gargs...)...).Scan(&parent, &deps)
			if guard == "" || !errors.Is(err, sql.ErrNoRows) {
				break
			}
			if err := t.ensureRecovered(); err != nil {
				return err
			}
		}
		if errors.Is(err, sql.ErrNoRows) {
			// A person's move, or a refused one: read the task.
			if err := t.ensureRecovered(); err != nil {
				return err
			}
			st, err := t.state(id)
			if err != nil {
				return err
			}
			if err := t.checkMove(st, loop.MoveComplete, by); err != nil {
				return err
			}
			if st.status != loop.StatusInProgress {
				return &loop.TransitionError{TaskID: id, From: st.status, To: loop.StatusDone}
			}
			if err := t.setStatus(id, st.status, loop.StatusDone); err != nil {
				return err
			}
			parent, deps = st.parentID, st.deps
		} else if err != nil {
			return err
		}
		// Logged even without a summary: the history says who finished it.
		if err := t.log(id, loop.LogDone, p.Message); err != nil {
			return err
		}
		return t.done(id, parent, deps)
	})
}

// claimed reads task id for a move of kind by by: the move must pass
// loop.CheckMove, and the task must be in one of the statuses from.
func (t *txn) claimed(id string, kind loop.MoveKind, by loop.Actor, to loop.Status, from ...loop.Status) (state, error) {
	st, err := t.state(id)
	if err != nil {
		return st, err
	}
	if err := t.checkMove(st, kind, by); err != nil {
		return st, err
	}
	if !slices.Contains(from, st.status) {
		return st, &loop.TransitionError{TaskID: id, From: st.status, To: to}
	}
	return st, nil
}

// Fail implements loop.TaskStore.
func (s *Store) Fail(ctx context.Context, p loop.MoveParams) error {
	return s.writeAs(ctx, p.By.Name(), func(t *txn) error {
		st, err := t.claimed(p.TaskID, loop.MoveFail, p.By, loop.StatusFailed, loop.StatusInProgress)
		if err != nil {
			return err
		}
		if _, err := t.transition(p.TaskID, loop.StatusFailed, loop.LogFail, p.Message); err != nil {
			return err
		}
		return t.failUp(p.TaskID, st.parentID)
	})
}

// Release implements loop.TaskStore.
func (s *Store) Release(ctx context.Context, p loop.MoveParams) error {
	return s.writeAs(ctx, p.By.Name(), func(t *txn) error {
		if _, err := t.claimed(p.TaskID, loop.MoveRelease, p.By, loop.StatusPending, loop.StatusInProgress); err != nil {
			return err
		}
		if _, err := t.transition(p.TaskID, loop.StatusPending, loop.LogRelease, p.Message); err != nil || !p.Raced {
			return err
		}
		_, err := t.exec(`UPDATE tasks SET raced = 1 WHERE id = ?`, p.TaskID)
		return err
	})
}

// ReleaseAgent implements loop.TaskStore. The history names agent as the
// actor.
func (s *Store) ReleaseAgent(ctx context.Context, agent, reason string) ([]string, error) {
	var ids []string
	err := s.writeAs(ctx, agent, func(t *txn) error {
		held, err := t.ids(`SELECT id FROM tasks WHERE status = 'in_progress' AND claimed_by = ? ORDER BY seq`, agent)
		if err != nil {
			return err
		}
		for _, id := range held {
			st, err := t.state(id)
			if err != nil {
				return err
			}
			if loop.LoopHeld(st.claim()) {
				continue // its live loop releases it
			}
			if _, err := t.transition(id, loop.StatusPending, loop.LogRelease, reason); err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// Retry implements loop.TaskStore.
func (s *Store) Retry(ctx context.Context, p loop.MoveParams) error {
	return s.writeAs(ctx, p.By.Name(), func(t *txn) error {
		if _, err := t.claimed(p.TaskID, loop.MoveRetry, p.By, loop.StatusPending, loop.StatusInProgress, loop.StatusFailed); err != nil {
			return err
		}
		if _, err := t.transition(p.TaskID, loop.StatusPending, loop.LogRetry, p.Message); err != nil {
			return err
		}
		_, err := t.exec(`UPDATE tasks SET retry_count = retry_count + 1 WHERE id = ?`, p.TaskID)
		return err
	})
}

// SetVerification implements loop.TaskStore. The verdict is "pass",
// "fail" or "" (cleared).
func (s *Store) SetVerification(ctx context.Context, id, verdict string) error {
	if verdict != "" && verdict != "pass" && verdict != "fail" {
		return fmt.Errorf("dag: verification verdict %q: want pass or fail", verdict)
	}
	return s.write(ctx, func(t *txn) error {
		res, err := t.exec(`UPDATE tasks SET verification_status = ?, updated_at = ? WHERE id = ?`, verdict, t.now, id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound(id)
		}
		return nil
	})
}

// AddLog implements loop.TaskStore.
func (s *Store) AddLog(ctx context.Context, id, kind, message string) error {
	if strings.TrimSpace(kind) == "" {
		return errors.New("dag: log entry needs a kind")
	}
	return s.write(ctx, func(t *txn) error {
		if _, err := t.state(id); err != nil {
			return err
		}
		return t.log(id, kind, message)
	})
}

// Logs implements loop.TaskStore.
func (s *Store) Logs(ctx context.Context, id string) ([]loop.LogEntry, error) {
	var out []loop.LogEntry
	err := s.read(ctx, func(t *txn) error {
		if _, err := t.state(id); err != nil {
			return err
		}
		rows, err := t.query(`SELECT at, kind, message, actor FROM task_logs WHERE task_id = ? ORDER BY seq`, id)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e loop.LogEntry
			var at int64
			if err := rows.Scan(&at, &e.Kind, &e.Message, &e.Actor); err != nil {
				return err
			}
			e.At = fromNanos(at)
			out = append(out, e)
		}
		return rows.Err()
	})
	return out, err
}
