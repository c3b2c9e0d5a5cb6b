package parallel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ralph-dev/ralph/hostgit"
	"github.com/ralph-dev/ralph/safefile"
)

// Commits lists the commits reachable from tip but not from base (git
// rev-list), newest first.
func (g *ExecGit) Commits(ctx context.Context, base, tip string) ([]string, error) {
	if err := checkName("tip", tip); err != nil {
		return nil, err
	}
	args := []string{"rev-list", tip}
	if base != "" {
		if err := checkName("base", base); err != nil {
			return nil, err
		}
		args = append(args, "^"+base)
	}
	out, err := g.run(ctx, g.Root, nil, append(args, "--")...)
	if err != nil {
		return nil, err
	}
	var commits []string
	for c := range strings.FieldsSeq(out) {
		commits = append(commits, c)
	}
	return commits, nil
}

// Branches lists refs/heads/ with git for-each-ref.
func (g *ExecGit) Branches(ctx context.Context) (map[string]string, error) {
	return g.Refs(ctx, "refs/heads")
}

// CheckWorktree implements Git.CheckWorktree. Which git directory the
// repository keeps for dir is hostgit.Repo.Linked's answer (from
// <common dir>/worktrees/*/gitdir, each naming its worktree's .git) — the
// one every git command ralph runs in a worker's tree is given — so that
// a tree this accepts is one those commands run in, and one they would
// refuse is a *WorktreeError here (task trouble: set aside or repaired),
// never a git failure later. It reads the file system only — dir with
// lstat, the repository's records, dir/.git opened without following a
// link — and runs no git in dir.
func (g *ExecGit) CheckWorktree(ctx context.Context, dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	bad := func(problem string, gitFileOnly bool) error {
		return &WorktreeError{Dir: dir, Problem: problem, GitFileOnly: gitFileOnly}
	}
	info, err := os.Lstat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &WorktreeError{Dir: dir, Problem: "it is gone", Gone: true}
	case err != nil:
		return err
	case info.Mode()&fs.ModeSymlink != 0:
		to, _ := os.Readlink(abs)
		return bad(fmt.Sprintf("it is a symbolic link (to %s)", to), false)
	case !info.IsDir():
		return bad("it is not a directory", false)
	}
	admin, err := g.adminDir(dir)
	if err != nil {
		return err
	}
	if admin == "" {
		return bad("the repository keeps no worktree there", false)
	}
	named, problem, err := readGitFile(filepath.Join(abs, ".git"))
	if err != nil {
		return err
	}
	if problem != "" {
		return bad(problem, true)
	}
	if !filepath.IsAbs(named) {
		named = filepath.Join(abs, named)
	}
	ni, err := os.Stat(named)
	ai, aerr := os.Lstat(admin)
	if err != nil || aerr != nil || !os.SameFile(ni, ai) {
		return bad(fmt.Sprintf("its .git names %s, not its git directory %s", named, admin), true)
	}
	return nil
}

// readGitFile reads a worktree's .git file without following a link
// (safefile.Open: no link, no FIFO, the file opened the one looked at):
// what it names, or a problem in words when it is not such a file.
func readGitFile(path string) (named, problem string, err error) {
	f, err := safefile.Open(filepath.Dir(path), filepath.Base(path))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "its .git is gone", nil
	case errors.Is(err, safefile.ErrLink):
		return "", "its .git is a symbolic link", nil
	case errors.Is(err, fs.ErrPermission):
		return "", "its .git cannot be read", nil
	case err != nil:
		// Not a regular file: say what it is (Lstat follows nothing).
		if fi, lerr := os.Lstat(path); lerr == nil && fi.IsDir() {
			return "", "its .git is a directory (a repository of its own)", nil
		} else if lerr == nil && !fi.Mode().IsRegular() {
			return "", "its .git is not a file", nil
		}
		return "", "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", "", err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	name, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "gitdir: ")
	if !ok || name == "" {
		return "", "its .git is not a gitdir: file", nil
	}
	return name, "", nil
}

// adminDir returns the git directory the repository keeps for the
// worktree at dir (hostgit.Repo.Linked: <common dir>/worktrees/<name>,
// whose gitdir file names <dir>/.git), "" when it keeps none.
func (g *ExecGit) adminDir(dir string) (string, error) {
	main, err := g.hostRepo(g.Root)
	if err != nil {
		return "", err
	}
	l, err := main.Linked(dir)
	if errors.Is(err, hostgit.ErrNotWorktree) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return l.GitDir, nil
}

// RepairWorktree implements Git.RepairWorktree. Nothing on the way is
// followed (package safefile, from Root when dir lies in it, else from
// dir's parent): dir must still be the directory the repository keeps a
// worktree at, its .git is moved into aside by a rename between
// directory descriptors, and the new .git is created anew (O_EXCL), so
// a link the agent planted at aside or on the way to it is refused, never
// followed.
func (g *ExecGit) RepairWorktree(ctx context.Context, dir, aside string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if aside, err = filepath.Abs(aside); err != nil {
		return err
	}
	info, err := os.Lstat(abs)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return fmt.Errorf("parallel: repair %s: not a directory", dir)
	}
	admin, err := g.adminDir(dir)
	if err != nil {
		return err
	}
	if admin == "" {
		return fmt.Errorf("parallel: repair %s: the repository keeps no worktree there", dir)
	}
	base := treeBase(g.absRoot(), abs)
	td, err := safefile.OpenDir(base, abs)
	if err != nil {
		return fmt.Errorf("parallel: repair %s: %w", dir, err)
	}
	defer td.Close()
	self, err := td.OpenSelf()
	if err != nil {
		return err
	}
	now, err := self.Stat()
	self.Close()
	if err != nil || !os.SameFile(now, info) {
		return fmt.Errorf("parallel: repair %s: it was replaced while ralph looked at it", dir)
	}
	if _, err := td.Lstat(".git"); err == nil {
		ad, err := safefile.MkdirAllDir(base, aside, 0o755)
		if err != nil {
			return fmt.Errorf("parallel: repair %s: %w", dir, err)
		}
		err = renameBetween(td, ".git", ad, ".git")
		ad.Close()
		if err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := td.Create(".git", 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString("gitdir: " + admin + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SetAside implements Git.SetAside: a rename, which moves a link itself,
// following no link on the way to dir or to aside (both must lie below
// Root, or below dir's parent when dir lies outside Root): a link the
// agent planted at aside's directory is refused. A dir that does not
// exist is nothing to set aside.
func (g *ExecGit) SetAside(_ context.Context, dir, aside string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if aside, err = filepath.Abs(aside); err != nil {
		return err
	}
	base := treeBase(g.absRoot(), abs)
	if _, err := safefile.Lstat(base, abs); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err := moveNoFollow(base, abs, aside); err != nil {
		return fmt.Errorf("parallel: setting %s aside: %w", dir, err)
	}
	return nil
}

// absRoot is Root, absolute.
func (g *ExecGit) absRoot() string {
	if abs, err := filepath.Abs(g.Root); err == nil {
		return abs
	}
	return g.Root
}
