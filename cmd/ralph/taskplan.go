package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/broker"
	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// taskPlan is the plan as the task commands a sandboxed agent may run
// reach it (ARCHITECTURE.md §7): the project's store, or, when $RALPH_SOCKET is
// set, the broker of the agent's session. Both give the same tasks,
// errors and messages, so a command prints the same either way.
type taskPlan interface {
	Get(ctx context.Context, id string) (loop.Task, error)
	Logs(ctx context.Context, id string) ([]loop.LogEntry, error)
	Ready(ctx context.Context, scope loop.Scope, limit int) ([]loop.Task, error)
	Active(ctx context.Context, scope loop.Scope) ([]loop.Task, error)
	Counts(ctx context.Context, scope loop.Scope) (loop.Counts, error)
	Claim(ctx context.Context, p loop.ClaimParams) (loop.Task, error)
	Complete(ctx context.Context, p loop.MoveParams) error
	Fail(ctx context.Context, p loop.MoveParams) error
	loop.TaskAdder
	loop.TaskLister
	loop.TaskNoter
}

var (
	_ taskPlan = (*dag.Store)(nil)
	_ taskPlan = (*broker.Client)(nil)
)

type planAction func(c *cli.Context, st taskPlan) error

// servedCommands lists, for messages, the task commands the broker serves.
const servedCommands = "peek, show, list, plan-status, claim, done, fail, add, dep add and note"

// withPlan runs fn on the plan: with $RALPH_SOCKET set — the session of
// a sandboxed agent — through its broker, which wins over --dir, $RALPH_DB
// and --plan; otherwise on the project's store. When the broker cannot be
// reached (a sandbox that refuses connect(2), such as Codex's read-only
// one, or a loop that is gone), a read command (write false) reads the
// project's store opened read-only, and a write command fails saying why.
func withPlan(cfg appConfig, write bool, fn planAction) cli.ActionFunc {
	return func(c *cli.Context) error {
		sock := strings.TrimSpace(cfg.getenv(broker.EnvSocket))
		if sock == "" {
			return withStore(cfg, func(c *cli.Context, _ project, st *dag.Store) error { return fn(c, st) })(c)
		}
		cl, err := broker.Dial(c.Context, sock)
		if err == nil {
			defer cl.Close()
			return fn(c, cl)
		}
		if !errors.Is(err, broker.ErrUnreachable) {
			return err
		}
		if write {
			return fmt.Errorf("'%s' cannot change the plan: %w; inside the sandbox the plan is read-only, and only the broker ($%s) writes it",
				commandPath(c), err, broker.EnvSocket)
		}
		ro := cfg
		ro.readOnly = true
		_, st, oerr := openProject(c, ro)
		if oerr != nil {
			return fmt.Errorf("%w; reading the plan directly failed too: %w", err, oerr)
		}
		defer st.Close()
		return fn(c, st)
	}
}

// notServed wraps a task command the broker does not serve: with
// $RALPH_SOCKET set it fails, saying so.
func notServed(cfg appConfig, action cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		if strings.TrimSpace(cfg.getenv(broker.EnvSocket)) == "" {
			return action(c)
		}
		return fmt.Errorf("'%s' is not served to a sandboxed agent: its task commands reach the plan through the ralph broker ($%s), which serves %s",
			commandPath(c), broker.EnvSocket, servedCommands)
	}
}
