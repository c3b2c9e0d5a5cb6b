package loop

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ralph-dev/ralph/hostgit"
	"github.com/ralph-dev/ralph/safefile"
	"github.com/ralph-dev/ralph/sigil"
)

// IterationStatus says how one iteration ended.
type IterationStatus string

// The statuses of an iteration, as the session log and receipts show them.
const (
	IterDone              IterationStatus = "done"               // the task was completed
	IterTaskFailed        IterationStatus = "task_failed"        // <task-failed>, or task trouble with no retry left
	IterNoSigil           IterationStatus = "no_sigil"           // task trouble: no task sigil
	IterWrongID           IterationStatus = "wrong_id"           // task trouble: a sigil for another task
	IterVerifyFailed      IterationStatus = "verify_failed"      // task trouble: the verifier said no (or nothing)
	IterAgentTrouble      IterationStatus = "agent_trouble"      // crash, error, timeout
	IterUsageLimit        IterationStatus = "usage_limit"        // a usage limit: a wait, not an iteration
	IterTestsFailed       IterationStatus = "tests_failed"       // gate trouble: the test command failed
	IterGitFailed         IterationStatus = "git_failed"         // gate trouble: git failed
	IterNoChange          IterationStatus = "nothing_changed"    // gate trouble: commits on, nothing changed
	IterFailure           IterationStatus = "failure"            // <promise>FAILURE</promise>
	IterCancelled         IterationStatus = "cancelled"          // the run was cancelled mid-iteration
	IterSessionOK         IterationStatus = "session_ok"         // peek mode: the session ran and left nothing held; plan and prompt mode: it ran cleanly
	IterSessionLeft       IterationStatus = "session_left_tasks" // peek mode: tasks left in_progress were failed
	IterPeekError         IterationStatus = "peek_error"         // peek mode: the store could not be read
	IterAlreadyClosed     IterationStatus = "already_closed"     // the task was done when the session ended (someone else, or the progress file's agent, finished it)
	IterClaimLost         IterationStatus = "claim_lost"         // the loop's claim ended behind its back: released (task trouble), taken over, or failed by someone else
	IterNotRecorded       IterationStatus = "not_recorded"       // the store stayed unwritable: the outcome could not be recorded; the run stops
	IterIntegrationFailed IterationStatus = "integration_failed" // task trouble, with workers: a conflict, or a test gate failing after the replay onto the moved tip
	IterHeadMoved         IterationStatus = "head_moved"         // task trouble, with --commit: the agent moved HEAD (or its checkout's) off the commit the session began on
	IterCheckFailed       IterationStatus = "check_failed"       // task trouble: the task's own check (Task.Check) failed
)

// Success reports whether the status counts as a successful iteration in
// the session summary.
func (s IterationStatus) Success() bool {
	return s == IterDone || s == IterSessionOK || s == IterAlreadyClosed
}

// releaseTimeout bounds the clean-up store calls made on the way out,
// with a context that is no longer cancelled.
const releaseTimeout = 10 * time.Second

// minRenewInterval bounds how often leases are renewed, whatever the lease.
const minRenewInterval = 10 * time.Millisecond

// summaryLimit caps the summary the loop logs when it completes a task.
const summaryLimit = 500

// gateDetailLimit caps the gate failure (with output) logged on release.
const gateDetailLimit = 1500

// Reasons written to task logs.
const (
	// ReasonSessionExited fails a task a peek-mode session left behind.
	ReasonSessionExited = "session exited without completing task"
	// ReasonLoopStopped releases the claims a run holds when it returns.
	ReasonLoopStopped = "loop stopped"
)

// Run runs the build loop until an outcome of ARCHITECTURE.md §3 ends it
// and returns the report. It returns a non-nil error exactly when the
// outcome is OutcomeError: an invalid Config, a prompt override that does
// not load, a store error, a Runner that could not start the agent, or a
// panicking Observer (*ObserverPanicError). Cancelling ctx stops the agent
// and ends the run with OutcomeCancelled.
//
// Whatever the return path — error, cancellation, timeout, a panic in the
// store or runner (which Run lets through after cleaning up) — no task is
// left in_progress under cfg.AgentID: the claim is released with a fresh,
// non-cancelled context.
func Run(ctx context.Context, cfg Config, store TaskStore, runner Runner) (Report, error) {
	if store == nil || runner == nil {
		err := fmt.Errorf("%w: Run needs a store and a runner", ErrConfig)
		return Report{Outcome: OutcomeError, Message: err.Error(), Remaining: -1}, err
	}
	auto := cfg.Session == ""
	kind, strat, err := cfg.normalize()
	if err != nil {
		return Report{Outcome: OutcomeError, Message: err.Error(), Remaining: -1}, err
	}
	r := newRun(cfg, store, runner, strat, auto)
	r.receipts, _ = store.(ReceiptStore)
	r.mode = kind.start(r)
	return r.exec(ctx)
}

// newRun is the engine of a run of a checked cfg; its caller sets its mode.
func newRun(cfg Config, store TaskStore, runner Runner, strat Strategy, auto bool) *run {
	r := &run{cfg: cfg, store: store, runner: runner, strategy: strat, m: newMachine(), autoSession: auto}
	r.pool, _ = runner.(*Pool)
	r.budget = cfg.Budget
	if r.budget == nil {
		r.own = solo{maxIter: cfg.MaxIterations, maxCost: cfg.MaxCost, report: &r.report}
		r.budget = &r.own
	}
	return r
}

