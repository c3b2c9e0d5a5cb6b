package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDiscoverRepository checks that the repository a Boundary finds is
// the one git finds, in a main checkout, a worktree, a submodule and their
// subdirectories, and that what is no git directory is no repository.
func TestDiscoverRepository(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := gitEnv(root)
	repo, lib := filepath.Join(root, "repo"), filepath.Join(root, "lib")
	mkdirs(t, filepath.Join(repo, "a", "b"), lib)
	for _, d := range []string{repo, lib} {
		git(t, env, d, "init", "-q", "-b", "main")
		writeFile(t, filepath.Join(d, "f"), "x")
		git(t, env, d, "add", "f")
		git(t, env, d, "commit", "-q", "-m", "first")
	}
	wt := filepath.Join(root, "wt")
	git(t, env, repo, "worktree", "add", "-q", "-b", "task", wt)
	mkdirs(t, filepath.Join(wt, "sub"))
	git(t, env, repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "vendor/lib")

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
			out := git(t, env, tc.dir, "rev-parse", "--absolute-git-dir", "--git-common-dir", "--show-toplevel")
			lines := strings.Split(out, "\n")
			want := [3]string{lines[0], lines[1], lines[2]}
			if !filepath.IsAbs(want[1]) {
				want[1] = filepath.Join(tc.dir, want[1])
			}
			for i := range want {
				if want[i], err = filepath.EvalSymlinks(want[i]); err != nil {
					t.Fatal(err)
				}
			}
			r := discoverRepository(tc.dir)
			if r == nil {
				t.Fatal("no repository found")
			}
			if diff := cmp.Diff(want, [3]string{r.gitDir, r.common, r.top}); diff != "" {
				t.Errorf("git dir, common dir, top (-git +discoverRepository):\n%s", diff)
			}
		})
	}

	for _, tc := range []struct {
		name  string
		setup func(dir string)
	}{
		{"gitdir: / in a project that is not a repository", func(dir string) { writeFile(t, filepath.Join(dir, ".git"), "gitdir: /\n") }},
		{"commondir naming /", func(dir string) {
			git(t, env, dir, "init", "-q")
			writeFile(t, filepath.Join(dir, ".git", "commondir"), "/\n")
		}},
		{"an empty .git directory", func(dir string) { mkdirs(t, filepath.Join(dir, ".git")) }},
		{"a .git file that names nothing", func(dir string) { writeFile(t, filepath.Join(dir, ".git"), "hello\n") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Looked for from a directory under the file system's root, which
			// is in no repository (the temp directory may be in one).
			dir := t.TempDir()
			tc.setup(dir)
			if r := discoverRepository(dir); r != nil && within(dir, r.top) {
				t.Errorf("discoverRepository found %+v", *r)
			}
		})
	}
}

func TestWorktreeGitDir(t *testing.T) {
	p := newProject(t)
	r := discoverRepository(p.repo)
	want := git(t, p.env, p.tree, "rev-parse", "--absolute-git-dir")
	if got := r.worktreeGitDir(filepath.Join(p.tree, ".git")); got != want {
		t.Errorf("worktreeGitDir = %q, want %q", got, want)
	}
	// What the tree's own .git file says is not read: a .git file naming
	// another git directory finds the one the repository has for it.
	writeFile(t, filepath.Join(p.tree, ".git"), "gitdir: /\n")
	if got := r.worktreeGitDir(filepath.Join(p.tree, ".git")); got != want {
		t.Errorf("with the .git file rewritten: worktreeGitDir = %q, want %q", got, want)
	}
	if got := r.worktreeGitDir(filepath.Join(p.sibling, ".git")); got != "" {
		t.Errorf("worktreeGitDir of a tree that is none = %q", got)
	}
}

