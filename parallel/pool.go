package parallel

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/loop"
)

// SettingInto is the plan setting that records a plan's integration
// branch (loop.SettingStore).
const SettingInto = "integration_branch"

// Config is a parallel build.
type Config struct {
	// Loop is every worker's loop configuration; the pool sets each
	// worker's Worker, AgentID (Loop.AgentID, or a new one, + "-wK"),
	// Workspace, Shared and Session. Loop.Commit must be off (integration
	// commits) and Loop.ClaimMode the loop's.
	Loop loop.Config
	// Workers is how many loops run at once (at least 1).
	Workers int
	// Into is the integration branch asked for (--into); empty takes the
	// plan's recorded one, or DefaultInto for a plan's first parallel
	// build.
	Into string
	// Base is the branch the integration branch follows (--base): each
	// build merges its new commits into the integration branch before any
	// worker starts (with Remote, the remote's branch, fetched). Empty
	// takes the plan's recorded one, or the branch HEAD is on when a
	// build first finds none recorded; it is recorded with the plan.
	Base string
	// Setup, if set, runs with sh -c in each worker's tree before its
	// first agent (--setup), by Loop.Commands (in the agent's sandbox when
	// the build has one).
	Setup string
	// Git is the repository; nil means ExecGit over Loop.Root.
	Git Git
	// WorktreeDir holds the workers' trees, wK each; empty means
	// <Root>/.ralph/worktrees.
	WorktreeDir string
	// Remote, if set, is the git remote (--remote NAME) where the
	// integration branch lives, for builds of one plan on several machines
	// (ARCHITECTURE.md §6): see the package doc. Empty keeps everything in
	// the repository.
	Remote string
	// AcceptTip accepts the integration branch as it is now (ralph build
	// --accept-tip) where its tip is not where ralph last put it: the
	// tasks whose landed work it no longer holds go back to pending,
	// logged as AcceptedBy's move, and the build goes on from it. A
	// deleted branch is made again from HEAD. Without it such a branch
	// stops the build (OutcomeGitFailed, a *TipError in the message).
	AcceptTip bool
	// AcceptedBy is the person who accepts (zero: "user").
	AcceptedBy loop.Actor
	// Words name, in the caller's terms, what Run's texts for people
	// refer to (zero: Config's fields).
	Words Words
}

// Words name, in a caller's terms, what Run's texts for people refer to
// where no error reaches the caller to be worded: a stop's message, a
// task's log entry, a warning in the Report. A command line names its
// flags (cmd/ralph: "ralph build --accept-tip", "--remote",
// "--sandbox"); an empty field names Config's field.
type Words struct {
	// AcceptTip names a build that accepts the integration branch's tip
	// (Config.AcceptTip), as in "to accept it, run <AcceptTip>" and
	// "which <AcceptTip> accepted". Empty: "a build with Config.AcceptTip".
	AcceptTip string
	// Remote names Config.Remote, before what went wrong with the remote.
	// Empty: "Config.Remote".
	Remote string
	// Sandbox names what keeps an agent from the repository's refs, as in
	// "without <Sandbox> an agent runs as you". Empty:
	// "Loop.Commands.Sandbox".
	Sandbox string
}

// or is w with each empty field Config's field's name.
func (w Words) or() Words {
	if w.AcceptTip == "" {
		w.AcceptTip = "a build with Config.AcceptTip"
	}
	if w.Remote == "" {
		w.Remote = "Config.Remote"
	}
	if w.Sandbox == "" {
		w.Sandbox = "Loop.Commands.Sandbox"
	}
	return w
}

// Report is a parallel build's report: the run's as one (outcome, counts,
// iterations, cost and receipts of every worker), each worker's, and the
// integration branch.
type Report struct {
	loop.Report
	// Into is the integration branch (short name, "ralph/integration").
	Into string
	// Remote is the remote where it lives ("" the repository's own).
	Remote string
	// Base is the branch it follows ("" none), and BaseMerge the merge
	// commit of the base's new commits this build made ("" none).
	Base, BaseMerge string
	// Workers are the reports of the workers, w1 first.
	Workers []loop.Report
	// AcceptedTip is the tip Config.AcceptTip accepted, and Reopened the
	// tasks that went back to pending because it lacks their work.
	AcceptedTip string
	Reopened    []string
	// Warnings are what the run saw that the person should know and that
	// did not stop it: branches that are not ralph's moved or deleted
	// during the run (by an agent: without a sandbox it runs as the
	// user).
	Warnings []string
}

