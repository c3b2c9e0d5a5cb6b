package parallel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/ralph-dev/ralph/loop"
)

// A TipError is an integration branch that is not where ralph last put it
// and not where ralph's own landings since have taken it (ARCHITECTURE.md §7):
// someone else moved, rewound or deleted it. The build stops (exit 5)
// before it builds on it; ralph build --accept-tip (Config.AcceptTip)
// accepts it as it is.
type TipError struct {
	// Branch is the integration branch's short name; Remote the remote
	// where it lives ("" the repository's own).
	Branch, Remote string
	// Tip is where the branch is now; "" when it was deleted.
	Tip string
	// Expected is where ralph last put it.
	Expected string
	// Foreign are commits on the branch that ralph did not make (a few,
	// newest first); Forged the task ids their Ralph-Task trailers name,
	// which mean nothing.
	Foreign, Forged []string
	// Missing are the tasks whose landed work the branch (or, deleted,
	// HEAD, which it would be made again from) no longer holds.
	Missing []string
	// Accept names a build that accepts the tip, as the message advises
	// it (Config.Words.AcceptTip; "": "a build with Config.AcceptTip").
	Accept string
}

func (e *TipError) Error() string {
	var b strings.Builder
	name := e.Branch
	if e.Remote != "" {
		name += " on " + e.Remote
	}
	if e.Tip == "" {
		fmt.Fprintf(&b, "the integration branch %s was deleted (ralph last put it at %s), and HEAD, which it would be made again from, lacks landed work", name, short(e.Expected))
	} else {
		fmt.Fprintf(&b, "the integration branch %s is at %s, not where ralph last put it (%s), and ralph's own landings do not explain the move: someone else moved it", name, short(e.Tip), short(e.Expected))
	}
	if len(e.Foreign) > 0 {
		fmt.Fprintf(&b, "; commits ralph did not make are on it: %s", shorts(e.Foreign))
		if len(e.Forged) > 0 {
			fmt.Fprintf(&b, " (their Ralph-Task trailers name %s, but a trailer is not a landing: ralph did not land them there)", strings.Join(e.Forged, ", "))
		}
	}
	if len(e.Missing) > 0 {
		fmt.Fprintf(&b, "; the work of %s is missing from it", strings.Join(e.Missing, ", "))
	}
	if e.Tip == "" {
		b.WriteString(". ralph does not make it again by itself. To accept that, making the branch again from HEAD")
	} else {
		fmt.Fprintf(&b, ". ralph builds nothing on it. To accept %s as the branch's tip", short(e.Tip))
	}
	if len(e.Missing) > 0 {
		fmt.Fprintf(&b, " (%s back to pending)", strings.Join(e.Missing, ", "))
	}
	b.WriteString(", run " + acceptName(e.Accept))
	switch {
	case e.Remote != "":
		fmt.Fprintf(&b, "; or put it back on %s at %s", e.Remote, e.Expected)
	case e.Tip == "":
		fmt.Fprintf(&b, "; or restore it: git branch %s %s", e.Branch, e.Expected)
	default:
		fmt.Fprintf(&b, "; or put it back: git update-ref refs/heads/%s %s", e.Branch, e.Expected)
	}
	return b.String()
}

// short is a commit's abbreviated name.
func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

func shorts(commits []string) string {
	s := make([]string, len(commits))
	for i, c := range commits {
		s[i] = short(c)
	}
	return strings.Join(s, ", ")
}

// tipGuard keeps the integration branch ralph's
// (ARCHITECTURE.md §7.3): the store records where
// ralph last put the branch and every commit it lands there, and a tip
// that those do not explain stops the build.
type tipGuard struct {
	git    Git
	store  loop.LandingStore
	into   string // the branch, full ref
	remote string
	// since is the commit the branch was at when the plan adopted it:
	// the landings are after it ("": the whole history).
	since string
	// acceptWord names a build that accepts the tip (Words.AcceptTip; "":
	// Config's field's).
	acceptWord string
	// base is the branch the integration branch follows (short name; ""
	// none): a person's merge of it is accepted as a tip (adoptMerge).
	base string
}

