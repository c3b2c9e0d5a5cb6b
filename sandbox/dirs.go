package sandbox

import (
	"os"
	"path/filepath"
	"strings"
)

// Dirs returns the paths every agent working in dir may write, given the
// agent's environment env: dir itself; the git directory of the
// repository dir is in and its common git directory (they differ in a
// worktree made by `git worktree add`, whose commits, refs and objects
// live in the main repository's .git); $RALPH_DIR/.ralph, the plan's
// directory (dir/.ralph without RALPH_DIR); $RALPH_WORKTREE; and the temp
// directory ($TMPDIR, else os.TempDir()). Relative values are taken
// relative to dir. Only paths that exist are returned, absolute, with
// symbolic links resolved, without duplicates, in that order.
//
// The git directories are found the way git finds them, without running
// it: $GIT_DIR and $GIT_COMMON_DIR when env sets them; otherwise the
// first .git up from dir (resolved), a directory holding HEAD or a file
// "gitdir: PATH"; the common directory is what PATH/commondir names, else
// the git directory itself. GIT_CEILING_DIRECTORIES and bare repositories
// are not considered.
func Dirs(dir string, env []string) []string {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	var out []string
	add := func(p string) {
		r, err := resolve(dir, p)
		if err != nil {
			return
		}
		if _, err := os.Stat(r); err != nil {
			return
		}
		for _, o := range out {
			if o == r {
				return
			}
		}
		out = append(out, r)
	}
	add(dir)
	gitDir, commonDir := gitDirs(dir, env)
	add(gitDir)
	add(commonDir)
	if rd := getenv(env, "RALPH_DIR"); rd != "" {
		add(filepath.Join(rd, ".ralph"))
	} else {
		add(filepath.Join(dir, ".ralph"))
	}
	add(getenv(env, "RALPH_WORKTREE"))
	if tmp := getenv(env, "TMPDIR"); tmp != "" {
		add(tmp)
	} else {
		add(os.TempDir())
	}
	return out
}

// gitDirs returns the git directory and the common git directory of the
// repository dir is in, absolute, or "" when there is none.
func gitDirs(dir string, env []string) (gitDir, commonDir string) {
	base, err := resolve("", dir)
	if err != nil {
		return "", ""
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(base, p)
	}
	if g := getenv(env, "GIT_DIR"); g != "" {
		gitDir = abs(g)
	} else {
		gitDir = discover(base)
		if gitDir == "" {
			return "", ""
		}
	}
	if c := getenv(env, "GIT_COMMON_DIR"); c != "" {
		return gitDir, abs(c)
	}
	return gitDir, common(gitDir)
}

// discover walks up from dir to the first .git: a git directory, or a
// file pointing to one (a worktree's, a submodule's).
func discover(dir string) string {
	for {
		dotgit := filepath.Join(dir, ".git")
		if fi, err := os.Stat(dotgit); err == nil {
			if fi.IsDir() {
				if _, err := os.Stat(filepath.Join(dotgit, "HEAD")); err == nil {
					return dotgit
				}
			} else if g := readGitdir(dotgit); g != "" {
				return g
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// readGitdir reads a .git file ("gitdir: PATH", PATH relative to the
// file's directory) and returns PATH absolute, or "".
func readGitdir(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	g, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "gitdir: ")
	if !ok || g == "" {
		return ""
	}
	if !filepath.IsAbs(g) {
		g = filepath.Join(filepath.Dir(file), g)
	}
	return filepath.Clean(g)
}

// common returns the common git directory of gitDir: what its commondir
// file names (relative to gitDir), else gitDir.
func common(gitDir string) string {
	b, err := os.ReadFile(filepath.Join(gitDir, "commondir"))
	if err != nil {
		return gitDir
	}
	c := strings.TrimSpace(string(b))
	if c == "" {
		return gitDir
	}
	if !filepath.IsAbs(c) {
		c = filepath.Join(gitDir, c)
	}
	return filepath.Clean(c)
}

// getenv returns key's value in env, the last one when it is there more
// than once (as exec.Cmd would pass it), or "".
func getenv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}
