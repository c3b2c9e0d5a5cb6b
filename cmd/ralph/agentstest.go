package main

import (
	"fmt"
	"io"

	"github.com/ralph-dev/ralph/loop"
)

// printDryRunTest says which test command a build would run after each
// task, and where it comes from: --test-cmd, or AGENTS.md as committed
// (the commit named), never the working copy an agent may have edited.
func printDryRunTest(w io.Writer, plan loop.DryRunPlan) {
	at := plan.AgentsTest
	switch {
	case plan.TestCmd == "":
		fmt.Fprintln(w, "test command: none")
	case at == nil:
		fmt.Fprintf(w, "test command: %q (--test-cmd)\n", plan.TestCmd)
	case at.Commit != "":
		fmt.Fprintf(w, "test command: %q (AGENTS.md at commit %s)\n", plan.TestCmd, shortCommit(at.Commit))
	default:
		fmt.Fprintf(w, "test command: %q (AGENTS.md; the project is no git repository)\n", plan.TestCmd)
	}
	if at != nil && at.Uncommitted != "" {
		fmt.Fprintf(w, "not run: %q (AGENTS.md in the working tree; not committed)\n", at.Uncommitted)
	}
}

func shortCommit(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
