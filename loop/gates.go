package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ralph-dev/ralph/hostgit"
)

// Gate errors. A gate failure is gate trouble: the claim is released and
// the iteration retried; the failure that finds no retry left stops the run
// (OutcomeTestGateFailed, OutcomeGitFailed).
var (
	ErrTestsFailed    = errors.New("loop: test gate failed")
	ErrGit            = errors.New("loop: git gate failed")
	ErrNothingChanged = errors.New("loop: git gate: the iteration changed nothing")
	// ErrNotGitRepo: Config.Commit is set in a project that is no git
	// repository; the run stops before its first iteration
	// (OutcomeGitFailed), its Report.Message starting with this error's
	// text.
	ErrNotGitRepo = errors.New("loop: Config.Commit needs a git repository")
	// ErrHeadMoved: the agent moved HEAD (or its private checkout's)
	// off the commit its session began on, so that the commit gate would
	// commit over a dropped commit or land a revert; nothing is committed.
	ErrHeadMoved = fmt.Errorf("%w: the agent moved HEAD", ErrGit)
)

// outputTail is how much of a failing command's output an error quotes.
const outputTail = 2000

// tail is the end of a command's output an error quotes.
func tail(s string) string { return excerptEnd(s, outputTail) }

// excerptEnd keeps the end of s, at most n bytes, its lines kept.
func excerptEnd(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return "…" + s[runeStart(s, len(s)-n):]
}

// runTests runs the test command with sh -c in dir (the project root or
// the worker's tree), through the run's CommandRunner.
func (r *run) runTests(ctx context.Context, dir, testCmd string) error {
	out, err := r.commands().RunCommand(ctx, CommandRequest{Command: testCmd, Dir: dir, UseAPIKey: r.cfg.UseAPIKey})
	if err != nil {
		return &TestsFailedError{Command: testCmd, Err: err, Output: tail(out)}
	}
	return nil
}

// TestsFailedError is a test command that failed (the test gate, a
// task's check, the baseline, the final check): it is ErrTestsFailed,
// and says "loop: test gate failed: COMMAND: HOW" then, on the lines
// after, the end of the command's output.
type TestsFailedError struct {
	Command string
	// Err says how the command ended ("exit status 1").
	Err error
	// Output is the end of what it printed, trimmed.
	Output string
}

func (e *TestsFailedError) Error() string {
	return fmt.Sprintf("%v: %s\n%s", ErrTestsFailed, e.Head(), e.Output)
}

// Head is "COMMAND: HOW", the failure without its output.
func (e *TestsFailedError) Head() string { return fmt.Sprintf("%s: %v", e.Command, e.Err) }

func (e *TestsFailedError) Unwrap() error { return ErrTestsFailed }

// checkGitRepo reports ErrNotGitRepo unless the run found a repository
// (findErr is what hostgit.Find said).
func checkGitRepo(repo *hostgit.Repo, findErr error, root string) error {
	if repo == nil {
		if findErr == nil {
			findErr = hostgit.ErrNotRepository
		}
		return fmt.Errorf("%w (%s): %v", ErrNotGitRepo, root, findErr)
	}
	return nil
}

// ralphExclude is the pathspec that leaves <root>/.ralph out.
const ralphExclude = ":(exclude).ralph"

// runGit runs git (built by package hostgit: the repository found when
// the run began, its own programs blanked) in dir and returns its
// standard output. A failure is an ErrGit error naming the git
// subcommand and quoting what git printed (standard output, then
// standard error); it wraps the *exec.ExitError too. A cancelled ctx
// stops git as hostgit's Command does (SIGTERM, then SIGKILL
// hostgit.WaitDelay later).
func runGit(ctx context.Context, repo *hostgit.Repo, dir string, args ...string) (string, error) {
	sub := args[0] // the subcommand: the first argument that is no option of git's own
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			sub = a
			break
		}
	}
	cmd, err := repo.Command(ctx, dir, args...)
	if err != nil {
		return "", fmt.Errorf("%w: git %s: %w", ErrGit, sub, err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: git %s: %w\n%s", ErrGit, sub, err, tail(stdout.String()+stderr.String()))
	}
	return stdout.String(), nil
}

// commitAll stages every change under root but <root>/.ralph and commits
// it with msg. Nothing staged is ErrNothingChanged.
//
// It stages with hostgit's StageAll, not git add: git add runs git status
// inside every submodule it tracks, with that repository's own
// configuration (an agent's nested repository with a filter of its own).
// The .ralph exclude pathspec leaves .ralph/ unstaged whether git ignores
// it or not, even when files under it were committed before (git add
// would have refused to be given an ignored path, even as an exclude). A
// repository the agent made inside the tree is committed as git add
// would: a gitlink to its HEAD. The commit is git commit, so the user's
// own hooks (a global core.hooksPath) and signing settings hold; the
// repository's hooks do not run (see hostgit).
func commitAll(ctx context.Context, repo *hostgit.Repo, root, msg string) error {
	if op := inProgress(repo); op != "" {
		return fmt.Errorf("%w: %s is in the git directory (an operation in progress, or left by an agent): ralph does not commit on top of it", ErrGit, op)
	}
	nested, err := repo.StageAll(ctx, root, ralphExclude)
	if err != nil {
		return fmt.Errorf("%w: staging: %w", ErrGit, err)
	}
	if len(nested) > 0 {
		if _, err := runGit(ctx, repo, repo.WorkTree, append([]string{"update-index", "--add", "--"}, nested...)...); err != nil {
			return err
		}
	}
	_, err = runGit(ctx, repo, root, "diff", "--cached", "--quiet")
	if err == nil {
		return ErrNothingChanged
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		return err
	}
	_, err = runGit(ctx, repo, root, "commit", "--quiet", "-m", msg)
	return err
}

// inProgress names the first file of repo's git directory that says a
// merge, cherry-pick, revert, rebase or sequence is in progress: git
// commit would record a merge with MERGE_HEAD's commit as a parent, or
// take another commit's message and author. "" when there is none.
func inProgress(repo *hostgit.Repo) string {
	for _, n := range []string{"MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "sequencer", "rebase-merge", "rebase-apply"} {
		if _, err := os.Lstat(filepath.Join(repo.GitDir, n)); err == nil {
			return n
		}
	}
	return ""
}

// CommitMessage is the commit gate's message: "<mode>: iteration <n> -
// <title>".
func CommitMessage(mode Mode, iteration int, title string) string {
	return fmt.Sprintf("%s: iteration %d - %s", mode, iteration, strings.Join(strings.Fields(title), " "))
}

// announceBlankedFilters says, when the run starts and will commit (the
// commit gate, or a worker's integration), that the filters the
// repository's own configuration defines do not run in ralph's git: a
// repository whose git-lfs was installed with --local would otherwise
// have its large files committed as they are without a word. A build
// with workers says it once.
func (r *run) announceBlankedFilters(ctx context.Context) {
	if r.repo == nil || !r.cfg.Commit && r.cfg.Workspace == nil {
		return
	}
	keys, err := r.repo.Blanked(ctx)
	if err != nil {
		return
	}
	var filters []string
	for _, k := range keys {
		if strings.HasPrefix(k, "filter.") && !strings.HasSuffix(k, ".required") {
			filters = append(filters, k)
		}
	}
	if len(filters) == 0 || !r.cfg.Shared.first("blanked-filters") {
		return
	}
	r.note.notice(0, "ralph's git does not run the filters this repository's own configuration defines (%s): files they would convert are committed as they are; a filter installed in your global configuration (git lfs install) does run", strings.Join(filters, ", "))
}
