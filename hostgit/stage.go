package hostgit

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// StageAll makes the index hold the working tree's files under dir (and
// the pathspec, which follows "." — excludes, say), as `git add --all`
// would, but without ever running git inside a nested repository.
//
// git add checks every submodule it tracks by running git status in it,
// with that repository's own configuration — filters and all, which this
// package never read. StageAll instead lists changed tracked files with
// `git diff-files --ignore-submodules=dirty` (a submodule whose HEAD moved
// is still seen; nothing runs inside it) and, at the same time, untracked
// files that are not ignored with `git ls-files --others
// --exclude-standard`, and records them with `git update-index`: deleted
// paths (and paths now beyond a symlink) are removed, the rest added.
// Untracked nested repositories, which ls-files shows as "dir/", are not
// staged: their paths (relative to the top of the working tree, without
// the slash) are returned for the caller to decide on.
func (r *Repo) StageAll(ctx context.Context, dir string, pathspec ...string) (nested []string, err error) {
	spec := append([]string{"--", "."}, pathspec...)
	var changed, others string
	var cerr, oerr error
	var wg sync.WaitGroup
	wg.Go(func() {
		changed, cerr = r.Run(ctx, dir, append([]string{"diff-files", "-z", "--name-status", "--ignore-submodules=dirty"}, spec...)...)
	})
	others, oerr = r.Run(ctx, dir, append([]string{"ls-files", "-z", "--full-name", "--others", "--exclude-standard"}, spec...)...)
	wg.Wait()
	if err := errors.Join(cerr, oerr); err != nil {
		return nil, err
	}
	var add, remove []string
	f := SplitNul(changed)
	for i := 0; i+1 < len(f); i += 2 {
		status, p := f[i], f[i+1]
		if status == "D" || !r.present(p) {
			remove = append(remove, p)
		} else {
			add = append(add, p)
		}
	}
	for _, p := range SplitNul(others) {
		if d, ok := strings.CutSuffix(p, "/"); ok {
			nested = append(nested, d)
		} else {
			add = append(add, p)
		}
	}
	slices.Sort(remove)
	if len(remove) > 0 {
		if err := r.update(ctx, "--force-remove", slices.Compact(remove)); err != nil {
			return nested, err
		}
	}
	slices.Sort(add)
	if len(add) > 0 {
		if err := r.update(ctx, "--add", slices.Compact(add)); err != nil {
			return nested, err
		}
	}
	return nested, nil
}

// present reports whether p (relative to the top) is there with no
// symlink on its way.
func (r *Repo) present(p string) bool {
	full := r.WorkTree
	parts := strings.Split(p, "/")
	for i, part := range parts {
		full = filepath.Join(full, part)
		fi, err := os.Lstat(full)
		if err != nil {
			return false
		}
		if i < len(parts)-1 && !fi.IsDir() {
			return false
		}
	}
	return true
}

// update runs git update-index with opt on paths (relative to the top).
func (r *Repo) update(ctx context.Context, opt string, paths []string) error {
	cmd, err := r.Command(ctx, r.WorkTree, "update-index", "-z", opt, "--stdin")
	if err != nil {
		return err
	}
	cmd.Stdin = strings.NewReader(strings.Join(paths, "\x00") + "\x00")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return &Error{Args: []string{"update-index", opt}, Err: err, Stderr: stderr.String()}
	}
	return nil
}

// SplitNul splits git's -z output into its entries.
func SplitNul(s string) []string {
	s = strings.TrimSuffix(s, "\x00")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\x00")
}
