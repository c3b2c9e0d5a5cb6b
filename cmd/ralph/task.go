package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

func taskCommand(cfg appConfig) *cli.Command {
	return &cli.Command{
		Name:   "task",
		Usage:  "add, inspect, claim and finish the tasks of the plan",
		Action: groupAction,
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "add a task; prints its id",
				ArgsUsage: "TITLE",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "description", Aliases: []string{"d"}, Usage: "the task's description, `TEXT`"},
					&cli.StringFlag{Name: "parent", Usage: "the parent task's `ID`"},
					&cli.IntFlag{Name: "priority", Aliases: []string{"p"}, Value: dag.DefaultPriority, Usage: "priority `N`: lower is claimed first"},
					&cli.StringSliceFlag{Name: "blocked-by", Usage: "a task `ID` that must be done first (repeat, or separate ids with commas)"},
					&cli.StringFlag{Name: "feature", Usage: "the feature `NAME` the task belongs to (see 'ralph feature add')"},
					&cli.StringFlag{Name: "id", Usage: "the new task's `ID` (default: generated)"},
					&cli.StringFlag{Name: "check", Usage: "a shell `CMD` that checks the task, run in its tree when the agent reports it done"},
				},
				Action: withPlan(cfg, true, taskAdd(cfg)),
			},
			{
				Name:  "list",
				Usage: "list tasks in plan order",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "status", Usage: "only tasks with status `S` (pending, in_progress, done, failed, blocked)"},
					&cli.StringFlag{Name: "feature", Usage: "only the tasks of feature `NAME`"},
					&cli.IntFlag{Name: "limit", Usage: "list at most the first `N` tasks (0: all)"},
					jsonFlag(),
				},
				Action: withPlan(cfg, false, taskList(cfg)),
			},
			{
				Name:      "show",
				Usage:     "show a task and its log",
				ArgsUsage: "ID",
				Flags:     []cli.Flag{jsonFlag()},
				Action:    withPlan(cfg, false, taskShow(cfg)),
			},
			{
				Name:   "dep",
				Usage:  "add or remove a dependency between tasks",
				Action: groupAction,
				Subcommands: []*cli.Command{
					{
						Name:      "add",
						Usage:     "make BLOCKED wait until BLOCKER is done (a cycle is refused)",
						ArgsUsage: "BLOCKED BLOCKER",
						Action:    withPlan(cfg, true, taskDepAdd),
					},
					{
						Name:      "rm",
						Usage:     "remove the dependency of BLOCKED on BLOCKER",
						ArgsUsage: "BLOCKED BLOCKER",
						Action:    notServed(cfg, withStore(cfg, taskDepRm)),
					},
				},
			},
			{
				Name:  "peek",
				Usage: "show the claimable and active tasks as markdown; nothing when none is claimable",
				Flags: []cli.Flag{
					&cli.IntFlag{Name: "n", Value: 10, Usage: "show at most `N` claimable tasks"},
					jsonFlag(),
				},
				Action: withPlan(cfg, false, taskPeek(cfg)),
			},
			{
				Name:      "claim",
				Usage:     "claim task ID, or the next ready task; prints its id (exit 2: nothing ready)",
				ArgsUsage: "[ID]",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "agent", Usage: "the claiming agent's `ID` (default: $RALPH_AGENT_ID, else user-$USER)"},
					&cli.DurationFlag{Name: "lease", Value: loop.DefaultLease, Usage: "how long the claim lasts unless renewed, as a `DURATION`"},
				},
				Action: withPlan(cfg, true, taskClaim(cfg)),
			},
			{
				Name:      "done",
				Usage:     "mark a claimed task done",
				ArgsUsage: "ID",
				Flags: append([]cli.Flag{
					&cli.StringFlag{Name: "summary", Aliases: []string{"s"}, Usage: "what was done, `TEXT` that dependent tasks will see"},
				}, moverFlags()...),
				Action: withPlan(cfg, true, func(c *cli.Context, st taskPlan) error {
					a, err := args(c, 1, 1, "ID")
					if err != nil {
						return err
					}
					return moveError("done", st.Complete(c.Context, loop.MoveParams{TaskID: a[0], Message: strings.TrimSpace(c.String("summary")), By: mover(c, cfg)}))
				}),
			},
			{
				Name:      "fail",
				Usage:     "mark a claimed task failed (its ancestors fail too)",
				ArgsUsage: "ID",
				Flags: append([]cli.Flag{
					&cli.StringFlag{Name: "reason", Aliases: []string{"r"}, Usage: "why the task failed, `TEXT` (required)"},
				}, moverFlags()...),
				Action: withPlan(cfg, true, func(c *cli.Context, st taskPlan) error {
					a, err := args(c, 1, 1, "ID")
					if err != nil {
						return err
					}
					reason := strings.TrimSpace(c.String("reason"))
					if reason == "" {
						return &usageError{cmd: commandPath(c), err: errors.New("--reason is required")}
					}
					return moveError("fail", st.Fail(c.Context, loop.MoveParams{TaskID: a[0], Message: reason, By: mover(c, cfg)}))
				}),
			},
			{
				Name:      "note",
				Usage:     "add a note to a task's log (it changes nothing else)",
				ArgsUsage: "ID MESSAGE",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "agent", Usage: "the `ID` of the agent that writes the note (default: $RALPH_AGENT_ID, else you, a person)"},
				},
				Action: withPlan(cfg, true, taskNote(cfg)),
			},
			{
				Name:      "reset",
				Usage:     "return a failed task to pending",
				ArgsUsage: "ID",
				Action: notServed(cfg, withStore(cfg, func(c *cli.Context, _ project, st *dag.Store) error {
					a, err := args(c, 1, 1, "ID")
					if err != nil {
						return err
					}
					return moveError("reset", st.Reset(c.Context, loop.MoveParams{TaskID: a[0], By: mover(c, cfg)}))
				})),
			},
			{
				Name:  "release",
				Usage: "return every task an agent holds to pending; prints their ids",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "agent", Usage: "the agent's `ID` (default: $RALPH_AGENT_ID, else user-$USER)"},
				},
				Action: notServed(cfg, withStore(cfg, taskRelease(cfg))),
			},
			{
				Name:      "block",
				Usage:     "block a pending task until 'ralph task unblock'",
				ArgsUsage: "ID",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "reason", Aliases: []string{"r"}, Usage: "what the task waits for, `TEXT`"},
				},
				Action: notServed(cfg, withStore(cfg, func(c *cli.Context, _ project, st *dag.Store) error {
					a, err := args(c, 1, 1, "ID")
					if err != nil {
						return err
					}
					return moveError("block", st.Block(c.Context, loop.MoveParams{TaskID: a[0], Message: strings.TrimSpace(c.String("reason")), By: mover(c, cfg)}))
				})),
			},
			{
				Name:      "unblock",
				Usage:     "return a blocked task to pending",
				ArgsUsage: "ID",
				Action: notServed(cfg, withStore(cfg, func(c *cli.Context, _ project, st *dag.Store) error {
					a, err := args(c, 1, 1, "ID")
					if err != nil {
						return err
					}
					return moveError("unblock", st.Unblock(c.Context, loop.MoveParams{TaskID: a[0], By: mover(c, cfg)}))
				})),
			},
			{
				Name:   "plan-status",
				Usage:  "print open=N active=N done=N failed=N blocked=N total=N",
				Flags:  []cli.Flag{jsonFlag()},
				Action: withPlan(cfg, false, taskPlanStatus(cfg)),
			},
			{
				Name:      "import",
				Usage:     "add the tasks of a JSON Lines file (or a markdown checklist), all or nothing; or the open issues of a GitHub repository",
				ArgsUsage: "FILE|-|github:OWNER/REPO",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "dry-run", Usage: "print what would be added; change nothing"},
					&cli.StringFlag{Name: "label", Usage: "with github:OWNER/REPO: only the open issues that have label `L` (and what they need: open blockers, sub-issues)"}},
				Action: notServed(cfg, withStore(cfg, taskImport(cfg))),
			},
			{
				Name:   "export",
				Usage:  "print every task as JSON Lines, ready for 'ralph task import'",
				Action: notServed(cfg, withStore(cfg, taskExport(cfg))),
			},
		},
	}
}

