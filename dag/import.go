package dag

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/ralph-dev/ralph/loop"
)

// ImportTask is one task of an Import batch (and of an Export).
type ImportTask struct {
	// Line is the 1-based line of the input file, used in error messages
	// when > 0.
	Line        int
	ID          string
	Title       string
	Description string
	Priority    int
	// ParentID and BlockedBy may name existing tasks or tasks anywhere in
	// the batch.
	ParentID  string
	BlockedBy []string
	// Status is pending, done, failed or blocked; in_progress is imported
	// as pending; "" means pending.
	Status  loop.Status
	Feature string
}

// where names a batch task in an error: "line 7: task t-3".
func (p ImportTask) where(i int) string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	} else {
		fmt.Fprintf(&b, "task #%d: ", i+1)
	}
	if p.ID != "" {
		fmt.Fprintf(&b, "task %s", p.ID)
	} else {
		fmt.Fprintf(&b, "task %q", p.Title)
	}
	return b.String()
}

// Import adds all tasks in one transaction, all or nothing, and returns how
// many were added. Statuses are taken as given (in_progress becomes
// pending) and readiness is computed from them; no log entries are
// written. Tasks without an id get a generated one. Errors name the
// offending task by its Line, e.g. "line 7: task t-3: parent t-99 does not
// exist", and wrap ErrDuplicateID, ErrCycle, loop.ErrNotFound or
// loop.ErrFeatureNotFound where they apply.
func (s *Store) Import(ctx context.Context, tasks []ImportTask) (int, error) {
	if len(tasks) == 0 {
		return 0, ctx.Err()
	}
	batch := make([]ImportTask, len(tasks))
	copy(batch, tasks)
	byID := make(map[string]int, len(batch))
	for i := range batch {
		p := &batch[i]
		if strings.TrimSpace(p.Title) == "" {
			return 0, fmt.Errorf("%s: a task needs a title", p.where(i))
		}
		switch p.Status {
		case "", loop.StatusInProgress:
			p.Status = loop.StatusPending
		case loop.StatusPending, loop.StatusDone, loop.StatusFailed, loop.StatusBlocked:
		default:
			return 0, fmt.Errorf("%s: unknown status %q (want pending, done, failed or blocked)", p.where(i), p.Status)
		}
		if p.ID == "" {
			continue
		}
		if err := checkID(p.ID); err != nil {
			return 0, fmt.Errorf("%s: %w", p.where(i), err)
		}
		if j, dup := byID[p.ID]; dup {
			return 0, fmt.Errorf("%s: %w (also %s)", p.where(i), ErrDuplicateID, strings.TrimPrefix(batch[j].where(j), "task "))
		}
		byID[p.ID] = i
	}
	err := s.write(ctx, func(t *txn) error { return t.importBatch(batch, byID) })
	if err != nil {
		return 0, err
	}
	return len(batch), nil
}

// extTask is what an import needs of a task already in the database.
type extTask struct {
	status loop.Status
	found  bool
}

