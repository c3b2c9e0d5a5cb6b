package parallel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// CleanConfig says what Clean looks at (ralph clean, DESIGN §15).
type CleanConfig struct {
	// Root is the project's root, in the repository's main working tree.
	Root string
	// Git is the repository; nil means ExecGit over Root.
	Git Git
	// WorktreeDir holds the workers' trees; empty means
	// <Root>/.ralph/worktrees.
	WorktreeDir string
	// Into is the plan's integration branch as recorded with it
	// (SettingInto): a branch name, "ralph/integration".
	Into string
	// InProgress holds the ids of the plan's tasks that are claimed now:
	// their task branches and fences are kept.
	InProgress map[string]bool
	// DryRun removes nothing: the report says what would go.
	DryRun bool
}

// A CleanItem is one ref or tree Clean looked at.
type CleanItem struct {
	// What is "branch", "fence" or "worktree"; Name the branch's name,
	// the fence's full ref, or the tree's directory.
	What, Name string
	// Removed is true when it went (or, with DryRun, would go).
	Removed bool
	// Reason says why it was kept.
	Reason string
}

// CleanReport is what Clean found, in the order it looked: worktrees,
// then branches, then fences.
type CleanReport struct {
	Items []CleanItem
}

// Removed counts the items removed (or, with DryRun, to remove).
func (r CleanReport) Removed() int {
	n := 0
	for _, it := range r.Items {
		if it.Removed {
			n++
		}
	}
	return n
}

var treeName = regexp.MustCompile(`^w[0-9]+$`)

// Clean removes what builds left that holds nothing not landed on the
// integration branch (DESIGN §15 "Clean-up"), in the repository only:
//
//   - the workers' trees wK that no build holds (its lock, as takeTree
//     takes it), in which no attempt was left under way (a crashed
//     build's marker), that are clean and whose HEAD is on a branch or is
//     a commit some branch holds: git worktree remove;
//   - the task branches ralph/task/<id> and attempt branches
//     ralph/attempt/<id>/<n> whose commits all landed — patch-equivalent
//     to commits of the integration branch (Git.Cherry: landings rebase)
//     or the branch holds nothing —, except the task branch of a task in
//     progress and a branch some worktree has checked out;
//   - the claims' fences of the tasks not in progress.
//
// Refs are deleted by compare-and-swap from what Clean read: one that
// moved meanwhile is kept. Everything kept is listed with why.
func Clean(ctx context.Context, cfg CleanConfig) (CleanReport, error) {
	g := cfg.Git
	if g == nil {
		g = &ExecGit{Root: cfg.Root}
	}
	if err := g.Check(ctx); err != nil {
		return CleanReport{}, err
	}
	if cfg.Into == "" {
		return CleanReport{}, errors.New("parallel: no integration branch given")
	}
	c := &cleaner{cfg: cfg, g: g, into: heads + cfg.Into}
	var err error
	if c.branches, err = g.Branches(ctx); err != nil {
		return CleanReport{}, err
	}
	for _, step := range []func(context.Context) error{c.trees, c.taskBranches, c.fences} {
		if err := step(ctx); err != nil {
			return c.rep, err
		}
	}
	return c.rep, nil
}

type cleaner struct {
	cfg      CleanConfig
	g        Git
	into     string
	branches map[string]string
	rep      CleanReport
}

func (c *cleaner) keep(what, name, reason string) {
	c.rep.Items = append(c.rep.Items, CleanItem{What: what, Name: name, Reason: reason})
}

// remove deletes ref from at, unless DryRun; a ref that moved is kept.
func (c *cleaner) remove(ctx context.Context, what, name, ref, at string) error {
	if !c.cfg.DryRun {
		err := c.g.DeleteRef(ctx, ref, at)
		if errors.Is(err, ErrRefMoved) {
			c.keep(what, name, "it moved while ralph clean looked at it")
			return nil
		}
		if err != nil {
			return err
		}
	}
	c.rep.Items = append(c.rep.Items, CleanItem{What: what, Name: name, Removed: true})
	return nil
}

// trees removes the workers' trees no build uses.
func (c *cleaner) trees(ctx context.Context) error {
	dir := c.cfg.WorktreeDir
	if dir == "" {
		dir = filepath.Join(c.cfg.Root, ".ralph", "worktrees")
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("parallel: worktrees: %w", err)
	}
	for _, e := range entries {
		if !treeName.MatchString(e.Name()) {
			continue
		}
		if err := c.tree(ctx, dir, e.Name()); err != nil {
			return err
		}
	}
	return nil
}

