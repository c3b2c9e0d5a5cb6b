package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/claude"
	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); "dev"
// falls back to the module version recorded in the binary. `ralph
// --version` adds the commit from the build information (version.go), or
// from commit, commitTime and treeState, which a release build sets at
// link time too (.goreleaser.yaml) for a build without VCS information
// (GOFLAGS=-buildvcs=false, a tarball).
var (
	version    = "dev"
	commit     = ""
	commitTime = ""
	treeState  = "" // "clean" or "dirty"
)

// Exit codes of the non-loop commands (README, "Exit codes").
const (
	exitOK      = 0
	exitError   = 1
	exitNothing = 2
	// exitInterrupted: SIGINT or SIGTERM stopped the command.
	exitInterrupted = 130
)

// codedError carries an exit code other than 1 up to run. Its message, if
// not empty, is printed like any error.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// nothingToDo is the exit-2 error: the command worked but found nothing to
// do.
func nothingToDo(format string, a ...any) error {
	return &codedError{code: exitNothing, err: fmt.Errorf(format, a...)}
}

// usageError is a bad command line: exit 1, with a hint to the help.
type usageError struct {
	cmd string // "ralph task add"
	err error
}

func (e *usageError) Error() string {
	return fmt.Sprintf("%s (see '%s --help')", e.err, e.cmd)
}
func (e *usageError) Unwrap() error { return e.err }

// appConfig is what the app takes from its surroundings; tests replace
// every part.
type appConfig struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	getenv         func(string) string
	now            func() time.Time
	// busyTimeout is how long to wait for another process's write lock;
	// zero means the store's default.
	busyTimeout time.Duration
	// readOnly opens the plan read-only (ralph serve).
	readOnly bool
}

func (cfg appConfig) storeOptions() dag.Options {
	return dag.Options{Now: cfg.now, BusyTimeout: cfg.busyTimeout, ReadOnly: cfg.readOnly}
}

// run runs the app on args (args[0] is the program name) and returns the
// process exit code. It is the only place errors become exit codes.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runApp(ctx, newApp(stdout, stderr), args, stderr)
}

// metaArgs keys the app's arguments in its Metadata, for the commands
// that say where a setting came from (config.go).
const metaArgs = "args"

func runApp(ctx context.Context, app *cli.App, args []string, stderr io.Writer) int {
	if app.Metadata == nil {
		app.Metadata = map[string]any{}
	}
	app.Metadata[metaArgs] = args
	err := app.RunContext(ctx, reorderArgs(app, args))
	switch {
	case err == nil:
	case interrupted(ctx, err):
		fmt.Fprintln(stderr, "ralph: interrupted")
	default:
		if msg := oneLine(storeError(err).Error()); msg != "" {
			// stderr is the app's own, not escaping: the message quotes
			// what it was given (ids, titles, lines of an import file).
			fmt.Fprintf(stderr, "ralph: %s\n", claude.EscapeControls(msg))
		}
	}
	return exitCode(ctx, err)
}

// oneLine keeps an error on one line of stderr, without the package
// prefixes of library errors (loop.ReasonLine).
func oneLine(s string) string { return loop.ReasonLine(s) }

// newApp builds the CLI writing to stdout and stderr.
func newApp(stdout, stderr io.Writer) *cli.App {
	return newAppConfig(appConfig{
		stdout: stdout,
		stderr: stderr,
		stdin:  os.Stdin,
		getenv: os.Getenv,
		now:    time.Now,
	})
}

func newAppConfig(cfg appConfig) *cli.App {
	// What the commands print is shown with its control characters
	// escaped (terminal.go); After writes what they held back.
	out, errOut := terminalWriter(cfg.stdout), terminalWriter(cfg.stderr)
	cfg.stdout, cfg.stderr = out, errOut
	app := &cli.App{
		Name:      "ralph",
		Usage:     "run an AI coding agent in a loop against a plan of tasks",
		UsageText: "ralph [--dir DIR] COMMAND [arguments]",
		Version:   buildVersion(),
		Writer:    cfg.stdout,
		ErrWriter: cfg.stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", EnvVars: []string{"RALPH_DIR"}, Usage: "project root `DIR`", DefaultText: "the current directory"},
			&cli.StringFlag{Name: "db", EnvVars: []string{"RALPH_DB"}, Usage: "keep the plan on PostgreSQL at `URL` (postgres://user@host/db; the password from PGPASSWORD or ~/.pgpass)", DefaultText: "what 'ralph init --db' remembered, else .ralph/progress.db"},
			&cli.StringFlag{Name: "plan", EnvVars: []string{"RALPH_PLAN"}, Usage: "the plan's `NAME` on the --db server", DefaultText: "what 'ralph init' remembered, else the project directory's name"},
			helpFlag(),
			&cli.BoolFlag{Name: "version", Aliases: []string{"v"}, Usage: "print the version", DisableDefaultText: true},
		},
		Commands: []*cli.Command{
			initCommand(cfg),
			taskCommand(cfg),
			featureCommand(cfg),
			buildCommand(cfg),
			planCommand(cfg),
			promptCommand(cfg),
			statusCommand(cfg),
			runsCommand(cfg),
			cleanCommand(cfg),
			serveCommand(cfg),
			hookCommand(cfg),
			versionCommand(cfg),
		},
		// cli's own --help and --version flags are package globals that
		// every app and command shares, and parsing writes to them: two
		// apps run at once (tests in parallel, an embedding program) would
		// race. Each command gets fresh ones instead (see setupCommands);
		// cli still finds --help by name.
		HideHelp:        true,
		HideHelpCommand: true,
		HideVersion:     true,
		// Only run maps errors to exit codes; the default handler would
		// call os.Exit itself.
		ExitErrHandler: func(*cli.Context, error) {},
		After: func(*cli.Context) error {
			_ = out.Flush()
			_ = errOut.Flush()
			return nil
		},
		Action: func(c *cli.Context) error {
			if c.Bool("version") {
				_, err := fmt.Fprint(c.App.Writer, readVersion().line())
				return err
			}
			if !c.Args().Present() {
				return cli.ShowAppHelp(c)
			}
			name := c.Args().First()
			return unknownCommand("ralph", fmt.Sprintf("unknown command %q", name), name, c.App.Commands)
		},
	}
	setupCommands("ralph", app.Commands, app.Flags)
	app.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		return &usageError{cmd: "ralph", err: flagError(err, app.Flags)}
	}
	return app
}

