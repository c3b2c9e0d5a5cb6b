package parallel

import (
	"context"
	"errors"
	"fmt"
)

// Git is the seam between the pool's policy and git: everything the
// worker pool and the integration step ask of a repository. ExecGit runs
// the git binary; tests use a fake.
//
// Refs are full names ("refs/heads/ralph/integration"); commits are full
// hex object names. Dir arguments are the working trees of worktrees that
// AddWorktree made (or the repository's own); an aside argument
// (RepairWorktree, SetAside) lies beside dir, below the same directory of
// trees. Package gittest is the contract's conformance suite.
type Git interface {
	// Check reports an error unless Root is inside a git work tree whose
	// HEAD names a commit: ErrNotRepository or ErrNoCommit, wrapped with
	// details.
	Check(ctx context.Context) error
	// Resolve returns the commit ref points at, or ok false when the ref
	// does not exist. A commit's name resolves to itself, and "HEAD" to
	// the commit HEAD of the repository's own working tree names.
	Resolve(ctx context.Context, ref string) (commit string, ok bool, err error)
	// CheckedOut returns the branches (full ref names) checked out in any
	// worktree of the repository, the main one included.
	CheckedOut(ctx context.Context) ([]string, error)
	// CreateRef makes ref point at commit, failing with ErrRefExists if
	// ref exists already.
	CreateRef(ctx context.Context, ref, commit string) error
	// SwapRef moves ref from old to new atomically (git update-ref REF NEW
	// OLD); when ref no longer points at old it changes nothing and
	// returns ErrRefMoved.
	SwapRef(ctx context.Context, ref, new, old string) error
	// SwapRefs moves several refs in one transaction: each from its Old
	// to its New, or — when any is not at its Old (a missing ref counts
	// as moved) — none, and the error wraps ErrRefMoved.
	SwapRefs(ctx context.Context, moves ...RefMove) error
	// SetRef points ref at commit, whatever it named before; a missing
	// ref is made.
	SetRef(ctx context.Context, ref, commit string) error
	// Mark returns the commit that stands for text, written to the
	// repository: the empty tree, no parent, text as its message and a
	// fixed author, committer and time, so that one text names one
	// commit in every clone of the repository (a claim's fence, see
	// ARCHITECTURE.md §7).
	Mark(ctx context.Context, text string) (string, error)
	// IsAncestor reports whether commit a is an ancestor of (or equal to) b.
	IsAncestor(ctx context.Context, a, b string) (bool, error)
	// Trailers returns the values of trailer key ("Ralph-Task") of the
	// commits reachable from tip but not from base (base "": all of
	// them), newest first; commits without that trailer add nothing.
	Trailers(ctx context.Context, base, tip, key string) ([]string, error)
	// Commits returns the commits reachable from tip but not from base
	// (base "": all of them), newest first.
	Commits(ctx context.Context, base, tip string) ([]string, error)
	// Branches returns the repository's branches (full ref names) and
	// the commits they name.
	Branches(ctx context.Context) (map[string]string, error)
	// Refs returns the refs under prefix ("refs/ralph/claims/"; whole
	// components match) and the commits they name.
	Refs(ctx context.Context, prefix string) (map[string]string, error)
	// Cherry returns the commits reachable from head but not from
	// upstream whose change no commit of upstream (not reachable from
	// head) makes as well — git cherry's "+" lines: the work of head that
	// did not land on upstream, patch-equivalent copies (a rebased
	// landing) counting as landed, in no promised order (Clean counts
	// them); none when all landed.
	Cherry(ctx context.Context, upstream, head string) ([]string, error)
	// DeleteRef deletes ref while it names old; when it names something
	// else, or nothing, it changes nothing and returns ErrRefMoved.
	DeleteRef(ctx context.Context, ref, old string) error
	// Parents returns commit's parents, the first parent first (none for
	// a root commit).
	Parents(ctx context.Context, commit string) ([]string, error)
	// Merge makes a merge commit of theirs into ours, with parents ours
	// and theirs in that order and message, moving no ref and writing no
	// tree. On a conflict it makes nothing and returns the conflicting
	// paths in a *ConflictError.
	Merge(ctx context.Context, ours, theirs, message string) (string, error)

	// AddWorktree makes a new worktree at dir with a detached HEAD at
	// commit (git worktree add --detach). dir must not exist; a worktree
	// the repository still has registered there (its directory set
	// aside) is replaced.
	AddWorktree(ctx context.Context, dir, commit string) error
	// CheckWorktree reports whether dir is a worktree AddWorktree made
	// in this repository, following no link: a real directory, not a
	// symbolic link, whose .git is the file naming the git directory the
	// repository keeps for that directory — the one the git commands
	// run in dir are given, so that a dir accepted here is one they
	// accept. Any other dir comes back as a *WorktreeError; other errors
	// are failures to look.
	CheckWorktree(ctx context.Context, dir string) error
	// RepairWorktree mends a worktree of which only .git is broken
	// (WorktreeError.GitFileOnly): whatever is at dir/.git is moved, not
	// followed, to aside/.git, and the file naming dir's git directory
	// written in its place. No link on the way to dir or to aside is
	// followed: one is an error (safefile.ErrLink), nothing moved.
	RepairWorktree(ctx context.Context, dir, aside string) error
	// SetAside moves dir — a directory, or a link, which is moved and not
	// followed — to aside, whole, making aside's parents; the worktree
	// the repository has registered at dir is then missing, and
	// AddWorktree makes it again. No link on the way to dir or to aside
	// is followed: one is an error (safefile.ErrLink), nothing moved.
	SetAside(ctx context.Context, dir, aside string) error
	// RemoveWorktree removes the worktree at dir, its directory and the
	// repository's record of it; a tree with changes or untracked files
	// that are not ignored is refused, nothing removed.
	RemoveWorktree(ctx context.Context, dir string) error
	// HeadOf returns the branch dir's HEAD is on (a full ref name; ""
	// when HEAD is detached) and the commit HEAD names.
	HeadOf(ctx context.Context, dir string) (branch, commit string, err error)
	// Status returns the paths a worktree's `git status --porcelain`
	// lists (changed, staged, untracked not ignored), nil when clean.
	Status(ctx context.Context, dir string) ([]string, error)
	// Switch detaches dir's HEAD at commit and makes its tree that
	// commit's — every tracked file reset, untracked files that are not
	// ignored removed (ignored files such as .env or node_modules stay,
	// and so do repositories inside the tree) —
	// and points branch ref at commit. The branch is not checked out:
	// any worktree may take up any task's branch next. A ref some
	// worktree has checked out is refused. An empty ref points no branch:
	// the tree is only made commit's (loop.TipTree).
	Switch(ctx context.Context, dir, ref, commit string) error
	// Commit records everything in dir's tree that differs from base —
	// tracked changes, deletions, untracked files that are not ignored,
	// and commits the agent made on top of base — as one commit whose
	// parent is base, with message, leaving HEAD (and the branch HEAD is
	// on, if any) at it. except lists paths never committed (copied
	// worktree-include files). changed is false, and nothing is
	// committed, when the tree equals base's. A repository inside the
	// tree is refused with a *NestedRepoError, committing nothing.
	Commit(ctx context.Context, dir, base, message string, except []string) (commit string, changed bool, err error)
	// Rebase replays the commits base..HEAD of dir onto onto (git rebase
	// --onto). On a conflict it aborts, leaving dir as it was, and returns
	// the conflicting paths in a *ConflictError.
	Rebase(ctx context.Context, dir, base, onto string) (head string, err error)

	// The remote's side, for builds on several machines (Config.Remote):
	// remote is the name of one of the repository's remotes; ref a full
	// branch name as the remote has it ("refs/heads/ralph/integration").

	// CheckRemote reports an error wrapping ErrNoRemote unless the
	// repository has a remote of that name. It does not reach the remote.
	CheckRemote(ctx context.Context, remote string) error
	// Fetch brings branch ref of remote, with the commits it holds, into
	// the repository as refs/remotes/<remote>/<branch> and returns the
	// commit it names; ok is false, and nothing changes, when the remote
	// has no such branch. Fetching is safe from several goroutines.
	Fetch(ctx context.Context, remote, ref string) (commit string, ok bool, err error)
	// RemoteRefs returns the refs of remote under prefix
	// ("refs/heads/ralph/attempt/x/") and the commits they name, as the
	// remote has them now; it fetches nothing.
	RemoteRefs(ctx context.Context, remote, prefix string) (map[string]string, error)
	// Push sets p.Ref on p.Remote to p.Commit, a commit of the repository,
	// as p.Mode says. A remote already at p.Commit is success. The
	// refusals that are races come back as ErrRefMoved (PushFastForward:
	// the remote's ref is no longer at p.Old, and not at an ancestor of
	// p.Commit) and ErrRefExists (PushCreate); any other failure, the
	// remote's hooks refusing included, is a git error.
	Push(ctx context.Context, p PushParams) error
}

