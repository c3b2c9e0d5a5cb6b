package dag

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/ralph-dev/ralph/loop"
)

// AddParams are the arguments of Store.Add: loop.NewTask, so that Add is
// the loop.TaskAdder the broker serves as it is. The title is required and
// must not be blank; Priority is used as is (callers pass DefaultPriority
// when the user gave none).
type AddParams = loop.NewTask

// Add creates a pending task and returns it. An empty p.ID is generated
// ("t-<n>"), never equal to an existing id.
// Errors: ErrDuplicateID, loop.ErrNotFound (parent or blocker),
// loop.ErrFeatureNotFound, ErrCycle, or a plain error for a blank title or
// an id that cannot be one (checkID: longer than MaxIDBytes, not UTF-8,
// with spaces or control characters).
func (s *Store) Add(ctx context.Context, p AddParams) (loop.Task, error) {
	if strings.TrimSpace(p.Title) == "" {
		return loop.Task{}, errors.New("dag: a task needs a title")
	}
	if p.ID != "" {
		if err := checkID(p.ID); err != nil {
			return loop.Task{}, err
		}
	}
	var task loop.Task
	err := s.write(ctx, func(t *txn) error {
		id := p.ID
		if id == "" {
			var err error
			if id, err = t.newID(nil); err != nil {
				return err
			}
		} else if exists, err := t.exists(id); err != nil {
			return err
		} else if exists {
			return fmt.Errorf("%w: %q", ErrDuplicateID, id)
		}
		if p.Feature != "" {
			if err := t.featureExists(p.Feature); err != nil {
				return err
			}
		}
		pfailed := 0
		if p.ParentID != "" {
			ps, err := t.state(p.ParentID)
			if err != nil {
				return fmt.Errorf("parent: %w", err)
			}
			if ps.status == loop.StatusDone {
				return fmt.Errorf("dag: parent %s is done; a done task takes no new subtasks", p.ParentID)
			}
			if ps.status == loop.StatusFailed {
				pfailed = 1
			}
		}
		_, err := t.exec(`INSERT INTO tasks (id, title, description, status, priority, parent_id, feature,
			parent_failed, created_at, updated_at, check_cmd, check_by) VALUES (?, ?, ?, 'pending', ?, NULLIF(?, ''), NULLIF(?, ''), ?, ?, ?, ?, ?)`,
			id, p.Title, p.Description, p.Priority, p.ParentID, p.Feature, pfailed, t.now, t.now, p.Check, checkAuthor(p.Check, p.CheckBy))
		if err != nil {
			return err
		}
		if p.ParentID != "" {
			if _, err := t.exec(`UPDATE tasks SET child_count = child_count + 1 WHERE id = ?`, p.ParentID); err != nil {
				return err
			}
			if err := t.updateChains(id); err != nil { // it waits for nothing yet; its parent waits for it
				return err
			}
		}
		for _, b := range p.BlockedBy {
			if err := t.addDep(id, b); err != nil {
				return err
			}
		}
		task, err = t.get(id)
		return err
	})
	return task, err
}

// checkAuthor is the agent stored as a check's author: by, but none for
// no check (a mark of nothing, loop.NewTask.CheckBy).
func checkAuthor(check, by string) string {
	if check == "" {
		return ""
	}
	return by
}

// MaxIDBytes is the length of the longest task id, in bytes. An id names git
// branches, ralph/task/<id> and ralph/attempt/<id>/<n> (ARCHITECTURE.md §5),
// where parallel.RefName writes every byte but a letter, a digit, '-' and '_'
// as %XX: an id of 80 bytes is at most 240 bytes there, one path component,
// within the 255 bytes a file name may have (a loose ref is a file, and git
// writes it as <name>.lock first).
const MaxIDBytes = 80

// checkID refuses ids that would not survive a command line, a JSON line
// or a git ref name intact: empty, longer than MaxIDBytes, not UTF-8, or
// with spaces or control characters.
func checkID(id string) error {
	if id == "" {
		return errors.New("dag: empty task id")
	}
	if len(id) > MaxIDBytes {
		return fmt.Errorf("dag: task id %q is %d bytes long: ids are at most %d bytes (an id names git branches, ralph/task/<id>)",
			idHead(id), len(id), MaxIDBytes)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("dag: task id %q is not UTF-8", id)
	}
	for _, r := range id {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("dag: task id %q: ids may not contain spaces or control characters", id)
		}
	}
	return nil
}

// idHead is the start of an id too long to quote whole, with an ellipsis.
func idHead(id string) string {
	n := 32
	for n > 0 && !utf8.RuneStart(id[n]) {
		n--
	}
	return id[:n] + "…"
}

