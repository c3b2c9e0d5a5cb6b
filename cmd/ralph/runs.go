package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/forge"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/notify"
)

// defaultRuns is how many runs `ralph runs` lists without -n.
const defaultRuns = 20

// runRecord is the store's record of this build, plan or prompt run
// (loop.RunRecorder, DESIGN §15). It begins when the loop tells its first
// note (observe): a command refused before its loop starts — bad flags, a
// bad configuration, a missing agent — is no run and changes nothing. end
// ends it however the command returns. The CLI writes it, not package
// loop: the kind of run and its exit code are the CLI's. A store that
// keeps no records (a progress file) gets none.
type runRecord struct {
	cfg   appConfig
	ctx   context.Context
	kind  loop.RunKind
	store loop.TaskStore
	scope loop.Scope

	once  sync.Once
	begun bool             // the loop said its first note
	rec   loop.RunRecorder // nil: not begun, or no record
	id    int64
	// notify tells the --notify targets of the run's events and its end
	// (nil: none).
	notify *notify.Notifier
	// issues comments on the GitHub issues of the tasks the run moves
	// (nil: the plan has none, or no token).
	issues *forge.IssueComments
	// rep is the run's report, once there is one; into the integration
	// branch of a parallel build.
	rep  *loop.Report
	into string
}

// newRun is the record of a run of kind on store, begun by observe.
func newRun(ctx context.Context, cfg appConfig, store loop.TaskStore, kind loop.RunKind, scope loop.Scope) *runRecord {
	return &runRecord{cfg: cfg, ctx: ctx, kind: kind, store: store, scope: scope}
}

// observe returns obs telling r that the run began at its first note.
func (r *runRecord) observe(obs loop.Observer) loop.Observer {
	return loop.ObserverFunc(func(n loop.Note) {
		r.once.Do(r.begin)
		obs.Observe(n)
		r.notify.Observe(n)
		if r.issues != nil {
			r.issues.Observe(n)
		}
	})
}

// begin records the start of the run. A store that cannot record it only
// costs a warning: the run goes on.
func (r *runRecord) begin() {
	r.begun = true
	rec, ok := r.store.(loop.RunRecorder)
	if !ok {
		return
	}
	id, err := rec.BeginRun(r.ctx, loop.RunRecord{Kind: r.kind, Holder: loop.ThisProcess(), Version: readVersion().brief()})
	if err != nil {
		fmt.Fprintf(r.cfg.stderr, "ralph: warning: this run is not recorded: %v\n", err)
		return
	}
	r.rec, r.id = rec, id
}

// end records how the run ended: err is what the command returns, whose
// exit code (exitCode) and outcome the record keeps; the counts are the
// report's (what the run's last line said), else the scope's now. It
// tells the --notify targets (run_end) and waits for the last
// notifications (closeNotify). It runs when the context is cancelled too
// (a signal).
func (r *runRecord) end(ctx context.Context, err error) {
	r.once.Do(func() {}) // a note that comes later begins nothing
	if !r.begun {
		r.closeNotify()
		return
	}
	code := exitCode(ctx, err) // before the context loses its cancellation
	ctx = context.WithoutCancel(ctx)
	e := loop.RunEnd{Outcome: outcomeOf(code), ExitCode: code}
	if r.rep != nil {
		e.Outcome, e.CostUSD, e.Agents = r.rep.Outcome, r.rep.CostUSD, len(r.rep.Receipts)
		for _, rc := range r.rep.Receipts {
			if rc.Agent != "" && !slices.Contains(e.AgentNames, rc.Agent) {
				e.AgentNames = append(e.AgentNames, rc.Agent)
			}
		}
		if err != nil && !errors.As(err, new(*codedError)) {
			e.Outcome = loop.OutcomeError // the report came, then an error
		}
	}
	// The report's counts, which the run's last line printed, else the
	// store's now (a run that ended before its loop could count).
	counts, cerr := loop.Counts{}, error(nil)
	if r.rep != nil && r.rep.Remaining >= 0 && r.rep.Counts.Total() > 0 {
		counts = r.rep.Counts
	} else {
		counts, cerr = r.store.Counts(ctx, r.scope)
	}
	if cerr == nil {
		e.Done, e.Failed, e.Remaining = counts.Done, counts.Failed, counts.Open()+counts.InProgress
	}
	if ls, ok := r.store.(loop.LandingStore); ok && r.into != "" {
		if tip, ok, terr := ls.BranchTip(ctx, r.into); terr == nil && ok {
			e.IntegrationTip = tip
		}
	}
	if r.rec != nil {
		if err := r.rec.EndRun(ctx, r.id, e); err != nil {
			fmt.Fprintf(r.cfg.stderr, "ralph: warning: the end of this run is not recorded: %v\n", err)
		}
	}
	if r.notify != nil {
		end := notify.End{Outcome: e.Outcome, ExitCode: code, Done: e.Done, Failed: e.Failed, Remaining: e.Remaining, CostUSD: e.CostUSD}
		if r.rep != nil {
			end.Message = reportWords(*r.rep)
		}
		r.notify.RunEnd(end)
	}
	r.closeNotify()
}

// notifyWait bounds how long ralph waits, on its way out, for the last
// notifications to be delivered.
const notifyWait = 15 * time.Second