func TestResolveHEAD(t *testing.T) {
	p := newProject(t)
	gitDir := filepath.Join(p.repo, ".git")
	head := git(t, p.env, p.repo, "rev-parse", "HEAD")
	refs := dirRefs(gitDir)
	if got := resolveHEAD(refs, refs); got != head {
		t.Errorf("loose ref: %q, want %q", got, head)
	}
	git(t, p.env, p.repo, "pack-refs", "--all")
	if got := resolveHEAD(refs, refs); got != head {
		t.Errorf("packed ref: %q, want %q", got, head)
	}
	wtDir := filepath.Join(gitDir, "worktrees", "w1")
	if got := resolveHEAD(dirRefs(wtDir), refs); got != head {
		t.Errorf("detached worktree HEAD: %q, want %q", got, head)
	}
	for name, content := range map[string]string{
		"unborn branch":      "ref: refs/heads/none\n",
		"outside refs":       "ref: ../../etc/passwd\n",
		"not an id":          "hello\n",
		"short id":           head[:12] + "\n",
		"symbolic ref loops": "ref: refs/heads/loop\n",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "HEAD"), content)
			writeFile(t, filepath.Join(dir, "refs", "heads", "loop"), "ref: refs/heads/loop\n")
			if got := resolveHEAD(dirRefs(dir), dirRefs(dir)); got != "" {
				t.Errorf("resolveHEAD = %q, want none", got)
			}
		})
	}
	t.Run("a FIFO for HEAD", func(t *testing.T) {
		dir := t.TempDir()
		if err := mkfifo(filepath.Join(dir, "HEAD")); err != nil {
			t.Skip(err)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		if got := resolveHEAD(rootRefs(root), rootRefs(root)); got != "" {
			t.Errorf("resolveHEAD = %q, want none", got)
		}
	})
	t.Run("a link out of the private directory", func(t *testing.T) {
		dir, outside := t.TempDir(), t.TempDir()
		writeFile(t, filepath.Join(outside, "HEAD"), head+"\n")
		if err := os.Symlink(filepath.Join(outside, "HEAD"), filepath.Join(dir, "HEAD")); err != nil {
			t.Fatal(err)
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer root.Close()
		if got := resolveHEAD(rootRefs(root), rootRefs(root)); got != "" {
			t.Errorf("resolveHEAD followed a link out of its root: %q", got)
		}
	})
}

// TestDropWorktreeSetting: the private copy of the config loses
// core.worktree (its work tree is where the copy is mounted) and keeps the
// rest; a config that only mentions worktrees elsewhere is left as it is.
func TestDropWorktreeSetting(t *testing.T) {
	p := newProject(t)
	r := discoverRepository(p.repo)
	for name, tc := range map[string]struct {
		config  string
		dropped bool
	}{
		"core.worktree": {"[core]\n\tbare = false\n\tworktree = /elsewhere\n[user]\n\tname = kept\n", true},
		"no such key":   {"[extensions]\n\tworktreeConfig = true\n[user]\n\tname = kept\n", false},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "config")
			writeFile(t, path, tc.config)
			if err := dropWorktreeSetting(r.host, path); err != nil {
				t.Fatal(err)
			}
			got := readFile(t, path)
			if strings.Contains(got, "/elsewhere") || !strings.Contains(got, "name = kept") {
				t.Errorf("config after dropWorktreeSetting:\n%s", got)
			}
			if !tc.dropped && got != tc.config {
				t.Errorf("a config without core.worktree changed:\n%s", got)
			}
		})
	}
}

// TestDiscoverRepositoryAsGitDoes: the rules the sandbox now shares with
// ralph's host git (hostgit.Find) — a ceiling stops the search, as it
// stops the agent's own git; a FIFO planted as the .git file or as
// commondir hangs nothing.
func TestDiscoverRepositoryAsGitDoes(t *testing.T) {
	p := newProject(t)
	sub := filepath.Join(p.repo, "a", "b")
	mkdirs(t, sub)
	t.Run("ceiling", func(t *testing.T) {
		t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Join(p.repo, "a"))
		if r := discoverRepository(sub); r != nil {
			t.Errorf("found %+v above a ceiling", *r)
		}
	})
	t.Run("FIFOs", func(t *testing.T) {
		if err := mkfifo(filepath.Join(sub, ".git")); err != nil {
			t.Skip(err)
		}
		commondir := filepath.Join(p.repo, ".git", "commondir")
		if err := mkfifo(commondir); err != nil {
			t.Skip(err)
		}
		defer os.Remove(commondir)
		done := make(chan *repository, 1)
		go func() { done <- discoverRepository(sub) }()
		select {
		case r := <-done:
			// git goes on upwards past a .git that is neither file nor
			// directory, and a commondir it cannot read names none.
			if r == nil || r.top != p.repo || r.common != r.gitDir {
				t.Errorf("found %+v", r)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a FIFO hung the discovery")
		}
	})
}
