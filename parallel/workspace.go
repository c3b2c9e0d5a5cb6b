package parallel

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/safefile"
)

// Branch names (ARCHITECTURE.md §5).
const (
	// DefaultInto is the integration branch of a plan whose first
	// parallel build gave no --into.
	DefaultInto = "ralph/integration"
	// TaskBranchPrefix names each attempt's branch: ralph/task/<id>.
	TaskBranchPrefix = "ralph/task/"
	// AttemptBranchPrefix names the kept attempts:
	// ralph/attempt/<id>/<n>.
	AttemptBranchPrefix = "ralph/attempt/"
	// TrailerTask is the trailer that names, in the commit that lands a
	// task's work, the task.
	TrailerTask = "Ralph-Task"
	// TrailerGeneration names the claim (ARCHITECTURE.md §2.2) the work was
	// done under.
	TrailerGeneration = "Ralph-Generation"
)

// RefName encodes a task id for use in a branch name: letters, digits,
// '-' and '_' stay; every other byte (the '.', '/', ' ', '~', '^', ':' and
// the rest that git refuses or reads specially) becomes %XX, its value in
// upper-case hex. The encoding is reversible ('%' is itself encoded) and
// always valid in a ref name: "fix bug/3" → "fix%20bug%2F3".
func RefName(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

const heads = "refs/heads/"

// workspace is one worker's git worktree: a loop.Workspace.
type workspace struct {
	git    Git
	dir    string
	worker string
	into   string // the integration branch, full ref name
	// remote, if set, is the git remote where the integration branch
	// lives (Config.Remote): its tip is fetched from there, and moved
	// there by a push that only fast-forwards.
	remote string
	// guard checks the branch's tip against the landings the store
	// recorded, and records this worker's landings (ARCHITECTURE.md §7).
	guard *tipGuard
	// include are the worktree-include files, relative to the project
	// root: copied into the tree, never committed.
	include []string
	root    string
	// land serialises the integrations of one process; across processes
	// (and machines) the compare-and-swap of the branch keeps them apart.
	land *sync.Mutex
	// lock holds the tree for this build (takeTree); nil in tests.
	lock *os.File
	// parent is the directory of the workers' trees as the build found
	// it (nil in tests): the tree is not ralph's if that was replaced.
	parent os.FileInfo

	// The attempt under way: its task, its branch (full ref), the
	// commit it began from, and how often the store had recorded the
	// task done when it began (its landing's Completions). The tree's
	// HEAD is detached; the branch moves to the attempt's commit when it
	// lands.
	task     loop.Task
	ref      string
	base     string
	recorded int
	// fence is the mark of the attempt's claim that Begin put on the
	// task's fence (fence.go).
	fence string

	// notices are what Begin found and the person should know (a tree
	// set aside), until the loop takes them (loop.Noticer).
	notices []string
}

// marker is the file that names the task of the attempt under way in the
// tree, for a run that finds the tree after a crash: <tree>.task.
func (w *workspace) marker() string { return w.dir + ".task" }

var _ loop.Workspace = (*workspace)(nil)

func (w *workspace) Dir() string { return w.dir }

// except are the paths never committed from the tree: ralph's own
// directory and the copied worktree-include files.
func (w *workspace) except() []string {
	return append([]string{".ralph"}, w.include...)
}

var _ loop.Noticer = (*workspace)(nil)

// Notices implements loop.Noticer.
func (w *workspace) Notices() []string {
	out := w.notices
	w.notices = nil
	return out
}

// Begin implements loop.Workspace.
func (w *workspace) Begin(ctx context.Context, task loop.Task, recorded int) (bool, error) {
	// Nothing runs git in the tree before it is known to be the tree
	// ralph made; a tree that is not is set aside and made again (the
	// attempt that broke it has ended), and the person told where its
	// work is.
	problem, err := w.ensureTree(ctx)
	if problem != "" {
		w.notices = append(w.notices, treeNotice(w.worker, "before task "+task.ID+" began", problem))
	}
	if err != nil {
		return false, err
	}
	// The claim's fence before the tip is read: a landing by an older
	// claim is on the tip read after it, or never lands.
	fence, err := w.raiseFence(ctx, task)
	if err != nil {
		return false, err
	}
	// The tip first (checked to be ralph's): with a remote, keep then
	// reads the tip just fetched.
	tip, err := w.guard.current(ctx)
	if err != nil {
		return false, err
	}
	if _, err := w.keep(ctx); err != nil {
		return false, err
	}
	if landed, err := w.landedAlready(ctx, task, recorded, tip, 0); err != nil || landed {
		return landed, err
	}
	branch := heads + TaskBranchPrefix + RefName(task.ID)
	// An earlier attempt's branch that did not land is kept before the
	// name is reused.
	if old, ok, err := w.git.Resolve(ctx, branch); err != nil {
		return false, err
	} else if ok {
		if _, err := w.keepCommit(ctx, task.ID, old, tip); err != nil {
			return false, err
		}
	}
	if err := w.writeMarker(task.ID); err != nil {
		return false, err
	}
	if err := w.git.Switch(ctx, w.dir, branch, tip); err != nil {
		return false, err
	}
	if err := copyInclude(w.root, w.dir, w.include); err != nil {
		return false, err
	}
	w.task, w.ref, w.base, w.recorded, w.fence = task, branch, tip, recorded, fence
	return false, nil
}

var _ loop.TipTree = (*workspace)(nil)

// ToTip implements loop.TipTree: with no task claimed, the tree becomes
// the integration tip's (detached, no branch moved) after what it held is
// kept as Begin keeps it. The test gate's baseline and the final command
// run there.
func (w *workspace) ToTip(ctx context.Context) error {
	problem, err := w.ensureTree(ctx)
	if problem != "" {
		w.notices = append(w.notices, treeNotice(w.worker, "before a check on the integration tip", problem))
	}
	if err != nil {
		return err
	}
	tip, err := w.guard.current(ctx)
	if err != nil {
		return err
	}
	if _, err := w.keep(ctx); err != nil {
		return err
	}
	if err := w.git.Switch(ctx, w.dir, "", tip); err != nil {
		return err
	}
	return copyInclude(w.root, w.dir, w.include)
}

// landedAlready reports whether the branch holds a landing of task that
// the store's record of the task's completions (recorded) does not
// account for: its work landed — under another claim than generation
// skip, when skip is not 0 — and the task is done. A landing recorded but
// never confirmed counts when tip's history holds its commit (a run
// stopped between the branch moving and the confirmation), and is made
// void when the branch has moved on from the tip it was made on without
// it (it can no longer land).
func (w *workspace) landedAlready(ctx context.Context, task loop.Task, recorded int, tip string, skip int64) (bool, error) {
	branch := w.guard.branch()
	ls, err := w.guard.store.Landings(ctx, loop.LandingQuery{Branch: branch, TaskID: task.ID,
		States: []loop.LandingState{loop.LandingRecorded, loop.LandingLanded}})
	if err != nil {
		return false, err
	}
	for _, l := range ls {
		if l.Completions < recorded || skip != 0 && l.Generation == skip {
			continue
		}
		if l.State == loop.LandingLanded {
			return true, nil
		}
		// A commit this repository lacks is not in the history of tip,
		// whose commits it has.
		_, in, err := w.git.Resolve(ctx, l.Commit)
		if err == nil && in {
			in, err = w.git.IsAncestor(ctx, l.Commit, tip)
		}
		if err != nil {
			return false, err
		}
		switch {
		case in:
			return true, w.guard.store.ConfirmLanding(ctx, branch, l.Commit)
		case l.Parent != tip:
			if err := w.guard.store.VoidLanding(ctx, branch, l.Commit); err != nil {
				return false, err
			}
		}
		// Else another process may be moving the branch to it right now:
		// whichever move comes first decides.
	}
	return false, nil
}

// branchName is the integration branch's short name, with the remote
// where it lives: "ralph/integration", "ralph/integration on origin".
func (w *workspace) branchName() string {
	name := strings.TrimPrefix(w.into, heads)
	if w.remote != "" {
		name += " on " + w.remote
	}
	return name
}

// knownTip returns the integration branch's tip as last seen, without
// reaching the remote: keeping a tree's work must not depend on the
// network. ok is false when there is none.
func (w *workspace) knownTip(ctx context.Context) (string, bool, error) {
	if w.remote == "" {
		return w.git.Resolve(ctx, w.into)
	}
	return w.git.Resolve(ctx, trackingRef(w.remote, w.into))
}

// keep makes sure that nothing the tree holds is lost before it is
// reused or left: changes not committed are committed on top of HEAD, and
// a task branch whose work did not land is kept as an attempt branch,
// whose name it returns ("" when none was needed).
func (w *workspace) keep(ctx context.Context) (string, error) {
	changed, err := w.dirty(ctx)
	if err != nil {
		return "", err
	}
	id, onTask := w.task.ID, w.task.ID != ""
	if !onTask {
		if b := w.readMarker(); b != "" {
			id, onTask = b, true // an attempt a crashed run left
		}
	}
	if !changed && !onTask {
		return "", nil // a clean tree between attempts: nothing to keep
	}
	branch, head, err := w.git.HeadOf(ctx, w.dir)
	if err != nil {
		return "", err
	}
	if !onTask {
		id, onTask = taskOf(branch)
	}
	if changed {
		what := "work left in " + w.worker + "'s tree"
		if onTask {
			what += " by an attempt at task " + id
		}
		c, ok, err := w.git.Commit(ctx, w.dir, head, "ralph: "+what+"\n", w.except())
		var nested *NestedRepoError
		if errors.As(err, &nested) {
			// A repository inside the tree is moved aside, whole, and
			// the rest is kept as usual.
			if err := w.moveAside(nested.Paths); err != nil {
				return "", err
			}
			c, ok, err = w.git.Commit(ctx, w.dir, head, "ralph: "+what+"\n", w.except())
		}
		if err != nil {
			return "", err
		}
		if ok {
			head = c
		}
		if !onTask && ok {
			// Work in a tree that was on no task's branch: kept under the
			// worker's name.
			id, onTask = "unknown-"+w.worker, true
		}
	}
	var kept string
	if onTask {
		tip, _, err := w.knownTip(ctx)
		if err != nil {
			return "", err
		}
		if kept, err = w.keepCommit(ctx, id, head, tip); err != nil {
			return "", err
		}
	}
	w.end()
	return kept, nil
}

// end forgets the attempt under way.
func (w *workspace) end() {
	w.task, w.ref, w.base, w.fence = loop.Task{}, "", "", ""
	w.removeMarker()
}

// follow moves the attempt's branch from old to commit. When someone
// else moved it (another attempt at the task began), the claim decides:
// a stale one stops here; the current one takes the branch back.
func (w *workspace) follow(ctx context.Context, req loop.IntegrateRequest, commit, old string) error {
	err := w.git.SwapRef(ctx, w.ref, commit, old)
	if !errors.Is(err, ErrRefMoved) {
		return err
	}
	if req.Current != nil {
		if err := req.Current(ctx); err != nil {
			return err
		}
	}
	now, _, err := w.git.Resolve(ctx, w.ref)
	if err != nil {
		return err
	}
	if now != "" {
		// What the other attempt left there is kept first.
		if _, err := w.keepCommit(ctx, req.Task.ID, now, ""); err != nil {
			return err
		}
	}
	if now == "" {
		return w.git.CreateRef(ctx, w.ref, commit)
	}
	return w.git.SwapRef(ctx, w.ref, commit, now)
}

// notCheckedOut refuses to move the integration branch while a worktree
// has it checked out: ralph never moves a branch under someone's files.
func (w *workspace) notCheckedOut(ctx context.Context) error {
	out, err := w.git.CheckedOut(ctx)
	if err != nil {
		return err
	}
	if slices.Contains(out, w.into) {
		return fmt.Errorf("the integration branch %s is checked out in a worktree: ralph does not move it under someone's files (switch that worktree away, then build again)", strings.TrimPrefix(w.into, heads))
	}
	return nil
}

// moveInto moves the integration branch from tip to head, and the task's
// fence from the claim's mark to head, in one transaction (fence.go): a
// compare-and-swap of the local refs, or, on a remote, an atomic push
// that only fast-forwards the branch. Either way ErrRefMoved is a lost
// race, or a fence another claim moved.
func (w *workspace) moveInto(ctx context.Context, head, tip string) error {
	branch, fence := w.landMoves(head, tip)
	if w.remote == "" {
		return w.git.SwapRefs(ctx, branch, fence)
	}
	return w.git.Push(ctx, PushParams{Remote: w.remote, Ref: w.into, Commit: head, Mode: PushFastForward, Old: tip, Guard: &fence})
}

// landedOnRemote follows a landing on the remote: the task's branch is
// pushed there, and the local integration branch and remote-tracking ref
// follow the remote's. The push only fast-forwards: the remote's task
// branch is only ever pushed so, at a landed commit, and every landing
// is made on a tip that holds the earlier ones.
func (w *workspace) landedOnRemote(ctx context.Context, head string) error {
	if err := w.git.Push(ctx, PushParams{Remote: w.remote, Ref: w.ref, Commit: head, Mode: PushFastForward}); err != nil {
		return fmt.Errorf("task %s landed on %s as %s, but its branch could not be pushed: %w", w.task.ID, w.branchName(), head, err)
	}
	if err := advance(ctx, w.git, trackingRef(w.remote, w.into), head); err != nil {
		return err
	}
	return advanceBranch(ctx, w.git, w.into, head)
}

// advance moves the local ref forward to commit, or makes it: only when
// the ref names an ancestor of commit; a ref with commits that commit
// has not is left as it is.
func advance(ctx context.Context, g Git, ref, commit string) error {
	for {
		cur, ok, err := g.Resolve(ctx, ref)
		if err != nil {
			return err
		}
		if !ok {
			err := g.CreateRef(ctx, ref, commit)
			if errors.Is(err, ErrRefExists) {
				continue
			}
			return err
		}
		if cur == commit {
			return nil
		}
		if up, err := g.IsAncestor(ctx, cur, commit); err != nil || !up {
			return err
		}
		err = g.SwapRef(ctx, ref, commit, cur)
		if !errors.Is(err, ErrRefMoved) {
			return err
		}
	}
}

// advanceBranch is advance for a local branch, which is not moved while a
// worktree has it checked out.
func advanceBranch(ctx context.Context, g Git, ref, commit string) error {
	out, err := g.CheckedOut(ctx)
	if err != nil || slices.Contains(out, ref) {
		return err
	}
	return advance(ctx, g, ref, commit)
}

// moveAside moves repositories an agent made inside the tree to
// <tree>.nested/<time>/<path>, beside the tree, whole: their files are in
// no commit, and the next attempt must not find them.
func (w *workspace) moveAside(paths []string) error {
	aside := filepath.Join(w.dir+".nested", strconv.FormatInt(time.Now().UnixNano(), 10))
	for _, p := range paths {
		dst := filepath.Join(aside, filepath.FromSlash(p))
		// Moved without following a link (a <tree>.nested the agent
		// planted as one would send the repository elsewhere: it is
		// removed first, the link and not its target).
		base := treeBase(w.root, w.dir)
		if err := removeLinks(base, filepath.Dir(w.dir), filepath.Base(w.dir)+".nested"); err != nil {
			return err
		}
		if err := moveNoFollow(base, filepath.Join(w.dir, filepath.FromSlash(p)), dst); err != nil {
			return fmt.Errorf("moving the repository %s out of %s: %w", p, w.dir, err)
		}
	}
	return nil
}

// dirty reports whether the tree has changes that are not ralph's own.
func (w *workspace) dirty(ctx context.Context) (bool, error) {
	paths, err := w.git.Status(ctx, w.dir)
	if err != nil {
		return false, err
	}
	for _, p := range paths {
		if !excluded(p, w.except()) {
			return true, nil
		}
	}
	return false, nil
}

// excluded reports whether path is one of except or under one.
func excluded(path string, except []string) bool {
	for _, e := range except {
		if path == e || strings.HasPrefix(path, e+"/") {
			return true
		}
	}
	return false
}

// taskOf returns the task id a task branch names.
func taskOf(branch string) (string, bool) {
	enc, ok := strings.CutPrefix(branch, heads+TaskBranchPrefix)
	if !ok || enc == "" {
		return "", false
	}
	id, err := decodeRefName(enc)
	return id, err == nil
}

func decodeRefName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("bad escape in %q", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape in %q", s)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}

// keepCommit keeps commit, an attempt at task id, as the next attempt
// branch ralph/attempt/<id>/<n> — unless it is on the integration branch
// already (tip) or an attempt branch has it — and returns that branch
// ("" when none was needed).
//
// With a remote the branch is pushed there too, made only where the
// remote has no branch of that name (PushCreate), so that the machines'
// attempts never take each other's numbers: n counts past the remote's
// attempt branches as well as this repository's. The local branch is made
// even when the remote cannot be reached — the work is kept here — and
// the error then says so.
func (w *workspace) keepCommit(ctx context.Context, id, commit, tip string) (string, error) {
	if tip != "" {
		if in, err := w.git.IsAncestor(ctx, commit, tip); err != nil || in {
			return "", err
		}
	}
	prefix := heads + AttemptBranchPrefix + RefName(id) + "/"
	branches, err := w.git.Branches(ctx)
	if err != nil {
		return "", err
	}
	var refs []string
	for ref := range branches {
		if strings.HasPrefix(ref, prefix) {
			refs = append(refs, ref)
		}
	}
	slices.Sort(refs)
	n := 0
	number := func(ref string) {
		if k, err := strconv.Atoi(strings.TrimPrefix(ref, prefix)); err == nil && k > n {
			n = k
		}
	}
	for _, ref := range refs {
		if branches[ref] == commit {
			// Kept already; on the remote too unless another machine's
			// attempt took the name there, when it is kept anew below.
			name := strings.TrimPrefix(ref, heads)
			switch err := w.publishAttempt(ctx, ref, commit); {
			case err == nil:
				return name, nil
			case !errors.Is(err, ErrRefExists):
				return name, fmt.Errorf("the attempt at task %s is kept on %s here but not on %s: %w", id, name, w.remote, err)
			}
		}
		number(ref)
	}
	var remoteErr error
	if w.remote != "" {
		var theirs map[string]string
		theirs, remoteErr = w.git.RemoteRefs(ctx, w.remote, prefix)
		for ref := range theirs {
			number(ref)
		}
	}
	for {
		n++
		ref := prefix + strconv.Itoa(n)
		if w.remote != "" && remoteErr == nil {
			err := w.publishAttempt(ctx, ref, commit)
			if errors.Is(err, ErrRefExists) {
				continue // another machine kept one just now
			}
			remoteErr = err
		}
		err := w.git.CreateRef(ctx, ref, commit)
		if errors.Is(err, ErrRefExists) {
			continue // another worker kept one just now
		}
		if err != nil {
			return "", err
		}
		name := strings.TrimPrefix(ref, heads)
		if remoteErr != nil {
			return name, fmt.Errorf("the attempt at task %s is kept on %s here but not on %s: %w", id, name, w.remote, remoteErr)
		}
		return name, nil
	}
}

// publishAttempt makes the attempt branch ref on the remote, if there is
// one: ErrRefExists when the remote has that name for another commit.
func (w *workspace) publishAttempt(ctx context.Context, ref, commit string) error {
	if w.remote == "" {
		return nil
	}
	return w.git.Push(ctx, PushParams{Remote: w.remote, Ref: ref, Commit: commit, Mode: PushCreate})
}

var _ loop.TreeChecker = (*workspace)(nil)

// CheckTree implements loop.TreeChecker: a tree that is not the worktree
// ralph made is set aside or repaired (ensureTree), what a repaired tree
// holds kept on an attempt branch, and the attempt is task trouble.
func (w *workspace) CheckTree(ctx context.Context) error {
	problem, err := w.ensureTree(ctx)
	if err != nil || problem == "" {
		return err
	}
	kept, err := w.keep(ctx)
	if err != nil {
		return err
	}
	w.end()
	return &loop.IntegrationError{Reason: problem, Attempt: kept}
}

// Integrate implements loop.Workspace: the tree checked to be the
// worktree ralph made, the attempt's change committed with the task's
// trailers as one commit on the attempt's base (commitWork: the agent's
// own changes, whatever it did to its HEAD), then, under the integration
// lock and while the claim is current, replayed onto the integration tip
// (git rebase) when the tip moved, checked by the test gate again then,
// recorded as a landing, and the branch moved to it by compare-and-swap;
// a lost race goes round again from the new tip. A tip that is not
// ralph's stops it (*TipError).
func (w *workspace) Integrate(ctx context.Context, req loop.IntegrateRequest) (loop.IntegrateResult, error) {
	task := req.Task
	if w.task.ID != task.ID || w.base == "" {
		return loop.IntegrateResult{}, fmt.Errorf("no attempt at task %s began in %s", task.ID, w.dir)
	}
	// Again, right before git runs there (the loop asked before the
	// gates; a process the agent left behind may have moved it since).
	if err := w.CheckTree(ctx); err != nil {
		return loop.IntegrateResult{}, err
	}
	head, changed, err := w.commitWork(ctx, req)
	if err != nil || !changed {
		if err == nil {
			w.end()
		}
		return loop.IntegrateResult{}, err
	}
	w.land.Lock()
	defer w.land.Unlock()
	branch := w.guard.branch()
	// refAt is where the attempt's branch is: it follows the attempt's
	// commit once, right before the integration branch moves.
	base, replayed, refAt := w.base, false, w.base
	// held is a landing recorded whose move the fence refused and that
	// is tried again while the tip stays where it was.
	held, retaken := "", 0
	for {
		if err := ctx.Err(); err != nil {
			return loop.IntegrateResult{}, err
		}
		tip, err := w.guard.current(ctx)
		if err != nil {
			return loop.IntegrateResult{}, err
		}
		if held != "" && tip != base {
			if err := w.guard.store.VoidLanding(ctx, branch, held); err != nil {
				return loop.IntegrateResult{}, err
			}
			held = ""
		}
		// Work that landed since the attempt began includes this task's
		// only when another claim landed it (one that began before this
		// one's fence went up): the task's work is on the branch, and
		// this attempt's is kept when the tree is next used.
		if landed, err := w.landedAlready(ctx, task, w.recorded, tip, task.Generation); err != nil || landed {
			return loop.IntegrateResult{Elsewhere: landed}, err
		}
		if tip != base {
			moved, err := w.git.Rebase(ctx, w.dir, base, tip)
			var conflict *ConflictError
			if errors.As(err, &conflict) {
				return loop.IntegrateResult{}, w.conflict(ctx, head, tip, "conflict with the integration branch in "+joinPaths(conflict.Paths))
			}
			if err != nil {
				return loop.IntegrateResult{}, err
			}
			head, base, replayed = moved, tip, true
			if req.Gate != nil && head != tip {
				if err := req.Gate(ctx); err != nil {
					if ctx.Err() != nil {
						return loop.IntegrateResult{}, ctx.Err()
					}
					return loop.IntegrateResult{}, w.trouble(ctx, head, tip, "the test gate failed after replaying onto the moved tip: "+err.Error())
				}
			}
		}
		if head == tip {
			// The replay changed nothing: the task's work is on the tip
			// already (another task made the same change, or the agent
			// brought the tip's commits into its tree). Nothing to land:
			// done, no commit, as for an attempt that changed nothing.
			w.end()
			return loop.IntegrateResult{Replayed: replayed}, nil
		}
		// Right before the branch moves (every time round: a replay and
		// its gate take time): the claim is still the task's, and — for
		// a local branch — nobody checked the branch out meanwhile (the
		// remote's branch is checked out nowhere; the local one follows
		// it only where it is not checked out).
		if req.Current != nil {
			if err := req.Current(ctx); err != nil {
				return loop.IntegrateResult{}, err
			}
		}
		if w.remote == "" {
			if err := w.notCheckedOut(ctx); err != nil {
				return loop.IntegrateResult{}, err
			}
		}
		if refAt != head {
			if err := w.follow(ctx, req, head, refAt); err != nil {
				return loop.IntegrateResult{}, err
			}
			refAt = head
		}
		// Recorded before the branch moves, confirmed after: a crash
		// between leaves a recorded landing that the next look at the
		// branch finds on it, or not.
		if err := w.guard.store.RecordLanding(ctx, loop.Landing{Branch: branch, Commit: head, Parent: tip,
			TaskID: task.ID, Generation: task.Generation, Completions: w.recorded}); err != nil {
			return loop.IntegrateResult{}, err
		}
		err = w.moveInto(ctx, head, tip)
		if errors.Is(err, ErrRefMoved) {
			// Another process or machine landed first: this commit can
			// no longer land; replay onto the new tip. Or another claim
			// moved the fence: a stale claim gives up, the current one
			// puts its mark back and tries again.
			fenced, ferr := w.refence(ctx, req)
			if fenced && ferr == nil {
				if retaken++; retaken > maxRetakes {
					// Something keeps moving it: an agent's process
					// left behind, say. Not a race to go on losing.
					if err := w.guard.store.VoidLanding(ctx, branch, head); err != nil {
						return loop.IntegrateResult{}, err
					}
					return loop.IntegrateResult{}, w.trouble(ctx, head, tip, fmt.Sprintf("the task's claim fence (%s) was moved by someone else %d times while its work was landing", fenceRef(w.into, task.ID), retaken))
				}
				held = head
				continue
			}
			if err := w.guard.store.VoidLanding(ctx, branch, head); err != nil {
				return loop.IntegrateResult{}, err
			}
			if ferr != nil {
				return loop.IntegrateResult{}, ferr
			}
			continue
		}
		if err != nil {
			return loop.IntegrateResult{}, err
		}
		if err := w.guard.store.ConfirmLanding(ctx, branch, head); err != nil {
			return loop.IntegrateResult{}, fmt.Errorf("task %s landed on %s as %s, but the store could not confirm it (the next build will): %w", task.ID, w.branchName(), short(head), err)
		}
		if w.remote != "" {
			if err := w.landedOnRemote(ctx, head); err != nil {
				return loop.IntegrateResult{}, err
			}
		}
		w.end()
		return loop.IntegrateResult{Commit: head, Replayed: replayed}, nil
	}
}

// commitWork commits the attempt's work as one commit on the attempt's base
// S, with the task's trailers (ARCHITECTURE.md §7: an attempt whose HEAD
// left S lands as the agent's own changes or is refused, never as a revert
// of work already landed). Let E be where the agent's HEAD ended
// (req.Checkout's End when the runner reports one, else the tree's own
// HEAD):
//
//   - E is S or descends from S: the tree, against S (the agent's
//     commits folded in).
//   - E is an ancestor of S (git reset backward): the agent's changes
//     since E — the tree against E — replayed onto S by a 3-way merge; a
//     conflict is task trouble.
//   - Anything else (git checkout of another commit, a rebase, an amend,
//     an orphan branch, a commit this repository lacks): task trouble
//     naming what the agent did, its work kept on an attempt branch.
//
// changed is false when there is nothing of the agent's to land.
func (w *workspace) commitWork(ctx context.Context, req loop.IntegrateRequest) (head string, changed bool, err error) {
	start, msg := w.base, commitMessage(req.Task, req.Summary)
	end, descends, err := w.agentEnd(ctx, req.Checkout)
	if err != nil {
		return "", false, err
	}
	commit := func(base string) (string, bool, error) {
		c, changed, err := w.git.Commit(ctx, w.dir, base, msg, w.except())
		var nested *NestedRepoError
		if errors.As(err, &nested) {
			return "", false, &loop.IntegrationError{Reason: nested.Error()}
		}
		return c, changed, err
	}
	if descends {
		return commit(start)
	}
	known := false
	if end != "" {
		if _, known, err = w.git.Resolve(ctx, end); err != nil {
			return "", false, err
		}
	}
	back := false
	if known {
		if back, err = w.git.IsAncestor(ctx, end, start); err != nil {
			return "", false, err
		}
	}
	if back {
		c, changed, err := commit(end)
		if err != nil || !changed {
			return c, changed, err
		}
		head, err := w.git.Rebase(ctx, w.dir, end, start)
		var conflict *ConflictError
		if errors.As(err, &conflict) {
			return "", false, w.trouble(ctx, c, "", fmt.Sprintf("the agent moved its HEAD back from %s to %s (a git reset), and its changes from there conflict with the work since in %s; ralph lands only the agent's own changes, never a revert of landed work",
				short(start), short(end), joinPaths(conflict.Paths)))
		}
		// Replayed onto S, the agent's changes may be S's already.
		return head, err == nil && head != start, err
	}
	// Kept as the agent left it: on its HEAD where the repository has
	// that commit, else on the attempt's base.
	base, did := start, "to a commit this repository does not have"
	switch {
	case end == "":
		did = "to no commit (an orphan branch, or a HEAD git cannot read)"
	case known:
		base, did = end, "to "+short(end)+", which neither descends from it nor is one of its ancestors (a git checkout, rebase or commit --amend)"
	}
	c, changed, err := commit(base)
	if err != nil {
		return "", false, err
	}
	if !changed {
		c = base
	}
	reason := fmt.Sprintf("the agent moved its HEAD from %s, the commit its attempt began from, %s: ralph does not land that; work from %s", short(start), did, short(start))
	return "", false, w.trouble(ctx, c, "", reason)
}

// agentEnd returns the commit the agent's HEAD ended at ("" when it names
// none), and whether it is the attempt's base or descends from it: from
// the runner's report of the agent's private checkout when there is one
// (the tree's own git metadata is ralph's then), else from the tree's
// HEAD.
func (w *workspace) agentEnd(ctx context.Context, co *loop.Checkout) (end string, descends bool, err error) {
	start := w.base
	if co != nil {
		if co.Descends && co.Start == start {
			return co.End, true, nil
		}
		if co.Descends && co.Start != "" {
			// A checkout that began elsewhere: it descends from the
			// attempt's base if where it began does.
			if _, ok, err := w.git.Resolve(ctx, co.Start); err != nil || !ok {
				return co.End, false, err
			}
			up, err := w.git.IsAncestor(ctx, start, co.Start)
			return co.End, up, err
		}
		return co.End, false, nil
	}
	_, end, err = w.git.HeadOf(ctx, w.dir)
	if err != nil {
		// A HEAD that names no commit (an orphan branch) or that git
		// cannot read: the agent's doing, told as such.
		return "", false, nil
	}
	if end == start {
		return end, true, nil
	}
	up, err := w.git.IsAncestor(ctx, start, end)
	return end, up, err
}

// trouble keeps a failed integration's commit on an attempt branch and
// returns the task trouble.
func (w *workspace) trouble(ctx context.Context, head, tip, reason string) error {
	kept, err := w.keepCommit(ctx, w.task.ID, head, tip)
	if err != nil {
		return err
	}
	w.end()
	return &loop.IntegrationError{Reason: reason, Attempt: kept}
}

// conflict is trouble for work that conflicts with what other workers
// landed meanwhile: a race lost, not the work's fault
// (loop.IntegrationError.Conflict).
func (w *workspace) conflict(ctx context.Context, head, tip, reason string) error {
	err := w.trouble(ctx, head, tip, reason)
	var ie *loop.IntegrationError
	if errors.As(err, &ie) {
		ie.Conflict = true
	}
	return err
}

// commitMessage is a landed task's commit message: its title, the
// agent's summary, and the trailers that make landing it idempotent.
func commitMessage(task loop.Task, summary string) string {
	var b strings.Builder
	b.WriteString(oneLine(task.Title))
	b.WriteString("\n\n")
	if s := strings.TrimSpace(summary); s != "" {
		b.WriteString(s)
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "%s: %s\n%s: %d\n", TrailerTask, task.ID, TrailerGeneration, task.Generation)
	return b.String()
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "ralph task"
	}
	return s
}

// readInclude reads .ralph/worktree-include: one path or glob a line,
// relative to the project root; blank lines and lines starting with '#'
// are skipped. It returns the regular files they match. A missing file is
// no files.
func readInclude(root string) ([]string, error) {
	data, err := safefile.ReadFile(root, filepath.Join(".ralph", "worktree-include"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		pat := strings.TrimSpace(line)
		if pat == "" || strings.HasPrefix(pat, "#") {
			continue
		}
		if filepath.IsAbs(pat) || slices.Contains(strings.Split(filepath.ToSlash(pat), "/"), "..") {
			return nil, fmt.Errorf(".ralph/worktree-include: %q: paths are relative to the project and stay in it", pat)
		}
		matches, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			return nil, fmt.Errorf(".ralph/worktree-include: %q: %w", pat, err)
		}
		for _, m := range matches {
			rel, err := filepath.Rel(root, m)
			if err != nil {
				return nil, err
			}
			if ok, err := includeSource(root, rel); err != nil {
				return nil, fmt.Errorf(".ralph/worktree-include: %w", err)
			} else if !ok {
				continue
			}
			rel = filepath.ToSlash(rel)
			if !slices.Contains(out, rel) {
				out = append(out, rel)
			}
		}
	}
	return out, nil
}

// runSetup runs the --setup command in dir with sh -c, through commands
// (the loop's Commands: in the agent's sandbox when the build has one;
// useAPIKey is the build's --use-api-key).
func runSetup(ctx context.Context, commands loop.CommandRunner, dir, cmd string, env []string, useAPIKey bool) error {
	if commands == nil {
		commands = loop.HostCommands
	}
	out, err := commands.RunCommand(ctx, loop.CommandRequest{Command: cmd, Dir: dir, Env: env, UseAPIKey: useAPIKey})
	if err != nil {
		return fmt.Errorf("setup %q in %s: %v\n%s", cmd, dir, err, tailLines(out, 20))
	}
	return nil
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