// run is the engine of one Run, Plan or RunPrompt: it opens the logs,
// renews the lease, takes iterations from the budget, waits out usage
// limits, books iterations and releases what is held on the way out; its
// mode does the rest (modes.go). Its fields are owned by the goroutine
// calling Run; the renewal goroutines read only cfg, store, the notifier
// (locked) and the lease (locked), never what the loop writes as it goes
// (r.iter: a notice of a failed renewal once read it, a data race).
type run struct {
	cfg    Config
	store  TaskStore
	runner Runner
	// pool is runner when it is a Pool; workAgent the agent that ran the
	// last work session, whom the verifier avoids.
	pool      *Pool
	workAgent string
	strategy  Strategy
	receipts  ReceiptStore
	m         *machine
	note      *notifier
	prompts   map[string]*Prompt
	// mode is what the run's kind does (modes.go); budget is where it
	// takes its iterations and cost from (budget.go).
	mode   mode
	budget Budget
	own    solo // the budget of a run of its own (no Config.Budget)

	report  Report
	history []Attempt
	// unpriced: a session's cost was unknown under a budget, and said so.
	unpriced bool
	hint     string
	// agentStreak and gateStreak count agent and gate trouble in a row;
	// a clean run of the agent resets the first, a passing gate the second.
	agentStreak int
	gateStreak  int
	// waited sums usage-limit waits since the last session that was not
	// stopped by a limit.
	waited time.Duration
	// unwritable is when a claim first failed for a reason that may pass
	// (a full disk, a locked database, a server away), zero while claims
	// go through; unwritableWait is the next wait (waitStore).
	unwritable     time.Time
	unwritableWait time.Duration
	// pausedUntil is the end of the last usage-limit pause of the runs
	// sharing the budget that this run waited for.
	pausedUntil time.Time
	// repo is the git repository Root is in, found when the run began
	// (nil, with repoErr, when it is in none): every git command of the
	// run is built from it (package hostgit).
	repo    *hostgit.Repo
	repoErr error
	// head is where HEAD was when the last agent session began (the
	// commit gate's check, headguard.go).
	head headState
	// autoSession is set when the session name came from the clock.
	autoSession bool
	// lease is the claim the loop holds, which a goroutine renews.
	lease lease
	// iter is the iteration under way, for the store's own bookkeeping
	// (IterationRecorder).
	iter iterState
}

// testGate is the test gate of the modes that have one (build and peek):
// its command ("" for none) and, when the run took it from AGENTS.md,
// where from (for its announcement).
type testGate struct {
	cmd    string
	agents *AgentsTest
}

// gated is a mode with a test gate, whose command the engine reads
// before the run begins (load) and announces.
type gated interface {
	gate() *testGate
}

// stop ends the loop with an outcome.
type stop struct {
	outcome Outcome
	message string
	// err is Run's error (OutcomeError only); cause the error behind
	// another outcome, for Report.Cause.
	err, cause error
	resetsAt   time.Time
	// failed is how many tasks in scope had failed when the stop was
	// made from the counts (completeStop, terminalStop): the ones
	// nameFailed names.
	failed int
}

func stopWith(o Outcome, format string, args ...any) *stop {
	return &stop{outcome: o, message: fmt.Sprintf(format, args...)}
}

func internal(err error) *stop {
	return &stop{outcome: OutcomeError, message: err.Error(), err: err}
}

func (r *run) exec(parent context.Context) (Report, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	cfg := r.cfg
	r.report = Report{Session: cfg.Session, AgentID: cfg.AgentID, StartedAt: cfg.Now(), Remaining: -1}
	obs := cfg.Observer
	// Prompts and the test command are read first: a bad override is an
	// error that leaves no trace, not even a log.
	if s := r.load(ctx); s != nil {
		r.report.Outcome, r.report.Message, r.report.Cause = s.outcome, s.message, s.err
		return r.report, s.err
	}
	// The working tree before anything is written: a run refused here
	// leaves no log (treelock.go). Released on every way out, a panic's
	// included.
	lock, held := r.holdTree()
	if held != nil {
		r.report.Outcome, r.report.Message, r.report.Cause = held.outcome, held.message, held.err
		return r.report, held.err
	}
	defer lock.release()
	slog := r.cfg.Shared.log()
	if slog != nil {
		// A worker: the build's one session log, which the pool opened.
		if !cfg.SessionLog {
			slog = nil
		}
	} else {
		var err error
		if slog, err = openLog(&r.cfg, r.autoSession); err != nil {
			r.report.Outcome, r.report.Message = OutcomeError, err.Error()
			return r.report, err
		}
		if slog != nil {
			defer slog.Close()
		}
		cfg = r.cfg
		r.report.Session = cfg.Session
	}
	r.note = &notifier{log: slog, obs: obs, cancel: cancel, base: Note{Session: cfg.Session, Mode: cfg.Mode, Worker: cfg.Worker}, now: cfg.Now}
	if slog != nil {
		slog.told.Do(func() {
			if err := slog.events.Err(); err != nil {
				// Not a reason to stop the run, but never silent.
				r.note.notice(0, "%v; this session's events are not written (ralph serve does not show them)", err)
			}
		})
	}
	r.announceAgentsTest()
	r.announceBlankedFilters(ctx)

	// A panic in the store or the runner goes through, but only after the
	// claims are released.
	defer func() {
		if v := recover(); v != nil {
			r.releaseAll(parent)
			panic(v)
		}
	}()
	// (The renewal goroutine below is stopped before the claims are
	// released; on a panic the deferred cancel of ctx stops it.)

	stopRenew := r.renewHeld(ctx)
	s := r.loop(ctx)
	r.stopped(s)
	stopRenew()
	r.releaseAll(parent)
	r.mode.close(parent, ctx.Err() == nil)
	r.finish(parent)
	if perr := r.note.err(); perr != nil {
		s = internal(perr)
	}
	r.report.Outcome, r.report.Message, r.report.ResetsAt = s.outcome, s.message, s.resetsAt
	r.report.Cause = s.cause
	if s.err != nil {
		r.report.Cause = s.err
	}
	r.fireEnd(parent)
	rep := r.report
	r.note.send(Note{Kind: NoteSessionEnd, Report: &rep})
	return r.report, s.err
}