// branchesMoved describes the branches of before that now moved or went,
// but for ralph's own (ralph/…) and the integration branch into.
func branchesMoved(before, now map[string]string, into string, words Words) []string {
	var out []string
	for _, ref := range slices.Sorted(maps.Keys(before)) {
		name := strings.TrimPrefix(ref, heads)
		if ref == into || strings.HasPrefix(name, "ralph/") {
			continue
		}
		switch c, ok := now[ref]; {
		case !ok:
			out = append(out, fmt.Sprintf("branch %s was deleted during the run (it was at %s)", name, short(before[ref])))
		case c != before[ref]:
			out = append(out, fmt.Sprintf("branch %s moved during the run, from %s to %s", name, short(before[ref]), short(c)))
		}
	}
	if len(out) > 0 {
		out = append(out, fmt.Sprintf("ralph did not do that: it writes only its own ralph/… branches and the integration branch. If you did not either, an agent did: without %s an agent runs as you and can write any branch (%s keeps the repository's refs out of its reach)", words.Sandbox, words.Sandbox))
	}
	return out
}

// Errors of Run, before any worker starts. Their words are the library's
// (Config.Into, Config.Loop.Commit); a command line that has flags for
// these fields tells them apart with errors.Is and errors.As, and words
// them its own way.
var (
	// ErrInto: Config.Into names another branch than the plan's, or a
	// branch checked out in a worktree (an *IntoError says which), or the
	// integration branch here and on the remote have each moved on.
	ErrInto = errors.New("parallel: integration branch")
	// ErrNoSettings: the store cannot record the integration branch.
	ErrNoSettings = errors.New("parallel: the store cannot record the plan's integration branch")
	// ErrCommitWithWorkers: Config.Loop.Commit is set. It wraps
	// loop.ErrConfig.
	ErrCommitWithWorkers = fmt.Errorf("%w: Config.Loop.Commit does not go with workers: each task's work is committed when it lands on the integration branch", loop.ErrConfig)
	// ErrPeekWithWorkers: Config.Loop.ClaimMode is loop.ClaimAgent (peek
	// mode). It wraps loop.ErrConfig.
	ErrPeekWithWorkers = fmt.Errorf("%w: peek mode (Config.Loop.ClaimMode %s) does not go with workers: each worker's loop claims its task, so that its tree can begin from the integration tip", loop.ErrConfig, loop.ClaimAgent)
)

// An IntoError is an integration branch Run refuses before any worker
// starts: the branch Config.Into names, or the one the plan recorded.
// Reason says why. It wraps loop.ErrConfig for a name ralph cannot use
// (IntoNotBranchName, IntoOwnBranch), ErrInto for the others.
type IntoError struct {
	Reason IntoReason
	// Branch is the branch refused: Config.Into, or for IntoCheckedOut
	// the plan's own.
	Branch string
	// Recorded is the branch the plan records (IntoRecorded,
	// IntoRecordedJustNow).
	Recorded string
	// Remote is the remote where the branch lives (IntoDiverged).
	Remote string
}

// IntoReason is why an integration branch is refused (see IntoError).
type IntoReason int

// The reasons of an IntoError.
const (
	// IntoNotBranchName: Branch is not a name git takes for a branch.
	IntoNotBranchName IntoReason = iota + 1
	// IntoOwnBranch: Branch is ralph, or under ralph/task/ or
	// ralph/attempt/, ralph's own branches.
	IntoOwnBranch
	// IntoRecorded: the plan integrates into Recorded, recorded by its
	// first parallel build, and Config.Into names another.
	IntoRecorded
	// IntoRecordedJustNow: another build recorded Recorded for the plan
	// while this one was recording Branch.
	IntoRecordedJustNow
	// IntoCheckedOut: Branch is checked out in a worktree, and ralph
	// never writes a checked-out branch.
	IntoCheckedOut
	// IntoDiverged: Branch here and on Remote each have commits the
	// other has not.
	IntoDiverged
	// IntoBaseInvalid: Branch, Config.Base, is not a branch name git
	// takes, or one of ralph's own, or the integration branch Recorded
	// itself.
	IntoBaseInvalid
	// IntoBaseRecorded: the plan's integration branch follows Recorded,
	// and Config.Base names another, Branch.
	IntoBaseRecorded
)

