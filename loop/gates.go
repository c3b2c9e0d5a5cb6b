package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// Gate errors. A gate failure is gate trouble: the claim is released and
// the iteration retried; the failure that finds no retry left stops the run
// (OutcomeTestGateFailed, OutcomeGitFailed).
var (
	ErrTestsFailed    = errors.New("loop: test gate failed")
	ErrGit            = errors.New("loop: git gate failed")
	ErrNothingChanged = errors.New("loop: git gate: the iteration changed nothing")
	ErrNotGitRepo     = errors.New("loop: --commit needs a git repository")
)

// gateWaitDelay bounds how long a gate command's leftover children may hold
// its output pipes after it exits or is cancelled.
const gateWaitDelay = 5 * time.Second

// outputTail is how much of a failing command's output an error quotes.
const outputTail = 2000

func command(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = gateWaitDelay
	err := cmd.Run()
	return out.String(), err
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > outputTail {
		s = "…" + s[len(s)-outputTail:]
	}
	return s
}

// runTests runs the test command with sh -c in dir (the project root or
// the worker's tree), through the run's CommandRunner.
func (r *run) runTests(ctx context.Context, dir, testCmd string) error {
	out, err := r.commands().RunCommand(ctx, CommandRequest{Command: testCmd, Dir: dir})
	if err != nil {
		return fmt.Errorf("%w: %s: %v\n%s", ErrTestsFailed, testCmd, err, tail(out))
	}
	return nil
}

// checkGitRepo reports ErrNotGitRepo unless root is inside a git work tree.
func checkGitRepo(ctx context.Context, root string) error {
	out, err := command(ctx, root, "git", "rev-parse", "--is-inside-work-tree")
	if err != nil || strings.TrimSpace(out) != "true" {
		return fmt.Errorf("%w (%s)", ErrNotGitRepo, root)
	}
	return nil
}

// ralphExclude is the pathspec that leaves <root>/.ralph out.
const ralphExclude = ":(exclude).ralph"

// addChunk is about how many bytes of paths one `git add` is given: well
// under the kernel's limits on a command line.
const addChunk = 64 << 10

// runGit runs git in root and returns its standard output. A failure is
// an ErrGit error naming the git subcommand and quoting what git printed
// (standard output, then standard error); it wraps the *exec.ExitError
// too.
func runGit(ctx context.Context, root string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = gateWaitDelay
	if err := cmd.Run(); err != nil {
		sub := args[0] // the subcommand: the first argument that is no option of git's own
		for _, a := range args {
			if !strings.HasPrefix(a, "-") {
				sub = a
				break
			}
		}
		return stdout.String(), fmt.Errorf("%w: git %s: %w\n%s", ErrGit, sub, err, tail(stdout.String()+stderr.String()))
	}
	return stdout.String(), nil
}

// commitAll stages every change outside <root>/.ralph and commits it with
// msg. Nothing staged is ErrNothingChanged.
//
// It does not stage with `git add -A -- . ':!.ralph'`: when git ignores
// .ralph/ (.gitignore lists it, as users' often does), that command
// reports .ralph as an ignored path it was asked to add and exits 1,
// although it staged the rest. Instead, changes to tracked files are
// staged with `git add --update`, which looks at no untracked path, and
// the untracked files git does not ignore are listed with `git ls-files
// --others --exclude-standard` and added by name; both leave .ralph out by
// an exclude pathspec. So .ralph/ is never staged, whether git ignores it
// or not, even when files under it were committed before.
func commitAll(ctx context.Context, root, msg string) error {
	if _, err := runGit(ctx, root, "add", "--update", "--", ".", ralphExclude); err != nil {
		return err
	}
	out, err := runGit(ctx, root, "ls-files", "-z", "--others", "--exclude-standard", "--", ".", ralphExclude)
	if err != nil {
		return err
	}
	if err := addPaths(ctx, root, strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")); err != nil {
		return err
	}
	_, err = runGit(ctx, root, "diff", "--cached", "--quiet")
	if err == nil {
		return ErrNothingChanged
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		return err
	}
	_, err = runGit(ctx, root, "commit", "--quiet", "-m", msg)
	return err
}

// addPaths stages paths (relative to root; names, not patterns), a chunk
// of about addChunk bytes of them per `git add`. Empty paths are skipped.
func addPaths(ctx context.Context, root string, paths []string) error {
	args := []string{"--literal-pathspecs", "add", "--"}
	n, size := len(args), 0
	for i, p := range paths {
		if p != "" {
			args = append(args, p)
			size += len(p) + 1
		}
		if len(args) > n && (size >= addChunk || i == len(paths)-1) {
			if _, err := runGit(ctx, root, args...); err != nil {
				return err
			}
			args, size = args[:n], 0
		}
	}
	return nil
}

// CommitMessage is the commit gate's message: "<mode>: iteration <n> -
// <title>".
func CommitMessage(mode Mode, iteration int, title string) string {
	return fmt.Sprintf("%s: iteration %d - %s", mode, iteration, strings.Join(strings.Fields(title), " "))
}