// jsonFlag is a fresh --json flag: cli flags keep parse state, so commands
// do not share one.
func jsonFlag() cli.Flag { return &cli.BoolFlag{Name: "json", Usage: "print JSON"} }

type storeAction func(c *cli.Context, p project, st *dag.Store) error

func taskAdd(cfg appConfig) planAction {
	return func(c *cli.Context, st taskPlan) error {
		a, err := args(c, 1, 1, "one TITLE (quote it)")
		if err != nil {
			return err
		}
		var blockers []string
		for _, b := range c.StringSlice("blocked-by") {
			if b = strings.TrimSpace(b); b != "" {
				blockers = append(blockers, b)
			}
		}
		check := strings.TrimSpace(c.String("check"))
		checkBy := ""
		if check != "" {
			// An agent's check is marked as such (DESIGN §14); the broker
			// marks the checks of its agent whatever the request says.
			checkBy = strings.TrimSpace(cfg.getenv("RALPH_AGENT_ID"))
		}
		t, err := st.AddTask(c.Context, loop.NewTask{
			Check:       check,
			CheckBy:     checkBy,
			ID:          strings.TrimSpace(c.String("id")),
			Title:       strings.TrimSpace(a[0]),
			Description: c.String("description"),
			Priority:    c.Int("priority"),
			ParentID:    strings.TrimSpace(c.String("parent")),
			Feature:     strings.TrimSpace(c.String("feature")),
			BlockedBy:   blockers,
		})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(cfg.stdout, t.ID)
		return err
	}
}