// maxSessionSeconds bounds the search for a free session name.
const maxSessionSeconds = 3600

// reserveSession makes the clock-made session name cfg.Session unique
// among the logs in LogDir and claims it atomically, so that two runs
// started in the same second — in one process or two — never share or
// overwrite a log. A name is taken when its session log or raw-log
// directory exists; then the next second's name is tried (no sleeping:
// the name stays in the session-YYYYMMDD-HHMMSS pattern and only says when
// the run started to within the seconds skipped). The claim is the session
// log itself, created with O_EXCL and returned open, when cfg.SessionLog
// is set; else the raw-log directory, made with Mkdir (which fails if it
// exists).
func reserveSession(cfg *Config) (*os.File, error) {
	dir := cfg.LogDir
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	base := logBase(cfg.Root, dir)
	if err := makeLogDir(base, dir); err != nil {
		return nil, fmt.Errorf("loop: session log: %w", err)
	}
	exists := func(path string) (bool, error) {
		_, err := safefile.Lstat(base, path)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	}
	start, err := time.Parse(sessionLayout, cfg.Session)
	if err != nil {
		return nil, fmt.Errorf("loop: session name %q: %w", cfg.Session, err)
	}
	for i := range maxSessionSeconds {
		name := SessionName(start.Add(time.Duration(i) * time.Second))
		taken, err := exists(SessionLogPath(dir, name))
		if err == nil && !taken {
			taken, err = exists(filepath.Join(dir, name))
		}
		if err != nil {
			return nil, fmt.Errorf("loop: session log: %w", err)
		}
		if taken {
			continue
		}
		if cfg.SessionLog {
			f, err := safefile.Create(base, SessionLogPath(dir, name), 0o644)
			if errors.Is(err, fs.ErrExist) {
				continue // another run took it just now
			}
			if err != nil {
				return nil, fmt.Errorf("loop: session log: %w", err)
			}
			cfg.Session = name
			return f, nil
		}
		err = safefile.Mkdir(base, filepath.Join(dir, name), 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("loop: raw log directory: %w", err)
		}
		cfg.Session = name
		return nil, nil
	}
	return nil, fmt.Errorf("loop: session log: no free session name in the %d seconds after %s", maxSessionSeconds, cfg.Session)
}

// loop runs the checks and iterations; it returns why it stopped.
func (r *run) loop(ctx context.Context) *stop {
	if s := r.prepareRun(ctx); s != nil {
		return s
	}
	if s := r.fire(ctx, StateEventStart); s != nil {
		return s
	}
	if s := r.finishedCheck(ctx); s != nil {
		return s
	}
	for {
		if s := r.checkCancel(ctx); s != nil {
			return s
		}
		if s := r.takeSlot(ctx); s != nil {
			return s
		}
		counted, s := r.mode.iteration(ctx)
		r.budget.Give(counted)
		if s != nil {
			return s
		}
		if !counted {
			continue // a usage-limit wait: same iteration again
		}
		if s := r.fire(ctx, StateEventIterate); s != nil {
			return s
		}
		if s := r.mode.exitChecks(ctx); s != nil {
			return s
		}
		if s := r.fire(ctx, StateEventNext); s != nil {
			return s
		}
	}
}

// load finds the git repository, reads the prompt templates and the test
// command.
func (r *run) load(ctx context.Context) *stop {
	r.repo, r.repoErr = hostgit.Find(r.cfg.Root)
	r.prompts = map[string]*Prompt{}
	for _, n := range r.mode.prompts() {
		for _, name := range []string{n, SystemPromptName(n)} {
			p, err := LoadPrompt(r.cfg.Root, name)
			if err != nil {
				return internal(err)
			}
			r.prompts[name] = p
		}
	}
	g, ok := r.mode.(gated)
	if !ok {
		return nil // plan and prompt mode have no test gate
	}
	tests := g.gate()
	tests.cmd = r.cfg.TestCmd
	if tests.cmd == "" {
		at, err := r.agentsTest(ctx)
		if err != nil {
			return internal(err)
		}
		*tests = testGate{cmd: at.Command, agents: &at}
	}
	return nil
}

// prepareRun checks the commit gate, makes the raw log directory and readies
// the mode (with Verify, the verifier's tree guard), before the first
// iteration.
func (r *run) prepareRun(ctx context.Context) *stop {
	if r.cfg.Commit {
		if err := checkGitRepo(r.repo, r.repoErr, r.cfg.Root); err != nil {
			return &stop{outcome: OutcomeGitFailed, message: err.Error(), cause: err}
		}
	}
	if r.cfg.RawLogs {
		dir, _ := filepath.Abs(filepath.Join(r.cfg.LogDir, r.cfg.Session))
		if err := makeLogDir(logBase(r.cfg.Root, r.cfg.LogDir), dir); err != nil {
			return internal(fmt.Errorf("loop: log directory: %w", err))
		}
	}
	return r.mode.prepare(ctx)
}

