package parallel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/ralph-dev/ralph/safefile"
)

// A WorktreeError is a worker's directory that is not the worktree ralph
// made (ARCHITECTURE.md §7.2): it is a
// symbolic link, not a directory, gone, or its .git does not name the
// git directory the repository keeps for it. Git.CheckWorktree returns it.
type WorktreeError struct {
	Dir string
	// Problem says what is wrong, in words.
	Problem string
	// GitFileOnly is set when dir is a real directory that the repository
	// knows as its worktree and only its .git is not the file git wrote
	// (deleted, rewritten, a link, a repository of its own): it is
	// repaired in place (Git.RepairWorktree). Otherwise the directory is
	// set aside whole (Git.SetAside) and the worktree made again.
	GitFileOnly bool
	// Gone is set when nothing is at dir: there is nothing to set aside.
	Gone bool
}

func (e *WorktreeError) Error() string {
	return e.Dir + " is not the worktree ralph made: " + e.Problem
}

// ensureTree makes sure that the worker's directory is the worktree ralph
// made before ralph runs git there. One that is not is made so: repaired
// in place when only its .git is broken (the broken one moved to
// <tree>.aside/<time>/.git), else — or when the repair fails — set aside
// whole as <tree>.aside/<time> — a link is moved, never followed, and
// nothing in it is deleted — and made again at the integration tip. A
// <tree>.aside that is not a directory (a file an agent left there) is
// left as it is and <tree>.aside-<time> used instead. problem says what
// was wrong ("" when nothing was); err is a failure to look or to mend.
func (w *workspace) ensureTree(ctx context.Context) (problem string, err error) {
	if w.parent != nil {
		dir := filepath.Dir(w.dir)
		if now, err := os.Lstat(dir); err != nil || !os.SameFile(now, w.parent) {
			return "", fmt.Errorf("%s, the directory of the workers' trees, was replaced or removed during the build (a link is not followed): ralph stops rather than run git there", dir)
		}
	}
	err = w.git.CheckWorktree(ctx, w.dir)
	var we *WorktreeError
	if !errors.As(err, &we) {
		return "", err
	}
	aside, err := w.asidePath()
	if err != nil {
		return "", fmt.Errorf("%v; %w", we, err)
	}
	var repairErr error
	if we.GitFileOnly {
		if repairErr = w.git.RepairWorktree(ctx, w.dir, aside); repairErr == nil {
			return fmt.Sprintf("%s (its .git was repaired; what was there is kept in %s)", we, aside), nil
		}
		// A tree ralph cannot repair is made again: its .git as it was
		// goes aside with the rest of it.
	}
	what := "set aside as " + aside
	if repairErr != nil {
		what = fmt.Sprintf("repairing its .git failed (%v), so it was set aside as %s", repairErr, aside)
	}
	if we.Gone {
		what = "nothing was there to set aside"
	} else if err := w.git.SetAside(ctx, w.dir, aside); err != nil {
		if repairErr != nil {
			return "", fmt.Errorf("%v; repairing it: %v; setting it aside: %w", we, repairErr, err)
		}
		return "", fmt.Errorf("%v; setting it aside: %w", we, err)
	}
	tip, ok, err := w.knownTip(ctx)
	if err != nil {
		return "", err
	}
	if !ok {
		if tip, err = headCommit(ctx, w.git); err != nil {
			return "", err
		}
	}
	if err := w.git.AddWorktree(ctx, w.dir, tip); err != nil {
		return "", fmt.Errorf("%v; %s, but making the worktree again failed: %w", we, what, err)
	}
	return fmt.Sprintf("%s (%s; the worktree was made again)", we, what), nil
}

// asidePath returns where what is wrong with the tree goes:
// <tree>.aside/<time>, or <tree>.aside-<time> when <tree>.aside is there
// and not a directory. A link planted at <tree>.aside would send the
// tree, or its .git, wherever it points: it is removed (the link, not its
// target), and the set-aside refuses one planted again meanwhile.
func (w *workspace) asidePath() (string, error) {
	now := strconv.FormatInt(time.Now().UnixNano(), 10)
	base, name := treeBase(w.root, w.dir), filepath.Base(w.dir)+".aside"
	aside := filepath.Join(w.dir+".aside", now)
	if err := removeLinks(base, filepath.Dir(w.dir), name); err != nil {
		return "", fmt.Errorf("clearing the way to %s: %w", aside, err)
	}
	if fi, err := safefile.Lstat(base, w.dir+".aside"); err == nil && !fi.IsDir() {
		return w.dir + ".aside-" + now, nil
	}
	return aside, nil
}

// treeNotice tells the person that worker's tree was not the worktree
// ralph made when ralph looked at it (when), and where what it held is:
// problem is ensureTree's, naming the path it was set aside at.
func treeNotice(worker, when, problem string) string {
	return fmt.Sprintf("%s's tree, %s: %s", worker, when, problem)
}
