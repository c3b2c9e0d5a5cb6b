package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitEnv is a hermetic environment for git in tests, with home as HOME.
func gitEnv(home string) []string {
	return append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
}

// git runs git in dir and returns its output, trimmed.
func git(t testing.TB, env []string, dir string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on PATH")
	}
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(t testing.TB, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mkdirs(t testing.TB, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// project is a layout like a parallel build's: a repository with a plan
// in .ralph/ and a worker's tree in .ralph/worktrees/w1 (made by git
// worktree add, as ralph makes it), a sibling project, a home with an
// agent's state directory, and the temp directory the scratch goes in.
type project struct {
	root    string // parent of everything below
	repo    string // the main checkout, the project root
	tree    string // .ralph/worktrees/w1
	sibling string // another project
	home    string
	state   string // the agent's state directory, ~/.agent
	tmp     string
	env     []string
}

func newProject(t testing.TB) *project {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := &project{
		root:    root,
		repo:    filepath.Join(root, "repo"),
		sibling: filepath.Join(root, "sibling"),
		home:    filepath.Join(root, "home"),
		tmp:     filepath.Join(root, "tmp"),
	}
	p.tree = filepath.Join(p.repo, ".ralph", "worktrees", "w1")
	p.state = filepath.Join(p.home, ".agent")
	mkdirs(t, p.repo, filepath.Join(p.repo, ".ralph", "logs"), p.sibling, p.state, p.tmp)
	p.env = append(gitEnv(p.home), "TMPDIR="+p.tmp)
	git(t, p.env, p.repo, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(p.repo, "README"), "hello\n")
	writeFile(t, filepath.Join(p.repo, ".gitignore"), ".ralph/\n")
	git(t, p.env, p.repo, "add", "README", ".gitignore")
	git(t, p.env, p.repo, "commit", "-q", "-m", "first")
	git(t, p.env, p.repo, "worktree", "add", "-q", "--detach", p.tree)
	writeFile(t, filepath.Join(p.repo, ".ralph", "progress.db"), "the plan\n")
	return p
}