func (t *txn) importBatch(batch []ImportTask, byID map[string]int) error {
	var existing int
	if err := t.row(`SELECT count(*) FROM tasks`).Scan(&existing); err != nil {
		return err
	}
	// Generated ids: "t-<n>" from the next insertion number, skipping ids in
	// the batch and in the database.
	var next int64
	if err := t.row(`SELECT coalesce(max(seq), 0) + 1 FROM tasks`).Scan(&next); err != nil {
		return err
	}
	for i := range batch {
		if batch[i].ID != "" {
			continue
		}
		for {
			id := fmt.Sprintf("t-%d", next)
			next++
			if _, ok := byID[id]; ok {
				continue
			}
			if existing > 0 {
				if ok, err := t.exists(id); err != nil {
					return err
				} else if ok {
					continue
				}
			}
			batch[i].ID, byID[id] = id, i
			break
		}
	}

	ext := map[string]extTask{}
	lookup := func(id string) (extTask, error) {
		if e, ok := ext[id]; ok || existing == 0 {
			return e, nil
		}
		var status string
		err := t.row(`SELECT status FROM tasks WHERE id = ?`, id).Scan(&status)
		if errors.Is(err, sql.ErrNoRows) {
			err = nil
		}
		e := extTask{status: loop.Status(status), found: status != ""}
		ext[id] = e
		return e, err
	}
	features := map[string]bool{}
	statusOf := func(id string) loop.Status {
		if j, ok := byID[id]; ok {
			return batch[j].Status
		}
		return ext[id].status
	}

	n := len(batch)
	children := make([]int, n)      // batch children of each batch task
	extChildren := map[string]int{} // batch children of existing tasks
	blockers := make([][]string, n) // deduplicated
	adj := make([][]int32, n)       // waits-for edges inside the batch: blockers and children
	depsOnExisting := false
	for i := range batch {
		p := &batch[i]
		if existing > 0 {
			if e, err := lookup(p.ID); err != nil {
				return err
			} else if e.found {
				return fmt.Errorf("%s: %w", p.where(i), ErrDuplicateID)
			}
		}
		if p.Feature != "" {
			ok, seen := features[p.Feature]
			if !seen {
				err := t.featureExists(p.Feature)
				if err != nil && !errors.Is(err, loop.ErrFeatureNotFound) {
					return err
				}
				ok = err == nil
				features[p.Feature] = ok
			}
			if !ok {
				return quiet(loop.ErrFeatureNotFound, "%s: feature %q does not exist", p.where(i), p.Feature)
			}
		}
		if p.ParentID != "" {
			if p.ParentID == p.ID {
				return fmt.Errorf("%s: a task cannot be its own parent: %w", p.where(i), ErrCycle)
			}
			if j, ok := byID[p.ParentID]; ok {
				children[j]++
				adj[j] = append(adj[j], int32(i))
			} else if e, err := lookup(p.ParentID); err != nil {
				return err
			} else if !e.found {
				return quiet(loop.ErrNotFound, "%s: parent %s does not exist", p.where(i), p.ParentID)
			} else {
				extChildren[p.ParentID]++
			}
		}
		seen := make(map[string]bool, len(p.BlockedBy))
		for _, b := range p.BlockedBy {
			if b == "" || seen[b] {
				continue
			}
			seen[b] = true
			if b == p.ID {
				return fmt.Errorf("%s: a task cannot block itself: %w", p.where(i), ErrCycle)
			}
			if j, ok := byID[b]; ok {
				adj[i] = append(adj[i], int32(j))
			} else if e, err := lookup(b); err != nil {
				return err
			} else if !e.found {
				return quiet(loop.ErrNotFound, "%s: blocker %s does not exist", p.where(i), b)
			} else {
				depsOnExisting = true
			}
			blockers[i] = append(blockers[i], b)
		}
	}
	if i, j := findCycle(adj); i >= 0 {
		return fmt.Errorf("%s: waits for %s, which waits for it: %w", batch[i].where(i), batch[j].ID, ErrCycle)
	}

	dependents := make([]int, n)      // batch dependents of each batch task
	extDependents := map[string]int{} // batch dependents of existing tasks
	for i := range batch {
		for _, b := range blockers[i] {
			if j, ok := byID[b]; ok {
				dependents[j]++
			} else {
				extDependents[b]++
			}
		}
	}
	const insTask = `INSERT INTO tasks (id, title, description, status, priority,
		parent_id, feature, created_at, updated_at, unmet_blockers, child_count, parent_failed,
		blocker_count, dependent_count)
		VALUES (?, ?, ?, ?, ?, NULLIF(?, ''), NULLIF(?, ''), ?, ?, ?, ?, ?, ?, ?)`
	for i := range batch {
		p := &batch[i]
		unmet := 0
		for _, b := range blockers[i] {
			if statusOf(b) != loop.StatusDone {
				unmet++
			}
		}
		pfailed := 0
		if p.ParentID != "" && statusOf(p.ParentID) == loop.StatusFailed {
			pfailed = 1
		}
		if _, err := t.exec(insTask, p.ID, p.Title, p.Description, string(p.Status), p.Priority,
			p.ParentID, p.Feature, t.now, t.now, unmet, children[i], pfailed, len(blockers[i]), dependents[i]); err != nil {
			return fmt.Errorf("%s: %w", p.where(i), err)
		}
	}
	const insDep = `INSERT INTO deps (blocked_id, blocker_id) VALUES (?, ?)`
	for i := range batch {
		for _, b := range blockers[i] {
			if _, err := t.exec(insDep, batch[i].ID, b); err != nil {
				return fmt.Errorf("%s: %w", batch[i].where(i), err)
			}
		}
	}
	for id, k := range extChildren {
		if _, err := t.exec(`UPDATE tasks SET child_count = child_count + ? WHERE id = ?`, k, id); err != nil {
			return err
		}
	}
	for id, k := range extDependents {
		if _, err := t.exec(`UPDATE tasks SET dependent_count = dependent_count + ? WHERE id = ?`, k, id); err != nil {
			return err
		}
	}
	// A cycle can also run through the database: a batch task waits for an
	// existing task that, through an existing parent, waits for a batch
	// task. Only then is the (slower) check in SQL needed.
	if depsOnExisting && len(extChildren) > 0 {
		for i := range batch {
			for _, b := range blockers[i] {
				if _, inBatch := byID[b]; inBatch {
					continue
				}
				cyc, err := t.reaches(b, batch[i].ID)
				if err != nil {
					return err
				}
				if cyc {
					return fmt.Errorf("%s: blocker %s waits for it through existing tasks: %w", batch[i].where(i), b, ErrCycle)
				}
			}
		}
	}
	return nil
}

