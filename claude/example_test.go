package claude_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ralph-dev/ralph/claude"
	"github.com/ralph-dev/ralph/loop"
)

// How the CLI wires the runner: resolve the agent, print the API key
// notice once, show events as they come, and a footer per run. (Not run:
// it needs Claude Code and a login.)
func ExampleRunner() {
	path, err := claude.LookPath("") // the --claude PATH flag's value, if given
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	if keys := claude.APIKeysSet(os.Environ()); len(keys) > 0 {
		fmt.Fprintln(os.Stderr, "not passed to the agent:", keys)
	}
	view := claude.NewFormatter(os.Stdout)
	runner := &claude.Runner{Path: path}
	res, err := runner.Run(context.Background(), loop.RunRequest{
		Prompt:      "Implement task t-1, then answer <task-done>t-1</task-done>.",
		Model:       "sonnet",
		Sandboxed:   true,
		Dir:         ".",
		Env:         []string{"RALPH_TASK_ID=t-1"},
		LogPath:     ".ralph/logs/session/iter-1.ndjson",
		Timeout:     30 * time.Minute,
		IdleTimeout: 10 * time.Minute,
		OnEvent:     view.Event,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // the agent could not be started
		return
	}
	view.Footer(res)
	if !res.OK() {
		fmt.Fprintln(os.Stderr, claude.Describe(res))
	}
}

func ExampleParseResetText() {
	now := time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)
	fmt.Println(claude.ParseResetText("You've hit your session limit · resets 6:30pm (UTC)", now))
	fmt.Println(claude.ParseResetText("You've hit your weekly limit · resets Nov 24, 5am (Europe/Paris)", now))
	fmt.Println(claude.ParseResetText("You've hit your session limit", now).IsZero())
	// Output:
	// 2026-11-23 18:30:00 +0000 UTC
	// 2026-11-24 04:00:00 +0000 UTC
	// true
}