func taskList(cfg appConfig) planAction {
	return func(c *cli.Context, st taskPlan) error {
		if _, err := args(c, 0, 0, ""); err != nil {
			return err
		}
		var p loop.ListQuery
		if s := c.String("status"); s != "" {
			status, err := parseStatus(s)
			if err != nil {
				return err
			}
			p.Status = status
		}
		p.Feature = c.String("feature")
		if p.Limit = c.Int("limit"); p.Limit < 0 {
			return &usageError{cmd: commandPath(c), err: fmt.Errorf("--limit %d: want 0 (all) or more", p.Limit)}
		}
		// Both forms stream: each task is written as it is read, so that
		// a plan of any size lists in flat memory (README, "Speed and memory").
		// A listing keeps next to nothing alive, and collecting its garbage
		// every 4 MB cost it a fifth of its time: the heap may grow to four
		// times the little it keeps, however long the list.
		defer debug.SetGCPercent(debug.SetGCPercent(400))
		if c.Bool("json") {
			out := newTaskListJSON(cfg.stdout)
			if err := pipeTasks(c, st, p, out.task); err != nil {
				return err
			}
			return out.end()
		}
		out := newTaskTable(cfg.stdout)
		p.Shape = out.shape
		if err := pipeTasks(c, st, p, out.task); err != nil {
			return err
		}
		return out.end()
	}
}

// errPipeStopped ends a listing whose writer failed.
var errPipeStopped = errors.New("the writer stopped")

// pipeTasks lists the tasks that match p into write, which runs on a
// goroutine of its own, batches of tasks behind the reading: on two cores,
// formatting overlaps with SQLite's reading. At most a few batches are in
// flight, so memory stays flat. When write fails the reading stops at the
// next batch, and write's error is returned.
func pipeTasks(c *cli.Context, st taskPlan, p loop.ListQuery, write func(loop.Task) error) error {
	const size = 256
	batches := make(chan []loop.Task, 4)
	stop := make(chan struct{})
	werr := make(chan error, 1)
	go func() {
		var err error
		for batch := range batches {
			for _, t := range batch {
				if err != nil {
					break
				}
				if err = write(t); err != nil {
					close(stop)
				}
			}
		}
		werr <- err
	}()
	batch := make([]loop.Task, 0, size)
	send := func() error {
		select {
		case batches <- batch:
			batch = make([]loop.Task, 0, size)
			return nil
		case <-stop:
			return errPipeStopped
		}
	}
	err := st.ListTasks(c.Context, p, func(t loop.Task) error {
		if batch = append(batch, t); len(batch) < size {
			return nil
		}
		return send()
	})
	if err == nil && len(batch) > 0 {
		err = send()
	}
	close(batches)
	if werr := <-werr; werr != nil {
		return werr
	}
	return err
}