// A RefMove is one ref's compare-and-swap: from Old to New.
type RefMove struct {
	Ref, New, Old string
}

// PushParams is one ref to set on a remote (Git.Push).
type PushParams struct {
	Remote string
	// Ref is the ref on the remote, a full name under refs/heads/ (or,
	// with PushCreate and PushReplace, under refs/ralph/: ralph's own
	// refs).
	Ref string
	// Commit is what Ref is to name.
	Commit string
	// Mode says which of the remote's refs may be replaced; ""
	// is PushFastForward.
	Mode PushMode
	// Old is where the caller last saw Ref on the remote (after a Fetch),
	// "" when it saw none: with PushFastForward, a push the remote
	// refused after it moved from Old is ErrRefMoved; with PushReplace,
	// the push replaces Ref only while it names Old ("": whatever it
	// names).
	Old string
	// Guard, when set, is a ref of ralph's own (under refs/ralph/) that
	// the same push moves from its Old to its New, atomically with Ref
	// (git push --atomic): the remote takes both or neither. A remote
	// where Guard is not at its Old refuses both, ErrRefMoved.
	Guard *RefMove
}

// A PushMode says which of a remote's refs a push may replace.
type PushMode string

// Push modes.
const (
	// PushFastForward moves the ref only forward, from an ancestor of the
	// new commit (or creates it): git push without --force, the remote's
	// own compare-and-swap.
	PushFastForward PushMode = "fast-forward"
	// PushCreate makes a ref that does not exist on the remote (git push
	// --force-with-lease=REF: with nothing expected).
	PushCreate PushMode = "create"
	// PushReplace sets a ref of ralph's own (under refs/ralph/) whatever
	// it names (git push +COMMIT:REF), or, with Old, only while it names
	// Old (--force-with-lease=REF:OLD; else ErrRefMoved).
	PushReplace PushMode = "replace"
)

