package hostgit_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/hostgit"
)

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed")
		}
		t.Skip("git is not installed")
	}
}

// isolate points git at a global configuration file of the test's own
// (with an identity) and no system file; it returns the global file.
func isolate(t *testing.T) string {
	t.Helper()
	needGit(t)
	global := filepath.Join(t.TempDir(), "gitconfig")
	write(t, global, "[user]\n\tname = Dev\n\temail = dev@example.com\n[init]\n\tdefaultBranch = main\n")
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	return global
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// script writes an executable shell script.
func script(t *testing.T, path, body string) string {
	t.Helper()
	write(t, path, "#!/bin/sh\n"+body+"\n")
	if err := os.Chmod(path, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// plain runs git as a person would, in dir.
func plain(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func must(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := plain(t, dir, args...)
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(out)
}

// newRepo is a repository with one commit of a.txt.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	must(t, t.TempDir(), "init", "-q", dir)
	write(t, filepath.Join(dir, "a.txt"), "a\n")
	must(t, dir, "add", "a.txt")
	must(t, dir, "commit", "-q", "-m", "init")
	return dir
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// TestPlantedProgramsDoNotRun plants, for each class of program git can
// be told to run, one in the repository (its config, its worktree config,
// a file it includes, its hooks directory, a nested repository), shows
// that git as a person runs it does run it, and that the same command
// through hostgit does not.
func TestPlantedProgramsDoNotRun(t *testing.T) {
	isolate(t)
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	// A 401 for every request: git asks its credential helpers, then
	// askpass.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()

	type tc struct {
		name  string
		plant func(t *testing.T, repo, marker string)
		// op runs the command; ok says whether hostgit's run must succeed.
		op func(t *testing.T, run func(args ...string) error, repo string)
		// hostOp, if set, is the op through hostgit: what ralph runs
		// instead of a command that would look inside nested repositories.
		hostOp func(t *testing.T, run func(args ...string) error, repo string)
		ok     bool
	}
	touch := func(m string) string { return "touch '" + m + "'" }
	cfg := func(t *testing.T, repo string, kv ...string) {
		t.Helper()
		for i := 0; i+1 < len(kv); i += 2 {
			must(t, repo, "config", "--add", kv[i], kv[i+1])
		}
	}
	addFile := func(name string) func(t *testing.T, run func(args ...string) error, repo string) {
		n := 0
		return func(t *testing.T, run func(args ...string) error, repo string) {
			n++
			write(t, filepath.Join(repo, name), fmt.Sprintf("content %d\n", n))
			run("add", "--", name)
		}
	}
	status := func(t *testing.T, run func(args ...string) error, repo string) {
		write(t, filepath.Join(repo, "a.txt"), "changed\n")
		run("status", "--porcelain")
	}
	commit := func(t *testing.T, run func(args ...string) error, repo string) {
		run("commit", "-q", "--allow-empty", "-m", "x")
	}
	hook := func(name string) func(t *testing.T, repo, marker string) {
		return func(t *testing.T, repo, marker string) {
			script(t, filepath.Join(repo, ".git", "hooks", name), touch(marker))
		}
	}
	cases := []tc{
		{name: "fsmonitor in .git/config", plant: func(t *testing.T, repo, m string) {
			cfg(t, repo, "core.fsmonitor", touch(m)+"; false")
		}, op: status, ok: true},
		{name: "clean filter in .git/config", plant: func(t *testing.T, repo, m string) {
			write(t, filepath.Join(repo, ".gitattributes"), "*.txt filter=x\n")
			cfg(t, repo, "filter.x.clean", touch(m)+"; cat")
		}, op: addFile("b.txt"), ok: true},
		{name: "required filter", plant: func(t *testing.T, repo, m string) {
			write(t, filepath.Join(repo, ".gitattributes"), "*.txt filter=x\n")
			cfg(t, repo, "filter.x.clean", touch(m)+"; cat", "filter.x.required", "true")
		}, op: addFile("b.txt"), ok: true},
		{name: "process filter", plant: func(t *testing.T, repo, m string) {
			write(t, filepath.Join(repo, ".gitattributes"), "*.txt filter=x\n")
			cfg(t, repo, "filter.x.process", touch(m)+"; exit 1")
		}, op: addFile("b.txt"), ok: true},
		{name: "smudge filter", plant: func(t *testing.T, repo, m string) {
			write(t, filepath.Join(repo, ".gitattributes"), "*.txt filter=x\n")
			cfg(t, repo, "filter.x.smudge", touch(m)+"; cat")
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			write(t, filepath.Join(repo, "a.txt"), "scribbled\n")
			run("checkout", "--", "a.txt")
		}, ok: true},
		{name: "textconv", plant: func(t *testing.T, repo, m string) {
			write(t, filepath.Join(repo, ".gitattributes"), "*.txt diff=x\n")
			cfg(t, repo, "diff.x.textconv", touch(m)+"; cat")
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			write(t, filepath.Join(repo, "a.txt"), "changed\n")
			run("diff")
		}},
		{name: "diff driver command", plant: func(t *testing.T, repo, m string) {
			write(t, filepath.Join(repo, ".gitattributes"), "*.txt diff=x\n")
			cfg(t, repo, "diff.x.command", touch(m))
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			write(t, filepath.Join(repo, "a.txt"), "changed\n")
			run("diff")
		}},
		{name: "diff.external", plant: func(t *testing.T, repo, m string) {
			cfg(t, repo, "diff.external", touch(m))
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			write(t, filepath.Join(repo, "a.txt"), "changed\n")
			run("diff")
		}},
		{name: "merge driver", plant: func(t *testing.T, repo, m string) {
			write(t, filepath.Join(repo, ".gitattributes"), "*.txt merge=x\n")
			must(t, repo, "add", ".gitattributes")
			must(t, repo, "commit", "-q", "-m", "attributes")
			must(t, repo, "branch", "other")
			write(t, filepath.Join(repo, "a.txt"), "ours\n")
			must(t, repo, "commit", "-q", "-am", "ours")
			must(t, repo, "checkout", "-q", "other")
			write(t, filepath.Join(repo, "a.txt"), "theirs\n")
			must(t, repo, "commit", "-q", "-am", "theirs")
			must(t, repo, "checkout", "-q", "main")
			cfg(t, repo, "merge.x.driver", touch(m)+"; exit 1")
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			run("merge-tree", "--write-tree", "main", "other")
		}},
		{name: "pre-commit hook", plant: hook("pre-commit"), op: commit, ok: true},
		{name: "post-commit hook", plant: hook("post-commit"), op: commit, ok: true},
		{name: "reference-transaction hook", plant: hook("reference-transaction"), op: func(t *testing.T, run func(args ...string) error, repo string) {
			run("update-ref", "refs/heads/moved", "HEAD")
		}, ok: true},
		{name: "post-checkout hook", plant: hook("post-checkout"), op: func(t *testing.T, run func(args ...string) error, repo string) {
			run("checkout", "-q", "--detach", "HEAD")
		}, ok: true},
		{name: "core.hooksPath", plant: func(t *testing.T, repo, m string) {
			script(t, filepath.Join(repo, "hooks", "pre-commit"), touch(m))
			cfg(t, repo, "core.hooksPath", filepath.Join(repo, "hooks"))
		}, op: commit, ok: true},
		{name: "fsmonitor in the worktree config", plant: func(t *testing.T, repo, m string) {
			cfg(t, repo, "extensions.worktreeConfig", "true")
			must(t, repo, "config", "--worktree", "core.fsmonitor", touch(m)+"; false")
		}, op: status, ok: true},
		{name: "filter in the worktree config", plant: func(t *testing.T, repo, m string) {
			write(t, filepath.Join(repo, ".gitattributes"), "*.txt filter=x\n")
			cfg(t, repo, "extensions.worktreeConfig", "true")
			must(t, repo, "config", "--worktree", "filter.x.clean", touch(m)+"; cat")
		}, op: addFile("b.txt"), ok: true},
		{name: "filter in an included file", plant: func(t *testing.T, repo, m string) {
			inc := filepath.Join(t.TempDir(), "inc.cfg")
			write(t, inc, "[filter \"x\"]\n\tclean = \""+touch(m)+"; cat\"\n")
			write(t, filepath.Join(repo, ".gitattributes"), "*.txt filter=x\n")
			cfg(t, repo, "include.path", inc)
		}, op: addFile("b.txt"), ok: true},
		{name: "hook path in a relative include", plant: func(t *testing.T, repo, m string) {
			script(t, filepath.Join(repo, "h", "pre-commit"), touch(m))
			write(t, filepath.Join(repo, "inc.cfg"), "[core]\n\thooksPath = "+filepath.Join(repo, "h")+"\n")
			cfg(t, repo, "include.path", "../inc.cfg")
		}, op: commit, ok: true},
		{name: "filter in an includeIf gitdir file", plant: func(t *testing.T, repo, m string) {
			inc := filepath.Join(t.TempDir(), "inc.cfg")
			write(t, inc, "[filter \"x\"]\n\tclean = \""+touch(m)+"; cat\"\n")
			write(t, filepath.Join(repo, ".gitattributes"), "*.txt filter=x\n")
			cfg(t, repo, "includeIf.gitdir:"+filepath.Join(repo, ".git")+".path", inc)
		}, op: addFile("b.txt"), ok: true},
		{name: "filter in an includeIf onbranch file", plant: func(t *testing.T, repo, m string) {
			inc := filepath.Join(t.TempDir(), "inc.cfg")
			write(t, inc, "[filter \"x\"]\n\tclean = \""+touch(m)+"; cat\"\n")
			write(t, filepath.Join(repo, ".gitattributes"), "*.txt filter=x\n")
			cfg(t, repo, "includeIf.onbranch:main.path", inc)
		}, op: addFile("b.txt"), ok: true},
		{name: "uploadpack", plant: func(t *testing.T, repo, m string) {
			remote := newRepo(t)
			cfg(t, repo, "remote.o.url", remote, "remote.o.uploadpack", touch(m)+"; git-upload-pack")
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			run("fetch", "-q", "o", "main")
		}, ok: true},
		{name: "receivepack", plant: func(t *testing.T, repo, m string) {
			remote := filepath.Join(t.TempDir(), "remote.git")
			must(t, repo, "init", "-q", "--bare", remote)
			cfg(t, repo, "remote.o.url", remote, "remote.o.receivepack", touch(m)+"; git-receive-pack")
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			run("push", "-q", "o", "HEAD:refs/heads/pushed")
		}, ok: true},
		{name: "ext:: URL", plant: func(t *testing.T, repo, m string) {
			cfg(t, repo, "protocol.ext.allow", "always", "remote.e.url", "ext::sh -c touch% "+m)
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			run("fetch", "-q", "e")
		}},
		{name: "remote helper named by vcs", plant: func(t *testing.T, repo, m string) {
			script(t, filepath.Join(bin, "git-remote-planted"), touch(m))
			cfg(t, repo, "remote.v.url", "x", "remote.v.vcs", "planted")
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			run("fetch", "-q", "v")
		}},
		{name: "core.sshCommand", plant: func(t *testing.T, repo, m string) {
			cfg(t, repo, "core.sshCommand", touch(m)+"; false", "remote.s.url", "ssh://127.0.0.1:1/x")
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			run("fetch", "-q", "s")
		}},
		{name: "gpg.program", plant: func(t *testing.T, repo, m string) {
			gpg := script(t, filepath.Join(t.TempDir(), "gpg"), touch(m)+"; exit 1")
			cfg(t, repo, "commit.gpgSign", "true", "gpg.program", gpg)
		}, op: commit},
		{name: "credential helper", plant: func(t *testing.T, repo, m string) {
			cfg(t, repo, "credential.helper", "!"+touch(m)+"; echo")
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			run("fetch", "-q", srv.URL+"/x.git")
		}},
		{name: "credential helper for a URL", plant: func(t *testing.T, repo, m string) {
			cfg(t, repo, "credential."+srv.URL+".helper", "!"+touch(m)+"; echo")
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			run("fetch", "-q", srv.URL+"/x.git")
		}},
		{name: "core.askPass", plant: func(t *testing.T, repo, m string) {
			ask := script(t, filepath.Join(t.TempDir(), "ask"), touch(m)+"; echo secret")
			cfg(t, repo, "core.askPass", ask)
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			run("fetch", "-q", srv.URL+"/x.git")
		}},
		{name: "fsmonitor in a nested repository", plant: func(t *testing.T, repo, m string) {
			nestedRepo(t, repo)
			must(t, filepath.Join(repo, "lib"), "config", "core.fsmonitor", touch(m)+"; false")
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			os.Chtimes(filepath.Join(repo, "lib", "f.txt"), time.Now(), time.Now())
			run("add", "-u")
		}, ok: true},
		{name: "filter in a nested repository", plant: func(t *testing.T, repo, m string) {
			nestedRepo(t, repo)
			lib := filepath.Join(repo, "lib")
			write(t, filepath.Join(lib, ".gitattributes"), "* filter=n\n")
			must(t, lib, "config", "filter.n.clean", touch(m)+"; cat")
		}, op: func(t *testing.T, run func(args ...string) error, repo string) {
			os.Chtimes(filepath.Join(repo, "lib", "f.txt"), time.Now(), time.Now())
			run("add", "-u")
		}, hostOp: func(t *testing.T, run func(args ...string) error, repo string) {
			// git add -u runs git status inside the nested repository,
			// with its configuration: ralph stages with these instead.
			os.Chtimes(filepath.Join(repo, "lib", "f.txt"), time.Now(), time.Now())
			run("status", "--porcelain", "--ignore-submodules=dirty")
			run("diff-files", "--name-only", "--ignore-submodules=dirty")
		}, ok: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			repo := newRepo(t)
			marker := filepath.Join(t.TempDir(), "planted-ran")
			c.plant(t, repo, marker)
			// As a person runs git: the plant works.
			c.op(t, func(args ...string) error {
				_, err := plain(t, repo, args...)
				return err
			}, repo)
			if !exists(marker) {
				t.Fatalf("the planted program did not run under plain git: the test shows nothing")
			}
			os.Remove(marker)
			r, err := hostgit.Find(repo)
			if err != nil {
				t.Fatal(err)
			}
			op := c.op
			if c.hostOp != nil {
				op = c.hostOp
			}
			var runErr error
			op(t, func(args ...string) error {
				_, err := r.Run(t.Context(), "", args...)
				runErr = errors.Join(runErr, err)
				return err
			}, repo)
			if exists(marker) {
				t.Errorf("the planted program ran through hostgit")
			}
			if c.ok && runErr != nil {
				t.Errorf("hostgit: %v", runErr)
			}
		})
	}
}

// nestedRepo commits a repository at lib inside repo as a gitlink, its
// files checked out: a submodule as git sees one.
func nestedRepo(t *testing.T, repo string) {
	t.Helper()
	lib := filepath.Join(repo, "lib")
	must(t, repo, "init", "-q", lib)
	write(t, filepath.Join(lib, "f.txt"), "f\n")
	must(t, lib, "add", "f.txt")
	must(t, lib, "commit", "-q", "-m", "lib")
	must(t, repo, "add", "lib")
	must(t, repo, "commit", "-q", "-m", "nested")
}

// TestGlobalFilterStillWorks: a filter the user's global configuration
// defines (git-lfs installs one) still cleans what .gitattributes sends
// it, even when the repository defines the same driver over it.
func TestGlobalFilterStillWorks(t *testing.T) {
	global := isolate(t)
	marks := t.TempDir()
	ranGlobal, ranPlanted := filepath.Join(marks, "global"), filepath.Join(marks, "planted")
	f, err := os.OpenFile(global, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "[filter \"lfs\"]\n\tclean = \"touch '%s'; tr a-z A-Z\"\n\tsmudge = cat\n\trequired = true\n", ranGlobal)
	f.Close()
	repo := newRepo(t)
	write(t, filepath.Join(repo, ".gitattributes"), "*.bin filter=lfs\n")
	must(t, repo, "config", "filter.lfs.clean", "touch '"+ranPlanted+"'; cat")
	write(t, filepath.Join(repo, "x.bin"), "payload\n")
	r, err := hostgit.Find(repo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(t.Context(), "", "add", "x.bin"); err != nil {
		t.Fatal(err)
	}
	if !exists(ranGlobal) {
		t.Error("the global filter did not run")
	}
	if exists(ranPlanted) {
		t.Error("the repository's filter ran")
	}
	blob, err := r.Run(t.Context(), "", "cat-file", "blob", ":x.bin")
	if err != nil || blob != "PAYLOAD\n" {
		t.Errorf("staged x.bin = %q, %v; want the global filter's output", blob, err)
	}
	if keys, err := r.Blanked(t.Context()); err != nil || !slices.Contains(keys, "filter.lfs.clean") {
		t.Errorf("Blanked = %q, %v; want filter.lfs.clean", keys, err)
	}
}

// TestGlobalCredentialHelperStillWorks: the user's helpers are asked,
// the repository's are not.
func TestGlobalCredentialHelperStillWorks(t *testing.T) {
	global := isolate(t)
	marks := t.TempDir()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	f, _ := os.OpenFile(global, os.O_APPEND|os.O_WRONLY, 0)
	fmt.Fprintf(f, "[credential]\n\thelper = \"!touch '%s'; echo\"\n", filepath.Join(marks, "global"))
	f.Close()
	repo := newRepo(t)
	must(t, repo, "config", "credential.helper", "!touch '"+filepath.Join(marks, "planted")+"'; echo")
	r, _ := hostgit.Find(repo)
	r.Run(t.Context(), "", "fetch", "-q", srv.URL+"/x.git")
	if !exists(filepath.Join(marks, "global")) {
		t.Error("the global credential helper was not asked")
	}
	if exists(filepath.Join(marks, "planted")) {
		t.Error("the repository's credential helper ran")
	}
}

func TestFind(t *testing.T) {
	isolate(t)
	repo := newRepo(t)
	write(t, filepath.Join(repo, "sub", "dir", "x"), "x")
	separate := filepath.Join(t.TempDir(), "work")
	sepGit := filepath.Join(t.TempDir(), "store.git")
	must(t, t.TempDir(), "init", "-q", "--separate-git-dir", sepGit, separate)
	linked := filepath.Join(t.TempDir(), "linked")
	must(t, repo, "worktree", "add", "-q", "--detach", linked)
	admin := filepath.Join(repo, ".git", "worktrees", "linked")
	bare := filepath.Join(t.TempDir(), "bare.git")
	must(t, t.TempDir(), "init", "-q", "--bare", bare)
	plainDir := t.TempDir()

	dotgit := filepath.Join(repo, ".git")
	for _, c := range []struct {
		name, dir           string
		gitDir, common, top string
		notRepo             bool
	}{
		{name: "top", dir: repo, gitDir: dotgit, common: dotgit, top: repo},
		{name: "subdirectory", dir: filepath.Join(repo, "sub", "dir"), gitDir: dotgit, common: dotgit, top: repo},
		{name: "gitdir file", dir: separate, gitDir: sepGit, common: sepGit, top: separate},
		{name: "linked worktree", dir: linked, gitDir: admin, common: dotgit, top: linked},
		{name: "git directory", dir: dotgit, notRepo: true},
		{name: "bare repository", dir: bare, notRepo: true},
		{name: "plain directory", dir: plainDir, notRepo: true},
		{name: "missing directory", dir: filepath.Join(plainDir, "nothere"), notRepo: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := hostgit.Find(c.dir)
			if c.notRepo {
				if !errors.Is(err, hostgit.ErrNotRepository) {
					t.Fatalf("Find = %+v, %v; want ErrNotRepository", r, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.GitDir != c.gitDir || r.CommonDir != c.common || r.WorkTree != c.top {
				t.Errorf("Find = %s %s %s, want %s %s %s", r.GitDir, r.CommonDir, r.WorkTree, c.gitDir, c.common, c.top)
			}
			// And git agrees.
			out, err := r.Run(t.Context(), c.dir, "rev-parse", "--absolute-git-dir", "--show-toplevel")
			if err != nil || out != c.gitDir+"\n"+c.top+"\n" {
				t.Errorf("git rev-parse = %q, %v", out, err)
			}
		})
	}
}

// TestLinkedIgnoresTheTreesOwnGitFile: a linked tree is found from the
// common directory's record, whatever its .git file says later, and a
// core.worktree or GIT_DIR set meanwhile changes nothing either; a tree
// replaced by a link to the main checkout is refused.
func TestLinkedIgnoresTheTreesOwnGitFile(t *testing.T) {
	isolate(t)
	repo := newRepo(t)
	main, err := hostgit.Find(repo)
	if err != nil {
		t.Fatal(err)
	}
	inside := filepath.Join(repo, ".ralph", "worktrees", "w1")
	if _, err := main.Run(t.Context(), "", "worktree", "add", "-q", "--detach", inside); err != nil {
		t.Fatal(err)
	}
	other := newRepo(t)
	write(t, filepath.Join(inside, ".git"), "gitdir: "+filepath.Join(other, ".git")+"\n")
	must(t, repo, "config", "core.worktree", other)
	t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
	t.Setenv("GIT_INDEX_FILE", filepath.Join(other, ".git", "index"))

	w, err := main.Linked(inside)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(repo, ".git", "worktrees", "w1"); w.GitDir != want || w.WorkTree != inside {
		t.Errorf("Linked = %s (%s), want %s (%s)", w.GitDir, w.WorkTree, want, inside)
	}
	out, err := w.Run(t.Context(), "", "rev-parse", "--absolute-git-dir", "--show-toplevel")
	if want := w.GitDir + "\n" + inside + "\n"; err != nil || out != want {
		t.Errorf("rev-parse = %q, %v; want %q", out, err, want)
	}
	out, err = main.Run(t.Context(), "", "ls-files")
	if err != nil || out != "a.txt\n" {
		t.Errorf("ls-files of the main tree = %q, %v", out, err)
	}
	// Through a symlink to the directory above it: the same tree.
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(filepath.Dir(inside), alias); err != nil {
		t.Fatal(err)
	}
	if l, err := main.Linked(filepath.Join(alias, "w1")); err != nil || l != w {
		t.Errorf("Linked through a symlinked parent = %v, %v", l, err)
	}
	for name, dir := range map[string]string{"the main tree": repo, "a subdirectory of the tree": filepath.Join(inside, "sub"), "elsewhere": t.TempDir()} {
		os.MkdirAll(dir, 0o755)
		if _, err := main.Linked(dir); !errors.Is(err, hostgit.ErrNotWorktree) {
			t.Errorf("Linked(%s) = %v, want ErrNotWorktree", name, err)
		}
	}
	// The tree replaced by a link to the main checkout.
	if err := os.Rename(inside, inside+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(repo, inside); err != nil {
		t.Fatal(err)
	}
	if _, err := main.Linked(inside); !errors.Is(err, hostgit.ErrNotWorktree) {
		t.Errorf("Linked(a link to the main checkout) = %v, want ErrNotWorktree", err)
	}
}

// TestConfigReadOnce: the configuration is listed once while its files
// do not change, and again when one does (an include target included).
func TestConfigReadOnce(t *testing.T) {
	isolate(t)
	defer hostgit.SetRacyWindow(hostgit.SetRacyWindow(0))
	repo := newRepo(t)
	inc := filepath.Join(t.TempDir(), "later.cfg")
	must(t, repo, "config", "include.path", inc)
	r, _ := hostgit.Find(repo)
	for range 5 {
		if _, err := r.Run(t.Context(), "", "rev-parse", "HEAD"); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.Listings(); n != 1 {
		t.Fatalf("%d listings for 5 commands, want 1", n)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	write(t, filepath.Join(repo, ".gitattributes"), "*.txt filter=x\n")
	write(t, inc, "[filter \"x\"]\n\tclean = \"touch '"+marker+"'; cat\"\n")
	write(t, filepath.Join(repo, "b.txt"), "b\n")
	if _, err := r.Run(t.Context(), "", "add", "b.txt"); err != nil {
		t.Fatal(err)
	}
	if n := r.Listings(); n != 2 {
		t.Errorf("%d listings after the include target appeared, want 2", n)
	}
	if exists(marker) {
		t.Error("the filter of a file included after the first listing ran")
	}
}

// TestStageAll stages what git add --all would — changes, deletions,
// new files, a type change, a file now beyond a symlink, a submodule
// whose HEAD moved — leaves out what the pathspec excludes and reports a
// new nested repository, and never runs the nested repositories'
// programs.
func TestStageAll(t *testing.T) {
	isolate(t)
	repo := newRepo(t)
	marker := filepath.Join(t.TempDir(), "ran")
	for name, content := range map[string]string{"b.txt": "b\n", "d/x.txt": "x\n", "gone.txt": "g\n", "link.txt": "l\n", ".ralph/keep": "k\n"} {
		write(t, filepath.Join(repo, name), content)
	}
	must(t, repo, "add", "-A")
	must(t, repo, "commit", "-q", "-m", "files")
	nestedRepo(t, repo)
	lib := filepath.Join(repo, "lib")
	must(t, lib, "commit", "-q", "--allow-empty", "-m", "moved")
	write(t, filepath.Join(lib, ".gitattributes"), "* filter=n\n")
	must(t, lib, "config", "filter.n.clean", "touch '"+marker+"'; cat")
	must(t, lib, "config", "core.fsmonitor", "touch '"+marker+"'; false")
	write(t, filepath.Join(lib, "f.txt"), "dirty\n")

	write(t, filepath.Join(repo, "a.txt"), "changed\n")
	write(t, filepath.Join(repo, "new.txt"), "new\n")
	write(t, filepath.Join(repo, ".ralph", "keep"), "changed\n")
	write(t, filepath.Join(repo, ".ralph", "new"), "n\n")
	os.Remove(filepath.Join(repo, "gone.txt"))
	os.Remove(filepath.Join(repo, "link.txt"))
	os.Symlink("a.txt", filepath.Join(repo, "link.txt"))
	os.RemoveAll(filepath.Join(repo, "d"))
	os.Symlink(t.TempDir(), filepath.Join(repo, "d"))
	write(t, filepath.Join(repo, "web", "index.js"), "x\n")
	must(t, filepath.Join(repo, "web"), "init", "-q")

	r, _ := hostgit.Find(repo)
	nested, err := r.StageAll(t.Context(), filepath.Join(repo), ":(exclude).ralph")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(nested, ",") != "web" {
		t.Errorf("nested = %q, want web", nested)
	}
	if exists(marker) {
		t.Error("a nested repository's program ran")
	}
	got := must(t, repo, "diff", "--cached", "--name-status", "--no-renames", "HEAD")
	want := "M\ta.txt\nA\td\nD\td/x.txt\nD\tgone.txt\nM\tlib\nT\tlink.txt\nA\tnew.txt"
	if got != want {
		t.Errorf("staged:\n%s\nwant:\n%s", got, want)
	}
}

// TestRelativeGlobalHooksPath: a user whose ~/.gitconfig says
// `hooksPath = .githooks` has git look for hooks in the tree it runs in —
// the agent's, which planted .githooks/pre-commit there. hostgit's git
// runs no hook then, and Blanked names core.hookspath; the user's
// absolute and ~/ hook directories still run.
func TestRelativeGlobalHooksPath(t *testing.T) {
	needGit(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GIT_CONFIG_GLOBAL", "")
	os.Unsetenv("GIT_CONFIG_GLOBAL")
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	marks := t.TempDir()
	for _, c := range []struct {
		name, hooksPath, dir string
		runs                 bool
	}{
		{name: "relative", hooksPath: ".githooks", dir: ".githooks"},
		{name: "dot-relative", hooksPath: "./.githooks", dir: ".githooks"},
		{name: "absolute", hooksPath: filepath.Join(home, "hooks"), dir: filepath.Join(home, "hooks"), runs: true},
		{name: "home", hooksPath: "~/myhooks", dir: filepath.Join(home, "myhooks"), runs: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			write(t, filepath.Join(home, ".gitconfig"), "[user]\n\tname = Dev\n\temail = dev@example.com\n[init]\n\tdefaultBranch = main\n[core]\n\thooksPath = "+c.hooksPath+"\n")
			repo := newRepo(t)
			mark := filepath.Join(marks, c.name)
			dir := c.dir
			if !filepath.IsAbs(dir) {
				dir = filepath.Join(repo, dir) // the agent's plant
			}
			script(t, filepath.Join(dir, "pre-commit"), "touch '"+mark+"'")
			if !c.runs {
				// git as a person runs it does run the planted hook.
				write(t, filepath.Join(repo, "p.txt"), "p\n")
				must(t, repo, "add", "p.txt")
				must(t, repo, "commit", "-q", "-m", "plain")
				if !exists(mark) {
					t.Fatal("the planted hook did not run under plain git: the test shows nothing")
				}
				os.Remove(mark)
			}
			r, err := hostgit.Find(repo)
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(repo, "b.txt"), "b\n")
			if _, err := r.Run(t.Context(), "", "add", "b.txt"); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Run(t.Context(), "", "commit", "-q", "-m", "b"); err != nil {
				t.Fatal(err)
			}
			if exists(mark) != c.runs {
				t.Errorf("hook ran = %v, want %v", exists(mark), c.runs)
			}
			keys, err := r.Blanked(t.Context())
			if err != nil || slices.Contains(keys, "core.hookspath") == c.runs {
				t.Errorf("Blanked = %q, %v; core.hookspath wanted: %v", keys, err, !c.runs)
			}
		})
	}
}

// TestRelativePathEntriesDropped: a relative PATH entry (here "bin",
// and an empty one) would have git's shell find the program the user's
// global filter names in the tree git runs in, where the agent put its
// own. hostgit's git gets PATH without them.
func TestRelativePathEntriesDropped(t *testing.T) {
	global := isolate(t)
	mark := filepath.Join(t.TempDir(), "planted")
	f, err := os.OpenFile(global, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "[filter \"up\"]\n\tclean = upfilter\n\tsmudge = cat\n")
	f.Close()
	repo := newRepo(t)
	write(t, filepath.Join(repo, ".gitattributes"), "*.bin filter=up\n")
	script(t, filepath.Join(repo, "bin", "upfilter"), "touch '"+mark+"'; cat")
	script(t, filepath.Join(repo, "upfilter"), "touch '"+mark+"'; cat")
	t.Setenv("PATH", "bin"+string(os.PathListSeparator)+os.Getenv("PATH")+string(os.PathListSeparator))
	write(t, filepath.Join(repo, "x.bin"), "x\n")
	if _, err := plain(t, repo, "add", "x.bin"); err != nil || !exists(mark) {
		t.Fatalf("plain git did not run the planted program (%v): the test shows nothing", err)
	}
	must(t, repo, "rm", "-q", "--cached", "x.bin")
	os.Remove(mark)
	r, err := hostgit.Find(repo)
	if err != nil {
		t.Fatal(err)
	}
	r.Run(t.Context(), "", "add", "x.bin") // the filter is not found: git says so
	if exists(mark) {
		t.Error("hostgit's git ran a program found through a relative PATH entry")
	}
	env, err := r.Env(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, d := range filepath.SplitList(p) {
				if !filepath.IsAbs(d) {
					t.Errorf("PATH entry %q is relative", d)
				}
			}
		}
	}
}

// TestLinkedRecordRules: only a record git itself would use counts — a
// real directory under <common>/worktrees with a HEAD and a regular
// gitdir file — and what an agent plants there (a link to a directory
// elsewhere, a FIFO for gitdir or commondir) hangs nothing and names no
// tree; a tree made again under another admin directory is found anew.
func TestLinkedRecordRules(t *testing.T) {
	isolate(t)
	repo := newRepo(t)
	main, err := hostgit.Find(repo)
	if err != nil {
		t.Fatal(err)
	}
	trees := filepath.Join(t.TempDir(), "trees")
	w1, w2 := filepath.Join(trees, "w1"), filepath.Join(trees, "w2")
	for _, w := range []string{w1, w2} {
		must(t, repo, "worktree", "add", "-q", "--detach", w)
	}
	admin := filepath.Join(repo, ".git", "worktrees")
	l1, err := main.Linked(w1)
	if err != nil || l1.GitDir != filepath.Join(admin, "w1") {
		t.Fatalf("Linked(w1) = %+v, %v", l1, err)
	}

	// w2's record replaced by a link to a copy of it elsewhere.
	copyDir := filepath.Join(t.TempDir(), "w2-admin")
	if err := os.Rename(filepath.Join(admin, "w2"), copyDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(copyDir, filepath.Join(admin, "w2")); err != nil {
		t.Fatal(err)
	}
	if l, err := main.Linked(w2); !errors.Is(err, hostgit.ErrNotWorktree) {
		t.Errorf("Linked through a linked record = %+v, %v; want ErrNotWorktree", l, err)
	}
	os.Remove(filepath.Join(admin, "w2"))
	if err := os.Rename(copyDir, filepath.Join(admin, "w2")); err != nil {
		t.Fatal(err)
	}

	// w1's record rewritten to name the main tree: Linked never answers
	// with the main tree, however it is named.
	gitdir1 := filepath.Join(admin, "w1", "gitdir")
	was, err := os.ReadFile(gitdir1)
	if err != nil {
		t.Fatal(err)
	}
	write(t, gitdir1, filepath.Join(repo, ".git")+"\n")
	for _, name := range []string{repo, repo + "/."} {
		if l, err := main.Linked(name); !errors.Is(err, hostgit.ErrNotWorktree) {
			t.Errorf("Linked(%s) with a record naming the main tree = %+v, %v; want ErrNotWorktree", name, l, err)
		}
	}
	write(t, gitdir1, string(was))

	// A FIFO for a record's gitdir, and for commondir: nothing hangs.
	done := make(chan error, 1)
	go func() {
		gitdir := filepath.Join(admin, "w2", "gitdir")
		os.Remove(gitdir)
		if err := mkfifo(gitdir); err != nil {
			done <- nil
			return
		}
		_, err := main.Linked(w2)
		if !errors.Is(err, hostgit.ErrNotWorktree) {
			done <- fmt.Errorf("Linked with a FIFO for gitdir = %v; want ErrNotWorktree", err)
			return
		}
		commondir := filepath.Join(admin, "w1", "commondir")
		os.Remove(commondir)
		if err := mkfifo(commondir); err != nil {
			done <- nil
			return
		}
		_, err = hostgit.Find(w1)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, hostgit.ErrNotRepository) {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a FIFO in the repository's records hung ralph")
	}
	// The records put back, for git's sake (it would wait on a FIFO).
	os.Remove(filepath.Join(admin, "w2", "gitdir"))
	write(t, filepath.Join(admin, "w2", "gitdir"), filepath.Join(w2, ".git")+"\n")
	os.Remove(filepath.Join(admin, "w1", "commondir"))
	write(t, filepath.Join(admin, "w1", "commondir"), "../..\n")

	// w1 made again under another admin directory, while its old admin
	// directory now records another tree: found anew, never the cached
	// one.
	must(t, repo, "worktree", "remove", "--force", w1)
	elsewhere := filepath.Join(t.TempDir(), "w1")
	must(t, repo, "worktree", "add", "-q", "--detach", elsewhere)
	must(t, repo, "worktree", "add", "-q", "--detach", w1)
	l, err := main.Linked(w1)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(l.GitDir, "gitdir")); l.GitDir == filepath.Join(admin, "w1") || strings.TrimSpace(string(b)) != filepath.Join(w1, ".git") {
		t.Errorf("Linked(w1 made again) = %s, which records %q; want the admin directory of %s", l.GitDir, b, w1)
	}
}
