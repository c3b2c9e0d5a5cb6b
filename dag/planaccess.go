package dag

import (
	"context"

	"github.com/ralph-dev/ralph/loop"
)

// The optional plan interfaces of package loop, through which the broker
// serves a sandboxed agent's `task add`, `task dep add`, `task list` and
// `task note` (ARCHITECTURE.md §7) whatever the store.
var (
	_ loop.TaskAdder  = (*Store)(nil)
	_ loop.TaskLister = (*Store)(nil)
	_ loop.TaskNoter  = (*Store)(nil)
)

// AddTask implements loop.TaskAdder: it is Add.
func (s *Store) AddTask(ctx context.Context, t loop.NewTask) (loop.Task, error) {
	return s.Add(ctx, t)
}

// ListTasks implements loop.TaskLister: it is EachTask.
func (s *Store) ListTasks(ctx context.Context, q loop.ListQuery, fn func(loop.Task) error) error {
	return s.EachTask(ctx, q, fn)
}

// Note implements loop.TaskNoter: a loop.LogNote entry on task p.TaskID,
// made by p.By. Error: loop.ErrNotFound.
func (s *Store) Note(ctx context.Context, p loop.MoveParams) error {
	return s.writeAs(ctx, p.By.Name(), func(t *txn) error {
		if _, err := t.state(p.TaskID); err != nil {
			return err
		}
		return t.log(p.TaskID, loop.LogNote, p.Message)
	})
}
