package loop_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// twoCommits is a repository whose HEAD holds an earlier task's work
// (done.txt) on top of init; it returns init's and HEAD's ids.
func twoCommits(t *testing.T, root string) (first, second string) {
	t.Helper()
	gitRepo(t, root)
	first = strings.TrimSpace(git(t, root, "rev-parse", "HEAD"))
	writeFile(t, root, "done.txt", "the previous task's work\n")
	git(t, root, "add", "done.txt")
	git(t, root, "commit", "-q", "-m", "previous task")
	return first, strings.TrimSpace(git(t, root, "rev-parse", "HEAD"))
}

// TestCommitGateRefusesAMovedHead: a hostile agent resets HEAD before it
// says done. Without --sandbox its `git reset --hard HEAD~1` drops the
// previous task's commit from the user's branch, and the gate would
// commit on top of the shortened branch; with --sandbox its reset moves
// only its private checkout (reported as a Checkout that does not
// descend) but rewrites the tree's files, and the gate's commit would
// land as a revert of the previous task. Either way nothing is committed
// and the attempt is task trouble naming the move. An agent that only
// adds commits on top still has its work committed.
func TestCommitGateRefusesAMovedHead(t *testing.T) {
	for _, c := range []struct {
		name string
		// act is the agent's payload in root; it returns the session's
		// Checkout.
		act        func(t *testing.T, root, first, second string) *loop.Checkout
		wantCommit bool
	}{
		{name: "unsandboxed reset", act: func(t *testing.T, root, first, second string) *loop.Checkout {
			git(t, root, "reset", "-q", "--hard", "HEAD~1")
			writeFile(t, root, "new.txt", "new\n")
			return nil
		}},
		{name: "unsandboxed checkout of an older commit", act: func(t *testing.T, root, first, second string) *loop.Checkout {
			git(t, root, "checkout", "-q", "--detach", first)
			writeFile(t, root, "new.txt", "new\n")
			return nil
		}},
		{name: "sandboxed reset", act: func(t *testing.T, root, first, second string) *loop.Checkout {
			// The private checkout's reset: the shared files go back
			// to init's, the repository's HEAD stays.
			if err := os.Remove(filepath.Join(root, "done.txt")); err != nil {
				t.Fatal(err)
			}
			writeFile(t, root, "new.txt", "new\n")
			return &loop.Checkout{Start: second, End: first, Descends: false}
		}},
		{name: "unsandboxed commit on top", wantCommit: true, act: func(t *testing.T, root, first, second string) *loop.Checkout {
			writeFile(t, root, "mine.txt", "mine\n")
			git(t, root, "add", "mine.txt")
			git(t, root, "commit", "-q", "-m", "the agent's own")
			writeFile(t, root, "new.txt", "new\n")
			return nil
		}},
		{name: "sandboxed commit on top", wantCommit: true, act: func(t *testing.T, root, first, second string) *loop.Checkout {
			writeFile(t, root, "new.txt", "new\n")
			return &loop.Checkout{Start: second, End: "0123456789abcdef0123456789abcdef01234567", Descends: true}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := newStore(t, tasks("a")...)
			cfg := testConfig(t)
			first, second := twoCommits(t, cfg.Root)
			cfg.Commit, cfg.MaxRetries = true, 0
			runner := looptest.NewFakeRunner(nil).Always(func(_ context.Context, req loop.RunRequest) (loop.RunResult, error) {
				res := looptest.Result(done(envOf(req, "RALPH_TASK_ID")))
				res.Checkout = c.act(t, cfg.Root, first, second)
				return res, nil
			})
			rep, err := loop.Run(t.Context(), cfg, store, runner)
			if err != nil {
				t.Fatal(err)
			}
			subject := strings.TrimSpace(git(t, cfg.Root, "log", "-1", "--format=%s"))
			committed := strings.HasPrefix(subject, "build: iteration 1")
			if committed != c.wantCommit {
				t.Fatalf("committed = %v (HEAD is %q), want %v; outcome %s: %s", committed, subject, c.wantCommit, rep.Outcome, rep.Message)
			}
			task, _ := store.Get(t.Context(), "a")
			if c.wantCommit {
				if task.Status != loop.StatusDone {
					t.Errorf("task %s, want done", task.Status)
				}
				if out := git(t, cfg.Root, "merge-base", "--is-ancestor", second, "HEAD"); out != "" {
					t.Error(out)
				}
				return
			}
			logs, _ := store.Logs(t.Context(), "a")
			last := logs[len(logs)-1]
			if task.Status != loop.StatusFailed || last.Kind != loop.LogFail || !strings.Contains(last.Message, "HEAD") {
				t.Errorf("task %s (%s %q), run %s (%q); want failed as task trouble naming HEAD", task.Status, last.Kind, last.Message, rep.Outcome, rep.Message)
			}
		})
	}
}