func (t *txn) exists(id string) (bool, error) {
	var n int
	err := t.row(`SELECT count(*) FROM tasks WHERE id = ?`, id).Scan(&n)
	return n > 0, err
}

// newID generates "t-<n>" from the next insertion number, skipping ids in
// use (imported ids may look the same) and ids in taken.
func (t *txn) newID(taken map[string]int) (string, error) {
	var n int64
	if err := t.row(`SELECT coalesce(max(seq), 0) + 1 FROM tasks`).Scan(&n); err != nil {
		return "", err
	}
	for ; ; n++ {
		id := fmt.Sprintf("t-%d", n)
		if _, ok := taken[id]; ok {
			continue
		}
		exists, err := t.exists(id)
		if err != nil {
			return "", err
		}
		if !exists {
			return id, nil
		}
	}
}

func (t *txn) featureExists(name string) error {
	var n int
	if err := t.row(`SELECT count(*) FROM features WHERE name = ?`, name).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: %q", loop.ErrFeatureNotFound, name)
	}
	return nil
}

// addDep records that blocked waits for blocker, after checking both exist
// and that no cycle would form. A dependency already present is a no-op.
func (t *txn) addDep(blocked, blocker string) error {
	if blocked == blocker {
		return fmt.Errorf("%w: task %s cannot block itself", ErrCycle, blocked)
	}
	if _, err := t.state(blocked); err != nil {
		return err
	}
	bs, err := t.state(blocker)
	if err != nil {
		return fmt.Errorf("blocker: %w", err)
	}
	var n int
	if err := t.row(`SELECT count(*) FROM deps WHERE blocked_id = ? AND blocker_id = ?`, blocked, blocker).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	cyc, err := t.reaches(blocker, blocked)
	if err != nil {
		return err
	}
	if cyc {
		return fmt.Errorf("%w: %s already waits (directly or through subtasks) for %s", ErrCycle, blocker, blocked)
	}
	if _, err := t.exec(`INSERT INTO deps (blocked_id, blocker_id) VALUES (?, ?)`, blocked, blocker); err != nil {
		return err
	}
	if err := t.countDep(blocked, blocker, bs.status, +1); err != nil {
		return err
	}
	return t.updateChains(blocker)
}

// countDep keeps the counters of one dependency added (delta +1) or
// removed (-1): the blocked task's blockers (and unmet ones, if the blocker
// is not done) and the blocker's dependents.
func (t *txn) countDep(blocked, blocker string, blockerStatus loop.Status, delta int) error {
	unmet := 0
	if blockerStatus != loop.StatusDone {
		unmet = delta
	}
	if _, err := t.exec(`UPDATE tasks SET blocker_count = blocker_count + ?, unmet_blockers = unmet_blockers + ?
		WHERE id = ?`, delta, unmet, blocked); err != nil {
		return err
	}
	_, err := t.exec(`UPDATE tasks SET dependent_count = dependent_count + ? WHERE id = ?`, delta, blocker)
	return err
}

// reaches reports whether task from waits, transitively, for task to. A task
// waits for its blockers and for its children (a parent is done only when
// they are), so a child blocked by its own ancestor is a cycle too.
func (t *txn) reaches(from, to string) (bool, error) {
	var n int
	err := t.row(t.s.d.reachesQuery(), from, to).Scan(&n)
	return n > 0, err
}

// reachesQuery walks the edges of both kinds with one recursive term
// each, every step by an index.
const reachesQuery = `WITH RECURSIVE w(id) AS (
		SELECT CAST(?1 AS TEXT)
		UNION
		SELECT d.blocker_id FROM deps d JOIN w ON d.blocked_id = w.id
		UNION
		SELECT c.id FROM tasks c JOIN w ON c.parent_id = w.id
	) SELECT count(*) FROM (SELECT 1 FROM w WHERE id = ?2 LIMIT 1) AS found`

// reachesQueryServer is reachesQuery for PostgreSQL, which allows a
// recursive query one recursive term with one reference to itself (it
// reads "a UNION b UNION c" as "(a UNION b) UNION c", whose left side
// would then refer to w): both kinds of edge come from a LATERAL subquery,
// each by its index. (SQLite has no LATERAL, and would scan a union of
// the edges given as a plain subquery at every step.)
const reachesQueryServer = `WITH RECURSIVE w(id) AS (
		SELECT CAST(?1 AS TEXT)
		UNION
		SELECT e.id FROM w, LATERAL (
			SELECT d.blocker_id AS id FROM deps d WHERE d.blocked_id = w.id
			UNION ALL
			SELECT c.id FROM tasks c WHERE c.parent_id = w.id) AS e
	) SELECT count(*) FROM (SELECT 1 FROM w WHERE id = ?2 LIMIT 1) AS found`

