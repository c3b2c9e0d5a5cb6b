package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
)

// checkoutOf returns the git checkout of tree as the Boundary knows it:
// the tree's .git (dotGit, a directory when dir), and its git directory
// ("" when the Boundary knows none: the project is in no repository, or a
// worker's tree has no worktree entry in the repository that names it).
// A .git that is a symbolic link, or that is no longer the kind of file it
// was when the Boundary was made, is an error: nothing is mounted on a
// path that may lead elsewhere.
func (b *Boundary) checkoutOf(tree string) (dotGit string, dir bool, gitDir string, err error) {
	if b.repo == nil {
		if tree == b.root {
			return "", false, "", nil // the project's own tree, in no repository: its .git is the agent's
		}
		dotGit = filepath.Join(tree, ".git")
	} else if tree == b.root {
		dotGit, dir, gitDir = b.repo.dotGit(), b.repo.dotGitDir, b.repo.gitDir
	} else {
		dotGit = filepath.Join(tree, ".git")
	}
	fi, err := os.Lstat(dotGit)
	switch {
	case os.IsNotExist(err) && gitDir == "":
		return "", false, "", nil
	case err != nil:
		return "", false, "", fmt.Errorf("sandbox: %w", err)
	case fi.Mode()&os.ModeSymlink != 0:
		return "", false, "", fmt.Errorf("sandbox: %s is a symbolic link: refusing to mount over it", dotGit)
	case tree == b.root && b.repo != nil && fi.IsDir() != dir:
		return "", false, "", fmt.Errorf("sandbox: %s changed since the run began", dotGit)
	case tree != b.root:
		dir = false
		if !fi.Mode().IsRegular() {
			return "", false, "", fmt.Errorf("sandbox: %s is not a worktree's .git file", dotGit)
		}
		if b.repo != nil {
			gitDir = b.repo.worktreeGitDir(dotGit)
		}
	}
	return dotGit, dir, gitDir, nil
}

// resolvedState is a State whose directory is resolved.
type resolvedState struct {
	State
	dir string
}

// states resolves the state directories of a session writing tree,
// making missing ones (mode 0700). One inside the tree is left out (the
// tree is writable anyway), and so is one inside another; one that holds
// the tree or the project is an error.
func (b *Boundary) states(tree string, sts []State) ([]resolvedState, error) {
	var out []resolvedState
	for _, st := range sts {
		if st.Dir == "" || !filepath.IsAbs(st.Dir) {
			return nil, fmt.Errorf("sandbox: state directory %q: want an absolute path", st.Dir)
		}
		if _, err := os.Lstat(st.Dir); os.IsNotExist(err) {
			if err := os.MkdirAll(st.Dir, 0o700); err != nil {
				return nil, fmt.Errorf("sandbox: state directory: %w", err)
			}
		}
		dir, err := filepath.EvalSymlinks(st.Dir)
		if err != nil {
			return nil, fmt.Errorf("sandbox: state directory: %w", err)
		}
		if !isDir(dir) {
			return nil, fmt.Errorf("sandbox: state directory %s is not a directory", dir)
		}
		if within(tree, dir) || within(b.root, dir) {
			return nil, fmt.Errorf("sandbox: state directory %s holds the project", dir)
		}
		if within(dir, tree) {
			continue
		}
		out = append(out, resolvedState{State: st, dir: dir})
	}
	// Nested ones: the outer one's scratch would hide the inner one's.
	var kept []resolvedState
	for i, s := range out {
		nested := false
		for j, o := range out {
			if i != j && within(s.dir, o.dir) && (s.dir != o.dir || j < i) {
				nested = true
			}
		}
		if !nested {
			kept = append(kept, s)
		}
	}
	return kept, nil
}