func (e *IntoError) Error() string {
	switch e.Reason {
	case IntoNotBranchName:
		return fmt.Sprintf("%v: Config.Into %q is not a branch name git takes", loop.ErrConfig, e.Branch)
	case IntoOwnBranch:
		return fmt.Sprintf("%v: Config.Into %q: ralph, %s… and %s… are ralph's own branches", loop.ErrConfig, e.Branch, TaskBranchPrefix, AttemptBranchPrefix)
	case IntoRecorded:
		return fmt.Sprintf("%v: this plan integrates into %s (recorded by its first parallel build); Config.Into %s refused", ErrInto, e.Recorded, e.Branch)
	case IntoRecordedJustNow:
		return fmt.Sprintf("%v: another build recorded %s for this plan just now; Config.Into %s refused", ErrInto, e.Recorded, e.Branch)
	case IntoCheckedOut:
		return fmt.Sprintf("%v: %s is checked out in a worktree; ralph never writes a checked-out branch (set Config.Into to another, or switch that worktree away)", ErrInto, e.Branch)
	case IntoDiverged:
		return fmt.Sprintf("%v: %s", ErrInto, Diverged(e.Branch, e.Remote))
	case IntoBaseInvalid:
		return fmt.Sprintf("%v: Config.Base %q: the integration branch %s cannot follow it (not a branch name git takes, ralph's own, or the integration branch itself)", loop.ErrConfig, e.Branch, e.Recorded)
	case IntoBaseRecorded:
		return fmt.Sprintf("%v: this plan's integration branch follows %s (recorded with the plan); Config.Base %s refused", ErrInto, e.Recorded, e.Branch)
	}
	return fmt.Sprintf("%v: %s refused", ErrInto, e.Branch)
}

// Diverged says that branch here and on remote each have commits the
// other has not, and how to join them (an IntoDiverged IntoError).
func Diverged(branch, remote string) string {
	return fmt.Sprintf("%s here and %s on %s each have commits the other has not; merge them into one (git pull %s %s with %s checked out, then git push %s %s) and build again",
		branch, branch, remote, remote, branch, branch, remote, branch)
}

// Unwrap returns loop.ErrConfig or ErrInto (see IntoError).
func (e *IntoError) Unwrap() error {
	if e.Reason == IntoNotBranchName || e.Reason == IntoOwnBranch || e.Reason == IntoBaseInvalid {
		return loop.ErrConfig
	}
	return ErrInto
}