// closeNotify delivers the notifications still queued, within notifyWait.
func (r *runRecord) closeNotify() {
	ctx, cancel := context.WithTimeout(context.Background(), notifyWait)
	defer cancel()
	if r.issues != nil {
		if err := r.issues.Close(ctx); err != nil {
			fmt.Fprintf(r.cfg.stderr, "ralph: warning: gave up commenting on GitHub issues: %v\n", err)
		}
	}
	if r.notify == nil {
		return
	}
	if err := r.notify.Close(ctx); err != nil {
		fmt.Fprintf(r.cfg.stderr, "ralph: warning: %v\n", err)
	}
}

// exitCode is the exit code of a command that returned err (runApp's,
// and a run record's).
func exitCode(ctx context.Context, err error) int {
	if err == nil {
		return exitOK
	}
	if interrupted(ctx, err) {
		return exitInterrupted
	}
	var ce *codedError
	if errors.As(storeError(err), &ce) {
		return ce.code
	}
	return exitError
}

// interrupted reports whether err is ctx's own end: a signal stopped the
// command (exit 130, "ralph: interrupted").
func interrupted(ctx context.Context, err error) bool {
	return ctx.Err() != nil && errors.Is(err, ctx.Err())
}

// outcomeOf is the outcome of a run that ended with exit code code before
// it had a report: the outcome of that code (README, "Exit codes").
func outcomeOf(code int) loop.Outcome {
	if code == exitOK {
		return loop.OutcomeComplete
	}
	for _, o := range loop.Outcomes() {
		if o.ExitCode() == code {
			return o
		}
	}
	return loop.OutcomeError
}

func runsCommand(cfg appConfig) *cli.Command {
	return &cli.Command{
		Name:      "runs",
		Usage:     "list the build, plan and prompt runs, newest first",
		UsageText: "ralph runs [-n N] [--json]",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "n", Value: defaultRuns, Usage: "list the latest `N` runs (0: all)"},
			jsonFlag(),
		},
		Action: withStore(cfg, func(c *cli.Context, _ project, st *dag.Store) error {
			if _, err := args(c, 0, 0, ""); err != nil {
				return err
			}
			if c.Int("n") < 0 {
				return &usageError{cmd: "ralph runs", err: fmt.Errorf("-n must be 0 or more, not %d", c.Int("n"))}
			}
			runs, err := st.Runs(c.Context, c.Int("n"))
			if err != nil {
				return err
			}
			if c.Bool("json") {
				out := make([]runJSON, 0, len(runs))
				for _, r := range runs {
					out = append(out, toRunJSON(r))
				}
				return writeJSON(cfg.stdout, out)
			}
			return writeRunsText(cfg.stdout, runs, cfg.now())
		}),
	}
}

// runJSON is one run record in `ralph runs --json` (an array of them,
// newest first) and `ralph status --json`'s last_run (loop.RunLine says
// its fields).
type runJSON = loop.RunLine

func toRunJSON(r loop.RunRecord) runJSON { return loop.RunLineOf(r) }

// writeRunsText prints the runs as a table, newest first.
func writeRunsText(w io.Writer, runs []loop.RunRecord, now time.Time) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "runs: none yet")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tOUTCOME\tEXIT\tDONE\tFAILED\tREMAINING\tAGENTS\tCOST\tSTARTED\tTOOK\tRAN ON")
	for _, r := range runs {
		r = r.Settled()
		ranOn := strings.Join(r.AgentNames, ",")
		if ranOn == "" {
			ranOn = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t$%.4f\t%s\t%s\t%s\n", r.ID, r.Kind, r.Outcome, exitText(r),
			r.Done, r.Failed, r.Remaining, r.Agents, r.CostUSD, r.StartedAt.UTC().Format(time.RFC3339), took(r, now), ranOn)
	}
	return tw.Flush()
}

// exitText is a run's exit code, "-" when it has none.
func exitText(r loop.RunRecord) string {
	if r.ExitCode == nil {
		return "-"
	}
	return strconv.Itoa(*r.ExitCode)
}

// took is how long a run took, or has been running ("running 3m").
func took(r loop.RunRecord, now time.Time) string {
	switch {
	case !r.EndedAt.IsZero():
		return age(r.EndedAt.Sub(r.StartedAt))
	case r.Outcome == loop.RunDied:
		return "-"
	}
	return "running " + age(now.Sub(r.StartedAt))
}

// lastRunLine is `ralph status`'s first line: the last run, in one line.
// "last run: build test_gate_failed (exit 3) · done 1, failed 0, remaining 2
// · $0.0120 over 2 agent sessions · ended 3m ago".
func lastRunLine(r loop.RunRecord, now time.Time) string {
	r = r.Settled()
	exit := "exit " + exitText(r)
	when := "started " + age(now.Sub(r.StartedAt)) + " ago"
	switch {
	case !r.EndedAt.IsZero():
		when = "ended " + age(now.Sub(r.EndedAt)) + " ago"
	case r.Outcome == loop.RunDied:
		exit = "no exit code: its process died"
	}
	return fmt.Sprintf("last run: %s %s (%s) · done %d, failed %d, remaining %d · $%.4f over %d agent %s · %s",
		r.Kind, r.Outcome, exit, r.Done, r.Failed, r.Remaining, r.CostUSD, r.Agents, "session"+plural(r.Agents), when)
}
