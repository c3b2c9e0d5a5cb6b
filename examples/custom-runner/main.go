// Command custom-runner embeds the loop with a Runner of its own: instead of
// an AI agent, each task's description is a shell command, and the "agent"
// runs it. The loop neither knows nor cares: it claims, runs, reads the
// sigils of the final text, and moves the task along.
//
//	go run ./examples/custom-runner
//
// Any agent CLI can be plugged in the same way: implement loop.Runner (or
// write a loop.RunnerFunc), put the session's final answer in RunResult.Text
// and say how it ended in RunResult.Class.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// shellRunner runs the task's description with sh -c and answers the way an
// agent would: <task-done> when the command succeeds, <task-failed> when not.
func shellRunner(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
	env := map[string]string{}
	for _, kv := range req.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	id := env["RALPH_TASK_ID"]
	command := env["TASK_COMMAND_"+id]
	start := time.Now()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = req.Dir
	cmd.Env = append(os.Environ(), req.Env...)
	out, err := cmd.CombinedOutput()
	res := loop.RunResult{Class: loop.ClassSuccess, Duration: time.Since(start), Turns: 1, Model: "sh"}
	switch {
	case ctx.Err() != nil:
		res.Class = loop.ClassCancelled
	case err != nil:
		res.Text = fmt.Sprintf("%s\n<task-failed>%s</task-failed>", out, id)
	default:
		res.Text = fmt.Sprintf("%s\n<task-done>%s</task-done>", out, id)
	}
	if req.OnEvent != nil {
		req.OnEvent(loop.Event{Kind: loop.EventToolUse, Tool: "sh", Input: command})
		req.OnEvent(loop.Event{Kind: loop.EventText, Text: strings.TrimSpace(string(out))})
	}
	return res, nil
}

func main() {
	ctx := context.Background()
	root, err := os.MkdirTemp("", "ralph-custom-runner-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer os.RemoveAll(root)

	store := looptest.NewMemStore(nil)
	tasks := []loop.Task{
		{ID: "fetch", Title: "Fetch", Description: "echo fetching > data.txt", Priority: 1},
		{ID: "count", Title: "Count lines", Description: "wc -l < data.txt", Priority: 2, BlockedBy: []string{"fetch"}},
		{ID: "date", Title: "Print the date", Description: "date -u +%Y", Priority: 2},
	}
	cfg := loop.DefaultConfig(root)
	cfg.Observer = loop.ObserverFunc(func(n loop.Note) {
		switch {
		case n.Kind == loop.NoteIterationStart:
			fmt.Printf("iteration %d: %s\n", n.Iteration, n.Task.Title)
		case n.Kind == loop.NoteAgentEvent && n.AgentEvent.Kind == loop.EventToolUse:
			fmt.Printf("  $ %s\n", n.AgentEvent.Input)
		case n.Kind == loop.NoteAgentEvent && n.AgentEvent.Kind == loop.EventText:
			fmt.Printf("  %s\n", n.AgentEvent.Text)
		}
	})
	for _, t := range tasks {
		t.Status = loop.StatusPending
		cfg.Env = append(cfg.Env, "TASK_COMMAND_"+t.ID+"="+t.Description)
	}
	if err := store.Add(tasks...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	report, err := loop.Run(ctx, cfg, store, loop.RunnerFunc(shellRunner))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	fmt.Println(report.Message)
	os.Exit(report.ExitCode())
}
