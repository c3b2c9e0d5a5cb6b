package parallel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ralph-dev/ralph/hostgit"
)

// ExecGit is Git over the git binary, for the repository whose working
// tree contains Root.
//
// Every command is built by package hostgit: run in DIR with GIT_DIR,
// GIT_COMMON_DIR and GIT_WORK_TREE set to the repository found from Root
// when ExecGit is first used (a worker's tree: the linked working tree
// the common directory records at that path, never what the tree's own
// .git file says, and refused when dir is no real directory),
// GIT_TERMINAL_PROMPT=0 (never ask for credentials),
// LC_ALL=C, an editor that accepts what it is given (nothing ralph runs
// may wait for a person), without the GIT_DIR family of variables a
// surrounding git (a hook running ralph) may have set, and with every
// program the repository's own configuration names — hooks, fsmonitor,
// filters, merge drivers, credential helpers, … — blanked, the user's
// global ones kept (see hostgit). Commands that would look inside a
// nested repository, with its configuration, are not used: Status passes
// --ignore-submodules=dirty and Commit stages with hostgit's StageAll,
// not git add.
//
// The user's configuration is kept, except where it would make ralph's own
// commits and rebases fail or stop: see Commit and Rebase. The user's
// identity is kept too; only where the configuration has no user.name or
// user.email does ralph supply "ralph <ralph@localhost>".
//
// Methods may be called from several goroutines; calls on one worktree dir
// should not overlap, as git's index lock allows one writer. A cancelled
// context stops git with SIGTERM, on which git removes its lock files, and
// the method returns an error wrapping the context's.
//
// It is tested with git 2.39. Trailers needs git 2.21 or later (its
// %(trailers:key=…,separator=…) format); Rebase uses git merge-tree
// --write-tree where git has it (2.38) and git rebase otherwise.
type ExecGit struct {
	Root string // any directory inside the repository's main working tree
	Bin  string // git executable; "" means "git" from PATH

	// ids caches identity by directory: one git config a worktree, not
	// one a commit (a change of user.name during a run is seen by the
	// next ExecGit).
	ids sync.Map
	// remote serialises this ExecGit's fetches and pushes: each updates
	// remote-tracking refs, and two git processes updating one ref at
	// once would fail on its lock.
	remote sync.Mutex
	// repo is the repository Root is in, found once (hostgit.Find).
	findOnce sync.Once
	repo     *hostgit.Repo
	findErr  error
	// emptyTree is the empty tree's object name once Mark wrote it.
	emptyTreeMu sync.Mutex
	emptyTree   string
}

// hostRepo is the repository's working tree that holds dir.
func (g *ExecGit) hostRepo(dir string) (*hostgit.Repo, error) {
	g.findOnce.Do(func() {
		g.repo, g.findErr = hostgit.Find(g.Root)
		if g.findErr == nil {
			g.repo.Bin = g.Bin
		}
	})
	if g.findErr != nil {
		return nil, g.findErr
	}
	if dir == g.Root {
		return g.repo, nil
	}
	// Any other directory is a worker's tree: a linked working tree the
	// common directory records at that path, and a real directory — never
	// the main tree, whatever dir holds.
	return g.repo.Linked(dir)
}

var _ Git = (*ExecGit)(nil)

// Check reports ErrNotRepository when Root is not inside a git work tree
// and ErrNoCommit when HEAD names no commit yet (a new repository).
func (g *ExecGit) Check(ctx context.Context) error {
	if _, err := g.hostRepo(g.Root); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrNotRepository, g.Root, err)
	}
	out, err := g.run(ctx, g.Root, nil, "rev-parse", "--is-inside-work-tree")
	if err != nil {
		var ge *gitError
		if errors.As(err, &ge) && ge.exitCode() > 0 {
			return fmt.Errorf("%w: %s: %v", ErrNotRepository, g.Root, err)
		}
		return err
	}
	if strings.TrimSpace(out) != "true" {
		return fmt.Errorf("%w: %s is not inside a work tree", ErrNotRepository, g.Root)
	}
	_, ok, err := g.resolve(ctx, g.Root, "HEAD")
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: HEAD of %s names no commit", ErrNoCommit, g.Root)
	}
	return nil
}

// Head returns the commit HEAD of Root's working tree names, as
// Resolve(ctx, "HEAD") does (Git has no Head of its own).
func (g *ExecGit) Head(ctx context.Context) (string, error) {
	return g.head(ctx, g.Root)
}

