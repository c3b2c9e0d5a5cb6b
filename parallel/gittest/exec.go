package gittest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/parallel"
)

// An ExecRepo is a DiskRepo: a real repository, in a temporary directory
// whose path has a space, with parallel.ExecGit over it. Its hands run
// the git binary on PATH with an identity of their own; the test's
// environment decides the rest of git's configuration (parallel's tests
// run with an empty global and no system configuration).
type ExecRepo struct {
	root  string
	trees string // where NewDir's paths are
	git   *parallel.ExecGit
}

var _ DiskRepo = (*ExecRepo)(nil)

// NewExecRepo makes a repository whose main holds files, in one commit.
// It skips t when there is no git on PATH, unless $CI is "true".
func NewExecRepo(t testing.TB, files map[string]string) *ExecRepo {
	t.Helper()
	NeedGit(t)
	root := filepath.Join(t.TempDir(), "my repo")
	Run(t, t.TempDir(), "init", "--quiet", "--initial-branch=main", root)
	r := &ExecRepo{root: root, trees: t.TempDir(), git: &parallel.ExecGit{Root: root}}
	r.Write(t, root, files)
	r.CommitAll(t, root, "initial")
	return r
}

// NeedGit skips tb when there is no git on PATH, unless $CI is "true",
// where a missing git is a broken setup.
func NeedGit(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatal("git is not on PATH, and CI=true: these tests must run")
		}
		tb.Skip("git is not on PATH:", err)
	}
}

// Run runs plain git in dir as a person would, with an identity, and
// returns its output, trimmed.
func Run(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=Test", "-c", "user.email=test@example.com"}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		tb.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// Git returns the ExecGit over the repository.
func (r *ExecRepo) Git() parallel.Git { return r.git }

// Root returns the repository's main working tree.
func (r *ExecRepo) Root() string { return r.root }

// NewDir returns a path in the repository's directory of trees.
func (r *ExecRepo) NewDir(_ testing.TB, name string) string {
	return filepath.Join(r.trees, name)
}

// Write writes files in dir, making directories; content "" deletes.
func (r *ExecRepo) Write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if content == "" {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// CommitAll runs git add --all and git commit in dir.
func (r *ExecRepo) CommitAll(t testing.TB, dir, message string) string {
	t.Helper()
	Run(t, dir, "add", "--all")
	Run(t, dir, "commit", "--quiet", "--allow-empty", "--no-verify", "-m", message)
	return Run(t, dir, "rev-parse", "HEAD")
}

// Files lists commit's tree with git ls-tree and reads each blob.
func (r *ExecRepo) Files(t testing.TB, commit string) map[string]string {
	t.Helper()
	files := map[string]string{}
	out := Run(t, r.root, "ls-tree", "-r", "-z", "--name-only", commit)
	for p := range strings.SplitSeq(out, "\x00") {
		if p != "" {
			files[p] = readBlob(t, r.root, commit+":"+p)
		}
	}
	return files
}

// readBlob returns the blob's content untrimmed (Run trims).
func readBlob(t testing.TB, dir, spec string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", dir, "cat-file", "blob", spec).Output()
	if err != nil {
		t.Fatalf("git cat-file blob %s: %v", spec, err)
	}
	return string(out)
}

// TreeFiles walks dir, leaving out .git.
func (r *ExecRepo) TreeFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	return TreeFiles(t, dir)
}

// TreeFiles returns the files under dir, .git aside, and their contents.
func TreeFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// BreakGitFile rewrites dir/.git to name a git directory that does not
// exist.
func (r *ExecRepo) BreakGitFile(t testing.TB, dir string) {
	t.Helper()
	gone := filepath.Join(t.TempDir(), "no such gitdir")
	if err := os.WriteFile(filepath.Join(dir, ".git"), []byte("gitdir: "+gone+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Clone runs git clone.
func (r *ExecRepo) Clone(t testing.TB) Repo {
	t.Helper()
	root := filepath.Join(t.TempDir(), "my clone")
	Run(t, t.TempDir(), "clone", "--quiet", "--no-hardlinks", r.root, root)
	return &ExecRepo{root: root, trees: t.TempDir(), git: &parallel.ExecGit{Root: root}}
}
