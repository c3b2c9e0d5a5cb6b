package loop_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// A plan run over one spec with a stand-in planner. A real planner adds
// tasks with `"$RALPH_BIN" task add`; this one adds them to the store
// itself, then says COMPLETE.
func ExamplePlan() {
	root, _ := os.MkdirTemp("", "ralph-example")
	defer os.RemoveAll(root)
	os.MkdirAll(filepath.Join(root, "specs"), 0o755)
	os.WriteFile(filepath.Join(root, "specs", "auth.md"), []byte("# Auth\nUsers log in with a password.\n"), 0o644)

	store := looptest.NewMemStore(nil)
	planner := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		store.Add(
			loop.Task{ID: "t-1", Title: "Users table", Priority: 1},
			loop.Task{ID: "t-2", Title: "Login form", Priority: 2, BlockedBy: []string{"t-1"}},
		)
		return loop.RunResult{Class: loop.ClassSuccess, Text: "Planned. <promise>COMPLETE</promise>"}, nil
	})
	rep, err := loop.Plan(context.Background(), loop.PlanConfig(root), store, planner)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s, exit %d: %s\n", rep.Outcome, rep.ExitCode(), rep.Message)
	// Output:
	// complete, exit 0: planning complete: 2 tasks in the plan (2 added)
}

// One session of an ad-hoc prompt: the text reaches the agent unchanged,
// with RALPH_ITERATION=1.
func ExampleRunPrompt() {
	root, _ := os.MkdirTemp("", "ralph-example")
	defer os.RemoveAll(root)
	agent := loop.RunnerFunc(func(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
		fmt.Printf("prompt: %q\n", req.Prompt)
		return loop.RunResult{Class: loop.ClassSuccess, Text: "Fixed the typos."}, nil
	})
	rep, err := loop.RunPrompt(context.Background(), loop.PromptConfig(root), loop.PromptParams{Text: "Fix the typos in README.md."}, agent)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s, exit %d: %s\n", rep.Outcome, rep.ExitCode(), rep.Message)
	// Output:
	// prompt: "Fix the typos in README.md."
	// complete, exit 0: prompt run finished
}