// Run runs cfg.Workers loops at once on one plan, each in its own git
// worktree, until the plan is done or a stop ends them (ARCHITECTURE.md §5):
//
//   - Before anything runs: the repository must have a commit (else
//     OutcomeGitFailed, exit 5); the plan's integration branch is the one
//     recorded with it, or — on the plan's first parallel build — Into
//     (DefaultInto), made from HEAD and recorded; another Into, or a
//     branch checked out in any worktree, is refused (OutcomeError). The
//     base's new commits are merged into it (Config.Base; see the package
//     doc): a conflict stops the build (OutcomeGitFailed) before any
//     worker starts.
//   - Worker wK works in <WorktreeDir>/wK, made on first use (git
//     worktree add, detached): .ralph/worktree-include's files copied in,
//     Setup run before its first agent. A tree left with uncommitted work
//     (a worker killed) is committed to an attempt branch first.
//   - Each attempt begins on ralph/task/<id> at the integration tip; a
//     done task's work is committed with its trailers, replayed onto the
//     tip, gated again if the tip moved and landed by compare-and-swap
//     before the task is done (see loop.Workspace).
//   - The workers share the iteration budget, the cost budget and
//     usage-limit pauses (the pool's loop.Budget) and the session log
//     (loop.Shared); the first stop that ends the run stops the others
//     before their next claim, and each worker releases its claims as it
//     returns. Cancelling ctx stops every agent.
//
// The outcome is the first such stop's; else the plan's state when the
// last worker ended: complete (with failures), the iteration limit,
// blocked.
func Run(ctx context.Context, cfg Config, store loop.TaskStore, runner loop.Runner) (Report, error) {
	rep := Report{Report: loop.Report{StartedAt: time.Now(), Remaining: -1}}
	fail := func(o loop.Outcome, err error) (Report, error) {
		rep.Outcome, rep.Message = o, err.Error()
		if o == loop.OutcomeError {
			return rep, err
		}
		return rep, nil
	}
	if cfg.Workers < 1 {
		return fail(loop.OutcomeError, fmt.Errorf("%w: workers %d: want at least 1", loop.ErrConfig, cfg.Workers))
	}
	base, words := cfg.Loop, cfg.Words.or()
	if base.Root == "" {
		return fail(loop.OutcomeError, fmt.Errorf("%w: root directory is required", loop.ErrConfig))
	}
	if abs, err := filepath.Abs(base.Root); err == nil {
		base.Root = abs
	}
	if err := CheckLoop(base); err != nil {
		return fail(loop.OutcomeError, err)
	}
	// Everything that can refuse the run is checked before the plan's
	// integration branch is recorded.
	if err := loop.CheckConfig(base); err != nil {
		return fail(loop.OutcomeError, err)
	}
	include, err := readInclude(base.Root)
	if err != nil {
		return fail(loop.OutcomeError, err)
	}
	g := cfg.Git
	if g == nil {
		g = &ExecGit{Root: base.Root}
	}
	if err := g.Check(ctx); err != nil {
		return fail(loop.OutcomeGitFailed, fmt.Errorf("workers need a git repository with a commit: %w", err))
	}
	if cfg.Remote != "" {
		if err := g.CheckRemote(ctx, cfg.Remote); err != nil {
			return fail(loop.OutcomeGitFailed, fmt.Errorf("%s: %w", words.Remote, err))
		}
	}
	settings, ok := store.(loop.SettingStore)
	if !ok {
		return fail(loop.OutcomeError, ErrNoSettings)
	}
	landings, ok := store.(loop.LandingStore)
	if !ok {
		return fail(loop.OutcomeError, ErrNoLandings)
	}
	guard := &tipGuard{git: g, store: landings, remote: cfg.Remote, acceptWord: words.AcceptTip}
	into, since, err := integrationBranch(ctx, g, settings, cfg.Into, cfg.Remote, guard)
	if err != nil {
		return fail(intoOutcome(err), err)
	}
	rep.Into, rep.Remote = strings.TrimPrefix(into, heads), cfg.Remote
	if guard.base, err = baseBranch(ctx, g, settings, cfg.Base, into, base.Root); err != nil {
		return fail(intoOutcome(err), err)
	}
	rep.Base = guard.base
	// The branch is ralph's before anything builds on it
	// (ARCHITECTURE.md §7.3): a tip someone else moved, rewound or deleted
	// stops the build here, unless the person accepts it.
	guard.since = since
	tip, reopened, err := guard.open(ctx, cfg.AcceptTip, cfg.AcceptedBy)
	if err != nil {
		return fail(loop.OutcomeGitFailed, err)
	}
	if cfg.AcceptTip {
		rep.AcceptedTip, rep.Reopened = tip, reopened
	}
	// The branches as the run found them: what moves during it that is
	// not ralph's, ralph did not move, and says so at the end.
	branches, err := g.Branches(ctx)
	if err != nil {
		return fail(loop.OutcomeGitFailed, err)
	}
	if base.AgentID == "" {
		id, err := loop.NewAgentID()
		if err != nil {
			return fail(loop.OutcomeError, err)
		}
		base.AgentID = id
	}
	session, slog, err := loop.OpenSession(base)
	if err != nil {
		return fail(loop.OutcomeError, err)
	}
	if slog != nil {
		defer slog.Close()
	}
	base.Session = session
	rep.Session, rep.AgentID = session, base.AgentID
	maxIter := base.MaxIterations
	if base.Once {
		maxIter = 1
	}
	shared := loop.NewShared(slog)
	budget := newBudget(maxIter, base.MaxCost)

	wtDir := cfg.WorktreeDir
	if wtDir == "" {
		wtDir = filepath.Join(base.Root, ".ralph", "worktrees")
	}
	wtInfo, err := prepareWorktreeDir(base.Root, wtDir)
	if err != nil {
		return fail(loop.OutcomeError, err)
	}
	// The base's new commits join the branch before any tree is made or
	// readied from its tip.
	say := func(msg string) { tell(base, slog, session, "", msg) }
	if rep.BaseMerge, err = followBase(ctx, guard, tip, say); err != nil {
		return fail(loop.OutcomeGitFailed, err)
	}
	if rep.BaseMerge != "" {
		tip = rep.BaseMerge
	}
	land := &sync.Mutex{}
	spaces := make([]*workspace, 0, cfg.Workers)
	defer func() {
		for _, ws := range spaces {
			ws.lock.Close()
		}
	}()
	for i := 1; len(spaces) < cfg.Workers; i++ {
		name := fmt.Sprintf("w%d", i)
		lock, ok, err := takeTree(base.Root, wtDir, name)
		if err != nil {
			return fail(loop.OutcomeError, err)
		}
		if !ok {
			continue // another build of this project works in that tree
		}
		ws := &workspace{git: g, dir: filepath.Join(wtDir, name), worker: name, into: into, remote: cfg.Remote, guard: guard,
			include: include, root: base.Root, land: land, lock: lock, parent: wtInfo}
		spaces = append(spaces, ws)
		problem, err := ws.open(ctx, tip)
		if problem != "" {
			tell(base, slog, session, name, treeNotice(name, "as the build found it", problem))
		}
		if err != nil {
			return fail(loop.OutcomeGitFailed, fmt.Errorf("%s: %w", name, err))
		}
	}

	reports := make([]loop.Report, cfg.Workers)
	errs := make([]error, cfg.Workers)
	var wg sync.WaitGroup
	for k, ws := range spaces {
		wcfg := base
		wcfg.Worker = ws.worker
		wcfg.AgentID = base.AgentID + "-" + ws.worker
		wcfg.Workspace = ws
		wcfg.Shared = shared
		wcfg.Budget = budget
		wg.Go(func() {
			if cfg.Setup != "" {
				if err := setupWorker(ctx, wcfg, ws, cfg.Setup); err != nil {
					o := loop.OutcomeTestGateFailed
					if ctx.Err() != nil {
						o = loop.OutcomeCancelled
					}
					budget.stop(o, err.Error())
					reports[k] = loop.Report{Outcome: o, Message: err.Error(), Remaining: -1}
					return
				}
			}
			reports[k], errs[k] = loop.Run(ctx, wcfg, store, runner)
		})
	}
	wg.Wait()
	// What the trees still hold is kept before the run ends.
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for _, ws := range spaces {
		problem, err := ws.ensureTree(kctx)
		if problem != "" {
			tell(base, slog, session, ws.worker, treeNotice(ws.worker, "as the build ended", problem))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ws.worker, err))
			continue
		}
		if _, err := ws.keep(kctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: keeping its tree's work: %w", ws.worker, err))
		}
	}
	if _, ok := budget.firstStop(); !ok && ctx.Err() == nil {
		// A run that would end complete looks at the branch once more:
		// one moved, rewound or deleted after its last landing is not.
		var te *TipError
		if err := guard.verify(kctx); errors.As(err, &te) {
			budget.stop(loop.OutcomeGitFailed, err.Error())
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	if cfg.Remote != "" && ctx.Err() == nil {
		// The local branch ends where the remote's is, with what other
		// machines landed too, for the merge the run's end suggests (not
		// after an interrupt, which must not wait for the network).
		if err := followRemote(kctx, g, cfg.Remote, into); err != nil {
			errs = append(errs, fmt.Errorf("bringing %s up to date with %s: %w", rep.Into, cfg.Remote, err))
		}
	}
	if now, err := g.Branches(kctx); err == nil {
		rep.Warnings = append(rep.Warnings, branchesMoved(branches, now, into, words)...)
	}
	rep.Workers = reports
	rep.Report = combine(rep.Report, reports, budget, ctx.Err() != nil)
	if c, err := store.Counts(kctx, base.Scope); err == nil {
		rep.Counts, rep.Remaining = c, c.Open()+c.InProgress
		if rep.Outcome == loop.OutcomeLimitReached && !strings.Contains(rep.Message, "remain") {
			// The budget said how many iterations ran; the end says
			// what is left.
			rep.Message += "; " + loop.Remain(rep.Remaining)
		}
	}
	rep.Duration = time.Since(rep.StartedAt)
	if slog != nil {
		total := rep.Report
		slog.Observe(loop.Note{Kind: loop.NoteSessionEnd, At: time.Now(), Session: session, Mode: loop.ModeBuild, Report: &total})
	}
	return rep, errors.Join(errs...)
}

// intoOutcome is the outcome of a failure to find the integration branch
// or its base: a refusal (ErrInto, loop.ErrConfig) is an error of the
// build's configuration, anything else a git failure.
func intoOutcome(err error) loop.Outcome {
	if errors.Is(err, ErrInto) || errors.Is(err, loop.ErrConfig) {
		return loop.OutcomeError
	}
	return loop.OutcomeGitFailed
}

// combine makes the run's report from the workers': the first stop that
// ended the run, else cancellation, else the plan's end as the workers saw
// it (complete, with failures, the iteration limit, blocked, no plan).
func combine(rep loop.Report, ws []loop.Report, budget *budget, cancelled bool) loop.Report {
	for _, w := range ws {
		rep.Iterations += w.Iterations
		rep.Successes += w.Successes
		rep.Failures += w.Failures
		rep.CostUSD += w.CostUSD
		rep.Receipts = append(rep.Receipts, w.Receipts...)
		if w.ResetsAt.After(rep.ResetsAt) {
			rep.ResetsAt = w.ResetsAt
		}
	}
	if first, ok := budget.firstStop(); ok {
		rep.Outcome, rep.Message, rep.Cause = first.Outcome, first.Message, first.Cause
		return rep
	}
	if cancelled {
		rep.Outcome, rep.Message = loop.OutcomeCancelled, "interrupted"
		return rep
	}
	for _, o := range []loop.Outcome{loop.OutcomeCompleteWithFailures, loop.OutcomeComplete, loop.OutcomeLimitReached,
		loop.OutcomeBlocked, loop.OutcomeNoPlan} {
		if i := slices.IndexFunc(ws, func(w loop.Report) bool { return w.Outcome == o }); i >= 0 {
			rep.Outcome, rep.Message, rep.Cause = o, ws[i].Message, ws[i].Cause
			return rep
		}
	}
	if len(ws) > 0 {
		rep.Outcome, rep.Message, rep.Cause = ws[0].Outcome, ws[0].Message, ws[0].Cause
	}
	return rep
}

// SettingIntoBase records, with the plan, the commit its integration
// branch was at when the plan adopted it: only commits after it can hold
// this plan's tasks (an older plan of the repository may have used the
// same task ids).
const SettingIntoBase = "integration_base"

// integrationBranch returns the plan's integration branch (a full ref
// name) and the commit it was at when the plan adopted it, recording both
// — and making the branch from HEAD — on the plan's first parallel build.
// With a remote, the branch is the remote's (remoteBranch). A later build
// does not make a branch that has gone: guard.open decides.
func integrationBranch(ctx context.Context, g Git, settings loop.SettingStore, asked, remote string, guard *tipGuard) (ref, since string, err error) {
	var tip string
	recorded, ok, err := settings.PlanSetting(ctx, SettingInto)
	if err != nil {
		return "", "", err
	}
	name := asked
	switch {
	case ok && asked != "" && asked != recorded:
		return "", "", &IntoError{Reason: IntoRecorded, Branch: asked, Recorded: recorded}
	case ok:
		name = recorded
	case name == "":
		name = DefaultInto
	}
	if err := checkBranchName(name); err != nil {
		return "", "", err
	}
	ref = heads + name
	out, err := g.CheckedOut(ctx)
	if err != nil {
		return "", "", err
	}
	if slices.Contains(out, ref) {
		return "", "", &IntoError{Reason: IntoCheckedOut, Branch: name}
	}
	guard.into = ref
	if remote != "" {
		if tip, err = remoteBranch(ctx, g, remote, ref, !ok, guard); err != nil {
			return "", "", err
		}
	} else {
		var exists bool
		if tip, exists, err = g.Resolve(ctx, ref); err != nil {
			return "", "", err
		}
		if !exists && !ok {
			if tip, err = headCommit(ctx, g); err != nil {
				return "", "", err
			}
			if err := g.CreateRef(ctx, ref, tip); err != nil && !errors.Is(err, ErrRefExists) {
				return "", "", err
			}
		}
	}
	if !ok {
		// The base first: a build that sees the branch recorded sees its
		// base too.
		if _, err := settings.RecordPlanSetting(ctx, SettingIntoBase, tip); err != nil {
			return "", "", err
		}
		now, err := settings.RecordPlanSetting(ctx, SettingInto, name)
		if err != nil {
			return "", "", err
		}
		if now != name {
			return "", "", &IntoError{Reason: IntoRecordedJustNow, Branch: name, Recorded: now}
		}
	}
	since, _, err = settings.PlanSetting(ctx, SettingIntoBase)
	if err != nil {
		return "", "", err
	}
	return ref, since, nil
}

// remoteBranchTries bounds remoteBranch's rounds: each is lost only to
// another machine's push of the branch at that moment.
const remoteBranchTries = 10

// remoteBranch returns the tip of the integration branch ref on remote
// ("" when it has none and this build is not to make it), after making
// sure that the remote's branch holds all that the local branch holds: a
// local branch ahead of the remote's (work landed by builds without
// --remote) is pushed there (PushFastForward), and so is a local branch
// where the remote has none (PushCreate) — each only when guard finds the
// local tip ralph's own; HEAD is pushed where neither has one, on the
// plan's first parallel build (create) only. A local branch behind the
// remote's follows it. Branches that have each commits the other has not
// are refused (ErrInto): ralph merges nothing but task commits, one at a
// time.
func remoteBranch(ctx context.Context, g Git, remote, ref string, create bool, guard *tipGuard) (string, error) {
	name := strings.TrimPrefix(ref, heads)
	ours := func(local string) (bool, error) {
		if create {
			return true, nil
		}
		return guard.ours(ctx, local)
	}
	for range remoteBranchTries {
		theirs, onRemote, err := g.Fetch(ctx, remote, ref)
		if err != nil {
			return "", err
		}
		local, onLocal, err := g.Resolve(ctx, ref)
		if err != nil {
			return "", err
		}
		push := PushParams{Remote: remote, Ref: ref, Commit: local, Mode: PushFastForward, Old: theirs}
		switch {
		case onRemote && (!onLocal || local == theirs):
			return theirs, advance(ctx, g, ref, theirs)
		case onRemote:
			behind, err := g.IsAncestor(ctx, local, theirs)
			if err != nil {
				return "", err
			}
			if behind {
				return theirs, advance(ctx, g, ref, theirs)
			}
			ahead, err := g.IsAncestor(ctx, theirs, local)
			if err != nil {
				return "", err
			}
			if !ahead {
				return "", &IntoError{Reason: IntoDiverged, Branch: name, Remote: remote}
			}
			if mine, err := ours(local); err != nil || !mine {
				// Not ralph's to push: the remote's tip is checked as
				// it is.
				return theirs, err
			}
		case onLocal:
			mine, err := ours(local)
			if err != nil || !mine {
				return "", err
			}
			push.Mode = PushCreate
		case !create:
			return "", nil
		default:
			if push.Commit, err = headCommit(ctx, g); err != nil {
				return "", err
			}
			push.Mode = PushCreate
		}
		err = g.Push(ctx, push)
		if err != nil && !errors.Is(err, ErrRefMoved) && !errors.Is(err, ErrRefExists) {
			return "", err
		}
		// Pushed, or another machine pushed first: look again.
	}
	return "", fmt.Errorf("%s on %s moved under every one of %d tries to read it", name, remote, remoteBranchTries)
}

// followRemote fetches the integration branch ref from remote and moves
// the local branch forward to it, where it is an ancestor of the remote's
// and checked out nowhere.
func followRemote(ctx context.Context, g Git, remote, ref string) error {
	tip, ok, err := g.Fetch(ctx, remote, ref)
	if err != nil || !ok {
		return err
	}
	return advanceBranch(ctx, g, ref, tip)
}

// checkBranchName refuses names git would refuse, or read as something
// else, in a branch.
func checkBranchName(name string) error {
	bad := name == "" || strings.HasPrefix(name, "-") || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") ||
		strings.HasSuffix(name, ".") || strings.HasSuffix(name, ".lock") || strings.Contains(name, "..") ||
		strings.Contains(name, "//") || strings.Contains(name, "@{") || name == "@" || strings.Contains(name, "/.") ||
		strings.HasPrefix(name, ".") || strings.HasPrefix(name, "refs/") || name == "HEAD"
	for _, c := range name {
		if c < 0x20 || c == 0x7f || strings.ContainsRune(" ~^:?*[\\", c) {
			bad = true
		}
	}
	if bad {
		return &IntoError{Reason: IntoNotBranchName, Branch: name}
	}
	// ralph's own branches live under ralph/task/ and ralph/attempt/; a
	// branch named ralph would make every one of them impossible.
	if name == "ralph" || strings.HasPrefix(name, TaskBranchPrefix) || strings.HasPrefix(name, AttemptBranchPrefix) {
		return &IntoError{Reason: IntoOwnBranch, Branch: name}
	}
	return nil
}

// takeTree takes the tree <dir>/<name> for this build: a lock on
// <name>.lock, held until the build ends (or its process does). ok is
// false when another build holds it; that build's workers and this one's
// then take different trees (w3, w4, …).
func takeTree(root, dir, name string) (f *os.File, ok bool, err error) {
	f, err = openTreeLock(root, filepath.Join(dir, name+".lock"))
	if err != nil {
		return nil, false, fmt.Errorf("parallel: worktree lock: %w", err)
	}
	ok, err = tryLock(f)
	if err != nil || !ok {
		f.Close()
		if err != nil {
			return nil, false, fmt.Errorf("parallel: worktree lock %s: %w", f.Name(), err)
		}
		return nil, false, nil
	}
	return f, true, nil
}

// open makes the worker's tree on first use, at the integration tip, and
// keeps what a tree left by an earlier run holds. A directory there that
// is not the worktree ralph made is set aside whole, or repaired, first
// (ensureTree): problem says so, and where it went.
func (w *workspace) open(ctx context.Context, tip string) (problem string, err error) {
	if _, err := os.Lstat(w.dir); errors.Is(err, os.ErrNotExist) {
		if err := w.git.AddWorktree(ctx, w.dir, tip); err != nil {
			return "", err
		}
		return "", copyInclude(w.root, w.dir, w.include)
	}
	if problem, err = w.ensureTree(ctx); err != nil {
		return problem, err
	}
	if _, err := w.keep(ctx); err != nil {
		return problem, err
	}
	return problem, copyInclude(w.root, w.dir, w.include)
}

// tell sends msg as a notice of worker's, from the pool while no worker's
// loop runs (before they start, after they end): to the session log and
// to the build's observer.
func tell(cfg loop.Config, slog *loop.SessionLog, session, worker, msg string) {
	n := loop.Note{Kind: loop.NoteNotice, At: time.Now(), Session: session, Mode: loop.ModeBuild, Worker: worker, Message: msg}
	if cfg.Now != nil {
		n.At = cfg.Now()
	}
	if slog != nil {
		slog.Observe(n)
	}
	if cfg.Observer != nil {
		cfg.Observer.Observe(n)
	}
}

// setupWorker runs --setup in the worker's tree; a failure is gate
// trouble, tried again up to cfg.MaxRetries times before it stops the
// worker (exit 3).
func setupWorker(ctx context.Context, cfg loop.Config, ws *workspace, cmd string) error {
	env := []string{"RALPH_DIR=" + cfg.Root, "RALPH_WORKTREE=" + ws.dir, "RALPH_WORKER=" + ws.worker}
	var err error
	for range 1 + max(cfg.MaxRetries, 0) {
		if err = runSetup(ctx, cfg.Commands, ws.dir, cmd, env, cfg.UseAPIKey); err == nil || ctx.Err() != nil {
			return err
		}
	}
	return fmt.Errorf("%s: %w", ws.worker, err)
}