// setupCommands makes every command report a bad flag as a one-line usage
// error (exit 1) instead of printing its help and the error to stdout, worded
// by flagError among its flags and the global ones (which reorderArgs
// accepts after any command), and gives it its own --help flag in place of
// cli's shared one.
func setupCommands(prefix string, cmds []*cli.Command, global []cli.Flag) {
	for _, c := range cmds {
		name := prefix + " " + c.Name
		c.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
			return &usageError{cmd: name, err: flagError(err, slices.Concat(c.Flags, global))}
		}
		c.HideHelp = true
		c.HideHelpCommand = true
		c.Flags = append(c.Flags, helpFlag())
		setupCommands(name, c.Subcommands, global)
	}
}

// helpFlag is a fresh --help flag (see newAppConfig).
func helpFlag() cli.Flag {
	return &cli.BoolFlag{Name: "help", Aliases: []string{"h"}, Usage: "show help", DisableDefaultText: true}
}

// groupAction is the action of commands that only hold subcommands: help
// when called bare, an error for an unknown subcommand.
func groupAction(c *cli.Context) error {
	if !c.Args().Present() {
		return cli.ShowSubcommandHelp(c)
	}
	name, sub := commandPath(c), c.Args().First()
	return unknownCommand(name, fmt.Sprintf("unknown command %q for %q", sub, name), sub, c.Command.Subcommands)
}

// commandPath is "ralph task dep" for the dep command's context.
func commandPath(c *cli.Context) string {
	var names []string
	for _, l := range c.Lineage() {
		if l.Command != nil && l.Command.Name != "" {
			names = append(names, l.Command.Name)
		}
	}
	if len(names) > 0 && names[len(names)-1] == c.App.Name {
		names = names[:len(names)-1] // the root command
	}
	path := "ralph"
	for i := len(names) - 1; i >= 0; i-- {
		path += " " + names[i]
	}
	return path
}

// buildVersion is the version alone (versionInfo.Version), for cli.App
// and OpenTelemetry's service.version.
func buildVersion() string { return readVersion().Version }

// args checks the number of positional arguments and returns them.
func args(c *cli.Context, min, max int, usage string) ([]string, error) {
	a := c.Args().Slice()
	if len(a) < min || len(a) > max {
		want := usage
		if want == "" {
			want = "no arguments"
		}
		return nil, &usageError{cmd: commandPath(c), err: fmt.Errorf("want %s, got %d argument%s", want, len(a), plural(len(a)))}
	}
	return a, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// project is an initialised ralph project: its root and its .ralph dir.
type project struct {
	root  string
	ralph string
}

func (p project) dbPath() string { return filepath.Join(p.ralph, "progress.db") }

// rel returns path relative to the project root, for messages.
func (p project) rel(path string) string {
	if r, err := filepath.Rel(p.root, path); err == nil {
		return r
	}
	return path
}

// projectRoot resolves --dir (default: the working directory) to an
// absolute path.
func projectRoot(c *cli.Context) (project, error) {
	dir := c.String("dir")
	if dir == "" {
		dir = "."
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return project{}, fmt.Errorf("--dir %s: %w", dir, err)
	}
	return project{root: root, ralph: filepath.Join(root, ".ralph")}, nil
}

// openProject finds the initialised project and opens its database. It never
// creates anything.
func openProject(c *cli.Context, cfg appConfig) (project, *dag.Store, error) {
	p, err := projectRoot(c)
	if err != nil {
		return project{}, nil, err
	}
	if fi, err := os.Stat(p.ralph); err != nil || !fi.IsDir() {
		return project{}, nil, fmt.Errorf("no ralph project in %s (run 'ralph init')", p.root)
	}
	st, _, err := openPlanStore(c, cfg, p, func() error {
		return fmt.Errorf("no task database at %s (run 'ralph init')", p.dbPath())
	})
	if err != nil {
		return project{}, nil, err
	}
	return p, st, nil
}

// withStore runs fn on the project's store and closes the store.
//
// Expired leases: ARCHITECTURE.md §2 wants every `ralph task` call to
// return expired claims to pending first. The store does so at the start of
// every method, reads included, after a cheap indexed check that takes no
// write lock, so withStore does not call Recover itself (that would take
// the write lock on every read and serialise peeks behind writers).
// TestReadCommandsRecoverExpiredLeases holds the store to it.
func withStore(cfg appConfig, fn func(c *cli.Context, p project, st *dag.Store) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		p, st, err := openProject(c, cfg)
		if err != nil {
			return err
		}
		defer st.Close()
		return fn(c, p, st)
	}
}
