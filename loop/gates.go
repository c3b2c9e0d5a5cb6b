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

// runTests runs the test command with sh -c in root.
func runTests(ctx context.Context, root, testCmd string) error {
	out, err := command(ctx, root, "sh", "-c", testCmd)
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

// commitAll stages every change except .ralph/ and commits it with msg.
// Nothing staged is ErrNothingChanged.
func commitAll(ctx context.Context, root, msg string) error {
	if out, err := command(ctx, root, "git", "add", "-A", "--", ".", ":!.ralph"); err != nil {
		return fmt.Errorf("%w: git add: %v\n%s", ErrGit, err, tail(out))
	}
	out, err := command(ctx, root, "git", "diff", "--cached", "--quiet")
	if err == nil {
		return ErrNothingChanged
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		return fmt.Errorf("%w: git diff: %v\n%s", ErrGit, err, tail(out))
	}
	if out, err := command(ctx, root, "git", "commit", "--quiet", "-m", msg); err != nil {
		return fmt.Errorf("%w: git commit: %v\n%s", ErrGit, err, tail(out))
	}
	return nil
}

// CommitMessage is the commit gate's message: "<mode>: iteration <n> -
// <title>".
func CommitMessage(mode Mode, iteration int, title string) string {
	return fmt.Sprintf("%s: iteration %d - %s", mode, iteration, strings.Join(strings.Fields(title), " "))
}