func (r *run) checkCancel(ctx context.Context) *stop {
	if ctx.Err() == nil {
		return nil
	}
	if err := r.note.err(); err != nil {
		return internal(err)
	}
	return stopWith(OutcomeCancelled, "interrupted")
}

// storeErr turns a store error into a stop: a cancelled context is a
// cancellation, anything else an internal error.
func (r *run) storeErr(ctx context.Context, err error) *stop {
	if ctx.Err() != nil {
		return r.checkCancel(ctx)
	}
	return internal(err)
}

func (r *run) fire(ctx context.Context, ev StateEvent) *stop {
	from, to, err := r.m.fire(ctx, ev)
	if err != nil {
		return internal(err)
	}
	r.note.send(Note{Kind: NoteTransition, From: from, To: to, Event: ev, Iteration: r.report.Iterations})
	return nil
}

// fireEnd moves the machine to done or failed after the outcome is known.
func (r *run) fireEnd(ctx context.Context) {
	ev := StateEventAbort
	if r.report.Outcome.Succeeded() {
		ev = StateEventFinish
	}
	if r.m.f.Can(string(ev)) {
		r.fire(ctx, ev)
	}
}

// planChecks is step 9 of the modes that work the plan's tasks: the plan
// is resolved, or the iteration limit hit. With tolerant (peek mode), a
// store that cannot count is "tasks remain".
func (r *run) planChecks(ctx context.Context, tolerant bool) *stop {
	if s := r.finishedCheck(ctx); s != nil {
		return s
	}
	c, err := r.store.Counts(ctx, r.cfg.Scope)
	if err != nil {
		if tolerant && ctx.Err() == nil {
			r.note.notice(r.report.Iterations, "plan status failed (tasks assumed to remain): %v", err)
			return r.limitCheck(-1)
		}
		return r.storeErr(ctx, err)
	}
	if c.Total() > 0 && c.Resolved() {
		return completeStop(c)
	}
	return r.limitCheck(c.Open() + c.InProgress)
}

func (r *run) limitCheck(remaining int) *stop {
	if !r.budget.Spent(r.report.Iterations) {
		return nil
	}
	if remaining < 0 {
		return stopWith(OutcomeLimitReached, "iteration limit reached (%d); tasks remain", r.cfg.MaxIterations)
	}
	return stopWith(OutcomeLimitReached, "iteration limit reached (%d); %s", r.cfg.MaxIterations, Remain(remaining))
}

func completeStop(c Counts) *stop {
	if c.Failed > 0 {
		s := stopWith(OutcomeCompleteWithFailures, "complete: %d done, %d failed", c.Done, c.Failed)
		s.failed = c.Failed
		return s
	}
	return stopWith(OutcomeComplete, "complete: all %d %s done", c.Done, plural(c.Done, "task", "tasks"))
}

// lookAgainAfter is how long a loop that saw a ready task it could not
// claim waits before it claims again.
const lookAgainAfter = 20 * time.Millisecond

// terminalStop says why nothing is ready, from the scope's counts.
func terminalStop(c Counts) *stop {
	switch {
	case c.Total() == 0:
		return stopWith(OutcomeNoPlan, "nothing to do: the plan is empty")
	case c.Resolved():
		return completeStop(c)
	default:
		s := stopWith(OutcomeBlocked, "blocked: %s but none is ready", Remain(c.Open()+c.InProgress))
		s.failed = c.Failed
		return s
	}
}

// session is what one agent session is given: the user prompt and the
// system prompt, rendered from the template name and its system template.
type session struct {
	prompt, system string
}

// render renders the user prompt template name and its system prompt with
// data.
func (r *run) render(name string, data PromptData) (session, *stop) {
	prompt, err := r.prompts[name].Render(data)
	if err != nil {
		return session{}, internal(err)
	}
	system, err := r.prompts[SystemPromptName(name)].Render(data)
	if err != nil {
		return session{}, internal(err)
	}
	return session{prompt: prompt, system: system}, nil
}

