package loop

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// headState is where the repository's HEAD was when the agent's session
// began, for the commit gate of a run without workers (Config.Commit):
// the gate commits the tree's files on top of HEAD, and an agent that
// moved HEAD away from its start must not have that commit land as if
// nothing had happened (ARCHITECTURE.md §7).
//
// Two ways an agent moves it. Without --sandbox its `git reset --hard
// HEAD~1` moves the user's branch itself, dropping a commit from it; the
// gate would then commit over the shortened branch. With --sandbox its
// git is a private copy (Checkout): the same reset moves nothing ralph
// reads, but it rewrites the tree's files to the older commit, and the
// gate's commit would land as a revert of the previous task's work.
type headState struct {
	// start is the commit HEAD named before the session ("" for an
	// unborn branch, which any history descends from); known says it was
	// read.
	start string
	known bool
	// checkout is how the agent's private checkout moved (nil: it had
	// none).
	checkout *Checkout
}

// headGuarded reports whether the run's commit gate commits on the
// repository's own HEAD (workers land through their Workspace, which
// reads Checkout itself).
func (r *run) headGuarded() bool {
	return r.cfg.Commit && r.cfg.Workspace == nil && r.repo != nil
}

// recordHead records HEAD before an agent session.
func (r *run) recordHead(ctx context.Context) {
	r.head = headState{}
	if !r.headGuarded() {
		return
	}
	r.head.start, r.head.known = r.readHead(ctx)
}

// readHead is the commit HEAD names, "" when it names none (an unborn
// branch); ok is false when git could not tell.
func (r *run) readHead(ctx context.Context) (string, bool) {
	out, err := runGit(ctx, r.repo, r.repo.WorkTree, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	var ee *exec.ExitError
	switch {
	case err == nil:
		return strings.TrimSpace(out), true
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return "", true
	}
	return "", false
}

// headMoved says why the commit gate must not commit after the agent's
// session: its private checkout's HEAD, or the repository's, no longer
// descends from where the session began. "" is no reason; an error is git
// failing to tell.
func (r *run) headMoved(ctx context.Context) (string, error) {
	if !r.headGuarded() {
		return "", nil
	}
	if c := r.head.checkout; c != nil && !c.Descends {
		end := short(c.End)
		if end == "" {
			end = "no commit"
		}
		return fmt.Sprintf("the agent moved its checkout's HEAD from %s to %s, which does not descend from it (a reset or checkout?): its tree is not work on top of %s, and ralph does not commit it", short(c.Start), end, short(c.Start)), nil
	}
	if !r.head.known || r.head.start == "" {
		return "", nil
	}
	now, ok := r.readHead(ctx)
	switch {
	case !ok:
		return "", fmt.Errorf("%w: HEAD could not be read", ErrGit)
	case now == r.head.start:
		return "", nil
	case now == "":
		return fmt.Sprintf("the agent left HEAD on no commit (it was %s): ralph does not commit over it", short(r.head.start)), nil
	}
	_, err := runGit(ctx, r.repo, r.repo.WorkTree, "merge-base", "--is-ancestor", r.head.start, now)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "", nil
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return fmt.Sprintf("the agent moved HEAD from %s to %s, which does not descend from it (a reset or checkout?): ralph does not commit over it; %s is still in git's reflog", short(r.head.start), short(now), short(r.head.start)), nil
	}
	return "", err
}
