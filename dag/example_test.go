package dag_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// A plan of three tasks: the claim order follows priority, then insertion;
// completing a blocker makes its dependent ready.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ralph-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := dag.Open(ctx, filepath.Join(dir, "progress.db"), dag.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	schema, _ := s.Add(ctx, dag.AddParams{ID: "schema", Title: "Design the schema", Priority: dag.DefaultPriority})
	s.Add(ctx, dag.AddParams{ID: "api", Title: "Write the API", Priority: 1, BlockedBy: []string{schema.ID}})
	s.Add(ctx, dag.AddParams{ID: "docs", Title: "Write the docs", Priority: 3})

	for {
		task, err := s.Claim(ctx, loop.ClaimParams{Agent: "agent-1"})
		if err != nil {
			fmt.Println(err)
			break
		}
		fmt.Println("claimed", task.ID)
		if err := s.Complete(ctx, loop.MoveParams{TaskID: task.ID, Message: "done"}); err != nil {
			log.Fatal(err)
		}
	}
	c, _ := s.Counts(ctx, loop.Scope{})
	fmt.Println(c)
	// Output:
	// claimed schema
	// claimed api
	// claimed docs
	// loop: no ready task
	// open=0 active=0 done=3 failed=0 blocked=0 total=3
}

// Import takes a whole plan in one transaction; references may point
// forward, and errors name the input line.
func ExampleStore_Import() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ralph-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := dag.Open(ctx, filepath.Join(dir, "progress.db"), dag.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	_, err = s.Import(ctx, []dag.ImportTask{
		{Line: 1, ID: "t-1", Title: "Login form", BlockedBy: []string{"t-2"}},
		{Line: 2, ID: "t-2", Title: "Session store", ParentID: "t-99"},
	})
	fmt.Println(err)

	n, err := s.Import(ctx, []dag.ImportTask{
		{Line: 1, ID: "t-1", Title: "Login form", BlockedBy: []string{"t-2"}},
		{Line: 2, ID: "t-2", Title: "Session store"},
	})
	fmt.Println(n, err)
	ready, _ := s.Ready(ctx, loop.Scope{}, 10)
	for _, t := range ready {
		fmt.Println("ready:", t.ID, t.Title)
	}
	// Output:
	// line 2: task t-2: parent t-99 does not exist
	// 2 <nil>
	// ready: t-2 Session store
}
