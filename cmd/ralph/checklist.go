package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/progress"
	"github.com/ralph-dev/ralph/loop"
)

// importInput is what `task import` adds.
type importInput struct {
	// src yields the tasks; nil when the input is blank.
	src dag.TaskSource
	// checklist: the input is a markdown checklist, of which add tasks
	// are new and present are already in the plan.
	checklist bool
	add       int
	present   []dag.ImportTask
	close     func()
}

// readImport reads an import file: a beads JSON document (bd list --json)
// read whole, JSON Lines when its first non-blank character is "{",
// streamed (the import reads it twice and holds none of it), and a
// markdown checklist otherwise, read whole (a checklist is
// written by people) and imported idempotently: what is already there
// (same id, or same title) is skipped. JSON Lines stay strict, all or
// nothing: a known id is an error. Input that cannot
// seek (a pipe) is first copied to a temporary file, removed at once.
func readImport(c *cli.Context, st *dag.Store, in io.Reader) (importInput, error) {
	input := importInput{close: func() {}}
	rs, ok := in.(io.ReadSeeker)
	if ok {
		_, err := rs.Seek(0, io.SeekCurrent)
		ok = err == nil
	}
	if !ok {
		f, closeFn, err := spool(in)
		if err != nil {
			return input, err
		}
		rs, input.close = f, closeFn
	}
	first, err := firstByte(rs)
	if err != nil || first == 0 {
		input.close()
		return input, err
	}
	doc, err := jsonDocument(rs, first)
	if err != nil {
		input.close()
		return input, err
	}
	if doc {
		// What bd list --json prints (beads 1.x): read whole.
		defer input.close()
		input.close = func() {}
		src, err := dag.ReadBeadsJSON(rs)
		if err != nil {
			return input, err
		}
		input.src = src
		return input, nil
	}
	if first == '{' {
		src, err := dag.NewJSONLSource(rs)
		if err != nil {
			input.close()
			return input, err
		}
		input.src = src
		return input, nil
	}
	// A checklist is read whole here: its file is closed on return (the
	// deferred call is the closer as it is now), not by the caller.
	defer input.close()
	input.close = func() {}
	data, err := io.ReadAll(rs)
	if err != nil {
		return input, err
	}
	items, err := progress.Checklist(data)
	if errors.Is(err, progress.ErrNoChecklist) {
		return input, errors.New("neither JSON Lines nor a markdown checklist (no \"- [ ] task\" lines)")
	}
	if err != nil {
		return input, err
	}
	existing, err := st.List(c.Context, dag.ListParams{})
	if err != nil {
		return input, err
	}
	tasks, present := dag.SkipPresent(existing, checklistTasks(items))
	input.src, input.checklist, input.add, input.present = dag.TaskSlice(tasks), true, len(tasks), present
	return input, nil
}

// jsonDocument reports whether rs, whose first byte is first, holds one
// JSON document rather than JSON Lines: an array, or an object spread over
// lines (its first line a lone "{"), or a one-line object holding the
// issues under "data" or "issues" — what beads' bd list --json prints. It
// seeks back to where rs stood.
func jsonDocument(rs io.ReadSeeker, first byte) (bool, error) {
	switch first {
	case '[':
		return true, nil
	case '{':
	default:
		return false, nil
	}
	start, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return false, err
	}
	line, err := bufio.NewReaderSize(rs, 64<<10).ReadSlice('\n')
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return false, err
	}
	if _, err := rs.Seek(start, io.SeekStart); err != nil {
		return false, err
	}
	line = bytes.TrimSpace(line)
	if string(line) == "{" {
		return true, nil
	}
	var env map[string]json.RawMessage
	if json.Unmarshal(line, &env) != nil {
		return false, nil // JSON Lines' reader says what is wrong with it
	}
	_, data := env["data"]
	_, issues := env["issues"]
	_, id := env["id"]
	return (data || issues) && !id, nil
}

// firstByte returns the first byte of rs that is not a space, tab or line
// break (0 for none), and seeks back to where rs stood.
func firstByte(rs io.ReadSeeker) (byte, error) {
	start, err := rs.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, err
	}
	br := bufio.NewReader(rs)
	for {
		b, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			b, err = 0, nil
		}
		if err != nil {
			return 0, err
		}
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			_, err := rs.Seek(start, io.SeekStart)
			return b, err
		}
	}
}

// spool copies r to a temporary file and returns it at its start, and how
// to close it. The file is removed at once where the system allows (an
// open file lives on without a name), else when closed.
func spool(r io.Reader) (*os.File, func(), error) {
	f, err := os.CreateTemp("", "ralph-import-*")
	if err != nil {
		return nil, nil, err
	}
	name := f.Name()
	removed := os.Remove(name) == nil
	closeFn := func() {
		f.Close()
		if !removed {
			os.Remove(name)
		}
	}
	if _, err := io.Copy(f, r); err != nil {
		closeFn()
		return nil, nil, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		closeFn()
		return nil, nil, err
	}
	return f, closeFn, nil
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
