package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/broker"
	"github.com/ralph-dev/ralph/dag/postgres"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/parallel"
)

// The library's errors speak of its own fields (Config.Into,
// Config.Loop.Commit); this file words the ones a flag sets as the
// command line knows them (--into, --commit), telling them apart with
// errors.Is and errors.As. The worded error wraps the library's, so the
// chain is kept. The loop's notices and closing messages speak of its
// fields too (Config.Commit, MaxCost, TestCmd, Scope.Feature): notices
// carry what they are about (loop.Note.Unpriced, Note.AgentsTest), which
// noticeWords words; a Report carries text only, which reportWords
// words by the library's own text.

// worded is a library error under the CLI's words.
type worded struct {
	msg string
	err error
}

func (e *worded) Error() string { return e.msg }
func (e *worded) Unwrap() error { return e.err }

// buildWords are ralph build's words for what package parallel's texts
// refer to where no error reaches the CLI to be worded (a stop's
// message, a task's log entry, a warning): its flags.
var buildWords = parallel.Words{AcceptTip: "ralph build --accept-tip", Remote: "--remote", Sandbox: "--sandbox"}

// configError is the error of `ralph <cmd>` for a loop.ErrConfig error:
// a usage error in the flags' words.
func configError(cmd string, err error) error {
	if msg, ok := flagWords(err); ok {
		err = &worded{msg: msg, err: err}
	}
	// The rest speak of nothing a flag names; their "loop: " goes where
	// every library error's goes (oneLine).
	return &usageError{cmd: cmd, err: err}
}

// flagWords words the library errors that name a field a flag of ralph
// build sets; ok is false for the others.
func flagWords(err error) (msg string, ok bool) {
	const invalid = "invalid configuration: "
	var into *parallel.IntoError
	switch {
	case errors.As(err, &into):
		switch into.Reason {
		case parallel.IntoNotBranchName:
			return fmt.Sprintf(invalid+"--into %q is not a branch name git takes", into.Branch), true
		case parallel.IntoOwnBranch:
			return fmt.Sprintf(invalid+"--into %q: ralph, %s… and %s… are ralph's own branches", into.Branch, parallel.TaskBranchPrefix, parallel.AttemptBranchPrefix), true
		case parallel.IntoRecorded:
			return fmt.Sprintf("integration branch: this plan integrates into %s (recorded by its first parallel build); --into %s refused", into.Recorded, into.Branch), true
		case parallel.IntoRecordedJustNow:
			return fmt.Sprintf("integration branch: another build recorded %s for this plan just now; --into %s refused", into.Recorded, into.Branch), true
		case parallel.IntoDiverged:
			return "integration branch: " + parallel.Diverged(into.Branch, into.Remote), true
		case parallel.IntoBaseInvalid:
			return fmt.Sprintf(invalid+"--base %q: the integration branch %s cannot follow it (not a branch name git takes, ralph's own, or the integration branch itself)", into.Branch, into.Recorded), true
		case parallel.IntoBaseRecorded:
			return fmt.Sprintf("integration branch: it follows %s (recorded with the plan); --base %s refused", into.Recorded, into.Branch), true
		case parallel.IntoCheckedOut:
			return fmt.Sprintf("integration branch: %s is checked out in a worktree; ralph never writes a checked-out branch (name another with --into, or switch that worktree away)", into.Branch), true
		}
	case errors.Is(err, parallel.ErrNoSettings):
		return "the store cannot record the plan's integration branch", true
	case errors.Is(err, parallel.ErrNoLandings):
		return "the store cannot record what ralph lands on the integration branch", true
	case errors.Is(err, parallel.ErrCommitWithWorkers):
		return invalid + "--commit does not go with workers: each task's work is committed when it lands on the integration branch", true
	case errors.Is(err, parallel.ErrPeekWithWorkers):
		return invalid + "peek mode (--claim agent) does not go with workers: each worker's loop claims its task, so that its tree can begin from the integration tip", true
	}
	return "", false
}