func parseStatus(s string) (loop.Status, error) {
	st := loop.Status(s)
	if !st.Valid() {
		return "", fmt.Errorf("unknown status %q (want pending, in_progress, done, failed or blocked)", s)
	}
	return st, nil
}

func taskShow(cfg appConfig) planAction {
	return func(c *cli.Context, st taskPlan) error {
		a, err := args(c, 1, 1, "ID")
		if err != nil {
			return err
		}
		t, err := st.Get(c.Context, a[0])
		if err != nil {
			return err
		}
		logs, err := st.Logs(c.Context, t.ID)
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return writeJSON(cfg.stdout, taskShowJSON{taskJSON: toJSON(t), Logs: logsJSON(logs)})
		}
		return writeTaskText(cfg.stdout, t, logs)
	}
}

func taskDepAdd(c *cli.Context, st taskPlan) error {
	a, err := args(c, 2, 2, "BLOCKED BLOCKER")
	if err != nil {
		return err
	}
	return st.AddDependency(c.Context, a[0], a[1])
}

func taskDepRm(c *cli.Context, _ project, st *dag.Store) error {
	a, err := args(c, 2, 2, "BLOCKED BLOCKER")
	if err != nil {
		return err
	}
	return st.RemoveDependency(c.Context, a[0], a[1])
}

// peekJSON is `task peek --json`.
type peekJSON struct {
	Claimable []taskJSON `json:"claimable"`
	Active    []taskJSON `json:"active"`
}

func taskPeek(cfg appConfig) planAction {
	return func(c *cli.Context, st taskPlan) error {
		if _, err := args(c, 0, 0, ""); err != nil {
			return err
		}
		n := c.Int("n")
		if n < 1 {
			return &usageError{cmd: commandPath(c), err: fmt.Errorf("-n %d: want at least 1", n)}
		}
		claimable, err := st.Ready(c.Context, loop.Scope{}, n)
		if err != nil {
			return err
		}
		if len(claimable) == 0 && !c.Bool("json") {
			return nil // prints nothing at all: nothing is claimable
		}
		active, err := st.Active(c.Context, loop.Scope{})
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return writeJSON(cfg.stdout, peekJSON{Claimable: tasksJSON(claimable), Active: tasksJSON(active)})
		}
		summaries, err := blockerSummaries(c, st, claimable)
		if err != nil {
			return err
		}
		return loop.WritePeek(cfg.stdout, loop.PeekParams{
			Claimable: claimable, Active: active, Now: cfg.now(), BlockerSummaries: summaries,
		})
	}
}

// blockerSummaries maps each blocker of the claimable tasks (all done, or
// the task would not be ready) to the message of its latest log entry.
func blockerSummaries(c *cli.Context, st taskPlan, tasks []loop.Task) (map[string]string, error) {
	out := map[string]string{}
	for _, t := range tasks {
		for _, b := range t.BlockedBy {
			if _, seen := out[b]; seen {
				continue
			}
			logs, err := st.Logs(c.Context, b)
			if err != nil {
				return nil, err
			}
			out[b] = loop.Summary(logs)
		}
	}
	return out, nil
}

// agentID is --agent, else $RALPH_AGENT_ID, else "user-$USER": a person
// claiming by hand gets a stable holder name they can release.
func agentID(c *cli.Context, cfg appConfig) string {
	if a := givenAgent(c, cfg); a != "" {
		return a
	}
	return personName(cfg)
}

