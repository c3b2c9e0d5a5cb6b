package dag

import (
	"cmp"
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"github.com/ralph-dev/ralph/loop"
)

// ListParams filter Store.List and Store.EachTask; the zero value lists
// everything. It is loop.ListQuery, so that EachTask is the
// loop.TaskLister the broker serves as it is.
type ListParams = loop.ListQuery

// ListShape describes the tasks of a listing (loop.ListShape): what a
// table needs to size its columns before it prints a row.
type ListShape = loop.ListShape

// List returns the tasks that match p, in insertion order. It holds them
// all in memory: EachTask streams them instead.
func (s *Store) List(ctx context.Context, p ListParams) ([]loop.Task, error) {
	var out []loop.Task
	err := s.EachTask(ctx, p, func(t loop.Task) error {
		out = append(out, t)
		return nil
	})
	return out, err
}

// EachTask calls fn with each task that matches p, in insertion order, as
// it reads them: its memory does not grow with the plan. The tasks come
// from one read transaction, a consistent snapshot, which stays open while
// fn runs (writers are not held up: the database is in WAL mode). An error
// from fn stops the listing and is returned as it is.
//
// Blockers are read alongside, by a second cursor over the dependencies in
// the order of the blocked tasks, merged with the first: no query per task
// and no table of dependencies in memory.
func (s *Store) EachTask(ctx context.Context, p ListParams, fn func(loop.Task) error) error {
	if p.Status != "" && !p.Status.Valid() {
		_, err := loop.ParseStatus(string(p.Status))
		return err
	}
	if p.Limit < 0 {
		return fmt.Errorf("dag: list limit %d: want 0 (all) or more", p.Limit)
	}
	var fnErr error
	err := s.readRaw(ctx, func(c *wconn) error {
		var err error
		fnErr, err = listTasks(ctx, c, p, 0, fn)
		return err
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}

// listTasks is EachTask in a transaction of c, over the tasks whose seq is
// greater than after. fnErr is an error of fn or p.Shape, which ended the
// listing; err any other.
func listTasks(ctx context.Context, c *wconn, p ListParams, after int64, fn func(loop.Task) error) (fnErr, err error) {
	limit := int64(p.Limit)
	if limit == 0 {
		limit = math.MaxInt64
	}
	filter := c.d.listFilter(p.Status != "", p.Feature != "")
	args := []any{string(p.Status), p.Feature, limit, after}
	if p.Shape != nil {
		var sh ListShape
		rows, err := c.query(ctx, `SELECT count(*), coalesce(max(length(id)), 0), coalesce(max(length(status)), 0),
			coalesce(max(length(CAST(priority AS TEXT))), 0)
			FROM (SELECT id, status, priority FROM tasks t WHERE `+filter+` ORDER BY seq LIMIT ?3) AS listed`, args...)
		if err := (wrow{rows: rows, err: err}).Scan(&sh.Tasks, &sh.IDWidth, &sh.StatusWidth, &sh.PriorityWidth); err != nil {
			return nil, err
		}
		if err := p.Shape(sh); err != nil {
			return err, nil
		}
	}
	// The driver may add the blockers to the row (a server's connection
	// runs one query at a time); else a second cursor reads them.
	cols := listCols + c.d.listBlockers()
	rows, err := c.query(ctx, `SELECT `+cols+` FROM tasks t WHERE `+filter+` ORDER BY seq LIMIT ?3`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var deps *depCursor
	defer func() {
		if deps != nil {
			deps.close()
		}
	}()
	for rows.Next() {
		task, blockers, seq, err := listTask(rows.vals)
		if err != nil {
			return nil, err
		}
		if blockers > 0 && len(rows.vals) > listColCount {
			var raw []byte
			switch v := rows.vals[listColCount].(type) {
			case string:
				raw = []byte(v)
			case []byte:
				raw = v
			}
			if err := json.Unmarshal(raw, &task.BlockedBy); err != nil {
				return nil, fmt.Errorf("dag: list: the blockers of task %s: %w", task.ID, err)
			}
		} else if blockers > 0 {
			if deps == nil {
				// Opened at the first task with blockers, from there on.
				// Ordered by the blocked task only: SQLite would sort
				// each task's few blockers in a b-tree of their own.
				dr, err := c.query(ctx, `SELECT t.seq, d.seq, d.blocker_id FROM tasks t CROSS JOIN deps d ON d.blocked_id = t.id
					WHERE t.blocker_count > 0 AND t.seq >= ?5 AND `+filter+` ORDER BY t.seq`, append(args, seq)...)
				if err != nil {
					return nil, err
				}
				deps = &depCursor{rows: dr}
				if err := deps.next(); err != nil {
					return nil, err
				}
			}
			if task.BlockedBy, err = deps.blockers(seq); err != nil {
				return nil, err
			}
		}
		if err := fn(task); err != nil {
			return err, nil
		}
	}
	return nil, rows.Err()
}

// listCols are the columns listTask reads: those of taskCols, shaped so
// that a row costs little to hand over (each column is a few calls into
// SQLite, and a string or large integer an allocation, times every task of
// a plan): the status as a small number; NULL for a column that holds its
// usual value (an empty text, a zero, updated_at equal to created_at —
// CASE, not NULLIF, which is a function call); the claim's columns, set
// together with a claimed_by never empty and cleared together (clearClaim),
// as one JSON array, NULL for a task without a claim; then seq; then the
// check and who wrote it.
const listCols = `id, title, CASE description WHEN '' THEN NULL ELSE description END,
	CASE status WHEN 'pending' THEN 0 WHEN 'done' THEN 1 WHEN 'failed' THEN 2 WHEN 'blocked' THEN 3
		WHEN 'in_progress' THEN 4 ELSE -1 END,
	priority, parent_id, feature, CASE retry_count WHEN 0 THEN NULL ELSE retry_count END,
	CASE verification_status WHEN '' THEN NULL ELSE verification_status END,
	created_at, CASE updated_at WHEN created_at THEN NULL ELSE updated_at END,
	CASE generation WHEN 0 THEN NULL ELSE generation END, blocker_count, seq,
	CASE WHEN claimed_by <> '' THEN json_array(claimed_by, claimed_at, lease_expires_at, claim_mode,
		holder_host, holder_pid, holder_start) END,
	CASE check_cmd WHEN '' THEN NULL ELSE check_cmd END, CASE check_by WHEN '' THEN NULL ELSE check_by END`

// listColCount is the number of listCols.
const listColCount = 17

// listStatuses are the statuses by the numbers of listCols.
var listStatuses = [...]loop.Status{loop.StatusPending, loop.StatusDone, loop.StatusFailed, loop.StatusBlocked, loop.StatusInProgress}

// listTask decodes a row of listCols.
func listTask(v []driver.Value) (task loop.Task, blockers int, seq int64, err error) {
	var bad error
	str := func(x driver.Value) string {
		switch x := x.(type) {
		case string:
			return x
		case nil:
			return ""
		case []byte:
			return string(x)
		}
		bad = fmt.Errorf("dag: list: %T where text belongs", x)
		return ""
	}
	num := func(x driver.Value) int64 {
		switch x := x.(type) {
		case int64:
			return x
		case nil:
			return 0
		}
		n, err := asInt(x)
		if err != nil {
			bad = fmt.Errorf("dag: list: %w", err)
		}
		return n
	}
	status := loop.Status("")
	if n, ok := v[3].(int64); ok && n >= 0 && int(n) < len(listStatuses) {
		status = listStatuses[n]
	} else {
		status = loop.Status(str(v[3]))
	}
	created := num(v[9])
	updated := created
	if v[10] != nil {
		updated = num(v[10])
	}
	t := loop.Task{
		ID: str(v[0]), Title: str(v[1]), Description: str(v[2]), Status: status,
		Priority: int(num(v[4])), ParentID: str(v[5]), Feature: str(v[6]), RetryCount: int(num(v[7])),
		VerificationStatus: str(v[8]), CreatedAt: fromNanos(created), UpdatedAt: fromNanos(updated),
		Generation: num(v[11]),
	}
	blockers, seq = int(num(v[12])), num(v[13])
	t.Check, t.CheckBy = str(v[15]), str(v[16])
	if claim := str(v[14]); claim != "" {
		var c struct {
			by         string
			at, lease  int64
			mode, host string
			pid, start int64
		}
		if err := json.Unmarshal([]byte(claim), &[]any{&c.by, &c.at, &c.lease, &c.mode, &c.host, &c.pid, &c.start}); err != nil {
			return t, 0, 0, fmt.Errorf("dag: list: the claim of task %s: %w", t.ID, err)
		}
		t.ClaimedBy, t.ClaimedAt, t.LeaseExpiresAt = c.by, fromNanos(c.at), fromNanos(c.lease)
		t.ClaimMode, t.Holder = loop.ClaimMode(c.mode), loop.Holder{Host: c.host, PID: int(c.pid), Start: c.start}
	}
	return t, blockers, seq, bad
}

// depCursor reads (blocked task's seq, dependency's seq, blocker id) rows
// in order of the blocked task's seq.
type depCursor struct {
	rows *wrows
	// cur is the current row, if ok.
	cur depRow
	ok  bool
	// buf holds the rows of one task while they are put in order.
	buf []depRow
}

type depRow struct {
	task, seq int64
	blocker   string
}

func (c *depCursor) next() error {
	if c.ok = c.rows.Next(); !c.ok {
		return c.rows.Err()
	}
	return c.rows.Scan(&c.cur.task, &c.cur.seq, &c.cur.blocker)
}

// blockers returns the blockers of the task with this seq, in the order
// they were added; seq is not smaller than that of the previous call.
func (c *depCursor) blockers(task int64) ([]string, error) {
	c.buf = c.buf[:0]
	for c.ok && c.cur.task <= task {
		if c.cur.task == task {
			c.buf = append(c.buf, c.cur)
		}
		if err := c.next(); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(c.buf, func(a, b depRow) int { return cmp.Compare(a.seq, b.seq) })
	out := make([]string, len(c.buf))
	for i, d := range c.buf {
		out[i] = d.blocker
	}
	return out, nil
}

func (c *depCursor) close() { c.rows.Close() }