// workersError is the usage error of ralph build for a refusal of
// parallel.CheckLoop (ErrPeekWithWorkers, ErrCommitWithWorkers) before the
// workers start, in the flags' words: planned says the workers come from
// the plan's integration branch, not from --workers.
func workersError(err error, planned bool) error {
	var msg string
	switch {
	case planned:
		msg = "this plan is built in worktrees (it has an integration branch): --commit and --claim agent do not go with that"
	case errors.Is(err, parallel.ErrPeekWithWorkers):
		msg = "--workers does not go with --claim agent: each worker's loop claims its task, so that its worktree can start from the integration branch"
	case errors.Is(err, parallel.ErrCommitWithWorkers):
		msg = "--workers does not go with --commit: each finished task is committed as it is merged into the integration branch"
	default:
		return configError("ralph build", err)
	}
	return &usageError{cmd: "ralph build", err: &worded{msg: msg, err: err}}
}

// intoError is the error of ralph build for a parallel.ErrInto,
// ErrNoSettings or ErrNoLandings error (exit 1, no usage hint), in the
// CLI's words.
func intoError(err error) error {
	if msg, ok := flagWords(err); ok {
		return &codedError{code: exitError, err: &worded{msg: msg, err: err}}
	}
	return &codedError{code: exitError, err: err}
}

// moveError is the error of the task command move ("done", "fail",
// "claim", "reset", "block", "unblock") in words, where the library's
// would name a field: a move the task's status does not allow (a
// *loop.TransitionError, "illegal transition pending -> done") says what
// the status means and the command that would work; a *loop.HeldError
// (loop.Actor.Force) and the broker's *broker.RefusalError (Actor.Force;
// peek mode) name the flag that sets it, --force or --claim agent. The
// worded error wraps the library's: errors.Is and errors.As, and so the
// exit code, are as they were.
func moveError(move string, err error) error {
	var te *loop.TransitionError
	var held *loop.HeldError
	var refusal *broker.RefusalError
	switch {
	case errors.As(err, &te):
		return &worded{msg: illegalMove(move, te.TaskID, te.From), err: err}
	case errors.As(err, &held):
		return reword(err, held, fmt.Sprintf("%v: task %s is held by %s (holder %s); pass --force to %s it anyway",
			loop.ErrHeldByLiveAgent, held.TaskID, held.ClaimedBy, held.Holder, held.Move))
	case errors.As(err, &refusal) && refusal.Refusal == broker.RefusedForce:
		return reword(err, refusal, fmt.Sprintf("%v: --force is for people; agent %s moves only the tasks it holds", broker.ErrRefused, refusal.Agent))
	case errors.As(err, &refusal) && refusal.Refusal == broker.RefusedClaim:
		return reword(err, refusal, fmt.Sprintf("%v: in this run the ralph loop claims the tasks; an agent claims for itself in peek mode only (ralph build --claim agent)", broker.ErrRefused))
	}
	return err
}

// illegalMoves words a refused move by the command and the task's status;
// %[1]s is the task's id. The moves the status machine allows
// (loop.Transitions) are not here: they are never refused as illegal.
var illegalMoves = map[string]map[loop.Status]string{
	"claim": {
		loop.StatusInProgress: "task %[1]s is in progress: it is claimed already ('ralph task show %[1]s' names its holder)",
		loop.StatusDone:       "task %[1]s is done: there is nothing left to claim",
		loop.StatusFailed:     "task %[1]s failed: return it to pending with 'ralph task reset %[1]s', then claim it",
		loop.StatusBlocked:    "task %[1]s is blocked: return it to pending with 'ralph task unblock %[1]s', then claim it",
	},
	"done": {
		loop.StatusPending: "task %[1]s is pending: it has not been claimed; claim it first with 'ralph task claim %[1]s', then mark it done",
		loop.StatusDone:    "task %[1]s is done already",
		loop.StatusFailed:  "task %[1]s failed: return it to pending with 'ralph task reset %[1]s', then claim it and mark it done",
		loop.StatusBlocked: "task %[1]s is blocked: return it to pending with 'ralph task unblock %[1]s', then claim it and mark it done",
	},
	"fail": {
		loop.StatusPending: "task %[1]s is pending: it has not been claimed, so it cannot fail; claim it first with 'ralph task claim %[1]s', or hold it back with 'ralph task block %[1]s'",
		loop.StatusDone:    "task %[1]s is done: a done task cannot fail; for more work on it, add a task with 'ralph task add TITLE'",
		loop.StatusFailed:  "task %[1]s has failed already",
		loop.StatusBlocked: "task %[1]s is blocked: it has not been claimed, so it cannot fail; it stays blocked until 'ralph task unblock %[1]s'",
	},
	"reset": {
		loop.StatusPending:    "task %[1]s is pending, not failed: there is nothing to reset",
		loop.StatusInProgress: "task %[1]s is in progress, not failed: only a failed task is reset; its holder gives it back with 'ralph task release --agent AGENT' ('ralph task show %[1]s' names the holder)",
		loop.StatusDone:       "task %[1]s is done, not failed: only a failed task is reset; for more work on it, add a task with 'ralph task add TITLE'",
		loop.StatusBlocked:    "task %[1]s is blocked, not failed: return it to pending with 'ralph task unblock %[1]s'",
	},
	"block": {
		loop.StatusInProgress: "task %[1]s is in progress: only a pending task can be blocked; its holder gives it back first with 'ralph task release --agent AGENT' ('ralph task show %[1]s' names the holder)",
		loop.StatusDone:       "task %[1]s is done: only a pending task can be blocked",
		loop.StatusFailed:     "task %[1]s failed: only a pending task can be blocked; return it to pending first with 'ralph task reset %[1]s'",
		loop.StatusBlocked:    "task %[1]s is blocked already",
	},
	"unblock": {
		loop.StatusPending:    "task %[1]s is pending, not blocked: there is nothing to unblock",
		loop.StatusInProgress: "task %[1]s is in progress, not blocked: there is nothing to unblock",
		loop.StatusDone:       "task %[1]s is done, not blocked: there is nothing to unblock",
		loop.StatusFailed:     "task %[1]s failed, not blocked: return it to pending with 'ralph task reset %[1]s'",
	},
}

