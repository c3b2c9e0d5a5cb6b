package main

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// readTasks reads an import file: JSON Lines when its first non-blank
// character is "{", a markdown checklist otherwise.
func readTasks(c *cli.Context, st *dag.Store, in io.Reader) ([]dag.ImportTask, error) {
	data, err := io.ReadAll(in)
	if err != nil {
		return nil, err
	}
	first := bytes.TrimLeft(data, " \t\r\n")
	if len(first) == 0 {
		return nil, nil
	}
	if first[0] == '{' {
		return dag.ReadJSONL(bytes.NewReader(data))
	}
	existing, err := st.List(c.Context, dag.ListParams{})
	if err != nil {
		return nil, err
	}
	taken := make(map[string]bool, len(existing))
	for _, t := range existing {
		taken[t.ID] = true
	}
	return parseChecklist(data, taken)
}

var (
	checklistHeading = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	checklistItem    = regexp.MustCompile(`^(\s*)[-*+]\s+\[([ xX])\]\s+(.*\S)\s*$`)
)

// Sections of a ralph progress file that hold a log, not tasks.
var checklistSkipSections = map[string]bool{
	"completed this iteration": true,
	"recent attempts":          true,
	"iteration log":            true,
}

// parseChecklist turns a markdown checklist into tasks. Each "- [ ] item"
// ("- [x]" when done) is a task; a heading with items under it (a phase,
// "### Phase 1: Setup") becomes their parent; an item indented under
// another becomes its child; indented text under an item that is not an
// item itself is its description. Headings without items of their own, and
// the log sections of a progress file, are skipped. Ids are generated,
// "t-<n>", skipping those in taken; a parent whose children are all done
// is imported done. No dependencies are implied: tasks keep file order, so
// with equal priorities they are claimed top to bottom.
func parseChecklist(data []byte, taken map[string]bool) ([]dag.ImportTask, error) {
	var (
		tasks   []dag.ImportTask
		next    = 1
		phase   = -1 // index in tasks of the current heading's task, -1 none
		heading struct {
			title string
			line  int
			skip  bool
		}
		// stack of open items: their index in tasks and their indent.
		stack []struct{ idx, indent int }
		last  = -1 // index of the last item, for description lines
	)
	newID := func() string {
		for ; ; next++ {
			id := "t-" + strconv.Itoa(next)
			if !taken[id] {
				taken[id] = true
				next++
				return id
			}
		}
	}

	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	for i, line := range lines {
		n := i + 1
		if m := checklistHeading.FindStringSubmatch(line); m != nil {
			heading.title, heading.line = m[2], n
			heading.skip = checklistSkipSections[strings.ToLower(m[2])]
			phase, stack, last = -1, nil, -1
			continue
		}
		m := checklistItem.FindStringSubmatch(line)
		if m == nil {
			if last >= 0 && strings.TrimSpace(line) != "" && indentOf(line) > stack[len(stack)-1].indent {
				t := &tasks[last]
				if t.Description != "" {
					t.Description += "\n"
				}
				t.Description += strings.TrimSpace(line)
			} else if strings.TrimSpace(line) != "" {
				last = -1 // other prose ends the item's description
			}
			continue
		}
		if heading.skip {
			continue
		}
		indent := indentOf(m[1])
		if phase < 0 && heading.title != "" {
			tasks = append(tasks, dag.ImportTask{
				Line: heading.line, ID: newID(), Title: heading.title,
				Priority: dag.DefaultPriority, Status: loop.StatusPending,
			})
			phase = len(tasks) - 1
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		t := dag.ImportTask{Line: n, ID: newID(), Title: m[3], Priority: dag.DefaultPriority, Status: loop.StatusPending}
		if m[2] != " " {
			t.Status = loop.StatusDone
		}
		switch {
		case len(stack) > 0:
			t.ParentID = tasks[stack[len(stack)-1].idx].ID
		case phase >= 0:
			t.ParentID = tasks[phase].ID
		}
		tasks = append(tasks, t)
		last = len(tasks) - 1
		stack = append(stack, struct{ idx, indent int }{last, indent})
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("neither JSON Lines nor a markdown checklist (no \"- [ ] task\" lines)")
	}
	markDoneParents(tasks)
	return tasks, nil
}

// markDoneParents marks done every task whose children are all done,
// innermost first (children always follow their parent).
func markDoneParents(tasks []dag.ImportTask) {
	open := make(map[string]bool)
	hasChild := make(map[string]bool)
	for i := len(tasks) - 1; i >= 0; i-- {
		t := &tasks[i]
		if hasChild[t.ID] {
			if open[t.ID] {
				t.Status = loop.StatusPending
			} else {
				t.Status = loop.StatusDone
			}
		}
		if t.ParentID != "" {
			hasChild[t.ParentID] = true
			if t.Status != loop.StatusDone {
				open[t.ParentID] = true
			}
		}
	}
}

func indentOf(s string) int {
	n := 0
	for _, r := range s {
		switch r {
		case ' ':
			n++
		case '\t':
			n += 4
		default:
			return n
		}
	}
	return n
}
