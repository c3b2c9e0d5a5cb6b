// Package gittest is the conformance suite of parallel.Git: TestGit runs
// one contract — every method of the seam — against any implementation,
// the way River's riverdrivertest runs one suite against each driver and
// looptest.TestTaskStore against each store. parallel's tests run it
// against the fake Git its policy tests use and against ExecGit on real
// repositories (NewExecRepo), so that what the policy tests take from
// the fake is what git does, as far as the suite reaches.
//
// For an implementation on a real repository (a Repo that is also a
// DiskRepo) the suite holds it to the trust rules of ARCHITECTURE.md §7 as
// well, so that no change of the seam can drop them:
//
//   - no program the repository names runs: hooks (in .git/hooks or
//     under a core.hooksPath), core.fsmonitor, clean/smudge/process
//     filters a committed .gitattributes sends files through, and diff
//     and merge drivers are planted in the repository's own
//     configuration, shown to run under plain git, and must not run
//     during any method of the seam, the remote ones included;
//   - git runs with explicit directories: a worktree whose .git file the
//     agent rewrote to name another repository is never worked through
//     that file — the other repository is left as it was, and what the
//     seam reads of the worktree is the worktree's own.
//
// The suite drives a Repo: the Git under test and the hands of a person
// or an agent who changes the repository outside the seam (writing files
// in a worktree, committing there).
package gittest

import (
	"testing"

	"github.com/ralph-dev/ralph/parallel"
)

// A Repo is a repository under test: the Git over it and the hands that
// change it outside the seam. A new Repo's branch refs/heads/main names
// one commit holding the files the suite asked for, checked out in the
// repository's own working tree (so main is checked out, and HEAD names
// it).
type Repo interface {
	// Git is the implementation under test.
	Git() parallel.Git
	// NewDir returns a path, unique to name, where nothing is yet and
	// where the suite may make a worktree (Git.AddWorktree) or set one
	// aside (Git.SetAside, Git.RepairWorktree). The paths of one Repo
	// share a parent directory, as a build's trees and their asides do
	// (<root>/.ralph/worktrees).
	NewDir(t testing.TB, name string) string
	// Write sets files in worktree dir as an agent writes them: a path
	// with content "" is deleted.
	Write(t testing.TB, dir string, files map[string]string)
	// CommitAll commits everything in dir's tree on its HEAD, as an
	// agent's git add --all && git commit -m message would, and returns
	// the commit.
	CommitAll(t testing.TB, dir, message string) string
	// Files returns the files of commit and their contents.
	Files(t testing.TB, commit string) map[string]string
	// TreeFiles returns the files in worktree dir (not its .git) and
	// their contents.
	TreeFiles(t testing.TB, dir string) map[string]string
	// BreakGitFile breaks only the .git of worktree dir, as an agent
	// that rewrote it would: Git.CheckWorktree must then report a
	// *parallel.WorktreeError with GitFileOnly set.
	BreakGitFile(t testing.TB, dir string)
	// Clone returns a new repository whose remote "origin" is this one,
	// with refs/heads/main checked out at this one's main.
	Clone(t testing.TB) Repo
}

// A DiskRepo is a Repo on disk, in a real git repository: TestGit then
// checks the trust rules of ARCHITECTURE.md §7 against it too.
type DiskRepo interface {
	Repo
	// Root is the repository's main working tree.
	Root() string
}

// NewRepo returns a new Repo whose main holds files (see Repo).
type NewRepo func(t *testing.T, files map[string]string) Repo