func (c *cleaner) tree(ctx context.Context, dir, name string) error {
	path := filepath.Join(dir, name)
	lock, ok, err := takeTree(c.cfg.Root, dir, name)
	if err != nil {
		return err
	}
	if !ok {
		c.keep("worktree", path, "a build is using it")
		return nil
	}
	defer lock.Close()
	if id := (&workspace{root: c.cfg.Root, dir: path}).readMarker(); id != "" {
		c.keep("worktree", path, "an attempt at task "+id+" was under way in it when its build stopped (the next build keeps its work)")
		return nil
	}
	if err := c.g.CheckWorktree(ctx, path); err != nil {
		var we *WorktreeError
		if errors.As(err, &we) {
			c.keep("worktree", path, "not a worktree ralph made: "+err.Error())
			return nil
		}
		return err
	}
	changed, err := c.g.Status(ctx, path)
	if err != nil {
		return err
	}
	if len(changed) > 0 {
		c.keep("worktree", path, fmt.Sprintf("%d uncommitted path%s", len(changed), plural(len(changed))))
		return nil
	}
	branch, head, err := c.g.HeadOf(ctx, path)
	if err != nil {
		return err
	}
	if branch == "" {
		held, err := c.held(ctx, head)
		if err != nil {
			return err
		}
		if !held {
			c.keep("worktree", path, "its HEAD "+short(head)+" is on no branch")
			return nil
		}
	}
	if !c.cfg.DryRun {
		if err := c.g.RemoveWorktree(ctx, path); err != nil {
			return err
		}
	}
	c.rep.Items = append(c.rep.Items, CleanItem{What: "worktree", Name: path, Removed: true})
	return nil
}

// held reports whether a branch holds commit: the integration branch
// first, then the others.
func (c *cleaner) held(ctx context.Context, commit string) (bool, error) {
	refs := slices.Sorted(func(yield func(string) bool) {
		for r := range c.branches {
			if r != c.into && !yield(r) {
				return
			}
		}
	})
	if _, ok := c.branches[c.into]; ok {
		refs = append([]string{c.into}, refs...)
	}
	for _, r := range refs {
		ok, err := c.g.IsAncestor(ctx, commit, c.branches[r])
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// taskBranches removes the task and attempt branches whose work landed.
func (c *cleaner) taskBranches(ctx context.Context) error {
	tip, ok := c.branches[c.into]
	out, err := c.g.CheckedOut(ctx)
	if err != nil {
		return err
	}
	for _, ref := range slices.Sorted(func(yield func(string) bool) {
		for r := range c.branches {
			if (strings.HasPrefix(r, heads+TaskBranchPrefix) || strings.HasPrefix(r, heads+AttemptBranchPrefix)) && !yield(r) {
				return
			}
		}
	}) {
		name, at := strings.TrimPrefix(ref, heads), c.branches[ref]
		if id, isTask := taskOf(ref); isTask && c.cfg.InProgress[id] {
			c.keep("branch", name, "its task is in progress")
			continue
		}
		if slices.Contains(out, ref) {
			c.keep("branch", name, "a worktree has it checked out")
			continue
		}
		if !ok {
			c.keep("branch", name, "the integration branch "+c.cfg.Into+" does not exist")
			continue
		}
		left, err := c.unlanded(ctx, tip, at)
		if err != nil {
			return err
		}
		if left > 0 {
			c.keep("branch", name, fmt.Sprintf("%d commit%s not on %s", left, plural(left), c.cfg.Into))
			continue
		}
		if err := c.remove(ctx, "branch", name, ref, at); err != nil {
			return err
		}
	}
	return nil
}

// unlanded counts the commits of at that did not land on tip.
func (c *cleaner) unlanded(ctx context.Context, tip, at string) (int, error) {
	if ok, err := c.g.IsAncestor(ctx, at, tip); err != nil || ok {
		return 0, err
	}
	left, err := c.g.Cherry(ctx, tip, at)
	return len(left), err
}

// fences removes the claims' fences of the tasks not in progress.
func (c *cleaner) fences(ctx context.Context) error {
	prefix := ownRefs + "claims/" + RefName(c.cfg.Into) + "/"
	refs, err := c.g.Refs(ctx, prefix)
	if err != nil {
		return err
	}
	for _, ref := range slices.Sorted(func(yield func(string) bool) {
		for r := range refs {
			if !yield(r) {
				return
			}
		}
	}) {
		id, derr := decodeRefName(strings.TrimPrefix(ref, prefix))
		if derr == nil && c.cfg.InProgress[id] {
			c.keep("fence", ref, "its task is in progress")
			continue
		}
		if err := c.remove(ctx, "fence", ref, ref, refs[ref]); err != nil {
			return err
		}
	}
	return nil
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