// illegalMove is the words of `ralph task move ID` refused for a task
// whose status is from.
func illegalMove(move, id string, from loop.Status) string {
	if words, ok := illegalMoves[move][from]; ok {
		return fmt.Sprintf(words, id)
	}
	return fmt.Sprintf("task %[1]s is %[2]s: 'ralph task %[3]s' does not apply to it ('ralph task show %[1]s' shows it)", id, from, move)
}

// reword is err with lib, the library error in its chain, in the CLI's
// words: the words around lib's message (a store's "progress: " before
// it, say) are kept. An err whose message does not end with lib's is left
// in the library's words.
func reword(err, lib error, words string) error {
	msg := err.Error()
	if !strings.HasSuffix(msg, lib.Error()) {
		return err
	}
	return &worded{msg: strings.TrimSuffix(msg, lib.Error()) + words, err: err}
}

// storeError is err with the PostgreSQL store's errors that a command of
// the CLI answers in the CLI's words: the command that makes a missing
// plan or its tables (ralph init --db URL), the flag that names another
// plan (--plan NAME). Every error runApp prints passes through it.
func storeError(err error) error {
	var noPlan *postgres.NoPlanError
	var other *postgres.OtherRepositoryError
	var missing *postgres.MissingTablesError
	switch {
	case errors.As(err, &noPlan):
		return rewordIn(err, noPlan, fmt.Sprintf("%v; 'ralph init --db URL --plan %s' makes it", noPlan, noPlan.Plan))
	case errors.As(err, &other):
		return rewordIn(err, other, fmt.Sprintf("%v: %s was made for the repository whose root commit is %s; this one's is %s (another plan name, --plan NAME, keeps them apart)",
			postgres.ErrOtherRepository, other.Plan, other.Recorded, other.Ours))
	case errors.As(err, &missing):
		return rewordIn(err, missing, fmt.Sprintf("%v; 'ralph init --db URL' makes them", missing))
	}
	return err
}

// rewordIn is reword for a library error wherever its message stands in
// err's: the first occurrence is replaced by words.
func rewordIn(err, lib error, words string) error {
	msg := err.Error()
	if !strings.Contains(msg, lib.Error()) {
		return err
	}
	return &worded{msg: strings.Replace(msg, lib.Error(), words, 1), err: err}
}

// noSpecsHint is where specs go, in the CLI's words: loop.NoSpecsHint
// with the command that gives a feature its spec.
const noSpecsHint = "write specs in specs/*.md, or give a feature one with 'ralph feature add NAME --spec FILE'"

// noSpecsError is err, a loop.ErrNoSpecs error, with the CLI's hint in
// place of the library's.
func noSpecsError(err error) error {
	var ns *loop.NoSpecsError
	if !errors.As(err, &ns) {
		return err
	}
	return reword(err, ns, fmt.Sprintf("%v: %s; %s", loop.ErrNoSpecs, ns.Missing, noSpecsHint))
}

