package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ralph-dev/ralph/agentproc"
	"github.com/ralph-dev/ralph/broker"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/parallel"
)

// The library's errors speak of its own fields (Config.Into,
// Config.Loop.Commit); this file words the ones a flag sets as the
// command line knows them (--into, --commit), telling them apart with
// errors.Is and errors.As. The worded error wraps the library's, so the
// chain is kept.

// worded is a library error under the CLI's words.
type worded struct {
	msg string
	err error
}

func (e *worded) Error() string { return e.msg }
func (e *worded) Unwrap() error { return e.err }

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

// intoError is the error of ralph build for a parallel.ErrInto,
// ErrNoSettings or ErrNoLandings error (exit 1, no usage hint), in the
// CLI's words.
func intoError(err error) error {
	if msg, ok := flagWords(err); ok {
		return &codedError{code: exitError, err: &worded{msg: msg, err: err}}
	}
	return &codedError{code: exitError, err: err}
}

// taskError is the error of ralph task done, fail and claim, with the
// refusals whose library words name a field a flag sets in the flag's
// words: a *loop.HeldError (loop.Actor.Force: --force) and the broker's
// *broker.RefusalError (Actor.Force: --force; peek mode: --claim agent).
func taskError(err error) error {
	var held *loop.HeldError
	var refusal *broker.RefusalError
	switch {
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
