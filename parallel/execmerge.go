package parallel

import (
	"context"
	"errors"
	"strings"
)

// Parents lists commit's parents, the first first (git rev-list
// --parents).
func (g *ExecGit) Parents(ctx context.Context, commit string) ([]string, error) {
	if err := checkName("commit", commit); err != nil {
		return nil, err
	}
	out, err := g.run(ctx, g.Root, nil, "rev-list", "--parents", "-n", "1", commit, "--")
	if err != nil {
		return nil, err
	}
	f := strings.Fields(out)
	if len(f) == 0 {
		return nil, nil
	}
	return f[1:], nil
}

// Merge merges theirs into ours in memory (git merge-tree --write-tree,
// git 2.38 or later) and records the result with git commit-tree, parents
// ours then theirs: no ref moves and no tree is written. A conflict is a
// *ConflictError naming the conflicting paths, nothing made.
func (g *ExecGit) Merge(ctx context.Context, ours, theirs, message string) (string, error) {
	if err := checkNames(ours, theirs); err != nil {
		return "", err
	}
	out, err := g.run(ctx, g.Root, nil, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", ours, theirs)
	fields := strings.Split(out, "\x00")
	if err != nil {
		var ge *gitError
		if !errors.As(err, &ge) || ge.exitCode() != 1 {
			return "", err
		}
		var paths []string
		for _, p := range fields[1:] {
			if p != "" {
				paths = append(paths, p)
			}
		}
		return "", &ConflictError{Paths: paths}
	}
	opts, err := g.identity(ctx, g.Root)
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(message, "\n") {
		message += "\n"
	}
	opts = append(opts, "-c", "commit.gpgSign=false", "commit-tree", fields[0], "-p", ours, "-p", theirs, "-F", "-")
	out, err = g.run(ctx, g.Root, strings.NewReader(message), opts...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}