// acceptName is g.acceptWord, or Config's field's name.
func (g *tipGuard) acceptName() string { return acceptName(g.acceptWord) }

// acceptName is accept, or, empty, Config's field's name for a build that
// accepts the tip.
func acceptName(accept string) string { return Words{AcceptTip: accept}.or().AcceptTip }

// branch is the key of the branch in the store: its short name.
func (g *tipGuard) branch() string { return strings.TrimPrefix(g.into, heads) }

// maxWalk bounds the landings check follows back from a tip: far more
// than land between two looks at the branch.
const maxWalk = 10000

// current reads the branch's tip and checks it (check): where ralph last
// put it is read first, and the branch after, so that another worker's
// landing under way — the branch moved, the store not yet told — reads
// as the landing it is. A branch that does not exist is made again from
// HEAD when nothing is lost by that (remake).
func (g *tipGuard) current(ctx context.Context) (string, error) {
	last, recorded, err := g.store.BranchTip(ctx, g.branch())
	if err != nil {
		return "", err
	}
	tip, ok, err := g.read(ctx)
	if err != nil {
		return "", err
	}
	if !ok {
		return g.remake(ctx, last, recorded, false)
	}
	return tip, g.check(ctx, last, recorded, tip)
}

// check returns nil when tip — the branch's tip, read after last (where
// ralph last put it; recorded false when it never recorded one) — is
// last, or is reached from last by landings ralph recorded (its own,
// another process's, another machine's): then the recorded tip follows
// it, and recorded landings found on the way are confirmed. Otherwise it
// returns a *TipError. A plan whose tip was never recorded (adopted
// before ralph recorded tips) takes tip as it is.
func (g *tipGuard) check(ctx context.Context, last string, recorded bool, tip string) error {
	branch := g.branch()
	if !recorded {
		_, err := g.store.MoveBranchTip(ctx, branch, "", tip)
		return err
	}
	if tip == last {
		return nil
	}
	chain, ok, err := g.walk(ctx, tip, last)
	if err == nil && !ok {
		// A person's merge of the base, after a build stopped on its
		// conflict, is the branch's tip from now on.
		if ok, err = g.adoptMerge(ctx, tip, last); ok {
			chain, ok, err = g.walk(ctx, tip, last)
		}
	}
	if err != nil {
		return err
	}
	if !ok {
		return g.tipError(ctx, tip, last)
	}
	// Oldest first, so that the recorded tip follows the chain.
	for i := len(chain) - 1; i >= 0; i-- {
		if chain[i].State == loop.LandingRecorded {
			if err := g.store.ConfirmLanding(ctx, branch, chain[i].Commit); err != nil {
				return err
			}
		}
	}
	_, err = g.store.MoveBranchTip(ctx, branch, last, tip)
	return err
}

// ours reports whether tip, a tip of the branch read before now, is where
// ralph last put it or follows from there by its landings. It changes
// nothing.
func (g *tipGuard) ours(ctx context.Context, tip string) (bool, error) {
	last, recorded, err := g.store.BranchTip(ctx, g.branch())
	if err != nil || !recorded {
		return err == nil, err
	}
	_, ok, err := g.walk(ctx, tip, last)
	return ok, err
}

// walk follows the landings back from tip, each to the commit it was made
// on, until it reaches last: ok false when a commit on the way is no
// landing ralph recorded (or one that never landed or was dropped).
func (g *tipGuard) walk(ctx context.Context, tip, last string) (chain []loop.Landing, ok bool, err error) {
	for c := tip; c != last; {
		if len(chain) == maxWalk {
			return nil, false, nil
		}
		ls, err := g.store.Landings(ctx, loop.LandingQuery{Branch: g.branch(), Commit: c,
			States: []loop.LandingState{loop.LandingRecorded, loop.LandingLanded}})
		if err != nil || len(ls) == 0 {
			return nil, false, err
		}
		chain = append(chain, ls[0])
		c = ls[0].Parent
	}
	return chain, true, nil
}