// Remain is "1 task remains" or "N tasks remain".
func Remain(n int) string {
	if n == 1 {
		return "1 task remains"
	}
	return fmt.Sprintf("%d tasks remain", n)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// by is the loop as the actor of a move on its claim of task.
func (r *run) by(task Task) Actor {
	return Actor{Agent: r.cfg.AgentID, Loop: true, Generation: task.Generation}
}

// sessionData is the prompt data every session of a run shares: mode,
// iteration, agent id, root, RALPH_BIN and the project's skills. Modes add
// their own fields (the task context of build mode comes from buildContext).
func (r *run) sessionData(mode Mode, n int) (PromptData, error) {
	skills, err := FindSkills(r.cfg.Root)
	if err != nil {
		return PromptData{}, err
	}
	return PromptData{Mode: mode, Iteration: n, AgentID: r.cfg.AgentID, Root: r.cfg.Root, RalphBin: r.cfg.RalphBin, Skills: skills}, nil
}

// runTaskless runs the session of an iteration that claims no task (plan,
// prompt): the model, the iteration's start, the agent. A nil result means
// the iteration ended there — cancelled, or a usage limit, whose wait has
// been taken (s then says whether the run stops).
func (r *run) runTaskless(ctx context.Context, n int, sess session) (res *RunResult, model string, hinted bool, s *stop) {
	model, hinted = r.pickModel(ModelChoice{Iteration: n, History: r.history})
	r.beginIteration(ctx, n, Task{}, model)
	got, s := r.runAgent(ctx, n, model, sess, Task{})
	switch {
	case s != nil:
		return nil, model, hinted, s
	case ctx.Err() != nil:
		return nil, model, hinted, r.checkCancel(ctx)
	case got.Class == ClassUsageLimit:
		r.endIteration(n, Task{}, model, IterUsageLimit, "")
		return nil, model, hinted, r.usageLimit(ctx, got)
	}
	r.waited = 0
	return &got, model, hinted, nil
}

// countIteration books an iteration that ran to its end (a usage-limit wait
// is not one): a clean agent (and verifier) session resets the agent-trouble
// streak; the report's tallies, the strategies' history and the Observer hear
// of it.
func (r *run) countIteration(n int, task Task, model string, hinted bool, status IterationStatus, why string) {
	if status != IterAgentTrouble {
		r.agentStreak = 0
	}
	r.report.Iterations++
	if status.Success() {
		r.report.Successes++
	} else {
		r.report.Failures++
	}
	r.history = append(r.history, Attempt{Iteration: n, TaskID: task.ID, Model: model, Hinted: hinted, Result: attemptResult(status)})
	r.endIteration(n, task, model, status, why)
}

// pickModel is step 5: the hint, if any, else the strategy.
func (r *run) pickModel(c ModelChoice) (model string, hinted bool) {
	if r.hint != "" {
		return r.hint, true
	}
	return r.strategy.Model(c), false
}

func (r *run) consumeHint(hinted bool) {
	if hinted {
		r.hint = ""
	}
}

func attemptResult(s IterationStatus) AttemptResult {
	switch s {
	case IterDone, IterSessionOK, IterAlreadyClosed:
		return AttemptDone
	case IterTaskFailed, IterFailure, IterSessionLeft:
		return AttemptTaskFailed
	case IterNoSigil, IterWrongID, IterVerifyFailed, IterClaimLost, IterIntegrationFailed, IterHeadMoved, IterCheckFailed:
		return AttemptTaskTrouble
	case IterTestsFailed, IterGitFailed, IterNoChange:
		return AttemptGateTrouble
	}
	return AttemptAgentTrouble
}

func (r *run) endIteration(n int, task Task, model string, status IterationStatus, why string) {
	r.note.send(Note{Kind: NoteIterationEnd, Iteration: n, Task: task, Model: model, Status: status, Message: why})
	r.recordResult(n, status)
	if status != IterUsageLimit {
		r.recordIteration(n, task, model, status, why)
	}
}

// holds reports whether cur, the task as the store has it now, is still
// under the loop's claim held (same agent, same generation).
func holds(cur, held Task) bool {
	return cur.Status == StatusInProgress && cur.ClaimedBy == held.ClaimedBy && cur.Generation == held.Generation
}

// lastMove describes the latest entry of a task's history that moved it
// ("release by agent-1a2b3c4d: …"), for messages about a lost claim.
func lastMove(ctx context.Context, store TaskStore, id string) string {
	logs, err := store.Logs(ctx, id)
	if err != nil {
		return "the task's history could not be read: " + err.Error()
	}
	for i := len(logs) - 1; i >= 0; i-- {
		switch e := logs[i]; e.Kind {
		case LogRelease, LogLeaseExpired, LogHolderGone, LogRetry, LogDone, LogFail, LogReset, LogClaim:
			s := e.Kind
			if e.Actor != "" {
				s += " by " + e.Actor
			}
			if e.Message != "" {
				s += ": " + e.Message
			}
			return s
		}
	}
	return "no entry in its history says how"
}

// gates runs the test gate (cmd, none when empty) and the commit gate. A
// zero verdict means both passed (or are off); otherwise it is the gate
// trouble, with a stop when no retry is left.
func (r *run) gates(ctx context.Context, n int, title, cmd string) verdict {
	if v := r.testGate(ctx, n, cmd); v.decided() {
		return v
	}
	if r.cfg.Commit {
		if v := r.commitGate(ctx, n, title); v.decided() {
			return v
		}
	}
	r.gateStreak = 0
	return verdict{}
}

// testGate runs the test command (none when cmd is empty): a zero
// verdict when it passed, else gate trouble. It leaves the gate streak to
// its caller, which resets it once every gate passed.
func (r *run) testGate(ctx context.Context, n int, cmd string) verdict {
	if cmd == "" {
		return verdict{}
	}
	if err := r.runTests(ctx, r.dir(), cmd); err != nil {
		r.note.failed(n, err)
		return r.gateTrouble(ctx, IterTestsFailed, OutcomeTestGateFailed, err)
	}
	return verdict{}
}

// commitGate commits the iteration's work (title names it): a zero
// verdict when it did, else gate trouble. Like testGate it leaves the
// streak to its caller.
func (r *run) commitGate(ctx context.Context, n int, title string) verdict {
	// Again after the test command, which runs the tree's code.
	if why, err := r.headMoved(ctx); err != nil || why != "" {
		if err == nil {
			err = fmt.Errorf("%w: %s", ErrHeadMoved, why)
		}
		r.note.notice(n, "%v", err)
		return r.gateTrouble(ctx, IterGitFailed, OutcomeGitFailed, err)
	}
	if err := commitAll(ctx, r.repo, r.cfg.Root, CommitMessage(r.cfg.Mode, n, title)); err != nil {
		st := IterGitFailed
		if errors.Is(err, ErrNothingChanged) {
			st = IterNoChange
		}
		r.note.notice(n, "%v", err)
		return r.gateTrouble(ctx, st, OutcomeGitFailed, err)
	}
	return verdict{}
}

// gateTrouble counts gate trouble; the (1+MaxRetries)-th in a row stops
// the run with o.
func (r *run) gateTrouble(ctx context.Context, st IterationStatus, o Outcome, err error) verdict {
	if ctx.Err() != nil {
		return judged(IterCancelled, "", r.checkCancel(ctx))
	}
	r.gateStreak++
	v := verdict{status: st, why: firstLine(err.Error()), detail: excerptLines(err.Error(), gateDetailLimit)}
	if r.gateStreak >= 1+r.cfg.MaxRetries {
		v.stop = stopWith(o, "%s (%d %s in a row)", v.why, r.gateStreak, plural(r.gateStreak, "time", "times"))
	}
	return v
}

// ErrNotLoggedIn (Report.Cause) stops a run whose agent is not logged in
// or whose credentials were refused (ClassAuth): at once, since every
// retry would be refused the same way.
var ErrNotLoggedIn = errors.New("loop: the agent is not logged in, or its credentials were refused")

// LoginHint is what Report.Message suggests after ErrNotLoggedIn.
const LoginHint = "log in to the agent's CLI (its own login command), or give it an API key (Config.UseAPIKey), then run again"

// agentTrouble counts agent trouble; the (1+MaxRetries)-th in a row stops
// the run. A refusal (ClassRefused) or an auth failure (ClassAuth: not
// logged in, a key refused) stops it at once: the agent refuses to run as
// it is set up, and would refuse every retry the same way.
func (r *run) agentTrouble(res RunResult, why string) *stop {
	r.agentStreak++
	switch res.Class {
	case ClassRefused:
		return stopWith(OutcomeAgentFailed, "the agent refused to run: %s", why)
	case ClassAuth:
		if r.pool != nil {
			// The pool has put the agent out for good: the run goes on
			// with the next, or takeSlot waits or stops.
			r.agentStreak--
			r.note.notice(r.report.Iterations+1, "%s is not logged in, or its credentials were refused%s", orAgent(res.Agent), r.goingOn())
			return nil
		}
		// Not logged in, or a key refused: every retry would be too.
		s := stopWith(OutcomeAgentFailed, "%s: %s; %s", strings.TrimPrefix(ErrNotLoggedIn.Error(), "loop: "), why, LoginHint)
		s.cause = ErrNotLoggedIn
		return s
	}
	if r.agentStreak >= 1+r.cfg.MaxRetries {
		return stopWith(OutcomeAgentFailed, "agent failed %d %s in a row: %s", r.agentStreak, plural(r.agentStreak, "time", "times"), why)
	}
	return nil
}

// runAgent runs one working session with lease renewal and records its
// receipt.
func (r *run) runAgent(ctx context.Context, n int, model string, sess session, task Task) (RunResult, *stop) {
	r.recordHead(ctx)
	started := r.cfg.Now()
	res, err := r.session(ctx, n, model, sess, task, false)
	if errors.Is(err, ErrPoolOut) {
		return res, nil // no session: no receipt
	}
	if err != nil {
		return res, r.runnerErr(ctx, err)
	}
	r.head.checkout = res.Checkout
	r.record(ctx, r.receipt(n, model, task, false, res, started), &res)
	return res, nil
}

// tidyTimeout bounds the tidying of the verifier's snapshot store when a
// run ends.
const tidyTimeout = time.Minute

// restoreTimeout bounds the comparison and restoration of the tree after a
// verifier session; it runs with a context that is no longer cancelled.
const restoreTimeout = 5 * time.Minute

// runnerErr is the stop for a Runner that could not run the agent.
func (r *run) runnerErr(ctx context.Context, err error) *stop {
	if ctx.Err() != nil {
		return r.checkCancel(ctx)
	}
	return internal(fmt.Errorf("loop: run agent: %w", err))
}

// session runs one agent session with lease renewal.
func (r *run) session(ctx context.Context, n int, model string, sess session, task Task, verifier bool) (RunResult, error) {
	req := RunRequest{
		Prompt:       sess.prompt,
		SystemPrompt: sess.system,
		Model:        model,
		Sandboxed:    !verifier,
		MaxTurns:     r.cfg.MaxTurns,
		Dir:          r.dir(),
		Env:          r.env(n, task.ID),
		UseAPIKey:    r.cfg.UseAPIKey,
		Timeout:      r.cfg.Timeout,
		IdleTimeout:  r.cfg.IdleTimeout,
		OnEvent: func(e Event) {
			r.note.send(Note{Kind: NoteAgentEvent, Iteration: n, AgentEvent: e})
		},
	}
	if verifier {
		req.Tools = append([]string(nil), VerifierTools...)
	}
	req.Plan = r.planAccess(task, verifier)
	runner, agent := r.runner, r.cfg.Agent
	if verifier && r.cfg.Verifier != nil {
		runner, agent = r.cfg.Verifier, r.cfg.VerifierAgent
	}
	var picked *poolAgent
	if r.pool != nil && runner == Runner(r.pool) {
		// The verifier's session runs on another agent than the work's.
		avoid := ""
		if verifier {
			avoid = r.workAgent
		}
		if picked = r.pool.pick(r.cfg.Now(), avoid); picked == nil {
			// Every agent went out since the run looked (another
			// worker's session): a wait for the earliest reset, or the
			// end, as for a usage limit.
			return RunResult{Class: ClassUsageLimit, IsError: true, UsageLimit: &UsageLimit{ResetsAt: r.pool.state(r.cfg.Now()).resetsAt}}, ErrPoolOut
		}
		runner, agent = picked.Runner, picked.Name
	}
	if r.cfg.RawLogs {
		req.LogPath = filepath.Join(r.cfg.LogDir, r.cfg.Session, RawLogName(r.cfg.Worker, n, verifier, agent))
		req.LogRoot = logBase(r.cfg.Root, r.cfg.LogDir)
	}
	res, err := runner.Run(ctx, req)
	if err != nil {
		return res, err
	}
	if picked != nil {
		var capped string
		if res, capped = r.pool.settle(r.cfg.Now(), picked, res); capped != "" {
			r.note.notice(n, "%s%s", capped, r.goingOn())
		}
	}
	if !verifier {
		r.workAgent = res.Agent
	}
	if res.LogErr != nil {
		// A raw log cut short (a full disk) or refused (a link planted
		// there) is said, never silent.
		r.note.notice(n, "%s", rawLogNotice(req.LogPath, res.LogErr))
	}
	return res, nil
}

// orAgent is agent's name for a message, "the agent" when unnamed.
func orAgent(name string) string {
	if name == "" {
		return "the agent"
	}
	return name
}

// goingOn says which agent of the run's pool the run goes on with, for a
// notice that one went out: "; going on with codex", or "" when none is
// in (the wait or the stop that follows says the rest).
func (r *run) goingOn() string {
	if next := r.pool.state(r.cfg.Now()).next; next != "" {
		return "; going on with " + next
	}
	return ""
}

// receipt is the receipt of a session that started at started.
func (r *run) receipt(n int, model string, task Task, verifier bool, res RunResult, started time.Time) Receipt {
	mode := r.cfg.Mode
	if verifier {
		mode = ModeVerify
	}
	rc := Receipt{
		Session: r.cfg.Session, Iteration: n, Mode: string(mode), TaskID: task.ID, Model: model,
		InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens,
		CacheReadTokens: res.Usage.CacheReadTokens, CacheWriteTokens: res.Usage.CacheWriteTokens,
		CostUSD: res.CostUSD, StartedAt: started, Duration: res.Duration, Turns: res.Turns,
		ExitReason: string(res.Class), Worker: r.cfg.Worker, Agent: res.Agent, CostSource: res.CostSource,
	}
	if res.Model != "" {
		rc.Model = res.Model
	}
	if rc.Duration == 0 {
		rc.Duration = r.cfg.Now().Sub(started)
	}
	if verifier && res.OK() {
		rc.Verdict = "fail"
		if sigil.Parse(res.Text).VerifyPass {
			rc.Verdict = "pass"
		}
	}
	return rc
}

// record books the receipt rc of a session whose result is res.
func (r *run) record(ctx context.Context, rc Receipt, res *RunResult) {
	if rc.CostSource == CostUnknown && r.cfg.MaxCost > 0 && !r.unpriced {
		r.unpriced = true
		agent := orAgent(rc.Agent)
		r.note.send(Note{Kind: NoteNotice, Iteration: rc.Iteration, Message: fmt.Sprintf("%s reported no cost and no price is known for model %q: MaxCost cannot count its sessions", agent, rc.Model), Unpriced: &rc})
	}
	r.report.Receipts = append(r.report.Receipts, rc)
	r.report.CostUSD += rc.CostUSD
	r.budget.Spend(rc.CostUSD)
	if r.receipts != nil {
		r.keepReceipt(ctx, rc)
	}
	r.note.send(Note{Kind: NoteReceipt, Iteration: rc.Iteration, Receipt: &rc, Result: res})
}

// planAccess is the plan as the session's agent may reach it through a
// broker when its runner sandboxes it (RunRequest.Plan): as this run's
// agent, its claims held by this loop; task is the session's loop claim
// (none in peek, plan and prompt sessions); a verifier reads only.
func (r *run) planAccess(task Task, verifier bool) *PlanAccess {
	return &PlanAccess{
		Store:     r.store,
		Agent:     r.cfg.AgentID,
		Holder:    r.cfg.Holder,
		Mode:      r.cfg.Mode,
		ClaimMode: r.cfg.ClaimMode,
		TaskID:    task.ID,
		Lease:     r.cfg.Lease,
		Scope:     r.cfg.Scope,
		ReadOnly:  verifier,
	}
}

// env is the RALPH_* environment of ARCHITECTURE.md §4 on top of cfg.Env.
func (r *run) env(n int, taskID string) []string {
	env := append([]string(nil), r.cfg.Env...)
	env = append(env,
		"RALPH_AGENT_ID="+r.cfg.AgentID,
		"RALPH_ITERATION="+strconv.Itoa(n),
		"RALPH_DIR="+r.cfg.Root,
		EnvHolder+"="+r.cfg.Holder.String(),
	)
	if r.cfg.RalphBin != "" {
		env = append(env, "RALPH_BIN="+r.cfg.RalphBin)
	}
	if taskID != "" {
		env = append(env, "RALPH_TASK_ID="+taskID)
	}
	if r.cfg.Workspace != nil {
		env = append(env, "RALPH_WORKTREE="+r.dir(), "RALPH_WORKER="+r.cfg.Worker)
	}
	return env
}

// agentTasks lists the ids of the tasks this agent holds, anywhere.
func (r *run) agentTasks(ctx context.Context) []string {
	active, err := r.store.Active(ctx, Scope{})
	if err != nil {
		return nil
	}
	var ids []string
	for _, t := range active {
		if t.ClaimedBy == r.cfg.AgentID {
			ids = append(ids, t.ID)
		}
	}
	return ids
}

// usageLimit releases nothing itself (the caller did); it stops under the
// stop policy or past MaxWait, and otherwise waits until the reset.
func (r *run) usageLimit(ctx context.Context, res RunResult) *stop {
	now := r.cfg.Now()
	var reset time.Time
	if res.UsageLimit != nil {
		reset = res.UsageLimit.ResetsAt
	}
	if reset.IsZero() {
		reset = now.Add(DefaultUsageWait)
	}
	if r.pool != nil {
		st := r.pool.state(now)
		switch {
		case st.next != "":
			if res.Agent != "" {
				r.note.notice(r.report.Iterations+1, "%s hit its usage limit (resets at %s); going on with %s", res.Agent, reset.Format(time.RFC3339), st.next)
			}
			return nil
		case st.end != nil:
			return st.end
		}
		reset = st.resetsAt // the earliest of the agents'
	}
	wait := max(reset.Sub(now), time.Second)
	msg := "usage limit reached; resets at " + reset.Format(time.RFC3339)
	if r.cfg.OnUsageLimit == UsageLimitStop {
		return &stop{outcome: OutcomeUsageLimit, message: msg, resetsAt: reset}
	}
	if wait > r.cfg.MaxWait || r.waited+wait > r.cfg.MaxWait {
		return &stop{outcome: OutcomeUsageLimit, message: msg, resetsAt: reset}
	}
	r.budget.Pause(now.Add(wait))
	r.pausedUntil = now.Add(wait)
	r.note.send(Note{Kind: NoteWait, Iteration: r.report.Iterations + 1, Until: now.Add(wait), Wait: wait, Message: msg})
	// Another worker's stop ends the wait.
	if err := r.sleep(ctx, wait); err != nil {
		return r.checkCancel(ctx)
	}
	r.waited += wait
	return r.checkCancel(ctx)
}

// releaseHeld releases the loop's claim, if any.
func (r *run) releaseHeld(ctx context.Context, reason string) {
	task := r.lease.drop()
	if task.ID == "" {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if err := r.store.Release(rctx, MoveParams{TaskID: task.ID, Message: reason, By: r.by(task)}); err != nil {
		r.note.notice(r.report.Iterations, "could not release %s: %v", task.ID, err)
	}
}

// releaseAll is the guarantee: on the way out, nothing stays in_progress
// under this agent.
func (r *run) releaseAll(ctx context.Context) {
	r.releaseHeld(ctx, ReasonLoopStopped)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	ids, err := r.store.ReleaseAgent(rctx, r.cfg.AgentID, ReasonLoopStopped)
	if err != nil {
		r.note.notice(r.report.Iterations, "could not release the claims of %s: %v", r.cfg.AgentID, err)
	} else if len(ids) > 0 {
		r.note.notice(r.report.Iterations, "released %s on the way out", strings.Join(ids, ", "))
	}
}

// finish fills the report's closing numbers.
func (r *run) finish(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if c, err := r.store.Counts(rctx, r.cfg.Scope); err == nil {
		r.report.Counts = c
		r.report.Remaining = c.Open() + c.InProgress
	}
	r.report.Duration = r.cfg.Now().Sub(r.report.StartedAt)
}

// sigilTags matches the sigils, which a task summary leaves out.
var sigilTags = regexp.MustCompile(`<(?:task-done|task-failed|promise|next-model|verify-fail)>[^<]*</(?:task-done|task-failed|promise|next-model|verify-fail)>|<verify-pass\s*/>`)

// summary is what the loop logs when it completes a task: the agent's final
// text without sigils, on one line.
func summary(text string) string {
	// As in excerpt, only the end is copied, widened as needed; it starts
	// where a sigil does if it would start inside one.
	w := 4*summaryLimit + 64
	if len(text) <= w {
		return excerpt(sigilTags.ReplaceAllString(text, " "), summaryLimit)
	}
	sigils := sigilTags.FindAllStringIndex(text, -1)
	for ; w < len(text); w *= 2 {
		start := runeStart(text, len(text)-w)
		for _, m := range sigils {
			if m[0] < start && start < m[1] {
				start = m[0]
			}
		}
		if s := fold(sigilTags.ReplaceAllString(text[start:], " ")); len(s) > summaryLimit {
			return "…" + s[runeStart(s, len(s)-summaryLimit):]
		}
	}
	return excerpt(sigilTags.ReplaceAllString(text, " "), summaryLimit)
}

// excerptLines keeps the first line and the end of s, at most n bytes.
func excerptLines(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	head := firstLine(s)
	if len(head) >= n {
		return head[:n]
	}
	i := len(s) - (n - len(head))
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return head + "\n…" + s[i:]
}

// ReasonLine is a reason or an error's text as one line for people:
// trimmed, its line breaks written "; ", and without the package prefixes
// of ralph's error texts ("loop: ", "dag: ", "broker: "), which say
// nothing to a reader. The CLI prints errors so, and a progress file's
// attempt blocks hold reasons so.
func ReasonLine(s string) string {
	s = strings.TrimSpace(s)
	for _, pkg := range []string{"loop: ", "dag: ", "broker: "} {
		s = strings.TrimPrefix(s, pkg)
		s = strings.ReplaceAll(s, ": "+pkg, ": ")
	}
	s = strings.ReplaceAll(s, "\r\n", "; ")
	return strings.ReplaceAll(s, "\n", "; ")
}
