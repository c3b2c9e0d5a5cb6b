package progress_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ralph-dev/ralph/dag/progress"
	"github.com/ralph-dev/ralph/loop"
)

func ExampleParse() {
	doc, err := progress.Parse([]byte(`# Progress: Login
## Status
In Progress
## Tasks
### Phase 1: Backend
- [x] Add the handler
- [ ] Hash passwords <!-- id: T-7 -->
` + "```" + `
- [ ] not a task: inside a code fence
` + "```" + `
## Completed This Iteration
- [x] not a task either
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(doc.Name, "/", doc.Status, "/ finished:", doc.Finished())
	for _, it := range doc.Items {
		fmt.Printf("%-16s phase=%-5v checked=%-5v parent=%q %s\n", it.ID, it.Phase, it.Checked, it.Parent, it.Title)
	}
	// Output:
	// Login / In Progress / finished: false
	// phase-1          phase=true  checked=false parent="" Backend
	// add-the-handler  phase=false checked=true  parent="phase-1" Add the handler
	// T-7              phase=false checked=false parent="phase-1" Hash passwords
}

func ExampleParse_notAProgressFile() {
	_, err := progress.Parse([]byte("\n# README\n\n- [ ] a\n"))
	fmt.Println(err)
	// Output:
	// progress: line 2: want "# Progress: <name>" as the first line, got "# README"
}

func ExampleChecklist() {
	items, err := progress.Checklist([]byte(`# Plan
Some notes.

## Backend
- [ ] API
- [x] Schema

## Frontend
- [ ] Page
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, it := range items {
		fmt.Printf("%-8s parent=%-8q phase=%v checked=%v\n", it.ID, it.Parent, it.Phase, it.Checked)
	}
	// Output:
	// backend  parent=""       phase=true checked=false
	// api      parent="backend" phase=false checked=false
	// schema   parent="backend" phase=false checked=true
	// frontend parent=""       phase=true checked=false
	// page     parent="frontend" phase=false checked=false
}

// A loop iteration over a progress file: claim the first unchecked box,
// tick it, log the iteration.
func ExampleStore() {
	dir, err := os.MkdirTemp("", "progress-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "progress.md")
	os.WriteFile(path, []byte("# Progress: demo\n## Status\nIn Progress\n## Tasks\n- [ ] First\n- [ ] Second\n"), 0o644)

	ctx := context.Background()
	s, err := progress.Open(path, progress.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	task, _ := s.Claim(ctx, loop.ClaimParams{Agent: "agent-1"})
	_ = s.Complete(ctx, loop.MoveParams{TaskID: task.ID, Message: "done"})
	started := time.Date(2026, 1, 29, 10, 0, 0, 0, time.UTC)
	_ = s.AppendIteration(ctx, progress.IterationRow{Iteration: 1, Started: started, Duration: 90 * time.Second, TasksCompleted: 1, Notes: task.ID})
	done, _ := s.Done(ctx)
	counts, _ := s.Counts(ctx, loop.Scope{})
	b, _ := os.ReadFile(path)
	fmt.Printf("%s\ndone: %v, %s\n", b, done, counts)
	// Output:
	// # Progress: demo
	// ## Status
	// In Progress
	// ## Tasks
	// - [x] First
	// - [ ] Second
	//
	// ## Iteration Log
	// | Iteration | Started | Duration | Tasks Completed | Notes |
	// |-----------|---------|----------|-----------------|-------|
	// | 1 | 2026-01-29T10:00:00Z | 1m30s | 1 | first |
	//
	// done: false, open=1 active=0 done=1 failed=0 blocked=0 total=2
}