// tipError describes a tip that is not ralph's: the commits on it since
// where ralph last put it that ralph did not make, the task ids their
// trailers name, and the tasks whose landed work it lacks.
func (g *tipGuard) tipError(ctx context.Context, tip, last string) error {
	e := &TipError{Branch: g.branch(), Remote: g.remote, Accept: g.acceptWord, Tip: tip, Expected: last}
	if tip != "" {
		cs, err := g.git.Commits(ctx, last, tip)
		if err != nil {
			return err
		}
		ours := map[string]bool{} // the tasks of ralph's landings among them
		for _, c := range cs {
			ls, err := g.store.Landings(ctx, loop.LandingQuery{Branch: g.branch(), Commit: c})
			if err != nil {
				return err
			}
			if len(ls) > 0 && (ls[0].State == loop.LandingLanded || ls[0].State == loop.LandingRecorded) {
				ours[ls[0].TaskID] = true
				continue
			}
			if len(e.Foreign) < 5 {
				e.Foreign = append(e.Foreign, c)
			}
		}
		var forged []string
		if len(e.Foreign) > 0 {
			vals, err := g.git.Trailers(ctx, last, tip, TrailerTask)
			if err != nil {
				return err
			}
			for _, v := range vals {
				if !ours[v] {
					forged = append(forged, v)
				}
			}
		}
		slices.Sort(forged)
		e.Forged = slices.Compact(forged)
	}
	missing, _, err := g.missing(ctx, tip)
	if err != nil {
		return err
	}
	e.Missing = missing
	return e
}

// missing returns the tasks whose landings (landed, or recorded and
// perhaps landed) the history of tip lacks, with those landings' commits;
// tip "" lacks them all.
func (g *tipGuard) missing(ctx context.Context, tip string) (tasks, commits []string, err error) {
	ls, err := g.store.Landings(ctx, loop.LandingQuery{Branch: g.branch(),
		States: []loop.LandingState{loop.LandingRecorded, loop.LandingLanded}})
	if err != nil || len(ls) == 0 {
		return nil, nil, err
	}
	have := map[string]bool{}
	if tip != "" {
		cs, err := g.git.Commits(ctx, g.since, tip)
		if err != nil {
			return nil, nil, err
		}
		for _, c := range cs {
			have[c] = true
		}
	}
	for _, l := range ls {
		if have[l.Commit] {
			continue
		}
		if l.State == loop.LandingRecorded {
			// Never landed here (or not yet): nothing of it is missing.
			continue
		}
		commits = append(commits, l.Commit)
		if l.TaskID != BaseTask && !slices.Contains(tasks, l.TaskID) {
			tasks = append(tasks, l.TaskID)
		}
	}
	return tasks, commits, nil
}

// accept records tip — the branch's tip now — as where ralph last put
// it: the landings its history lacks are dropped and their tasks, if
// done, go back to pending (LandingStore.AcceptTip). It returns the tasks
// it sent back.
func (g *tipGuard) accept(ctx context.Context, tip string, by loop.Actor) ([]string, error) {
	_, drop, err := g.missing(ctx, tip)
	if err != nil {
		return nil, err
	}
	name := g.branch()
	if g.remote != "" {
		name += " on " + g.remote
	}
	reason := fmt.Sprintf("its work is not on %s at %s, which %s accepted", name, short(tip), g.acceptName())
	return g.store.AcceptTip(ctx, loop.AcceptTipParams{Branch: g.branch(), Tip: tip, Drop: drop, Reason: reason, By: by})
}

// ErrNoLandings: the store cannot record landings (loop.LandingStore).
var ErrNoLandings = errors.New("parallel: the store cannot record what ralph lands on the integration branch")

