package looptest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ralph-dev/ralph/loop"
)

var (
	_ loop.TaskAdder  = (*MemStore)(nil)
	_ loop.TaskLister = (*MemStore)(nil)
	_ loop.TaskNoter  = (*MemStore)(nil)
)

// AddTask implements loop.TaskAdder as the SQLite store does: an empty id
// becomes "t-<n>" from the next insertion number (skipping ids in use), a
// parent must exist and not be done, a feature must exist
// (loop.ErrFeatureNotFound), blockers must exist and form no cycle.
func (s *MemStore) AddTask(ctx context.Context, nt loop.NewTask) (loop.Task, error) {
	now, err := s.begin(ctx)
	if err != nil {
		return loop.Task{}, err
	}
	defer s.mu.Unlock()
	if strings.TrimSpace(nt.Title) == "" {
		return loop.Task{}, fmt.Errorf("looptest: a task needs a title")
	}
	if nt.Feature != "" {
		if _, ok := s.features[nt.Feature]; !ok {
			return loop.Task{}, fmt.Errorf("looptest: feature %q: %w", nt.Feature, loop.ErrFeatureNotFound)
		}
	}
	if nt.ParentID != "" {
		p, err := s.getLocked(nt.ParentID)
		if err != nil {
			return loop.Task{}, fmt.Errorf("parent: %w", err)
		}
		if p.task.Status == loop.StatusDone {
			return loop.Task{}, fmt.Errorf("looptest: parent %s is done; a done task takes no new subtasks", nt.ParentID)
		}
	}
	id := nt.ID
	if id == "" {
		for n := s.seq + 1; ; n++ {
			if _, taken := s.tasks["t-"+strconv.FormatInt(n, 10)]; !taken {
				id = "t-" + strconv.FormatInt(n, 10)
				break
			}
		}
	}
	t := loop.Task{ID: id, Title: nt.Title, Description: nt.Description, Priority: nt.Priority,
		ParentID: nt.ParentID, Feature: nt.Feature, BlockedBy: nt.BlockedBy, Check: nt.Check, CheckBy: nt.CheckBy}
	if err := s.addLocked(now, []loop.Task{t}); err != nil {
		return loop.Task{}, err
	}
	return s.tasks[id].snapshot(), nil
}

// ListTasks implements loop.TaskLister, in insertion order. It holds the
// store's lock while it lists: fn must not call the store.
func (s *MemStore) ListTasks(ctx context.Context, q loop.ListQuery, fn func(loop.Task) error) error {
	if q.Status != "" && !q.Status.Valid() {
		return fmt.Errorf("looptest: unknown status %q", q.Status)
	}
	if _, err := s.begin(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	var match []*memTask
	var shape loop.ListShape
	for _, mt := range s.order {
		if q.Limit > 0 && len(match) == q.Limit {
			break
		}
		if (q.Status != "" && mt.task.Status != q.Status) || (q.Feature != "" && mt.task.Feature != q.Feature) {
			continue
		}
		match = append(match, mt)
		shape.IDWidth = max(shape.IDWidth, utf8.RuneCountInString(mt.task.ID))
		shape.StatusWidth = max(shape.StatusWidth, len(mt.task.Status))
		shape.PriorityWidth = max(shape.PriorityWidth, len(strconv.Itoa(mt.task.Priority)))
	}
	shape.Tasks = len(match)
	if q.Shape != nil {
		if err := q.Shape(shape); err != nil {
			return err
		}
	}
	for _, mt := range match {
		if err := fn(mt.snapshot()); err != nil {
			return err
		}
	}
	return nil
}

// Note implements loop.TaskNoter.
func (s *MemStore) Note(ctx context.Context, p loop.MoveParams) error {
	now, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer s.mu.Unlock()
	mt, err := s.getLocked(p.TaskID)
	if err != nil {
		return err
	}
	mt.logs = append(mt.logs, loop.LogEntry{At: now, Kind: loop.LogNote, Message: p.Message, Actor: p.By.Name()})
	return nil
}
