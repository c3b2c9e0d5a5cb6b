package main

import (
	"bytes"
	"errors"
	"io"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/progress"
	"github.com/ralph-dev/ralph/loop"
)

// readTasks reads an import file: JSON Lines when its first non-blank
// character is "{", a markdown checklist otherwise (checklist is then true).
// It returns no tasks for blank input.
func readTasks(in io.Reader) (tasks []dag.ImportTask, checklist bool, err error) {
	data, err := io.ReadAll(in)
	if err != nil {
		return nil, false, err
	}
	first := bytes.TrimLeft(data, " \t\r\n")
	if len(first) == 0 {
		return nil, false, nil
	}
	if first[0] == '{' {
		tasks, err := dag.ReadJSONL(bytes.NewReader(data))
		return tasks, false, err
	}
	items, err := progress.Checklist(data)
	if errors.Is(err, progress.ErrNoChecklist) {
		return nil, true, errors.New("neither JSON Lines nor a markdown checklist (no \"- [ ] task\" lines)")
	}
	if err != nil {
		return nil, true, err
	}
	return checklistTasks(items), true, nil
}

// checklistTasks maps the items of a markdown checklist (progress.Checklist:
// the same reading, and the same ids, as `ralph build --progress`) to
// tasks: a phase becomes a parent task, done when all its boxes are
// checked; a box becomes a task, done when checked. Ids are the items'
// (derived from the text, or given as "<!-- id: X -->"); file order is
// kept, so at equal priority the tasks are claimed top to bottom. No
// dependencies are implied.
func checklistTasks(items []progress.Item) []dag.ImportTask {
	open := map[string]bool{} // phases with an unchecked box
	for _, it := range items {
		if !it.Phase && !it.Checked && it.Parent != "" {
			open[it.Parent] = true
		}
	}
	tasks := make([]dag.ImportTask, 0, len(items))
	for _, it := range items {
		t := dag.ImportTask{
			Line:        it.Line,
			ID:          it.ID,
			Title:       it.Title,
			Description: it.Description,
			Priority:    dag.DefaultPriority,
			ParentID:    it.Parent,
			Status:      loop.StatusPending,
		}
		if (it.Phase && !open[it.ID]) || it.Checked {
			t.Status = loop.StatusDone
		}
		tasks = append(tasks, t)
	}
	return tasks
}
