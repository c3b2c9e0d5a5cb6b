package dag

import (
	"context"
	"fmt"
	"io"
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
	// Check is the task's check command and CheckBy the agent that wrote
	// it (loop.Task.Check, CheckBy); a CheckBy without a Check is dropped.
	Check   string
	CheckBy string
}

// where names a batch task in an error: "line 7: task t-3".
func (p ImportTask) where(i int) string {
	var b strings.Builder
	b.WriteString(p.place(i))
	b.WriteString(": ")
	if p.ID != "" {
		fmt.Fprintf(&b, "task %s", p.ID)
	} else {
		fmt.Fprintf(&b, "task %q", p.Title)
	}
	return b.String()
}

// place is where a batch task is, without its id: "line 7", or "task #3"
// (the i-th of the batch) when it has no line.
func (p ImportTask) place(i int) string {
	if p.Line > 0 {
		return fmt.Sprintf("line %d", p.Line)
	}
	return fmt.Sprintf("task #%d", i+1)
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

// Export returns every task in insertion order, ready for Import (Line is
// zero). It holds them all in memory: ExportJSONL streams them.
func (s *Store) Export(ctx context.Context) ([]ImportTask, error) {
	var out []ImportTask
	err := s.EachTask(ctx, ListParams{}, func(t loop.Task) error {
		out = append(out, exportTask(t))
		return nil
	})
	return out, err
}

// ExportJSONL writes every task in insertion order to w as WriteJSONL
// does, each as it is read (EachTask), in memory that does not grow with
// the plan.
func (s *Store) ExportJSONL(ctx context.Context, w io.Writer) error {
	jw := newJSONLWriter(w)
	if err := s.EachTask(ctx, ListParams{}, func(t loop.Task) error { return jw.write(exportTask(t)) }); err != nil {
		return err
	}
	return jw.bw.Flush()
}

func exportTask(t loop.Task) ImportTask {
	return ImportTask{
		ID:          t.ID,
		Title:       t.Title,
		Description: t.Description,
		Priority:    t.Priority,
		ParentID:    t.ParentID,
		BlockedBy:   t.BlockedBy,
		Status:      t.Status,
		Feature:     t.Feature,
		Check:       t.Check,
		CheckBy:     t.CheckBy,
	}
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
