package parallel

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// Refs lists the refs under prefix with git for-each-ref, which matches
// whole components (".../x" lists ".../x/1", not ".../xy/1").
func (g *ExecGit) Refs(ctx context.Context, prefix string) (map[string]string, error) {
	if err := checkName("prefix", prefix); err != nil {
		return nil, err
	}
	out, err := g.run(ctx, g.Root, nil, "for-each-ref", "--format=%(objectname) %(refname)", "--", prefix)
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	for line := range strings.Lines(out) {
		if c, ref, ok := strings.Cut(strings.TrimRight(line, "\n"), " "); ok {
			refs[ref] = c
		}
	}
	return refs, nil
}

// Cherry lists, with git cherry, the commits of head not on upstream
// whose change no commit of upstream makes (its "+" lines), in git cherry's
// order.
func (g *ExecGit) Cherry(ctx context.Context, upstream, head string) ([]string, error) {
	if err := checkNames(upstream, head); err != nil {
		return nil, err
	}
	out, err := g.run(ctx, g.Root, nil, "cherry", upstream, head)
	if err != nil {
		return nil, err
	}
	var left []string
	for line := range strings.Lines(out) {
		if c, ok := strings.CutPrefix(strings.TrimSpace(line), "+ "); ok {
			left = append(left, c)
		}
	}
	return left, nil
}

// DeleteRef deletes ref while it names old (git update-ref -d REF OLD);
// a ref that names something else, or nothing, is ErrRefMoved.
func (g *ExecGit) DeleteRef(ctx context.Context, ref, old string) error {
	if err := checkNames(ref, old); err != nil {
		return err
	}
	_, err := g.run(ctx, g.Root, nil, "update-ref", "-m", "ralph: clean", "-d", ref, old)
	if err == nil {
		return nil
	}
	at, ok, rerr := g.resolve(ctx, g.Root, ref)
	if rerr == nil && (!ok || at != old) {
		return fmt.Errorf("%w: %s is at %q, not %s", ErrRefMoved, ref, at, old)
	}
	return err
}

// RemoveWorktree removes the worktree at dir with git worktree remove,
// which refuses a tree with changes or untracked files that are not
// ignored.
func (g *ExecGit) RemoveWorktree(ctx context.Context, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("parallel: worktree %s: %w", dir, err)
	}
	_, err = g.run(ctx, g.Root, nil, "worktree", "remove", "--", abs)
	return err
}
