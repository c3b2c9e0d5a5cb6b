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
	"sync"
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
	strat, err := cfg.normalize()
	if err != nil {
		return Report{Outcome: OutcomeError, Message: err.Error(), Remaining: -1}, err
	}
	r := &run{cfg: cfg, store: store, runner: runner, strategy: strat, m: newMachine(), autoSession: auto}
	r.receipts, _ = store.(ReceiptStore)
	return r.exec(ctx)
}

// run is one Run. Its fields are owned by the goroutine calling Run; the
// renewal goroutines read only cfg, store, the notifier (locked) and
// renewal (locked), never what the loop writes as it goes (r.iter: a
// notice of a failed renewal once read it, a data race).
type run struct {
	cfg      Config
	store    TaskStore
	runner   Runner
	strategy Strategy
	receipts ReceiptStore
	m        *machine
	note     *notifier
	prompts  map[string]*Prompt
	testCmd  string

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
	// pausedUntil is the end of the workers' shared usage-limit pause
	// this worker last waited for (Shared).
	pausedUntil time.Time
	// held is the claim the loop holds (zero ID when none), with the
	// generation its outcome is fenced by.
	held Task
	// limited is the verifier's usage-limited result, for the wait.
	limited RunResult
	// guard snapshots and restores the working tree around verifier
	// sessions (nil without Verify).
	guard *treeGuard
	// repo is the git repository Root is in, found when the run began
	// (nil, with repoErr, when it is in none): every git command of the
	// run is built from it (package hostgit).
	repo    *hostgit.Repo
	repoErr error
	// head is where HEAD was when the last agent session began (the
	// commit gate's check, headguard.go).
	head headState
	// agents is the AGENTS.md test command the run took (nil with
	// Config.TestCmd, or no test gate), for its announcement.
	agents *AgentsTest
	// autoSession is set when the session name came from the clock.
	autoSession bool
	// gateDetail is the last gate failure with its output's tail: the
	// release reason the next attempt's prompt shows.
	gateDetail string
	// waitingFor names the held tasks the loop last said it waits for.
	waitingFor string
	// recounting is set while claimLost counts a lost claim against its
	// task, under a claim of its own.
	recounting bool
	// renewal renews the held claim's lease for as long as it is held.
	renewal renewal
	// iter is the iteration under way, for the store's own bookkeeping
	// (IterationRecorder); plan and adhoc hold plan and prompt mode state.
	iter  iterState
	plan  planState
	adhoc promptState
}

