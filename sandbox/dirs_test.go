package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gitEnv is a hermetic environment for git in tests.
func gitEnv(home string) []string {
	return append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
}

func gitIn(t *testing.T, env []string, dir string, args ...string) string {
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

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGitDirs checks that gitDirs finds what git itself finds, in a main
// checkout, a worktree, a submodule and their subdirectories.
func TestGitDirs(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := gitEnv(root)
	repo, lib := filepath.Join(root, "repo"), filepath.Join(root, "lib")
	mkdirs(t, filepath.Join(repo, "a", "b"), lib)
	for _, d := range []string{repo, lib} {
		gitIn(t, env, d, "init", "-q", "-b", "main")
		if err := os.WriteFile(filepath.Join(d, "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		gitIn(t, env, d, "add", "f")
		gitIn(t, env, d, "commit", "-q", "-m", "first")
	}
	wt := filepath.Join(root, "wt")
	gitIn(t, env, repo, "worktree", "add", "-q", "-b", "task", wt)
	mkdirs(t, filepath.Join(wt, "sub"))
	gitIn(t, env, repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "vendor/lib")
	outside := filepath.Join(root, "outside")
	mkdirs(t, outside)

	for _, tc := range []struct {
		name string
		dir  string
	}{
		{"main checkout", repo},
		{"subdirectory", filepath.Join(repo, "a", "b")},
		{"worktree", wt},
		{"worktree subdirectory", filepath.Join(wt, "sub")},
		{"submodule", filepath.Join(repo, "vendor", "lib")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := gitIn(t, env, tc.dir, "rev-parse", "--absolute-git-dir", "--git-common-dir")
			lines := strings.Split(out, "\n")
			want := [2]string{lines[0], lines[1]}
			if !filepath.IsAbs(want[1]) {
				want[1] = filepath.Join(tc.dir, want[1])
			}
			for i := range want {
				if want[i], err = filepath.EvalSymlinks(want[i]); err != nil {
					t.Fatal(err)
				}
			}
			g, c := gitDirs(tc.dir, env)
			if diff := cmp.Diff(want, [2]string{g, c}); diff != "" {
				t.Errorf("gitDirs(%s) git dir, common dir (-git +gitDirs):\n%s", tc.dir, diff)
			}
		})
	}
	t.Run("outside any repository", func(t *testing.T) {
		// The temp directory may itself lie in a repository; look from
		// the file system's root, which does not.
		if g, c := gitDirs("/", nil); g != "" || c != "" {
			t.Errorf("gitDirs(/) = %q, %q", g, c)
		}
	})
	t.Run("GIT_DIR and GIT_COMMON_DIR", func(t *testing.T) {
		g, c := gitDirs(outside, []string{"GIT_DIR=../repo/.git/worktrees/wt", "GIT_COMMON_DIR=" + filepath.Join(repo, ".git")})
		want := [2]string{filepath.Join(repo, ".git", "worktrees", "wt"), filepath.Join(repo, ".git")}
		if diff := cmp.Diff(want, [2]string{g, c}); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

func TestDirs(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := gitEnv(root)
	repo, wt, tmp := filepath.Join(root, "repo"), filepath.Join(root, "wt"), filepath.Join(root, "tmp")
	mkdirs(t, filepath.Join(repo, ".ralph"), tmp)
	gitIn(t, env, repo, "init", "-q", "-b", "main")
	gitIn(t, env, repo, "commit", "-q", "--allow-empty", "-m", "first")
	gitIn(t, env, repo, "worktree", "add", "-q", "-b", "task", wt)
	link := filepath.Join(root, "link")
	if err := os.Symlink(wt, link); err != nil {
		t.Fatal(err)
	}
	tmpLink := filepath.Join(root, "tmplink")
	if err := os.Symlink(tmp, tmpLink); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		dir  string
		env  []string
		want []string
	}{
		{
			name: "worktree of a parallel build",
			dir:  wt,
			env:  []string{"RALPH_DIR=" + repo, "RALPH_WORKTREE=" + wt, "TMPDIR=" + tmp},
			want: []string{wt, filepath.Join(repo, ".git", "worktrees", "wt"), filepath.Join(repo, ".git"), filepath.Join(repo, ".ralph"), tmp},
		},
		{
			name: "symbolic links resolved",
			dir:  link,
			env:  []string{"RALPH_DIR=" + repo, "RALPH_WORKTREE=" + link, "TMPDIR=" + tmpLink},
			want: []string{wt, filepath.Join(repo, ".git", "worktrees", "wt"), filepath.Join(repo, ".git"), filepath.Join(repo, ".ralph"), tmp},
		},
		{
			name: "project without RALPH_DIR: its own .ralph",
			dir:  repo,
			env:  []string{"TMPDIR=" + tmp},
			want: []string{repo, filepath.Join(repo, ".git"), filepath.Join(repo, ".ralph"), tmp},
		},
		{
			name: "missing paths skipped, the last TMPDIR wins",
			dir:  wt,
			env:  []string{"RALPH_DIR=" + filepath.Join(root, "gone"), "RALPH_WORKTREE=" + filepath.Join(root, "gone"), "TMPDIR=/nonexistent", "TMPDIR=" + tmp},
			want: []string{wt, filepath.Join(repo, ".git", "worktrees", "wt"), filepath.Join(repo, ".git"), tmp},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Dirs(tc.dir, tc.env)); diff != "" {
				t.Errorf("Dirs (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("no TMPDIR: os.TempDir()", func(t *testing.T) {
		t.Setenv("TMPDIR", tmp)
		got := Dirs(repo, nil)
		if want := tmp; got[len(got)-1] != want {
			t.Errorf("Dirs = %v, want %s last", got, want)
		}
	})
}
