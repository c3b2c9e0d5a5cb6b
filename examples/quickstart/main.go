// Command quickstart runs a real ralph loop on a throwaway project, with no
// API key and no server: the real SQLite plan (package dag), the real loop
// (package loop) and the real Claude Code runner (package claude: process
// group, stream-json parsing, logs, classification). Only the agent is a
// stand-in: this same program, re-executed, speaks Claude Code's stream-json,
// "does" each task by writing a file, and answers with the task-done sigil.
//
//	go run ./examples/quickstart          # run it, then remove the project
//	go run ./examples/quickstart -keep    # keep the project to look around
//
// Point -claude at a real `claude` binary to watch the real agent work the
// same plan (that one needs your Claude login).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ralph-dev/ralph/claude"
	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// standInEnv switches this program into the stand-in agent.
const standInEnv = "RALPH_QUICKSTART_STAND_IN"

func main() {
	if os.Getenv(standInEnv) == "1" {
		os.Exit(standIn(os.Stdin, os.Stdout))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keep := fs.Bool("keep", false, "keep the throwaway project")
	agent := fs.String("claude", "", "agent executable (default: the scripted stand-in)")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	root, err := os.MkdirTemp("", "ralph-quickstart-")
	if err != nil {
		fmt.Fprintln(stderr, "quickstart:", err)
		return 1
	}
	if *keep {
		fmt.Fprintln(stdout, "project:", root)
	} else {
		defer os.RemoveAll(root)
	}

	store, err := newPlan(ctx, root)
	if err != nil {
		fmt.Fprintln(stderr, "quickstart:", err)
		return 1
	}
	defer store.Close()

	runner := &claude.Runner{Path: *agent}
	if *agent == "" {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(stderr, "quickstart:", err)
			return 1
		}
		runner.Path = self
	}

	view := claude.NewFormatter(stdout)
	cfg := loop.DefaultConfig(root)
	cfg.Model = "sonnet"
	cfg.SessionLog = true
	cfg.RawLogs = true
	cfg.Timeout = 2 * time.Minute
	cfg.Env = []string{standInEnv + "=1"}
	cfg.Observer = loop.ObserverFunc(func(n loop.Note) {
		switch n.Kind {
		case loop.NoteIterationStart:
			fmt.Fprintf(stdout, "\n== iteration %d: %s %q (model %s)\n", n.Iteration, n.Task.ID, n.Task.Title, n.Model)
		case loop.NoteAgentEvent:
			view.Event(n.AgentEvent)
		case loop.NoteReceipt:
			if r := n.Receipt; r != nil {
				fmt.Fprintf(stdout, "-- %s: %d turns, %d in / %d out tokens, $%.4f, %s\n", r.ExitReason, r.Turns, r.InputTokens, r.OutputTokens, r.CostUSD, r.Duration.Round(time.Millisecond))
			}
		case loop.NoteNotice:
			fmt.Fprintln(stdout, "note:", n.Message)
		}
	})

	report, err := loop.Run(ctx, cfg, store, runner)
	if err != nil {
		fmt.Fprintln(stderr, "quickstart:", err)
	}
	fmt.Fprintf(stdout, "\n%s after %d iterations (%s)\n", report.Message, report.Iterations, report.Counts)
	tasks, err := store.List(ctx, dag.ListParams{})
	if err == nil {
		for _, t := range tasks {
			fmt.Fprintf(stdout, "  %-6s %-12s %s\n", t.ID, t.Status, t.Title)
		}
	}
	if *keep {
		fmt.Fprintln(stdout, "session log:", filepath.Join(root, ".ralph", "logs", report.Session+".log"))
	} else {
		fmt.Fprintln(stdout, "(the project is removed; -keep keeps it, with its session log and raw agent streams)")
	}
	return report.ExitCode()
}

// newPlan makes the throwaway project's plan: a small graph with a parent,
// priorities and dependencies, so the order the loop takes is visible.
func newPlan(ctx context.Context, root string) (*dag.Store, error) {
	if err := os.MkdirAll(filepath.Join(root, ".ralph", "logs"), 0o755); err != nil {
		return nil, err
	}
	store, err := dag.Open(ctx, filepath.Join(root, ".ralph", "progress.db"), dag.Options{})
	if err != nil {
		return nil, err
	}
	add := func(p dag.AddParams) string {
		if err != nil {
			return ""
		}
		var t loop.Task
		t, err = store.Add(ctx, p)
		return t.ID
	}
	// Lower priority numbers go first; the layout task, added last, runs
	// first, and "Greeting API" is done by the loop when both children are.
	api := add(dag.AddParams{Title: "Greeting API", Priority: dag.DefaultPriority})
	model := add(dag.AddParams{Title: "Write the greeting model", ParentID: api, Priority: 1})
	handler := add(dag.AddParams{Title: "Write the HTTP handler", ParentID: api, Priority: dag.DefaultPriority, BlockedBy: []string{model}})
	add(dag.AddParams{Title: "Document the API", Priority: 3, BlockedBy: []string{handler}})
	add(dag.AddParams{Title: "Set up the project layout", Priority: 0})
	if err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}

// standIn is the scripted agent: it reads the prompt from standard input
// as Claude Code does, writes one file for the task it was given
// (RALPH_TASK_ID), and streams what a real session would.
func standIn(stdin io.Reader, stdout io.Writer) int {
	prompt, _ := io.ReadAll(stdin)
	task := os.Getenv("RALPH_TASK_ID")
	if task == "" || !strings.Contains(string(prompt), task) {
		fmt.Fprintln(os.Stderr, "stand-in: no task in the prompt")
		return 1
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	emit := func(v any) {
		b, _ := json.Marshal(v)
		w.Write(append(b, '\n'))
		w.Flush()
	}
	session := "quickstart-" + task
	emit(map[string]any{"type": "system", "subtype": "init", "session_id": session, "model": "stand-in", "cwd": os.Getenv("RALPH_DIR")})
	file := filepath.Join(os.Getenv("RALPH_DIR"), "work", task+".txt")
	cmd := "mkdir -p work && echo done > work/" + task + ".txt"
	emit(assistant(session, map[string]any{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": map[string]any{"command": cmd}}))
	result, isErr := "", false
	if err := writeFile(file); err != nil {
		result, isErr = err.Error(), true
	}
	emit(map[string]any{"type": "user", "session_id": session, "message": map[string]any{"role": "user",
		"content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": result, "is_error": isErr}}}})
	time.Sleep(50 * time.Millisecond) // a little time passes, as it would
	text := fmt.Sprintf("Wrote work/%s.txt.\n<task-done>%s</task-done>", task, task)
	emit(assistant(session, map[string]any{"type": "text", "text": text}))
	emit(map[string]any{"type": "result", "subtype": "success", "is_error": false, "session_id": session,
		"result": text, "num_turns": 2, "duration_ms": 60, "total_cost_usd": 0.0042,
		"usage": map[string]any{"input_tokens": 1200, "output_tokens": 80, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 0}})
	return 0
}

func assistant(session string, block map[string]any) map[string]any {
	return map[string]any{"type": "assistant", "session_id": session,
		"message": map[string]any{"role": "assistant", "model": "stand-in", "content": []any{block}}}
}

func writeFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(path); err == nil {
		return errors.New("already done: " + path)
	}
	return os.WriteFile(path, []byte("done\n"), 0o644)
}