// open checks the branch before a build's workers start, as current
// does; with accept, a tip that is not ralph's is accepted instead
// (accept), and a deleted branch is made again from HEAD whatever HEAD
// lacks. It returns the tip the build starts from and, with accept, the
// tasks sent back to pending.
func (g *tipGuard) open(ctx context.Context, accept bool, by loop.Actor) (string, []string, error) {
	if !accept {
		tip, err := g.current(ctx)
		return tip, nil, err
	}
	last, recorded, err := g.store.BranchTip(ctx, g.branch())
	if err != nil {
		return "", nil, err
	}
	tip, ok, err := g.read(ctx)
	if err != nil {
		return "", nil, err
	}
	if !ok {
		if tip, err = g.remake(ctx, last, recorded, true); err != nil {
			return "", nil, err
		}
	}
	reopened, err := g.accept(ctx, tip, by)
	return tip, reopened, err
}

// remake makes the branch, which does not exist, again from HEAD, when
// nothing is lost by that — on a plan that never recorded a tip, or when
// every landing on it has reached HEAD (a merged pull request whose
// branch was deleted) — or, with accept, whatever HEAD lacks; otherwise
// it returns a *TipError naming the work HEAD lacks. It returns the new
// tip, which it records as where ralph put the branch (but with accept,
// which leaves that to AcceptTip).
func (g *tipGuard) remake(ctx context.Context, last string, recorded, accept bool) (string, error) {
	head, err := headCommit(ctx, g.git)
	if err != nil {
		return "", err
	}
	if recorded && !accept {
		missing, _, err := g.missing(ctx, head)
		if err != nil {
			return "", err
		}
		if len(missing) > 0 {
			return "", &TipError{Branch: g.branch(), Remote: g.remote, Accept: g.acceptWord, Expected: last, Missing: missing}
		}
	}
	err = g.create(ctx, head)
	if errors.Is(err, ErrRefExists) {
		// Another build made it just now: what it is is checked like
		// any tip.
		now, ok, err := g.read(ctx)
		if err != nil {
			return "", err
		}
		if !ok {
			return "", fmt.Errorf("the integration branch %s appeared and went again while this build made it", g.branch())
		}
		if accept {
			return now, nil
		}
		return now, g.check(ctx, last, recorded, now)
	}
	if err != nil || accept {
		return head, err
	}
	_, err = g.store.MoveBranchTip(ctx, g.branch(), last, head)
	return head, err
}

// read returns the branch's tip: the remote's, fetched now, when it lives
// on a remote; ok false when there is none.
func (g *tipGuard) read(ctx context.Context) (string, bool, error) {
	if g.remote == "" {
		return g.git.Resolve(ctx, g.into)
	}
	return g.git.Fetch(ctx, g.remote, g.into)
}

// create makes the branch at commit (on the remote, when it lives there):
// ErrRefExists when it exists.
func (g *tipGuard) create(ctx context.Context, commit string) error {
	if g.remote == "" {
		return g.git.CreateRef(ctx, g.into, commit)
	}
	if err := g.git.Push(ctx, PushParams{Remote: g.remote, Ref: g.into, Commit: commit, Mode: PushCreate}); err != nil {
		return err
	}
	return advanceBranch(ctx, g.git, g.into, commit)
}

// verify looks at the branch at the end of a run: nil when it is ralph's,
// or was deleted with every landing on it in HEAD (the next build makes
// it again); else a *TipError.
func (g *tipGuard) verify(ctx context.Context) error {
	last, recorded, err := g.store.BranchTip(ctx, g.branch())
	if err != nil {
		return err
	}
	tip, ok, err := g.read(ctx)
	if err != nil {
		return err
	}
	if ok {
		return g.check(ctx, last, recorded, tip)
	}
	head, err := headCommit(ctx, g.git)
	if err != nil {
		return err
	}
	missing, _, err := g.missing(ctx, head)
	if err != nil || len(missing) == 0 {
		return err
	}
	return &TipError{Branch: g.branch(), Remote: g.remote, Accept: g.acceptWord, Expected: last, Missing: missing}
}