// AddDependency makes blocked wait for blocker. It is a no-op when the
// dependency exists. Errors: ErrCycle (a task blocking itself included, and
// a task waiting for its own ancestor), loop.ErrNotFound.
func (s *Store) AddDependency(ctx context.Context, blocked, blocker string) error {
	return s.write(ctx, func(t *txn) error { return t.addDep(blocked, blocker) })
}

// RemoveDependency removes the dependency of blocked on blocker.
// Errors: loop.ErrNotFound, ErrNoDependency. An explicitly blocked task
// stays blocked even when this removes its last unfinished blocker: the
// automatic unblock happens only when a blocker becomes done.
func (s *Store) RemoveDependency(ctx context.Context, blocked, blocker string) error {
	return s.write(ctx, func(t *txn) error {
		if _, err := t.state(blocked); err != nil {
			return err
		}
		bs, err := t.state(blocker)
		if err != nil {
			return err
		}
		res, err := t.exec(`DELETE FROM deps WHERE blocked_id = ? AND blocker_id = ?`, blocked, blocker)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("%w: %s is not blocked by %s", ErrNoDependency, blocked, blocker)
		}
		if err := t.countDep(blocked, blocker, bs.status, -1); err != nil {
			return err
		}
		return t.updateChains(blocker)
	})
}

// Block moves pending task p.TaskID to blocked (explicitly), logging
// p.Message as kind loop.LogBlock, made by p.By. Errors: loop.ErrNotFound,
// *loop.TransitionError.
func (s *Store) Block(ctx context.Context, p loop.MoveParams) error {
	return s.writeAs(ctx, p.By.Name(), func(t *txn) error {
		_, err := t.transition(p.TaskID, loop.StatusBlocked, loop.LogBlock, p.Message)
		return err
	})
}

// Unblock moves blocked task p.TaskID back to pending, logged as kind
// loop.LogUnblock (p.Message, or "unblocked"), made by p.By.
// Errors: loop.ErrNotFound, *loop.TransitionError.
func (s *Store) Unblock(ctx context.Context, p loop.MoveParams) error {
	if p.Message == "" {
		p.Message = "unblocked"
	}
	return s.writeAs(ctx, p.By.Name(), func(t *txn) error {
		// Only blocked -> pending is an unblock: the other moves to
		// pending (a release, a reset) are not this command's.
		st, err := t.state(p.TaskID)
		if err != nil {
			return err
		}
		if st.status != loop.StatusBlocked {
			return &loop.TransitionError{TaskID: p.TaskID, From: st.status, To: loop.StatusPending}
		}
		_, err = t.transition(p.TaskID, loop.StatusPending, loop.LogUnblock, p.Message)
		return err
	})
}

// Reset moves failed task p.TaskID back to pending, logged as kind
// loop.LogReset (p.Message, or "reset"), made by p.By. Ancestors that
// failed only because of it (they have no other failed child) go back to
// pending too, each logged. RetryCount is not changed.
// Errors: loop.ErrNotFound, *loop.TransitionError.
func (s *Store) Reset(ctx context.Context, p loop.MoveParams) error {
	id := p.TaskID
	if p.Message == "" {
		p.Message = "reset"
	}
	return s.writeAs(ctx, p.By.Name(), func(t *txn) error {
		st, err := t.state(id)
		if err != nil {
			return err
		}
		if st.status != loop.StatusFailed {
			return &loop.TransitionError{TaskID: id, From: st.status, To: loop.StatusPending}
		}
		if _, err := t.transition(id, loop.StatusPending, loop.LogReset, p.Message); err != nil {
			return err
		}
		for child, parent := id, st.parentID; parent != ""; {
			ps, err := t.state(parent)
			if err != nil {
				return err
			}
			if ps.status != loop.StatusFailed {
				return nil
			}
			var others int
			if err := t.row(`SELECT count(*) FROM tasks WHERE parent_id = ? AND status = 'failed'`, parent).Scan(&others); err != nil {
				return err
			}
			if others > 0 {
				return nil
			}
			if _, err := t.transition(parent, loop.StatusPending, loop.LogReset, "reset with subtask "+child); err != nil {
				return err
			}
			child, parent = parent, ps.parentID
		}
		return nil
	})
}