// PushModes lists the push modes.
func PushModes() []PushMode { return []PushMode{PushFastForward, PushCreate, PushReplace} }

// headCommit returns the commit HEAD of the repository's own working tree
// names (Resolve "HEAD"), ErrNoCommit when it names none.
func headCommit(ctx context.Context, g Git) (string, error) {
	c, ok, err := g.Resolve(ctx, "HEAD")
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("parallel: %w: HEAD names no commit", ErrNoCommit)
	}
	return c, nil
}

// Errors of Git implementations.
var (
	ErrNotRepository = errors.New("not a git repository")
	ErrNoCommit      = errors.New("the repository has no commit yet")
	ErrRefExists     = errors.New("ref exists already")
	ErrRefMoved      = errors.New("ref moved")
	ErrNoRemote      = errors.New("no such remote")
)

// A NestedRepoError is a Commit refused because the tree holds git
// repositories of its own (an agent ran git init, or a scaffolding tool
// did): git would record each as a gitlink and none of its files.
type NestedRepoError struct {
	// Paths are the repositories' directories, relative to the tree.
	Paths []string
}

func (e *NestedRepoError) Error() string {
	return "git repositories inside the tree: " + joinPaths(e.Paths) + " (ralph lands files, not repositories: remove their .git)"
}

// A ConflictError is a rebase that stopped on conflicts.
type ConflictError struct {
	// Paths are the conflicting files, relative to the worktree.
	Paths []string
}

func (e *ConflictError) Error() string {
	return "conflict in " + joinPaths(e.Paths)
}

func joinPaths(p []string) string {
	const most = 20
	s := ""
	for i, x := range p {
		if i == most {
			return s + ", …"
		}
		if i > 0 {
			s += ", "
		}
		s += x
	}
	return s
}