// noticeWords is a notice's text in the CLI's words: the notices that
// carry what they are about (loop.Note.Unpriced, Note.AgentsTest) name
// the flag that sets the field they speak of.
func noticeWords(n loop.Note) string {
	switch {
	case n.Unpriced != nil:
		agent := n.Unpriced.Agent
		if agent == "" {
			agent = "the agent"
		}
		return fmt.Sprintf("%s reported no cost and no price is known for model %q: --max-cost cannot count its sessions", agent, n.Unpriced.Model)
	case n.AgentsTest != nil:
		at := *n.AgentsTest
		uncommitted := at.Uncommitted
		at.Uncommitted = ""
		var parts []string
		if s := at.Announcement(); s != "" {
			parts = append(parts, s)
		}
		if uncommitted != "" {
			parts = append(parts, fmt.Sprintf("AGENTS.md in the working tree names the test command %q, which is not committed: it is not run (commit it, or pass --test-cmd)", uncommitted))
		}
		return strings.Join(parts, "; ")
	}
	return n.Message
}

// baselineWords is loop.BaselineHint in the CLI's words.
const baselineWords = "before any agent ran, so every task's gate would fail: give each task a check of its own (ralph task add --check) " +
	"or check the whole suite once the plan is complete (--final-cmd instead of --test-cmd)"

// loginWords is loop.LoginHint in the CLI's words, with each agent's
// login step.
const loginWords = "log in and build again: claude, then /login (Claude Code); codex login (Codex); gemini, then choose a login (Gemini CLI); " +
	"opencode auth login (OpenCode) — or set the provider's API key and build with --use-api-key"

// firstLineOf is s up to its first line break.
func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// reportWords is a run's closing message in the CLI's words: the causes
// that speak of a field a flag sets (Report.Cause) are worded with the
// flag — loop.ErrNotGitRepo (Config.Commit: --commit), plan mode's count
// of tasks added outside the feature it planned (--feature), a no-specs
// report (specs gone between the CLI's look and the run's) with the CLI's
// hint.
func reportWords(rep loop.Report) string {
	msg := rep.Message
	var ns *loop.NoSpecsError
	var fe *loop.EmptyFeatureError
	switch {
	case errors.Is(rep.Cause, loop.ErrNotLoggedIn):
		return strings.Replace(msg, loop.LoginHint, loginWords, 1)
	case errors.Is(rep.Cause, loop.ErrBaselineFailed):
		// The command's output was shown, in lines, by the notice.
		return firstLineOf(strings.Replace(msg, loop.BaselineHint, baselineWords, 1))
	case errors.Is(rep.Cause, loop.ErrNotGitRepo):
		if rest, ok := strings.CutPrefix(msg, loop.ErrNotGitRepo.Error()); ok {
			return "--commit needs a git repository" + rest
		}
	case errors.As(rep.Cause, &ns):
		return strings.TrimPrefix(loop.ErrNoSpecs.Error(), "loop: ") + ": " + ns.Missing + "; " + noSpecsHint
	case errors.As(rep.Cause, &fe) && fe.Outside > 0:
		added := "tasks were"
		if fe.Outside == 1 {
			added = "task was"
		}
		words := fmt.Sprintf("feature %s has no task (%d %s added without --feature %s)", fe.Feature, fe.Outside, added, fe.Feature)
		return strings.Replace(msg, fe.Error(), words, 1)
	}
	return msg
}

// notFoundError words an agent executable that is not there
// (agentproc.NotFoundError) with the flag that names it, flag (--claude
// or --agent-bin): `--agent-bin "X" is not an executable (…); install …
// or name the executable with --agent-bin PATH or $RALPH_CODEX` (Claude
// Code's hint says RALPH_CLAUDE, without the "$").
func notFoundError(err error, flag string) error {
	var nf *agentproc.NotFoundError
	if !errors.As(err, &nf) {
		return err
	}
	env := "$" + nf.EnvVar
	if flag == "--claude" {
		env = nf.EnvVar
	}
	return &worded{msg: fmt.Sprintf("%v: %s; %s or name the executable with %s PATH or %s",
		loop.ErrAgentNotFound, nf.Missing(flag), nf.Install, flag, env), err: err}
}