func (g *ExecGit) head(ctx context.Context, dir string) (string, error) {
	out, err := g.run(ctx, dir, nil, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// Resolve returns the commit ref points at, or ok false when there is no
// such ref (or it names something other than a commit).
func (g *ExecGit) Resolve(ctx context.Context, ref string) (string, bool, error) {
	if err := checkName("ref", ref); err != nil {
		return "", false, err
	}
	return g.resolve(ctx, g.Root, ref)
}

func (g *ExecGit) resolve(ctx context.Context, dir, ref string) (string, bool, error) {
	out, err := g.run(ctx, dir, nil, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil {
		var ge *gitError
		if errors.As(err, &ge) && ge.exitCode() == 1 {
			return "", false, nil
		}
		return "", false, err
	}
	return strings.TrimSpace(out), true, nil
}

// CheckedOut returns the branches checked out in the repository's
// worktrees, as `git worktree list --porcelain` lists them.
func (g *ExecGit) CheckedOut(ctx context.Context) ([]string, error) {
	wts, err := g.worktrees(ctx, g.Root)
	if err != nil {
		return nil, err
	}
	var refs []string
	for _, wt := range wts {
		if wt.branch != "" {
			refs = append(refs, wt.branch)
		}
	}
	return refs, nil
}

// CreateRef makes ref point at commit unless ref exists, in which case it
// returns ErrRefExists.
func (g *ExecGit) CreateRef(ctx context.Context, ref, commit string) error {
	if err := checkNames(ref, commit); err != nil {
		return err
	}
	// The "create" instruction checks that ref does not exist, whatever
	// the length of the repository's object names.
	in := "create " + ref + " " + commit + "\n"
	_, err := g.run(ctx, g.Root, strings.NewReader(in), "update-ref", "-m", "ralph: create", "--stdin")
	if err == nil {
		return nil
	}
	if _, ok, rerr := g.resolve(ctx, g.Root, ref); rerr == nil && ok {
		return fmt.Errorf("%w: %s: %v", ErrRefExists, ref, err)
	}
	return err
}

// SwapRef moves ref from old to new atomically, or returns ErrRefMoved
// when ref does not point at old (a missing ref counts as moved): SwapRefs
// of the one ref.
func (g *ExecGit) SwapRef(ctx context.Context, ref, new, old string) error {
	return g.SwapRefs(ctx, RefMove{Ref: ref, New: new, Old: old})
}

// SwapRefs moves every ref from its Old to its New in one git update-ref
// --stdin transaction, which takes all or none. git fails both when a
// ref is not at its Old and when another update holds a ref's lock for
// longer than core.filesRefLockTimeout (100ms): what the refs read
// afterwards tells them apart — moved, or all still at their Old, when
// trying again is right.
func (g *ExecGit) SwapRefs(ctx context.Context, moves ...RefMove) error {
	var in strings.Builder
	for _, m := range moves {
		if err := checkNames(m.Ref, m.New, m.Old); err != nil {
			return err
		}
		fmt.Fprintf(&in, "update %s %s %s\n", m.Ref, m.New, m.Old)
	}
	const tries = 3
	var err error
	for range tries {
		_, err = g.run(ctx, g.Root, strings.NewReader(in.String()), "update-ref", "-m", "ralph: swap", "--stdin")
		if err == nil {
			return nil
		}
		for _, m := range moves {
			at, ok, rerr := g.resolve(ctx, g.Root, m.Ref)
			if rerr != nil {
				return errors.Join(err, rerr)
			}
			if !ok || at != m.Old {
				return fmt.Errorf("%w: %s is at %q, not %s", ErrRefMoved, m.Ref, at, m.Old)
			}
		}
	}
	return err
}

// SetRef points ref at commit (git update-ref REF COMMIT).
func (g *ExecGit) SetRef(ctx context.Context, ref, commit string) error {
	if err := checkNames(ref, commit); err != nil {
		return err
	}
	_, err := g.run(ctx, g.Root, nil, "update-ref", "-m", "ralph: set", ref, commit)
	return err
}

// markIdentity is the author and committer of every Mark: fixed, with
// the time 0, so that a mark's commit depends on its text alone.
const markIdentity = "ralph <ralph@localhost> 0 +0000"

// Mark writes the empty tree (once an ExecGit) and the commit object
// for text (git hash-object -w -t commit, which checks its form).
func (g *ExecGit) Mark(ctx context.Context, text string) (string, error) {
	if strings.ContainsRune(text, 0) {
		return "", fmt.Errorf("parallel: mark %q: a NUL in the text", text)
	}
	g.emptyTreeMu.Lock()
	tree := g.emptyTree
	if tree == "" {
		out, err := g.run(ctx, g.Root, strings.NewReader(""), "hash-object", "-w", "-t", "tree", "--stdin")
		if err != nil {
			g.emptyTreeMu.Unlock()
			return "", err
		}
		tree = strings.TrimSpace(out)
		g.emptyTree = tree
	}
	g.emptyTreeMu.Unlock()
	obj := "tree " + tree + "\nauthor " + markIdentity + "\ncommitter " + markIdentity + "\n\n" + strings.TrimRight(text, "\n") + "\n"
	out, err := g.run(ctx, g.Root, strings.NewReader(obj), "hash-object", "-w", "-t", "commit", "--stdin")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// IsAncestor reports whether commit a is an ancestor of, or equal to, b.
func (g *ExecGit) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	if err := checkNames(a, b); err != nil {
		return false, err
	}
	_, err := g.run(ctx, g.Root, nil, "merge-base", "--is-ancestor", a, b)
	if err != nil {
		var ge *gitError
		if errors.As(err, &ge) && ge.exitCode() == 1 {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// Trailers returns the values of the trailer key in the messages of the
// commits reachable from tip, newest first; a commit may give several.
// Keys match case-insensitively, as git matches them.
func (g *ExecGit) Trailers(ctx context.Context, base, tip, key string) ([]string, error) {
	if err := checkNames(tip, key); err != nil {
		return nil, err
	}
	revs := []string{tip}
	if base != "" {
		if err := checkName("base", base); err != nil {
			return nil, err
		}
		revs = append(revs, "^"+base)
	}
	if strings.ContainsAny(key, ",:)%\n") {
		return nil, fmt.Errorf("parallel: trailer key %q: not a plain word", key)
	}
	// NUL separates values, RS commits; unfold joins continuation
	// lines. log.showSignature would add lines of its own.
	format := "--format=%(trailers:key=" + key + ",valueonly,unfold,separator=%x00)%x1e"
	args := append([]string{"-c", "log.showSignature=false", "log", format}, revs...)
	out, err := g.run(ctx, g.Root, nil, append(args, "--")...)
	if err != nil {
		return nil, err
	}
	var vals []string
	for rec := range strings.SplitSeq(out, "\x1e") {
		for v := range strings.SplitSeq(rec, "\x00") {
			if v = strings.TrimSpace(v); v != "" {
				vals = append(vals, v)
			}
		}
	}
	return vals, nil
}

// AddWorktree makes a worktree at dir, HEAD detached at commit. A relative
// dir is taken from the current directory, not Root. It runs git worktree
// add --force --force: a worktree the repository still has registered at
// dir, whose directory was set aside (SetAside), is replaced, even one an
// agent locked (git worktree lock) — git refuses a directory that exists
// and is not empty all the same.
func (g *ExecGit) AddWorktree(ctx context.Context, dir, commit string) error {
	if err := checkName("commit", commit); err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("parallel: worktree %s: %w", dir, err)
	}
	// Two git worktree add at once in one repository can fail: one reads
	// the other's half-written .git/worktrees entry ("failed to read
	// .git/worktrees/w3/commondir"). A failure that left no worktree
	// behind is tried again, after a short wait.
	for attempt := 1; ; attempt++ {
		_, err = g.run(ctx, g.Root, nil, "worktree", "add", "--force", "--force", "--detach", "--quiet", "--", abs, commit)
		if err == nil || attempt == addWorktreeTries || ctx.Err() != nil {
			return err
		}
		if _, serr := os.Stat(filepath.Join(abs, ".git")); serr == nil {
			return err // a worktree is there: not a race to retry
		}
		os.RemoveAll(abs) // what the failed add may have made
		time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
	}
}

// addWorktreeTries bounds AddWorktree's tries.
const addWorktreeTries = 5

// Status returns the paths `git status --porcelain` lists for dir: changed,
// staged and untracked files that are not ignored, one path each (a rename
// lists as the deletion and the addition it is), nil when dir is clean.
// A submodule counts when its HEAD moved, not for changes inside it
// (--ignore-submodules=dirty: git would run git status in it, with its
// own configuration, to see them).
func (g *ExecGit) Status(ctx context.Context, dir string) ([]string, error) {
	out, err := g.run(ctx, dir, nil, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=dirty")
	if err != nil {
		return nil, err
	}
	return parseStatus(out)
}

// parseStatus reads `git status --porcelain=v1 -z`: entries "XY PATH",
// NUL-terminated, a rename or copy followed by its source path.
func parseStatus(out string) ([]string, error) {
	var paths []string
	fields := strings.Split(out, "\x00")
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if f == "" {
			continue
		}
		if len(f) < 4 || f[2] != ' ' {
			return nil, fmt.Errorf("parallel: git status: unexpected entry %q", f)
		}
		paths = append(paths, f[3:])
		if f[0] == 'R' || f[0] == 'C' {
			i++ // the source, which a copy keeps and a rename removes
			if i < len(fields) && f[0] == 'R' {
				paths = append(paths, fields[i])
			}
		}
	}
	return paths, nil
}

// Switch detaches dir's HEAD at commit, as `git checkout --force
// --detach` does, removes untracked files that are not ignored (git
// clean, with -f twice so that repositories an agent cloned or made inside
// the tree go too), then points branch ref at commit. The branch is never
// checked out, so that any worktree can take up any task's branch; a ref
// that a worktree has checked out is refused. ref must be under
// refs/heads/. A rebase, cherry-pick, revert or git am an agent left
// stopped is forgotten first: checkout would keep it in progress.
func (g *ExecGit) Switch(ctx context.Context, dir, ref, commit string) error {
	if err := checkName("commit", commit); err != nil {
		return err
	}
	if ref != "" {
		if err := checkNames(ref, commit); err != nil {
			return err
		}
		if branch, ok := strings.CutPrefix(ref, "refs/heads/"); !ok || branch == "" {
			return fmt.Errorf("parallel: switch to %q: not a branch (refs/heads/…)", ref)
		}
	}
	if err := g.forgetOperations(ctx, dir); err != nil {
		return err
	}
	if _, err := g.run(ctx, dir, nil, "checkout", "--quiet", "--force", "--no-recurse-submodules", "--detach", commit, "--"); err != nil {
		return err
	}
	// One -f: a repository an agent made inside the tree is not removed
	// (its files are in no commit of ralph's; see Commit).
	if _, err := g.run(ctx, dir, nil, "clean", "-fdq"); err != nil {
		return err
	}
	if ref == "" {
		return nil
	}
	if err := g.notCheckedOut(ctx, dir, ref); err != nil {
		return err
	}
	_, err := g.run(ctx, dir, nil, "update-ref", "-m", "ralph: attempt begins", ref, commit)
	return err
}

// notCheckedOut returns an error if a worktree has ref checked out: ralph
// never moves a branch under a worktree.
func (g *ExecGit) notCheckedOut(ctx context.Context, dir, ref string) error {
	wts, err := g.worktrees(ctx, dir)
	if err != nil {
		return err
	}
	for _, wt := range wts {
		if wt.branch == ref {
			return fmt.Errorf("parallel: %s is checked out in %s; ralph does not move it", strings.TrimPrefix(ref, "refs/heads/"), wt.path)
		}
	}
	return nil
}

// A worktree is an entry of `git worktree list --porcelain`.
type worktree struct {
	path   string
	branch string // full ref name; "" when detached
}

func (g *ExecGit) worktrees(ctx context.Context, dir string) ([]worktree, error) {
	out, err := g.run(ctx, dir, nil, "worktree", "list", "--porcelain")
	if err != nil {
		return nil, err
	}
	var wts []worktree
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		if p, ok := strings.CutPrefix(line, "worktree "); ok {
			wts = append(wts, worktree{path: p})
		} else if ref, ok := strings.CutPrefix(line, "branch "); ok && len(wts) > 0 {
			wts[len(wts)-1].branch = ref
		}
	}
	return wts, nil
}

// Commit folds everything in dir that differs from base into one commit
// on top of base; see Git.Commit.
//
// It stages the tree as git add --all would (hostgit's StageAll: git add
// would run git status inside every submodule, with that repository's
// own configuration) and records it with git write-tree and git
// commit-tree, then moves HEAD (and its branch) with
// git update-ref: on a large tree git commit costs as much again, to
// check once more what add has just checked. So no hook runs and the
// commit is not signed: the gate that decides whether an agent's work is
// good is ralph's own check, and a pre-commit hook that prompts, fails or
// takes minutes, or a signing key that asks for a passphrase, would turn
// into a failed task for no fault of the agent's. (It is what git commit
// --no-verify with commit.gpgSign=false would do, less the post-commit
// hook and the automatic housekeeping, which the user's next git command
// does.) The message is recorded as given, ending with a newline.
func (g *ExecGit) Commit(ctx context.Context, dir, base, message string, except []string) (string, bool, error) {
	if err := checkName("base", base); err != nil {
		return "", false, err
	}
	// The index, whatever the agent staged or committed on top of base,
	// becomes dir's tree, the excepted paths left as they are.
	var pathspecs, excludes []string
	for _, p := range except {
		pathspecs = append(pathspecs, ":(literal)"+p)
		excludes = append(excludes, ":(exclude,literal)"+p)
	}
	if err := g.stage(ctx, dir, excludes); err != nil {
		return "", false, err
	}
	// What the index now changes from base, in one listing: a repository
	// inside the tree (recorded as a gitlink, none of its files) is
	// refused; an excluded path the agent staged or committed gets back
	// base's version (none when base has none); nothing at all is no
	// commit.
	raw, err := g.run(ctx, dir, nil, "diff", "--cached", "--raw", "-z", "--no-renames", base, "--")
	if err != nil {
		return "", false, err
	}
	var nested []string
	touched, changedPaths := false, 0
	fields := strings.Split(raw, "\x00") // ":meta", "path", ":meta", "path", …
	for i := 0; i+1 < len(fields); i += 2 {
		meta, path := fields[i], fields[i+1]
		changedPaths++
		if strings.HasPrefix(meta, ":000000 160000 ") {
			nested = append(nested, path)
		}
		if excluded(path, except) {
			touched = true
		}
	}
	if len(nested) > 0 {
		g.run(context.WithoutCancel(ctx), dir, nil, append([]string{"reset", "--quiet", base, "--"}, nested...)...)
		return "", false, &NestedRepoError{Paths: nested}
	}
	if touched {
		args := append([]string{"reset", "--quiet", base, "--"}, pathspecs...)
		if _, err := g.run(ctx, dir, nil, args...); err != nil {
			return "", false, err
		}
	}
	commit := base
	if changedPaths > 0 {
		out, err := g.run(ctx, dir, nil, "write-tree")
		if err != nil {
			return "", false, err
		}
		tree := strings.TrimSpace(out)
		var changed bool
		if touched {
			// Only excluded paths may have changed: compare the trees.
			out, err = g.run(ctx, dir, nil, "rev-parse", "--verify", base+"^{tree}")
			if err != nil {
				return "", false, err
			}
			changed = tree != strings.TrimSpace(out)
		} else {
			changed = true
		}
		if changed {
			commit, err = g.commitTree(ctx, dir, tree, base, message)
			if err != nil {
				return "", false, err
			}
		}
	}
	subject, _, _ := strings.Cut(message, "\n")
	if _, err := g.run(ctx, dir, nil, "update-ref", "--no-deref", "-m", "ralph: commit: "+subject, "HEAD", commit); err != nil {
		return "", false, err
	}
	return commit, commit != base, nil
}

// commitTree records tree as a commit on parent with message.
func (g *ExecGit) commitTree(ctx context.Context, dir, tree, parent, message string) (string, error) {
	opts, err := g.identity(ctx, dir)
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(message, "\n") {
		message += "\n"
	}
	opts = append(opts, "-c", "commit.gpgSign=false", "commit-tree", tree, "-p", parent, "-F", "-")
	out, err := g.run(ctx, dir, strings.NewReader(message), opts...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// identity returns the -c options that supply ralph's name and email
// where the configuration seen from dir has none.
func (g *ExecGit) identity(ctx context.Context, dir string) ([]string, error) {
	if opts, ok := g.ids.Load(dir); ok {
		return opts.([]string), nil
	}
	opts, err := g.readIdentity(ctx, dir)
	if err == nil {
		g.ids.Store(dir, opts)
	}
	return opts, err
}

func (g *ExecGit) readIdentity(ctx context.Context, dir string) ([]string, error) {
	out, err := g.run(ctx, dir, nil, "config", "--get-regexp", `^user\.(name|email)$`)
	if err != nil {
		var ge *gitError
		if !errors.As(err, &ge) || ge.exitCode() != 1 { // 1: none set
			return nil, err
		}
	}
	var name, email bool
	for line := range strings.Lines(out) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch {
		case v == "":
		case k == "user.name":
			name = true
		case k == "user.email":
			email = true
		}
	}
	var opts []string
	if !name {
		opts = append(opts, "-c", "user.name=ralph")
	}
	if !email {
		opts = append(opts, "-c", "user.email=ralph@localhost")
	}
	return opts, nil
}

// Rebase replays base..HEAD of dir onto onto; see Git.Rebase.
//
// When base..HEAD is one commit, as Commit leaves it, and base is an
// ancestor of onto, it does not run git rebase: git merge-tree (git 2.38
// or later) merges in memory, git commit-tree records the result with
// the commit's author and message, and git reset --keep moves dir to it.
// On a large tree that is a third of git rebase's cost, which refreshes
// and rewrites the index several times over. Changes in dir that are not
// committed stay, unless they are to files the rebase changes; then, as
// in every other case, it runs git rebase, which refuses a dirty tree.
//
// Nothing in the user's configuration may make git rebase stop for a
// person or do more than replay: no editor, no autostash, no rerere, no
// moving other branches (rebase.updateRefs), no pre-rebase hook
// (--no-verify, as for Commit), no signing.
func (g *ExecGit) Rebase(ctx context.Context, dir, base, onto string) (string, error) {
	if err := checkNames(base, onto); err != nil {
		return "", err
	}
	if base == onto {
		return g.head(ctx, dir)
	}
	// Replayed commits need a committer.
	ident, err := g.identity(ctx, dir)
	if err != nil {
		return "", err
	}
	if head, ok, err := g.rebaseOne(ctx, dir, base, onto, ident); ok {
		return head, err
	}
	_, err = g.run(ctx, dir, nil, append(ident,
		"-c", "core.editor=true",
		"-c", "rerere.enabled=false",
		"-c", "rebase.updateRefs=false",
		"-c", "rebase.autoSquash=false",
		"-c", "commit.gpgSign=false",
		"rebase", "--quiet", "--no-verify", "--no-autostash", "--onto", onto, base)...)
	if err == nil {
		return g.head(ctx, dir)
	}
	// Whatever stopped it, leave dir as it was, even when ctx is done.
	bg := context.WithoutCancel(ctx)
	out, derr := g.run(bg, dir, nil, "diff", "--name-only", "-z", "--diff-filter=U", "--ignore-submodules=dirty")
	var paths []string
	if derr == nil {
		for p := range strings.SplitSeq(out, "\x00") {
			if p != "" {
				paths = append(paths, p)
			}
		}
	}
	if aerr := g.abortRebase(bg, dir); aerr != nil {
		return "", errors.Join(err, aerr)
	}
	if len(paths) > 0 && ctx.Err() == nil {
		return "", &ConflictError{Paths: paths}
	}
	return "", err
}

// rebaseOne rebases dir's HEAD onto onto when HEAD is one commit on top
// of base and base is an ancestor of onto, so that merging onto with HEAD
// (their merge base is base) is replaying HEAD. ok false means it did
// nothing: another case, or a git without merge-tree --write-tree, or a
// tree reset --keep would not move; git rebase is the way then.
func (g *ExecGit) rebaseOne(ctx context.Context, dir, base, onto string, ident []string) (head string, ok bool, err error) {
	// HEAD's parents, tree, author, encoding and message; onto's and
	// base's name and tree. --no-walk=unsorted keeps this order, and
	// drops repeats (HEAD is base or onto), so that the count tells.
	out, err := g.run(ctx, dir, nil, "-c", "log.showSignature=false", "-c", "i18n.logOutputEncoding=UTF-8",
		"log", "--no-walk=unsorted", "--date=raw",
		"--format=%H%x00%P%x00%T%x00%an%x00%ae%x00%ad%x00%e%x00%B%x00%x1e", "HEAD", onto, base, "--")
	if err != nil {
		return "", true, err
	}
	var c [3][]string // HEAD, onto, base
	recs := strings.Split(out, "\x1e")
	if len(recs) != 4 {
		return "", false, nil
	}
	for i := range c {
		c[i] = strings.Split(strings.TrimPrefix(recs[i], "\n"), "\x00")
		if len(c[i]) != 9 {
			return "", false, fmt.Errorf("parallel: rebase: unexpected git log output %q", recs[i])
		}
	}
	const (
		hash = iota
		parents
		tree
		authorName
		authorEmail
		authorDate
		encoding
		message
	)
	if c[0][parents] != c[2][hash] || c[0][encoding] != "" {
		return "", false, nil
	}
	if up, err := g.IsAncestor(ctx, base, onto); err != nil || !up {
		return "", err != nil, err
	}
	out, err = g.run(ctx, dir, nil, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", onto, "HEAD")
	fields := strings.Split(out, "\x00")
	if err != nil {
		var ge *gitError
		if !errors.As(err, &ge) || ge.exitCode() != 1 {
			return "", ctx.Err() != nil, err // 129: git before 2.38
		}
		var paths []string
		for _, p := range fields[1:] {
			if p != "" {
				paths = append(paths, p)
			}
		}
		if len(paths) == 0 {
			return "", false, nil
		}
		return "", true, &ConflictError{Paths: paths}
	}
	merged := fields[0]
	head = c[1][hash]
	// A commit that the tip has made empty goes, as git rebase drops it;
	// one that was empty from the start stays.
	if merged != c[1][tree] || c[0][tree] == c[2][tree] {
		env := []string{
			"GIT_AUTHOR_NAME=" + c[0][authorName],
			"GIT_AUTHOR_EMAIL=" + c[0][authorEmail],
			"GIT_AUTHOR_DATE=" + c[0][authorDate],
		}
		args := append(slices.Clip(ident), "-c", "commit.gpgSign=false", "commit-tree", merged, "-p", c[1][hash], "-F", "-")
		out, err := g.runEnv(ctx, dir, env, strings.NewReader(c[0][message]), args...)
		if err != nil {
			return "", true, err
		}
		head = strings.TrimSpace(out)
	}
	if _, err := g.run(ctx, dir, nil, "reset", "--quiet", "--keep", head); err != nil {
		return "", ctx.Err() != nil, err
	}
	return head, true, nil
}

// abortRebase runs git rebase --abort if dir has a rebase in progress.
func (g *ExecGit) abortRebase(ctx context.Context, dir string) error {
	there, err := g.gitPathsExist(ctx, dir, "rebase-merge", "rebase-apply")
	if err != nil || !slices.Contains(there, true) {
		return err
	}
	_, err = g.run(ctx, dir, nil, "rebase", "--abort")
	return err
}

// forgetOperations drops the state of a rebase, git am, cherry-pick or
// revert that stopped in dir (an agent's, on a conflict), which git
// checkout keeps; HEAD and the files stay as they are.
func (g *ExecGit) forgetOperations(ctx context.Context, dir string) error {
	there, err := g.gitPathsExist(ctx, dir, "rebase-merge", "rebase-apply/applying", "rebase-apply", "sequencer")
	if err != nil {
		return err
	}
	var quit [][]string
	switch {
	case there[0] || (there[2] && !there[1]):
		quit = append(quit, []string{"rebase", "--quit"})
	case there[1]:
		// git am wants an identity even to quit; it records nothing.
		quit = append(quit, []string{"-c", "user.name=ralph", "-c", "user.email=ralph@localhost", "am", "--quit"})
	}
	if there[3] {
		quit = append(quit, []string{"cherry-pick", "--quit"})
	}
	for _, args := range quit {
		if _, err := g.run(ctx, dir, nil, args...); err != nil {
			return err
		}
	}
	return nil
}

// gitPathsExist reports which of names exist in dir's git directory
// (git rev-parse --git-path: per worktree where git keeps them so).
func (g *ExecGit) gitPathsExist(ctx context.Context, dir string, names ...string) ([]bool, error) {
	args := []string{"rev-parse"}
	for _, n := range names {
		args = append(args, "--git-path", n)
	}
	out, err := g.run(ctx, dir, nil, args...)
	if err != nil {
		return nil, err
	}
	paths := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(paths) != len(names) {
		return nil, fmt.Errorf("parallel: git rev-parse --git-path: %d lines for %d names", len(paths), len(names))
	}
	there := make([]bool, len(paths))
	for i, p := range paths {
		if !filepath.IsAbs(p) { // relative to dir
			p = filepath.Join(dir, p)
		}
		_, err := os.Stat(p)
		there[i] = err == nil
	}
	return there, nil
}

// run runs git in dir with args and returns its standard output. A
// failure comes back as a *gitError (wrapping the context's error when
// that was the cause), or the error starting git gave.
func (g *ExecGit) run(ctx context.Context, dir string, stdin io.Reader, args ...string) (string, error) {
	return g.runEnv(ctx, dir, nil, stdin, args...)
}

// runEnv is run with env added to git's environment.
func (g *ExecGit) runEnv(ctx context.Context, dir string, env []string, stdin io.Reader, args ...string) (string, error) {
	repo, err := g.hostRepo(dir)
	if err != nil {
		return "", &gitError{dir: dir, args: args, err: err}
	}
	cmd, err := repo.Command(ctx, dir, args...)
	if err != nil {
		return "", &gitError{dir: dir, args: args, err: err}
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		ge := &gitError{dir: dir, args: args, err: err, tail: lastLines(stderr.String(), 4)}
		if ge.tail == "" {
			ge.tail = lastLines(stdout.String(), 4)
		}
		if ctx.Err() != nil {
			ge.err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return stdout.String(), ge
	}
	return stdout.String(), nil
}

// A gitError is a git command that failed: the command, how it ended and
// the end of what it said.
type gitError struct {
	dir  string
	args []string
	err  error
	tail string
}

func (e *gitError) Error() string {
	var b strings.Builder
	b.WriteString("git -C ")
	b.WriteString(quoteArg(e.dir))
	n := 0
	for i := 0; i < len(e.args); i++ {
		a := e.args[i]
		if a == "-c" { // options ralph adds; the command is what tells
			i++
			continue
		}
		if n == 8 {
			b.WriteString(" …")
			break
		}
		b.WriteByte(' ')
		b.WriteString(quoteArg(a))
		n++
	}
	b.WriteString(": ")
	b.WriteString(e.err.Error())
	if e.tail != "" {
		b.WriteString(": ")
		b.WriteString(e.tail)
	}
	return b.String()
}

func (e *gitError) Unwrap() error { return e.err }

// exitCode returns git's exit status, or -1 when git did not exit (it did
// not start, or was killed).
func (e *gitError) exitCode() int {
	var ee *exec.ExitError
	if errors.As(e.err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

func quoteArg(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"'\\$`*?[]()&;|<>") {
		return strconv.Quote(s)
	}
	return s
}

// lastLines returns the last n non-blank lines of s joined by "; ".
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	var keep []string
	for i := len(lines) - 1; i >= 0 && len(keep) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			keep = append(keep, l)
		}
	}
	for i, j := 0, len(keep)-1; i < j; i, j = i+1, j-1 {
		keep[i], keep[j] = keep[j], keep[i]
	}
	return strings.Join(keep, "; ")
}

// checkName rejects what git would read as an option rather than a name.
func checkName(what, s string) error {
	if s == "" || s[0] == '-' || strings.ContainsAny(s, "\x00\n") {
		return fmt.Errorf("parallel: %s %q: not a git name", what, s)
	}
	return nil
}

func checkNames(names ...string) error {
	for _, s := range names {
		if err := checkName("name", s); err != nil {
			return err
		}
	}
	return nil
}

// HeadOf returns the branch dir's HEAD is on (git symbolic-ref HEAD; ""
// when detached) and the commit it names.
func (g *ExecGit) HeadOf(ctx context.Context, dir string) (string, string, error) {
	commit, err := g.head(ctx, dir)
	if err != nil {
		return "", "", err
	}
	out, err := g.run(ctx, dir, nil, "symbolic-ref", "--quiet", "HEAD")
	if err != nil {
		var ge *gitError
		if errors.As(err, &ge) && ge.exitCode() == 1 {
			return "", commit, nil // detached
		}
		return "", "", err
	}
	return strings.TrimSpace(out), commit, nil
}

// stage makes dir's index hold dir's tree but for the excluded paths; an
// untracked repository inside the tree is a *NestedRepoError, nothing
// staged.
func (g *ExecGit) stage(ctx context.Context, dir string, excludes []string) error {
	repo, err := g.hostRepo(dir)
	if err != nil {
		return err
	}
	nested, err := repo.StageAll(ctx, dir, excludes...)
	if len(nested) > 0 {
		return &NestedRepoError{Paths: nested}
	}
	if err != nil {
		return &gitError{dir: dir, args: []string{"add", "--all"}, err: err}
	}
	return nil
}