// givenAgent is --agent, else $RALPH_AGENT_ID: the agent a command acts
// for, "" for a person.
func givenAgent(c *cli.Context, cfg appConfig) string {
	if a := strings.TrimSpace(c.String("agent")); a != "" {
		return a
	}
	return strings.TrimSpace(cfg.getenv("RALPH_AGENT_ID"))
}

// personName is "user-$USER", the name of a person in a task's history.
func personName(cfg appConfig) string {
	for _, k := range []string{"USER", "LOGNAME", "USERNAME"} {
		if u := strings.TrimSpace(cfg.getenv(k)); u != "" {
			return "user-" + u
		}
	}
	return "user"
}

// moverFlags are the flags of the commands that move a claimed task.
func moverFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "agent", Usage: "the `ID` of the agent that moves the task; it may move only tasks it holds (default: $RALPH_AGENT_ID, else you, a person)"},
		&cli.BoolFlag{Name: "force", Usage: "as a person, move a task that a live agent holds"},
	}
}

// mover is who runs a command that moves a task (ARCHITECTURE.md §2.3): the
// agent of --agent or $RALPH_AGENT_ID, which may move only what it holds
// and never the ralph loop's claims; else a person, who may move any task
// but one a live agent holds only with --force.
func mover(c *cli.Context, cfg appConfig) loop.Actor {
	if a := givenAgent(c, cfg); a != "" {
		return loop.Actor{Agent: a}
	}
	return loop.Actor{Person: personName(cfg), Force: c.Bool("force")}
}

func taskClaim(cfg appConfig) planAction {
	return func(c *cli.Context, st taskPlan) error {
		a, err := args(c, 0, 1, "at most one ID")
		if err != nil {
			return err
		}
		lease := c.Duration("lease")
		if lease <= 0 {
			return &usageError{cmd: commandPath(c), err: fmt.Errorf("--lease %s: want a positive duration", lease)}
		}
		// In a session of a loop that claimed a task for the agent, that
		// task is the agent's whole job: a claim of its own would hold a
		// task the loop then waits for.
		if held := strings.TrimSpace(cfg.getenv("RALPH_TASK_ID")); held != "" {
			return fmt.Errorf("the ralph loop claimed task %s for you: work on it alone, and end your final answer with "+
				"<task-done>%s</task-done> (or <task-failed>%s</task-failed>); add work the plan lacks with 'task add'", held, held, held)
		}
		p := loop.ClaimParams{Agent: agentID(c, cfg), Lease: lease}
		if len(a) == 1 {
			p.TaskID = a[0]
		}
		// An agent claiming inside a ralph session: the claim lives as long
		// as the loop that runs it, never the short-lived claim process.
		if p.Holder, err = loop.ParseHolder(cfg.getenv(loop.EnvHolder)); err != nil {
			return fmt.Errorf("$%s: %w", loop.EnvHolder, err)
		}
		if !p.Holder.IsZero() {
			p.Mode = loop.ClaimAgent
		}
		t, err := st.Claim(c.Context, p)
		if errors.Is(err, loop.ErrNoReadyTask) {
			return nothingToDo("no task is ready to claim")
		}
		if err != nil {
			return moveError("claim", err)
		}
		_, err = fmt.Fprintln(cfg.stdout, t.ID)
		return err
	}
}

// taskNote is `ralph task note ID MESSAGE`: a log entry of kind note by
// the agent of --agent or $RALPH_AGENT_ID, else by the person running it.
func taskNote(cfg appConfig) planAction {
	return func(c *cli.Context, st taskPlan) error {
		a, err := args(c, 2, 2, "ID MESSAGE (quote the message)")
		if err != nil {
			return err
		}
		msg := strings.TrimSpace(a[1])
		if msg == "" {
			return &usageError{cmd: commandPath(c), err: errors.New("the note is empty")}
		}
		by := loop.Actor{Person: personName(cfg)}
		if agent := givenAgent(c, cfg); agent != "" {
			by = loop.Actor{Agent: agent}
		}
		return st.Note(c.Context, loop.MoveParams{TaskID: a[0], Message: msg, By: by})
	}
}

