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
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// shellRunner runs the task's description with sh -c and answers the way an
// agent would: <task-done> when the command succeeds, <task-failed> when not.
// It keeps loop.Runner's contract (runnertest.TestRunner checks it): the
// prompt on standard input, the command in a process group of its own that
// is killed whole on cancel or timeout, the output appended to the log.
// For a real agent CLI, package agentproc does all of that and more.
func shellRunner(ctx context.Context, req loop.RunRequest) (loop.RunResult, error) {
	env := map[string]string{}
	for _, kv := range req.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	id := env["RALPH_TASK_ID"]
	command := env["TASK_COMMAND_"+id]
	runCtx := ctx
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	start := time.Now()
	cmd := exec.CommandContext(runCtx, "sh", "-c", command)
	cmd.Dir = req.Dir
	cmd.Env = append(os.Environ(), req.Env...)
	// The "agent" does not know Claude Code's custom slash commands: a
	// prompt that is one (peek mode's "/ralph-build <peek>") becomes the
	// command's text, as it does for ralph's own runners.
	cmd.Stdin = strings.NewReader(loop.ExpandSlashCommand(req.Dir, req.Prompt))
	// A group of its own, killed whole: what the command started in the
	// background goes too, and does not hold the output open.
	ownGroup(cmd)
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	res := loop.RunResult{Class: loop.ClassSuccess, Turns: 1, Model: "sh"}
	cmd.Stdout = &out
	if req.LogPath != "" {
		f, err := os.OpenFile(req.LogPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			res.LogErr = err
		} else {
			defer f.Close()
			cmd.Stdout = io.MultiWriter(&out, f)
		}
	}
	cmd.Stderr = cmd.Stdout
	err := cmd.Start()
	if err == nil {
		err = cmd.Wait()
		killGroup(cmd.Process.Pid) // and what it left behind
	}
	res.Duration = time.Since(start)
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	switch {
	case ctx.Err() != nil:
		res.Class = loop.ClassCancelled
	case runCtx.Err() != nil:
		res.Class = loop.ClassTimeout
	case res.ExitCode < 0 || res.ExitCode > 128:
		// Killed by a signal (the shell says so as 128+n): the command
		// did not get to say how the task went.
		res.Class, res.Text = loop.ClassCrashed, out.String()
	case err != nil:
		res.Text = fmt.Sprintf("%s\n<task-failed>%s</task-failed>", out.String(), id)
	default:
		res.Text = fmt.Sprintf("%s\n<task-done>%s</task-done>", out.String(), id)
	}
	if req.OnEvent != nil {
		req.OnEvent(loop.Event{Kind: loop.EventToolUse, Tool: "sh", Input: command})
		req.OnEvent(loop.Event{Kind: loop.EventText, Text: strings.TrimSpace(out.String())})
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