// stop ends the loop with an outcome.
type stop struct {
	outcome  Outcome
	message  string
	err      error
	resetsAt time.Time
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
		r.report.Outcome, r.report.Message = s.outcome, s.message
		return r.report, s.err
	}
	var slog *SessionLog
	if cfg.Shared != nil {
		// A worker: the build's one session log, which the pool opened.
		if cfg.SessionLog {
			slog = cfg.Shared.log
		}
	} else {
		var err error
		if slog, err = r.openLog(); err != nil {
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
	if cfg.Shared != nil {
		cfg.Shared.stopped(s)
	}
	stopRenew()
	r.releaseAll(parent)
	if r.guard != nil {
		gctx, cancel := context.WithTimeout(context.WithoutCancel(parent), tidyTimeout)
		r.guard.close(gctx, ctx.Err() == nil)
		cancel()
	}
	r.finish(parent)
	if perr := r.note.err(); perr != nil {
		s = internal(perr)
	}
	r.report.Outcome, r.report.Message, r.report.ResetsAt = s.outcome, s.message, s.resetsAt
	r.fireEnd(parent)
	rep := r.report
	r.note.send(Note{Kind: NoteSessionEnd, Report: &rep})
	return r.report, s.err
}

// maxSessionSeconds bounds the search for a free session name.
const maxSessionSeconds = 3600

// reserveSession makes the clock-made session name r.cfg.Session unique
// among the logs in LogDir and claims it atomically, so that two runs
// started in the same second — in one process or two — never share or
// overwrite a log. A name is taken when its session log or raw-log
// directory exists; then the next second's name is tried (no sleeping:
// the name stays in the session-YYYYMMDD-HHMMSS pattern and only says when
// the run started to within the seconds skipped). The claim is the session
// log itself, created with O_EXCL and returned open, when cfg.SessionLog
// is set; else the raw-log directory, made with Mkdir (which fails if it
// exists).
func (r *run) reserveSession() (*os.File, error) {
	dir := r.cfg.LogDir
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	base := logBase(r.cfg.Root, dir)
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
	start, err := time.Parse(sessionLayout, r.cfg.Session)
	if err != nil {
		return nil, fmt.Errorf("loop: session name %q: %w", r.cfg.Session, err)
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
		if r.cfg.SessionLog {
			f, err := safefile.Create(base, SessionLogPath(dir, name), 0o644)
			if errors.Is(err, fs.ErrExist) {
				continue // another run took it just now
			}
			if err != nil {
				return nil, fmt.Errorf("loop: session log: %w", err)
			}
			r.cfg.Session = name
			return f, nil
		}
		err = safefile.Mkdir(base, filepath.Join(dir, name), 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("loop: raw log directory: %w", err)
		}
		r.cfg.Session = name
		return nil, nil
	}
	return nil, fmt.Errorf("loop: session log: no free session name in the %d seconds after %s", maxSessionSeconds, r.cfg.Session)
}

// loop runs the checks and iterations; it returns why it stopped.
func (r *run) loop(ctx context.Context) *stop {
	if s := r.prepare(ctx); s != nil {
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
		if r.cfg.Shared == nil && r.cfg.MaxCost > 0 && r.report.CostUSD >= r.cfg.MaxCost {
			return stopWith(OutcomeBudgetExhausted, "cost budget exhausted: spent $%.4f of $%.4f", r.report.CostUSD, r.cfg.MaxCost)
		}
		var s *stop
		var counted bool
		switch {
		case r.cfg.Mode == ModePlan:
			counted, s = r.planIteration(ctx)
		case r.cfg.Mode == ModePrompt:
			counted, s = r.promptIteration(ctx)
		case r.cfg.ClaimMode == ClaimAgent:
			counted, s = r.peekIteration(ctx)
		default:
			counted, s = r.iteration(ctx)
		}
		if s != nil {
			return s
		}
		if !counted {
			continue // a usage-limit wait: same iteration again
		}
		if s := r.fire(ctx, StateEventIterate); s != nil {
			return s
		}
		if s := r.exitChecks(ctx); s != nil {
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
	names := []string{PromptBuild}
	switch {
	case r.cfg.Mode == ModePlan:
		names = []string{PromptPlan}
	case r.cfg.Mode == ModePrompt:
		names = []string{PromptAdHoc}
	case r.cfg.ClaimMode == ClaimAgent:
		names = []string{PromptPeek}
	}
	if r.cfg.Verify {
		names = append(names, PromptVerify)
	}
	r.prompts = map[string]*Prompt{}
	for _, n := range names {
		for _, name := range []string{n, SystemPromptName(n)} {
			p, err := LoadPrompt(r.cfg.Root, name)
			if err != nil {
				return internal(err)
			}
			r.prompts[name] = p
		}
	}
	if r.cfg.Mode != ModeBuild {
		return nil // plan and prompt mode have no test gate
	}
	r.testCmd = r.cfg.TestCmd
	if r.testCmd == "" {
		at, err := r.agentsTest(ctx)
		if err != nil {
			return internal(err)
		}
		r.testCmd, r.agents = at.Command, &at
	}
	return nil
}

// prepare checks the commit gate, makes the raw log directory and, with
// Verify, prepares the verifier's tree guard, before the first iteration.
func (r *run) prepare(ctx context.Context) *stop {
	if r.cfg.Commit {
		if err := checkGitRepo(r.repo, r.repoErr, r.cfg.Root); err != nil {
			return stopWith(OutcomeGitFailed, "%v", err)
		}
	}
	if r.cfg.RawLogs {
		dir, _ := filepath.Abs(filepath.Join(r.cfg.LogDir, r.cfg.Session))
		if err := makeLogDir(logBase(r.cfg.Root, r.cfg.LogDir), dir); err != nil {
			return internal(fmt.Errorf("loop: log directory: %w", err))
		}
	}
	if r.cfg.Verify {
		store := filepath.Join(r.cfg.Root, ".ralph", snapshotDir)
		if r.cfg.Workspace != nil {
			name := r.cfg.Worker
			if name == "" {
				name = "workspace"
			}
			store = filepath.Join(r.cfg.Root, ".ralph", "worktrees", name+".verify.git")
		}
		g, err := r.newGuard(ctx, store)
		if err != nil {
			if ctx.Err() != nil {
				return r.checkCancel(ctx)
			}
			return internal(err)
		}
		r.guard = g
	}
	return nil
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

// exitChecks is step 9: the plan is resolved, or the iteration limit hit.
func (r *run) exitChecks(ctx context.Context) *stop {
	switch r.cfg.Mode {
	case ModePlan:
		return r.planExitChecks(ctx)
	case ModePrompt:
		return r.promptExit()
	}
	if s := r.finishedCheck(ctx); s != nil {
		return s
	}
	c, err := r.store.Counts(ctx, r.cfg.Scope)
	if err != nil {
		if r.cfg.ClaimMode == ClaimAgent && ctx.Err() == nil {
			// Peek mode: a status error counts as "tasks remain".
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
	if sh := r.cfg.Shared; sh != nil {
		if !sh.limitReached() {
			return nil
		}
	} else if r.report.Iterations < r.cfg.MaxIterations {
		return nil
	}
	if remaining < 0 {
		return stopWith(OutcomeLimitReached, "iteration limit reached (%d); tasks remain", r.cfg.MaxIterations)
	}
	return stopWith(OutcomeLimitReached, "iteration limit reached (%d); %s", r.cfg.MaxIterations, remain(remaining))
}

func completeStop(c Counts) *stop {
	if c.Failed > 0 {
		return stopWith(OutcomeCompleteWithFailures, "complete: %d done, %d failed", c.Done, c.Failed)
	}
	return stopWith(OutcomeComplete, "complete: all %d %s done", c.Done, plural(c.Done, "task", "tasks"))
}

// terminal is step 2: nothing could be claimed. With tasks in scope held
// by other live agents, the loop waits for them and returns nil to try
// again (waitForAgents); otherwise it says why it stops. token is the
// store's change token from before the failed claim.
func (r *run) terminal(ctx context.Context, token string) *stop {
	c, err := r.store.Counts(ctx, r.cfg.Scope)
	if err != nil {
		return r.storeErr(ctx, err)
	}
	if c.InProgress > 0 {
		return r.waitForAgents(ctx, token)
	}
	if c.Total() > 0 && !c.Resolved() {
		// A task may have become ready between the failed claim and
		// the counts (another agent's completion), or the claim may
		// have passed over one another transaction held for a moment (a
		// server's SKIP LOCKED claims): with one ready, look again.
		ready, err := r.store.Ready(ctx, r.cfg.Scope, 1)
		if err != nil {
			return r.storeErr(ctx, err)
		}
		if len(ready) > 0 {
			if err := r.cfg.Sleep(ctx, lookAgainAfter); err != nil {
				return r.checkCancel(ctx)
			}
			return nil
		}
	}
	return terminalStop(c)
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
		n := c.Open() + c.InProgress
		return stopWith(OutcomeBlocked, "blocked: %s but none is ready", remain(n))
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

// remain is "1 task remains" or "N tasks remain".
func remain(n int) string {
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

// iteration runs one loop-claimed iteration (steps 1–8). counted is false
// when a usage limit turned it into a wait.
func (r *run) iteration(ctx context.Context) (counted bool, s *stop) {
	n := r.report.Iterations + 1
	if sh := r.cfg.Shared; sh != nil {
		if s := sh.take(ctx, r); s != nil {
			return false, s
		}
		defer func() { sh.give(counted) }()
	}
	token := r.changeToken(ctx)
	task, err := r.claim(ctx, "")
	if errors.Is(err, ErrNoReadyTask) {
		return false, r.terminal(ctx, token)
	}
	if err != nil {
		return false, r.storeErr(ctx, err)
	}
	if r.cfg.Shared != nil {
		n = r.cfg.Shared.next()
	}
	logs, err := r.store.Logs(ctx, task.ID)
	if err != nil {
		return false, r.storeErr(ctx, err)
	}
	if ws := r.cfg.Workspace; ws != nil {
		if landed, s := r.begin(ctx, n, ws, task, logs); landed || s != nil {
			return false, s
		}
	}

	data, err := buildContext(ctx, r.store, r.cfg.Root, task, r.cfg.MaxRetries, logs)
	if err != nil {
		return false, r.storeErr(ctx, err)
	}
	data.Mode, data.Iteration, data.AgentID, data.RalphBin = ModeBuild, n, r.cfg.AgentID, r.cfg.RalphBin
	data.Root = r.dir()
	sess, s := r.render(PromptBuild, data)
	if s != nil {
		return false, s
	}
	model, hinted := r.pickModel(ModelChoice{Iteration: n, Task: task, TaskLogs: logs, History: r.history})

	r.beginIteration(ctx, n, task, model)
	res, s := r.runAgent(ctx, n, model, sess, task)
	if s != nil {
		return false, s
	}
	if res.Class == ClassUsageLimit {
		r.releaseHeld(ctx, "usage limit: waiting for reset")
		r.endIteration(n, task, model, IterUsageLimit, "")
		return false, r.usageLimit(ctx, res)
	}
	r.consumeHint(hinted)

	status, why, s := r.handle(ctx, n, model, task, res)
	if status == IterUsageLimit && s == nil {
		r.endIteration(n, task, model, IterUsageLimit, why)
		return false, r.usageLimit(ctx, r.limited)
	}
	r.waited = 0
	r.countIteration(n, task, model, hinted, status, why)
	return true, s
}

// claim claims task id (empty: the next ready task in scope) for the
// agent this loop runs, and holds it.
func (r *run) claim(ctx context.Context, id string) (Task, error) {
	task, err := r.store.Claim(ctx, ClaimParams{TaskID: id, Scope: r.cfg.Scope, Agent: r.cfg.AgentID,
		Lease: r.cfg.Lease, Holder: r.cfg.Holder, Mode: ClaimLoop})
	if err == nil {
		r.held = task
		r.renewal.hold(task.ID, task.LeaseExpiresAt)
	}
	return task, err
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
	case IterNoSigil, IterWrongID, IterVerifyFailed, IterClaimLost, IterIntegrationFailed, IterHeadMoved:
		return AttemptTaskTrouble
	case IterTestsFailed, IterGitFailed, IterNoChange:
		return AttemptGateTrouble
	}
	return AttemptAgentTrouble
}

func (r *run) endIteration(n int, task Task, model string, status IterationStatus, why string) {
	r.note.send(Note{Kind: NoteIterationEnd, Iteration: n, Task: task, Model: model, Status: status, Message: why})
	if status != IterUsageLimit {
		r.recordIteration(n, task, model, status, why)
	}
}

// handle is steps 7–8 for a finished session of a loop-claimed task.
func (r *run) handle(ctx context.Context, n int, model string, task Task, res RunResult) (IterationStatus, string, *stop) {
	if res.Class == ClassCancelled || ctx.Err() != nil {
		return IterCancelled, "", r.checkCancel(ctx)
	}
	if !res.OK() {
		why := troubleText(res)
		r.releaseHeld(ctx, "agent trouble: "+why)
		return IterAgentTrouble, why, r.agentTrouble(res, why)
	}

	sig := sigil.Parse(res.Text)
	if sig.NextModel != "" {
		r.hint = sig.NextModel
	}
	status, why, s := r.handleTask(ctx, n, model, task, res, sig)
	if s != nil {
		return status, why, s
	}
	if sig.Failure {
		return IterFailure, why, stopWith(OutcomeFailure, "the agent declared FAILURE: %s", excerpt(res.Text, 200))
	}
	if sig.Complete {
		c, err := r.store.Counts(ctx, r.cfg.Scope)
		if err == nil && !c.Resolved() {
			r.note.notice(n, "agent said COMPLETE but %s; going on", remain(c.Open()+c.InProgress))
		}
	}
	return status, why, nil
}

// handleTask applies the task sigil (or its absence) to the claimed task.
func (r *run) handleTask(ctx context.Context, n int, model string, task Task, res RunResult, sig sigil.Result) (IterationStatus, string, *stop) {
	// The claim may have ended during the session: released or recovered
	// behind the loop's back, taken over, or moved by a person.
	cur, err := r.store.Get(ctx, task.ID)
	if err != nil {
		return IterCancelled, "", r.storeErr(ctx, err)
	}
	if !holds(cur, task) {
		return r.claimLost(ctx, n, task, cur)
	}

	switch {
	case sig.TaskDone(task.ID) || r.markedDone(ctx, task.ID):
		return r.taskDone(ctx, n, model, task, res)
	case sig.TaskFailed(task.ID):
		why := "agent reported the task failed: " + excerpt(res.Text, 300)
		if st, w, s, ok := r.commitMove(ctx, task, "failed", res.Text, func(ctx context.Context) error {
			return r.store.Fail(ctx, MoveParams{TaskID: task.ID, Message: why, By: r.by(task)})
		}); !ok {
			return st, w, s
		}
		r.unhold()
		return IterTaskFailed, why, nil
	case sig.Failure:
		// FAILURE without a verdict on the task: the task is not at fault.
		r.releaseHeld(ctx, "the agent declared FAILURE")
		return IterFailure, "", nil
	case len(sig.Done)+len(sig.Failed) > 0:
		why := fmt.Sprintf("wrong task id: expected %s, got %s", task.ID, strings.Join(append(append([]string{}, sig.Done...), sig.Failed...), ", "))
		return r.taskTrouble(ctx, task, IterWrongID, why)
	default:
		return r.taskTrouble(ctx, task, IterNoSigil, "the agent ended without a task sigil")
	}
}

// markedDone reports whether the agent marked task id done in the store's
// own way (DoneMarker): a ticked progress-file box.
func (r *run) markedDone(ctx context.Context, id string) bool {
	m, ok := r.store.(DoneMarker)
	if !ok {
		return false
	}
	done, err := m.MarkedDone(ctx, id)
	return err == nil && done
}

// holds reports whether cur, the task as the store has it now, is still
// under the loop's claim held (same agent, same generation).
func holds(cur, held Task) bool {
	return cur.Status == StatusInProgress && cur.ClaimedBy == held.ClaimedBy && cur.Generation == held.Generation
}

// claimLost handles a session after which the loop's claim on task no
// longer stands (cur is the task now). A claim lost silently is how a loop
// spins: back to pending — released, or recovered, behind the
// loop's back — is task trouble, counted against the task's breaker like a
// missing sigil, with a reason that says who released it (the loop claims
// the task again to count it, when it is still ready); held by another
// claim, or done or failed by someone else, is noted, and the loop moves
// on.
func (r *run) claimLost(ctx context.Context, n int, task, cur Task) (IterationStatus, string, *stop) {
	r.unhold()
	who := lastMove(ctx, r.store, task.ID)
	switch cur.Status {
	case StatusPending:
		why := "the claim was lost during the session: " + who
		if r.recounting {
			// The claim taken to count the trouble was lost too: count
			// no further, so that this never goes round again.
			r.note.notice(n, "task %s: %s", task.ID, why)
			return IterClaimLost, why, nil
		}
		r.recounting = true
		defer func() { r.recounting = false }()
		again, err := r.claim(ctx, task.ID)
		if err != nil {
			if ctx.Err() != nil {
				return IterCancelled, "", r.checkCancel(ctx)
			}
			r.note.notice(n, "task %s: %s; it could not be claimed again to count it: %v", task.ID, why, err)
			return IterClaimLost, why, nil
		}
		r.note.notice(n, "task %s: %s", task.ID, why)
		return r.taskTrouble(ctx, again, IterClaimLost, why)
	case StatusDone:
		r.note.notice(n, "task %s was done by someone else during the session (%s); leaving it as it is", task.ID, who)
		return IterAlreadyClosed, "done by someone else: " + who, nil
	case StatusFailed:
		r.note.notice(n, "task %s was failed by someone else during the session (%s); leaving it as it is", task.ID, who)
		return IterTaskFailed, "failed by someone else: " + who, nil
	}
	why := fmt.Sprintf("task %s is %s now", task.ID, cur.Status)
	if cur.Status == StatusInProgress {
		why = fmt.Sprintf("task %s is held by %s now (claim %d)", task.ID, cur.ClaimedBy, cur.Generation)
	}
	r.note.notice(n, "the claim was lost during the session: %s (%s); leaving it", why, who)
	return IterClaimLost, why, nil
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

// taskTrouble releases the task and counts a retry, or fails it when it
// has run 1+MaxRetries times.
func (r *run) taskTrouble(ctx context.Context, task Task, status IterationStatus, why string) (IterationStatus, string, *stop) {
	if task.RetryCount >= r.cfg.MaxRetries {
		reason := fmt.Sprintf("%s (after %d %s)", why, task.RetryCount+1, plural(task.RetryCount+1, "run", "runs"))
		if st, w, s, ok := r.commitMove(ctx, task, "failed", "", func(ctx context.Context) error {
			return r.store.Fail(ctx, MoveParams{TaskID: task.ID, Message: reason, By: r.by(task)})
		}); !ok {
			return st, w, s
		}
		r.unhold()
		return IterTaskFailed, reason, nil
	}
	if st, w, s, ok := r.commitMove(ctx, task, "back to pending for a retry", "", func(ctx context.Context) error {
		return r.store.Retry(ctx, MoveParams{TaskID: task.ID, Message: why, By: r.by(task)})
	}); !ok {
		return st, w, s
	}
	r.unhold()
	return status, why, nil
}

// taskDone verifies (if enabled), runs the gates and completes the task.
func (r *run) taskDone(ctx context.Context, n int, model string, task Task, res RunResult) (IterationStatus, string, *stop) {
	// Nothing runs in a tree the agent replaced (a link to the user's
	// checkout): not the verifier, not the gates.
	if tc, ok := r.cfg.Workspace.(TreeChecker); ok {
		if status, why, s := r.checkTree(ctx, n, task, tc); status != "" {
			return status, why, s
		}
	}
	// Nothing is committed over a HEAD the agent moved away from where
	// the session began.
	if why, err := r.headMoved(ctx); err != nil || why != "" {
		if err != nil {
			if ctx.Err() != nil {
				r.releaseHeld(ctx, ReasonLoopStopped)
				return IterCancelled, "", r.checkCancel(ctx)
			}
			why = fmt.Sprintf("git: task %s: %v", task.ID, err)
			r.releaseHeld(ctx, "HEAD could not be checked: "+firstLine(err.Error()))
			return IterGitFailed, why, stopWith(OutcomeGitFailed, "%s", why)
		}
		r.note.notice(n, "task %s: %s", task.ID, why)
		return r.taskTrouble(ctx, task, IterHeadMoved, why)
	}
	if r.cfg.Verify {
		end := r.note.phase(n, PhaseVerify, task)
		v, why, s := r.verify(ctx, n, model, task, res.Text)
		end(verdictStatus(ctx, v, s), why)
		// The verifier may have replaced the tree (the guard restores
		// nothing through a replaced one): asked again while the claim
		// is still held, before the gates run there.
		if tc, ok := r.cfg.Workspace.(TreeChecker); ok && s == nil && (v == verdictPass || v == verdictFail) {
			if status, why, s := r.checkTree(ctx, n, task, tc); status != "" {
				return status, why, s
			}
		}
		switch {
		case s != nil:
			return IterAgentTrouble, why, s
		case v == verdictUsageLimit:
			return IterUsageLimit, why, nil
		case v == verdictTrouble:
			return IterAgentTrouble, why, nil
		case v == verdictFail:
			return r.taskTrouble(ctx, task, IterVerifyFailed, "verification failed: "+why)
		}
	}
	var endGate func(IterationStatus, string)
	if r.testCmd != "" || r.cfg.Commit {
		endGate = r.note.phase(n, PhaseGate, task)
	}
	status, why, s := r.gates(ctx, n, task.Title)
	if endGate != nil {
		endGate(status, why)
	}
	if status != "" {
		reason := r.gateDetail
		if status == IterCancelled {
			reason = ReasonLoopStopped
		}
		r.releaseHeld(ctx, reason)
		return status, why, s
	}
	if ws := r.cfg.Workspace; ws != nil {
		end := r.note.phase(n, PhaseIntegrate, task)
		status, why, s := r.integrate(ctx, n, ws, task, res)
		end(status, why)
		if status != "" {
			return status, why, s
		}
	}
	if st, why, s, ok := r.commitMove(ctx, task, "done", res.Text, func(ctx context.Context) error {
		return r.store.Complete(ctx, MoveParams{TaskID: task.ID, Message: summary(res.Text), By: r.by(task)})
	}); !ok {
		return st, why, s
	}
	r.unhold()
	return IterDone, "", nil
}

// gates runs the test and commit gates. A zero status means both passed
// (or are off); otherwise it is the gate trouble, with a stop when no
// retry is left.
func (r *run) gates(ctx context.Context, n int, title string) (IterationStatus, string, *stop) {
	trouble := func(st IterationStatus, o Outcome, err error) (IterationStatus, string, *stop) {
		if ctx.Err() != nil {
			return IterCancelled, "", r.checkCancel(ctx)
		}
		r.gateStreak++
		why := firstLine(err.Error())
		r.gateDetail = excerptLines(err.Error(), gateDetailLimit)
		if r.gateStreak >= 1+r.cfg.MaxRetries {
			return st, why, stopWith(o, "%s (%d %s in a row)", why, r.gateStreak, plural(r.gateStreak, "time", "times"))
		}
		return st, why, nil
	}
	if r.testCmd != "" {
		if err := r.runTests(ctx, r.dir(), r.testCmd); err != nil {
			r.note.notice(n, "%v", err)
			return trouble(IterTestsFailed, OutcomeTestGateFailed, err)
		}
	}
	if r.cfg.Commit {
		// Again after the test command, which runs the tree's code.
		if why, err := r.headMoved(ctx); err != nil || why != "" {
			if err == nil {
				err = fmt.Errorf("%w: %s", ErrHeadMoved, why)
			}
			r.note.notice(n, "%v", err)
			return trouble(IterGitFailed, OutcomeGitFailed, err)
		}
		if err := commitAll(ctx, r.repo, r.cfg.Root, CommitMessage(r.cfg.Mode, n, title)); err != nil {
			st := IterGitFailed
			if errors.Is(err, ErrNothingChanged) {
				st = IterNoChange
			}
			r.note.notice(n, "%v", err)
			return trouble(st, OutcomeGitFailed, err)
		}
	}
	r.gateStreak = 0
	return "", "", nil
}

// verdictStatus is the status a verification ends with, for its
// NotePhaseEnd: empty when it passed.
func verdictStatus(ctx context.Context, v verdict, s *stop) IterationStatus {
	switch {
	case ctx.Err() != nil:
		return IterCancelled
	case s != nil, v == verdictTrouble:
		return IterAgentTrouble
	case v == verdictUsageLimit:
		return IterUsageLimit
	case v == verdictFail:
		return IterVerifyFailed
	}
	return ""
}

// verdict is what a verifier session concluded.
type verdict int

const (
	verdictPass       verdict = iota
	verdictFail               // verify-fail, or no verdict at all
	verdictTrouble            // the verifier session itself failed: agent trouble
	verdictUsageLimit         // the verifier hit a usage limit: a wait
)

// verify runs the verifier session. On trouble or a usage limit it has
// released the claim already.
func (r *run) verify(ctx context.Context, n int, model string, task Task, agentText string) (verdict, string, *stop) {
	data := PromptData{Mode: ModeVerify, Task: task, Iteration: n, AgentID: r.cfg.AgentID, Root: r.dir(), RalphBin: r.cfg.RalphBin, AgentText: agentText}
	if task.ParentID != "" {
		if p, err := r.store.Get(ctx, task.ParentID); err == nil {
			data.Parent = &p
		}
	}
	sess, s := r.render(PromptVerify, data)
	if s != nil {
		return verdictTrouble, "", s
	}
	res, changed, s := r.runVerifier(ctx, n, model, sess, task)
	if s != nil {
		return verdictTrouble, "", s
	}
	switch {
	case res.Class == ClassCancelled || ctx.Err() != nil:
		return verdictTrouble, "", r.checkCancel(ctx)
	case res.Class == ClassUsageLimit:
		r.limited = res
		r.releaseHeld(ctx, "usage limit: waiting for reset")
		return verdictUsageLimit, "verifier hit the usage limit", nil
	case !res.OK():
		// The verifier could not judge: agent trouble, not the task's fault.
		why := "verifier: " + troubleText(res)
		r.releaseHeld(ctx, "agent trouble: "+why)
		return verdictTrouble, why, r.agentTrouble(res, why)
	}
	sig := sigil.Parse(res.Text)
	v, why, word := verdictFail, "", "fail"
	switch {
	case len(changed) > 0:
		// Whatever it said: a verifier that wrote to the tree judged a
		// tree that is not the one ralph keeps.
		why = "the verifier changed files (restored): " + changeList(changed)
	case sig.VerifyPass:
		v, word = verdictPass, "pass"
	case sig.VerifyFail:
		why = sig.VerifyReason
		if why == "" {
			why = "no reason given"
		}
	default:
		why = "the verifier gave no verdict"
	}
	if err := r.store.SetVerification(ctx, task.ID, word); err != nil {
		return verdictTrouble, why, r.storeErr(ctx, err)
	}
	return v, why, nil
}

// agentTrouble counts agent trouble; the (1+MaxRetries)-th in a row stops
// the run. A refusal (ClassRefused) stops it at once: the agent refuses to
// run as it is set up, and would refuse every retry the same way.
func (r *run) agentTrouble(res RunResult, why string) *stop {
	r.agentStreak++
	if res.Class == ClassRefused {
		return stopWith(OutcomeAgentFailed, "the agent refused to run: %s", why)
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
	if err != nil {
		return res, r.runnerErr(ctx, err)
	}
	r.head.checkout = res.Checkout
	r.record(ctx, r.receipt(n, model, task, false, res, started))
	return res, nil
}

// runVerifier runs the verifier session under the tree guard: the working
// tree is snapshotted before it and compared after it, whatever the
// session's end (crash, timeout, usage limit and cancellation included);
// what the verifier changed is restored, logged on the task and returned.
// Its receipt's verdict is "fail" when it changed anything. A tree that
// could not be snapshotted (the verifier is then not run) or restored is
// an internal error.
func (r *run) runVerifier(ctx context.Context, n int, model string, sess session, task Task) (RunResult, []treeChange, *stop) {
	before, err := r.guard.record(ctx)
	if err != nil && ctx.Err() == nil {
		// The snapshot store is a cache: a damaged one is rebuilt, once.
		r.note.notice(n, "rebuilding the verifier's snapshot store: %v", err)
		if err = r.guard.rebuild(ctx); err == nil {
			before, err = r.guard.record(ctx)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return RunResult{}, nil, r.checkCancel(ctx)
		}
		return RunResult{}, nil, internal(fmt.Errorf("%w: %v", ErrVerifySnapshot, err))
	}
	started := r.cfg.Now()
	res, runErr := r.session(ctx, n, model, sess, task, true)
	gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
	defer cancel()
	changed, gerr := r.guard.checkAll(gctx, before)
	if len(changed) > 0 {
		msg := "the verifier changed files (restored): " + changeList(changed)
		if gerr != nil {
			msg = "the verifier changed files: " + changeList(changed)
		}
		r.note.notice(n, "%s; its verdict does not count", msg)
		if err := r.store.AddLog(gctx, task.ID, LogVerify, msg); err != nil && gerr == nil {
			gerr = fmt.Errorf("loop: task %s: log: %w", task.ID, err)
		}
	}
	if runErr == nil {
		rc := r.receipt(n, model, task, true, res, started)
		if len(changed) > 0 && rc.Verdict != "" {
			rc.Verdict = "fail"
		}
		r.record(ctx, rc)
	}
	switch {
	case gerr != nil:
		return res, changed, internal(gerr)
	case runErr != nil:
		return res, changed, r.runnerErr(ctx, runErr)
	}
	return res, changed, nil
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
	if r.cfg.RawLogs {
		agent := r.cfg.Agent
		if verifier && r.cfg.Verifier != nil {
			agent = r.cfg.VerifierAgent
		}
		req.LogPath = filepath.Join(r.cfg.LogDir, r.cfg.Session, RawLogName(r.cfg.Worker, n, verifier, agent))
		req.LogRoot = logBase(r.cfg.Root, r.cfg.LogDir)
	}
	if task.ID == "" && r.cfg.ClaimMode == ClaimAgent && r.cfg.Mode == ModeBuild {
		// Peek mode: the claims the agent makes in the session.
		stopRenew := r.renewAgentClaims(ctx, n)
		defer stopRenew()
	}
	runner := r.runner
	if verifier && r.cfg.Verifier != nil {
		runner = r.cfg.Verifier
	}
	res, err := runner.Run(ctx, req)
	if err == nil && res.LogErr != nil {
		// A raw log cut short (a full disk) or refused (a link planted
		// there) is said, never silent.
		r.note.notice(n, "%s", rawLogNotice(req.LogPath, res.LogErr))
	}
	return res, err
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

func (r *run) record(ctx context.Context, rc Receipt) {
	if rc.CostSource == CostUnknown && r.cfg.MaxCost > 0 && !r.unpriced {
		r.unpriced = true
		agent := rc.Agent
		if agent == "" {
			agent = "the agent"
		}
		r.note.notice(rc.Iteration, "%s reported no cost and no price is known for model %q: --max-cost cannot count its sessions", agent, rc.Model)
	}
	r.report.Receipts = append(r.report.Receipts, rc)
	r.report.CostUSD += rc.CostUSD
	if r.cfg.Shared != nil {
		r.cfg.Shared.addCost(rc.CostUSD)
	}
	if r.receipts != nil {
		if err := r.receipts.RecordReceipt(context.WithoutCancel(ctx), rc); err != nil {
			r.note.notice(rc.Iteration, "could not record the receipt: %v", err)
		}
	}
	r.note.send(Note{Kind: NoteReceipt, Iteration: rc.Iteration, Receipt: &rc})
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

// renewAgentClaims renews, every third of the lease, every claim this
// agent holds (peek mode: the agent claims in its session), until stop is
// called.
func (r *run) renewAgentClaims(ctx context.Context, n int) (stop func()) {
	return r.every(ctx, func(ctx context.Context) {
		for _, id := range r.agentTasks(ctx) {
			if err := r.store.RenewLease(ctx, id, r.cfg.AgentID, r.cfg.Lease); err != nil && ctx.Err() == nil {
				r.note.notice(n, "could not renew the lease on %s: %v", id, err)
			}
		}
	})
}

// renewHeld renews, every third of the lease, the claim the loop holds
// (r.renewal), for the whole run: from the claim until its outcome is
// recorded — through the agent's session, verification, the gates and the
// retries of a durable outcome (ARCHITECTURE.md §2.2).
func (r *run) renewHeld(ctx context.Context) (stop func()) {
	return r.every(ctx, func(ctx context.Context) {
		id, _, n := r.renewal.get()
		if id == "" {
			return
		}
		if err := r.store.RenewLease(ctx, id, r.cfg.AgentID, r.cfg.Lease); err == nil {
			r.renewal.renewed(id, r.cfg.Now().Add(r.cfg.Lease))
		} else if ctx.Err() == nil {
			r.note.notice(n, "could not renew the lease on %s: %v", id, err)
		}
	})
}

// every runs f every third of the lease until stop is called.
func (r *run) every(ctx context.Context, f func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(max(r.cfg.Lease/3, minRenewInterval))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f(ctx)
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// renewal is the claim the loop holds, shared with the goroutine that
// renews its lease: all that goroutine knows of the run's state besides
// cfg and store, which nobody writes while it runs.
type renewal struct {
	mu    sync.Mutex
	id    string
	until time.Time // when the lease runs out unless renewed again
	iter  int       // the iteration under way, for notices
}

func (w *renewal) hold(id string, until time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.id, w.until = id, until
}

// begin notes that iteration n began.
func (w *renewal) begin(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.iter = n
}

func (w *renewal) get() (id string, until time.Time, iter int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.id, w.until, w.iter
}

// renewed records a renewal of claim id, unless the loop let it go since.
func (w *renewal) renewed(id string, until time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.id == id {
		w.until = until
	}
}

// unhold forgets the claim the loop held: released, or its outcome
// recorded.
func (r *run) unhold() {
	r.held = Task{}
	r.renewal.hold("", time.Time{})
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
	wait := max(reset.Sub(now), time.Second)
	msg := "usage limit reached; resets at " + reset.Format(time.RFC3339)
	if r.cfg.OnUsageLimit == UsageLimitStop {
		return &stop{outcome: OutcomeUsageLimit, message: msg, resetsAt: reset}
	}
	if wait > r.cfg.MaxWait || r.waited+wait > r.cfg.MaxWait {
		return &stop{outcome: OutcomeUsageLimit, message: msg, resetsAt: reset}
	}
	if r.cfg.Shared != nil {
		r.cfg.Shared.pauseUntil(now.Add(wait))
		r.pausedUntil = now.Add(wait)
	}
	r.note.send(Note{Kind: NoteWait, Iteration: r.report.Iterations + 1, Until: now.Add(wait), Wait: wait, Message: msg})
	sleep := r.cfg.Sleep
	if sh := r.cfg.Shared; sh != nil {
		// Another worker's stop ends the wait.
		sleep = func(ctx context.Context, d time.Duration) error { return sh.sleep(ctx, r.cfg.Sleep, d) }
	}
	if err := sleep(ctx, wait); err != nil {
		return r.checkCancel(ctx)
	}
	r.waited += wait
	return r.checkCancel(ctx)
}

// releaseHeld releases the loop's claim, if any.
func (r *run) releaseHeld(ctx context.Context, reason string) {
	if r.held.ID == "" {
		return
	}
	task := r.held
	r.unhold()
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