func taskRelease(cfg appConfig) storeAction {
	return func(c *cli.Context, _ project, st *dag.Store) error {
		if _, err := args(c, 0, 0, ""); err != nil {
			return err
		}
		agent := agentID(c, cfg)
		ids, err := st.ReleaseAgent(c.Context, agent, "released by 'ralph task release --agent "+agent+"'")
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := fmt.Fprintln(cfg.stdout, id); err != nil {
				return err
			}
		}
		return nil
	}
}

func taskPlanStatus(cfg appConfig) planAction {
	return func(c *cli.Context, st taskPlan) error {
		if _, err := args(c, 0, 0, ""); err != nil {
			return err
		}
		counts, err := st.Counts(c.Context, loop.Scope{})
		if err != nil {
			return err
		}
		if c.Bool("json") {
			return writeJSON(cfg.stdout, toCountsJSON(counts))
		}
		_, err = fmt.Fprintln(cfg.stdout, counts.String())
		return err
	}
}

func taskImport(cfg appConfig) storeAction {
	return func(c *cli.Context, _ project, st *dag.Store) error {
		a, err := args(c, 1, 1, "FILE or - for standard input")
		if err != nil {
			return err
		}
		name, in := a[0], cfg.stdin
		if strings.HasPrefix(name, "github:") {
			return importGitHub(c, cfg, st, name)
		}
		if c.IsSet("label") {
			return &usageError{cmd: "ralph task import", err: errors.New("--label goes with github:OWNER/REPO")}
		}
		if name != "-" {
			f, err := os.Open(name)
			if err != nil {
				return err
			}
			defer f.Close()
			in = f
		} else {
			name = "standard input"
		}
		// An import keeps a few integers a task between its two passes and
		// makes much garbage reading the file: collecting at half the heap
		// it keeps, not at all of it, keeps a million-task import near 130
		// MB (at 100%, some 150) for a little more collecting.
		defer debug.SetGCPercent(debug.SetGCPercent(50))
		input, err := readImport(c, st, in)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if input.src == nil {
			return nothingToDo("%s: no tasks to import", name)
		}
		defer input.close()
		already := ""
		if len(input.present) > 0 {
			already = fmt.Sprintf(" (%d already present)", len(input.present))
		}
		p := dag.ImportParams{Source: input.src, DryRun: c.Bool("dry-run")}
		out := bufio.NewWriter(cfg.stdout)
		if p.DryRun {
			p.Added = func(t dag.ImportTask) error {
				line := fmt.Sprintf("would add %s %s [%s]", t.ID, t.Title, t.Status)
				if t.ParentID != "" {
					line += " (parent " + t.ParentID + ")"
				}
				if len(t.BlockedBy) > 0 {
					line += " (after " + strings.Join(t.BlockedBy, ", ") + ")"
				}
				_, err := fmt.Fprintln(out, line)
				return err
			}
		}
		n := 0
		if !input.checklist || input.add > 0 {
			if n, err = st.ImportFrom(c.Context, p); err != nil {
				if _, beads := input.src.(*dag.BeadsJSON); beads && errors.Is(err, loop.ErrNotFound) {
					// bd list leaves closed issues out, bd show all but one.
					return fmt.Errorf("%s: %w (bd list --json prints only some issues unless given --all: import bd export, or bd list --json --all)", name, err)
				}
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		switch {
		case n == 0 && !input.checklist:
			return nothingToDo("%s: no tasks to import", name)
		case p.DryRun:
			fmt.Fprintf(out, "would import %d task%s%s; nothing changed\n", n, plural(n), already)
		default:
			fmt.Fprintf(out, "imported %d task%s%s\n", n, plural(n), already)
		}
		return out.Flush()
	}
}

func taskExport(cfg appConfig) storeAction {
	return func(c *cli.Context, _ project, st *dag.Store) error {
		if _, err := args(c, 0, 0, ""); err != nil {
			return err
		}
		return st.ExportJSONL(c.Context, cfg.stdout)
	}
}