// quietError reads as its message alone but still matches the errors it
// wraps with errors.Is and errors.As: "line 7: task t-3: parent t-99 does
// not exist" says all that the sentinel's text would repeat.
type quietError struct {
	msg  string
	errs []error
}

func (e *quietError) Error() string   { return e.msg }
func (e *quietError) Unwrap() []error { return e.errs }

func quiet(sentinel error, format string, args ...any) error {
	return &quietError{msg: fmt.Sprintf(format, args...), errs: []error{sentinel}}
}

// findCycle looks for a cycle in a directed graph given as adjacency lists
// and returns an edge (i, j) closing one, or (-1, -1). It is an iterative
// depth-first search, safe for long chains.
func findCycle(adj [][]int32) (int, int) {
	const (
		white = iota
		grey
		black
	)
	color := make([]byte, len(adj))
	type frame struct{ node, next int32 }
	var stack []frame
	for root := range adj {
		if color[root] != white {
			continue
		}
		color[root] = grey
		stack = append(stack[:0], frame{int32(root), 0})
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if int(f.next) == len(adj[f.node]) {
				color[f.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			j := adj[f.node][f.next]
			f.next++
			switch color[j] {
			case grey:
				return int(f.node), int(j)
			case white:
				color[j] = grey
				stack = append(stack, frame{j, 0})
			}
		}
	}
	return -1, -1
}

// Export returns every task in insertion order, ready for Import (Line is
// zero).
func (s *Store) Export(ctx context.Context) ([]ImportTask, error) {
	tasks, err := s.List(ctx, ListParams{})
	if err != nil {
		return nil, err
	}
	out := make([]ImportTask, len(tasks))
	for i, task := range tasks {
		out[i] = ImportTask{
			ID:          task.ID,
			Title:       task.Title,
			Description: task.Description,
			Priority:    task.Priority,
			ParentID:    task.ParentID,
			BlockedBy:   task.BlockedBy,
			Status:      task.Status,
			Feature:     task.Feature,
		}
	}
	return out, nil
}

// SkipPresent makes an import idempotent: it drops the tasks already in
// existing — the same id, or else the same title — and points the kept
// tasks' parents and blockers at the existing tasks they matched. It returns
// the tasks to import and those found present, both in input order.
// `ralph task import` uses it for markdown checklists, so that importing
// the same list twice, or a longer version of it, adds only what is new.
func SkipPresent(existing []loop.Task, tasks []ImportTask) (add, present []ImportTask) {
	ids := make(map[string]bool, len(existing))
	titles := make(map[string]string, len(existing))
	for _, t := range existing {
		ids[t.ID] = true
		if _, dup := titles[t.Title]; !dup {
			titles[t.Title] = t.ID
		}
	}
	alias := map[string]string{} // input id -> existing id it matched
	for _, t := range tasks {
		switch id, ok := titles[t.Title]; {
		case ids[t.ID]:
			alias[t.ID] = t.ID
		case ok:
			alias[t.ID] = id
		}
	}
	for _, t := range tasks {
		if _, ok := alias[t.ID]; ok {
			present = append(present, t)
			continue
		}
		if id, ok := alias[t.ParentID]; ok {
			t.ParentID = id
		}
		if len(t.BlockedBy) > 0 {
			bs := make([]string, len(t.BlockedBy))
			for i, b := range t.BlockedBy {
				if id, ok := alias[b]; ok {
					b = id
				}
				bs[i] = b
			}
			t.BlockedBy = bs
		}
		add = append(add, t)
	}
	return add, present
}
