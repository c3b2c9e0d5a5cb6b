package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// findBwrap returns the sandbox, skipping the test when bubblewrap is
// missing or cannot run here, and failing it under CI, where it must be.
func findBwrap(t testing.TB) *Sandbox {
	t.Helper()
	s, err := Find()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	return s
}

// realBoundary is the project's Boundary with the real bubblewrap.
func (p *project) realBoundary(t testing.TB) *Boundary {
	t.Helper()
	b, err := findBwrap(t).Boundary(BoundaryParams{Root: p.repo, Env: p.env})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// agentState is the project's agent state directory as a runner names
// it: a login kept, a database fresh.
func (p *project) agentState() []State {
	return []State{{Dir: p.state, Keep: []string{"auth.json"}, Fresh: []string{"sessions"}}}
}

// session prepares a session in dir running sh -c script with the
// project's environment and the agent's state.
func (p *project) session(t testing.TB, b *Boundary, dir, script string, extraEnv ...string) *Session {
	t.Helper()
	scratch, err := os.MkdirTemp(p.tmp, "ralph-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(scratch) })
	s, err := b.Prepare(SessionParams{Dir: dir, Path: "/bin/sh", Args: []string{"-c", script}, Env: append(p.env, extraEnv...), State: p.agentState(), Scratch: scratch})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run runs the session to its end and returns its exit code, its
// standard output and its standard error; Close is left to the caller.
func run(t testing.TB, s *Session) (int, string, string) {
	t.Helper()
	cmd := exec.Command(s.Path, s.Args...)
	cmd.Env = s.Env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// sh runs script in a new session in dir and returns what run does.
func (p *project) sh(t testing.TB, b *Boundary, dir, script string, extraEnv ...string) (int, string, string) {
	t.Helper()
	return run(t, p.session(t, b, dir, script, extraEnv...))
}

func TestWritable(t *testing.T) {
	p := newProject(t)
	b := p.realBoundary(t)
	for _, dir := range []string{p.repo, p.tree} {
		for _, tc := range []struct {
			name string
			path string
		}{
			{"tree", filepath.Join(dir, "new.txt")},
			{"TMPDIR", "$TMPDIR/scratch"},
			{"state directory", filepath.Join(p.state, "session.json")},
			{"a kept state file", filepath.Join(p.state, "auth.json")},
			{"git metadata (the private copy)", filepath.Join(dir, ".git", "x")},
			{"dev/null", "/dev/null"},
			{"dev/shm (private)", "/dev/shm/sandbox-test"},
		} {
			t.Run(filepath.Base(dir)+"/"+tc.name, func(t *testing.T) {
				if tc.name == "a kept state file" {
					writeFile(t, tc.path, "old login\n")
				}
				if tc.name == "git metadata (the private copy)" && dir == p.tree {
					tc.path = "$(sed 's/gitdir: //' .git)/x" // the .git file names the private directory
				}
				code, _, stderr := p.sh(t, b, dir, `echo written > "`+tc.path+`"`)
				if code != 0 {
					t.Fatalf("writing %s: exit %d: %s", tc.path, code, stderr)
				}
			})
		}
	}
	if _, err := os.Stat("/dev/shm/sandbox-test"); err == nil {
		t.Error("/dev/shm/sandbox-test written in the sandbox is on the host's /dev/shm")
	}
	if got := readFile(t, filepath.Join(p.state, "auth.json")); got != "written\n" {
		t.Errorf("the kept login = %q, want the sandboxed write", got)
	}
	if _, err := os.Stat(filepath.Join(p.state, "session.json")); err == nil {
		t.Error("a new file in the state directory outlived the session")
	}
}

func TestReadOnly(t *testing.T) {
	p := newProject(t)
	b := p.realBoundary(t)
	rnd := "ralph-sandbox-test-" + strconv.Itoa(os.Getpid())
	mkdirs(t, filepath.Join(p.repo, ".ralph", "worktrees", "w2"))
	common := filepath.Join(p.repo, ".git")
	for _, dir := range []string{p.repo, p.tree} {
		for _, tc := range []struct {
			name string
			path string
			// private: in the project's own tree, the repository's .git is
			// where the private copy is mounted: the write lands there, and
			// the repository does not change.
			private bool
		}{
			{"home", filepath.Join(p.home, "x"), false},
			{"parent of the project", filepath.Join(p.root, "x"), false},
			{"sibling project", filepath.Join(p.sibling, "x"), false},
			{"the plan", filepath.Join(p.repo, ".ralph", "progress.db"), false},
			{"the logs", filepath.Join(p.repo, ".ralph", "logs", "x"), false},
			{"another worker's tree", filepath.Join(p.repo, ".ralph", "worktrees", "w2", "x"), false},
			{"the repository's refs", filepath.Join(common, "refs", "heads", "main"), true},
			{"the repository's hooks", filepath.Join(common, "hooks", "pre-commit"), true},
			{"the repository's config", filepath.Join(common, "config"), true},
			{"the repository's objects", filepath.Join(common, "objects", "x"), true},
			{"the worker's git directory", filepath.Join(common, "worktrees", "w1", "HEAD"), true},
			{"etc", filepath.Join("/etc", rnd), false},
			{"/tmp", filepath.Join("/tmp", rnd), false},
			{"root", filepath.Join("/", rnd), false},
		} {
			t.Run(filepath.Base(dir)+"/"+tc.name, func(t *testing.T) {
				before, beforeErr := os.ReadFile(tc.path)
				code, _, stderr := p.sh(t, b, dir, `mkdir -p "$(dirname "`+tc.path+`")"; echo written >> "`+tc.path+`"`)
				if !tc.private || dir != p.repo {
					if code == 0 {
						t.Errorf("wrote %s", tc.path)
					}
					if !strings.Contains(stderr, "Read-only file system") {
						t.Errorf("stderr = %q, want Read-only file system", stderr)
					}
				}
				after, afterErr := os.ReadFile(tc.path)
				if !bytes.Equal(before, after) || (beforeErr == nil) != (afterErr == nil) {
					os.Remove(tc.path)
					t.Errorf("%s changed", tc.path)
				}
			})
		}
	}
	t.Run("remount", func(t *testing.T) {
		// As root, bubblewrap keeps every capability unless told: the
		// agent could then remount / read-write.
		target := filepath.Join("/etc", rnd)
		code, _, stderr := p.sh(t, b, p.repo, `mount -o remount,rw / && echo x > `+target)
		if code == 0 {
			os.Remove(target)
			t.Fatalf("remounted / read-write and wrote %s", target)
		}
		if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (%v); stderr %s", target, err, stderr)
		}
	})
	t.Run("the tree's own .git is not replaced", func(t *testing.T) {
		for _, dir := range []string{p.repo, p.tree} {
			code, _, _ := p.sh(t, b, dir, `rm -rf .git || mv .git gone || ln -sfn / .git`)
			if code == 0 {
				t.Errorf("%s: the agent replaced .git", dir)
			}
		}
		if fi, err := os.Lstat(filepath.Join(p.tree, ".git")); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("the tree's .git: %v, %v", fi, err)
		}
		if fi, err := os.Lstat(filepath.Join(p.repo, ".git")); err != nil || !fi.IsDir() {
			t.Errorf("the project's .git: %v, %v", fi, err)
		}
	})
	t.Run("the worker's tree is not replaced", func(t *testing.T) {
		code, _, _ := p.sh(t, b, p.tree, `cd .. && { mv w1 gone || { rm -rf w1; ln -sT `+p.repo+` w1; }; }`)
		if code == 0 {
			t.Error("the agent moved its tree")
		}
		if fi, err := os.Lstat(p.tree); err != nil || !fi.IsDir() {
			t.Errorf("the tree: %v, %v", fi, err)
		}
	})
}

// TestFreshProjectPlan: in a project that has no .ralph/ yet (a first
// `ralph build --progress FILE --sandbox`), the agent cannot make one of
// its own — which would be writable for the whole run, and read as the
// plan's logs, prompts and skills by the next run — while the progress
// file in the tree is still its to tick.
func TestFreshProjectPlan(t *testing.T) {
	p := newProject(t)
	plan := filepath.Join(p.repo, ".ralph")
	if err := os.RemoveAll(plan); err != nil {
		t.Fatal(err)
	}
	progress := filepath.Join(p.repo, "PROGRESS.md")
	writeFile(t, progress, "## Tasks\n- [ ] a task\n")
	b := p.realBoundary(t)
	if fi, err := os.Lstat(plan); err != nil || !fi.IsDir() {
		t.Errorf("the Boundary did not make .ralph/: %v, %v", fi, err)
	}
	code, _, stderr := p.sh(t, b, p.repo, `sed 's/\[ \]/[x]/' PROGRESS.md > $TMPDIR/p && cat $TMPDIR/p > PROGRESS.md`)
	if code != 0 {
		t.Fatalf("ticking the progress file: exit %d: %s", code, stderr)
	}
	if got := readFile(t, progress); got != "## Tasks\n- [x] a task\n" {
		t.Errorf("the progress file = %q, want the box ticked", got)
	}
	for _, script := range []string{
		`mkdir -p .ralph/prompts && echo injected > .ralph/prompts/build.md`,
		`echo x > .ralph/progress.db`,
		`rmdir .ralph && mkdir .ralph && echo x > .ralph/x`,
		`mv .ralph gone`,
	} {
		code, _, stderr := p.sh(t, b, p.repo, script)
		if code == 0 {
			t.Errorf("%s: succeeded", script)
		}
		if !strings.Contains(stderr, "Read-only file system") && !strings.Contains(stderr, "busy") {
			t.Errorf("%s: stderr = %q, want Read-only file system", script, stderr)
		}
	}
	if ents, err := os.ReadDir(plan); err != nil || len(ents) != 0 {
		t.Errorf(".ralph/ after the agent: %v, %v; want it empty", ents, err)
	}

	t.Run(".ralph is not a directory", func(t *testing.T) {
		root := t.TempDir()
		writeFile(t, filepath.Join(root, ".ralph"), "a file\n")
		if _, err := (&Sandbox{Path: "/usr/bin/bwrap"}).Boundary(BoundaryParams{Root: root}); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("Boundary = %v, want an error saying .ralph is not a directory", err)
		}
	})
}

func TestHidden(t *testing.T) {
	p := newProject(t)
	writeFile(t, filepath.Join(p.home, ".pgpass"), "db:5432:*:u:secret\n")
	writeFile(t, filepath.Join(p.repo, ".ralph", "db.json"), `{"db":"postgres://u@h/db"}`)
	b := p.realBoundary(t)
	code, stdout, stderr := p.sh(t, b, p.repo, `cat ~/.pgpass .ralph/db.json; echo end`)
	if code != 0 || stdout != "end\n" {
		t.Errorf("exit %d, stdout %q (want the files empty), stderr %s", code, stdout, stderr)
	}
}

// TestSubmodules: the private checkout does not break a submodule: the
// agent's git sees the submodules' git directories (read-only), in the
// project's tree and in a worker's, and cannot write them.
func TestSubmodules(t *testing.T) {
	p := newProject(t)
	lib := filepath.Join(p.root, "lib")
	mkdirs(t, lib)
	git(t, p.env, lib, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(lib, "lib.go"), "package lib\n")
	git(t, p.env, lib, "add", "lib.go")
	git(t, p.env, lib, "commit", "-q", "-m", "lib")
	git(t, p.env, p.repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", lib, "lib")
	git(t, p.env, p.repo, "commit", "-q", "-m", "the submodule")
	tree := filepath.Join(p.repo, ".ralph", "worktrees", "w2")
	git(t, p.env, p.repo, "worktree", "add", "-q", "--detach", tree)
	git(t, p.env, tree, "-c", "protocol.file.allow=always", "submodule", "update", "--init", "-q")
	modules := filepath.Join(p.repo, ".git", "modules", "lib")
	before := git(t, p.env, modules, "rev-parse", "HEAD")
	b := p.realBoundary(t)
	for _, dir := range []string{p.repo, tree} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			code, stdout, stderr := p.sh(t, b, dir, `git status --porcelain && git submodule status && git -C lib log --format=%s`)
			if code != 0 || !strings.Contains(stdout, " lib (") || !strings.HasSuffix(stdout, "\nlib\n") {
				t.Errorf("git in the sandbox: exit %d, stdout %q, stderr %s", code, stdout, stderr)
			}
			code, _, _ = p.sh(t, b, dir, `cd lib && echo x > new.go && git add new.go && git commit -q -m agent`)
			if code == 0 {
				t.Error("the agent committed in the submodule's real git directory")
			}
		})
	}
	if after := git(t, p.env, modules, "rev-parse", "HEAD"); after != before {
		t.Errorf("the submodule's HEAD moved: %s -> %s", before, after)
	}
}

// TestPrivateCheckout: the agent's git works — status, diff, add,
// commit, log, branch, reset — on a private copy of the metadata, and the
// repository ralph reads does not change.
func TestPrivateCheckout(t *testing.T) {
	p := newProject(t)
	b := p.realBoundary(t)
	for _, dir := range []string{p.repo, p.tree} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			refsBefore := git(t, p.env, p.repo, "for-each-ref")
			head := git(t, p.env, dir, "rev-parse", "HEAD")
			s := p.session(t, b, dir, `set -e
echo changed >> README
echo new > new.txt
git status --short
git diff --stat
git add -A
git commit -q -m "agent's work"
git log --format=%s -2
git branch agent-branch
git tag agent-tag
echo '#!/bin/sh' > "$(git rev-parse --git-dir)/hooks/pre-commit"
git config user.name planted
git rev-parse --git-common-dir`)
			code, stdout, stderr := run(t, s)
			if code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			for _, want := range []string{" M README", "?? new.txt", "1 file changed", "agent's work\nfirst"} {
				if !strings.Contains(stdout, want) {
					t.Errorf("the agent's git did not show %q:\n%s", want, stdout)
				}
			}
			c := s.Close(t.Context())
			if c == nil || c.Start != head || c.End == head || c.End == "" || !c.Descends {
				t.Errorf("Checkout = %+v, want a commit on top of %s", c, head)
			}
			if got := git(t, p.env, p.repo, "for-each-ref"); got != refsBefore {
				t.Errorf("the repository's refs changed:\n%s\nwant\n%s", got, refsBefore)
			}
			if got := git(t, p.env, dir, "rev-parse", "HEAD"); got != head {
				t.Errorf("the tree's HEAD moved to %s", got)
			}
			if c != nil {
				cmd := exec.Command("git", "cat-file", "-e", c.End)
				cmd.Dir, cmd.Env = p.repo, p.env
				if cmd.Run() == nil {
					t.Errorf("the agent's commit %s is in the repository's object store", c.End)
				}
			}
			if _, err := os.Stat(filepath.Join(p.repo, ".git", "hooks", "pre-commit")); err == nil {
				t.Error("the agent's hook is in the repository")
			}
			if strings.Contains(readFile(t, filepath.Join(p.repo, ".git", "config")), "planted") {
				t.Error("the agent's config is in the repository")
			}
			// The agent's work is in the tree's files, where ralph takes it.
			if got := readFile(t, filepath.Join(dir, "new.txt")); got != "new\n" {
				t.Errorf("new.txt = %q", got)
			}
			git(t, p.env, dir, "checkout", "-q", "--", "README")
			os.Remove(filepath.Join(dir, "new.txt"))
		})
	}
}

// TestPrivateRefs: the agent's git sees the repository's refs as they
// are — loose, packed, overridden, annotated tags, symbolic — in both
// kinds of tree.
func TestPrivateRefs(t *testing.T) {
	p := newProject(t)
	git(t, p.env, p.repo, "tag", "-a", "-m", "annotated", "v1")
	git(t, p.env, p.repo, "branch", "packed")
	git(t, p.env, p.repo, "pack-refs", "--all")
	git(t, p.env, p.repo, "commit", "-q", "--allow-empty", "-m", "second")
	git(t, p.env, p.repo, "branch", "-f", "packed") // loose now, over its packed self
	git(t, p.env, p.repo, "branch", "loose")
	git(t, p.env, p.repo, "update-ref", "refs/remotes/origin/main", "HEAD")
	git(t, p.env, p.repo, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
	b := p.realBoundary(t)
	const format = "--format=%(refname) %(objectname) %(*objectname) %(symref)"
	want := git(t, p.env, p.repo, "for-each-ref", format)
	for _, dir := range []string{p.repo, p.tree} {
		code, stdout, stderr := p.sh(t, b, dir, "git for-each-ref '"+format+"'")
		if code != 0 || strings.TrimSpace(stdout) != want {
			t.Errorf("%s: exit %d, refs:\n%s\nwant\n%s\n%s", dir, code, stdout, want, stderr)
		}
	}
}

func TestCheckoutMoves(t *testing.T) {
	p := newProject(t)
	git(t, p.env, p.repo, "commit", "-q", "--allow-empty", "-m", "second")
	git(t, p.env, p.tree, "checkout", "-q", "--detach", "main")
	b := p.realBoundary(t)
	head := git(t, p.env, p.repo, "rev-parse", "HEAD")
	parent := git(t, p.env, p.repo, "rev-parse", "HEAD~1")
	for _, tc := range []struct {
		name     string
		script   string
		end      string // "" for a commit of the agent's own
		descends bool
	}{
		{"nothing", "true", head, true},
		{"a commit", "git commit -q --allow-empty -m mine", "", true},
		{"two commits and a merge", "git checkout -q -b side && git commit -q --allow-empty -m a && git checkout -q - && git commit -q --allow-empty -m b && git merge -q --no-edit side", "", true},
		{"reset --hard HEAD~1", "git reset -q --hard HEAD~1", parent, false},
		{"reset, then a commit", "git reset -q --hard HEAD~1 && git commit -q --allow-empty -m mine", "", false},
		{"an orphan branch", "git checkout -q --orphan other && git commit -q --allow-empty -m root", "", false},
		{"HEAD written by hand", "echo " + strings.Repeat("ab", 20) + " > $(git rev-parse --git-dir)/HEAD", strings.Repeat("ab", 20), false},
		{"HEAD a link out", "ln -sf /etc/hostname $(git rev-parse --git-dir)/HEAD", "", false},
		{"HEAD a FIFO", "g=$(git rev-parse --git-dir); rm $g/HEAD; mkfifo $g/HEAD", "", false},
		{"objects a link to /", "g=$(git rev-parse --git-dir); git commit -q --allow-empty -m mine; rm -rf $g/objects; ln -s / $g/objects", "", false},
	} {
		for _, dir := range []string{p.repo, p.tree} {
			t.Run(tc.name+"/"+filepath.Base(dir), func(t *testing.T) {
				s := p.session(t, b, dir, tc.script)
				if code, stdout, stderr := run(t, s); code != 0 {
					t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
				}
				c := s.Close(t.Context())
				if c == nil || c.Start != head || c.Descends != tc.descends {
					t.Fatalf("Checkout = %+v, want Start %s, Descends %v", c, head, tc.descends)
				}
				switch {
				case tc.end != "" && c.End != tc.end:
					t.Errorf("End = %s, want %s", c.End, tc.end)
				case tc.end == "" && strings.HasPrefix(tc.name, "HEAD") && c.End != "":
					t.Errorf("End = %s, want none", c.End)
				case tc.end == "" && !strings.HasPrefix(tc.name, "HEAD") && (c.End == "" || c.End == head):
					t.Errorf("End = %q, want the agent's commit", c.End)
				}
			})
		}
	}
}

// TestCommondirAttack is issue 20's item 1 in the sandbox itself: an
// agent writes / into the git metadata it is given (a commondir, a
// gitdir: line), and the next session still writes nothing outside its
// tree.
func TestCommondirAttack(t *testing.T) {
	p := newProject(t)
	b := p.realBoundary(t)
	marker := filepath.Join("/etc", "ralph-sandbox-test-"+strconv.Itoa(os.Getpid()))
	t.Cleanup(func() { os.Remove(marker) })
	for _, dir := range []string{p.repo, p.tree} {
		p.sh(t, b, dir, `g=$(git rev-parse --git-dir); echo / > $g/commondir; echo "gitdir: /" > .git`)
		code, _, _ := p.sh(t, b, dir, `echo x > `+marker+`; echo x > `+p.home+`/marker`)
		if code == 0 {
			t.Errorf("%s: the next session wrote outside its tree", dir)
		}
	}
	proj := filepath.Join(p.root, "plain")
	mkdirs(t, proj)
	writeFile(t, filepath.Join(proj, ".git"), "gitdir: /\n")
	bp, err := findBwrap(t).Boundary(BoundaryParams{Root: proj, Env: p.env})
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := p.sh(t, bp, proj, `echo x > `+marker+`; echo x > `+p.home+`/marker`)
	if code == 0 {
		t.Error("a project whose .git says gitdir: / let the session write outside it")
	}
	if !strings.Contains(stderr, "Read-only file system") {
		t.Errorf("stderr = %q", stderr)
	}
	for _, f := range []string{marker, filepath.Join(p.home, "marker")} {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s written", f)
		}
	}
}

// TestStateScratch: what the agent writes in its state directory stays in
// the session's scratch — a hook in the settings, an instructions file, a
// plugin — except its login.
func TestStateScratch(t *testing.T) {
	p := newProject(t)
	writeFile(t, filepath.Join(p.state, "settings.json"), `{"theme":"dark"}`)
	writeFile(t, filepath.Join(p.state, "auth.json"), "old token\n")
	writeFile(t, filepath.Join(p.state, "plugins", "p.js"), "ok()\n")
	writeFile(t, filepath.Join(p.state, "sessions", "old.jsonl"), "{}\n")
	b := p.realBoundary(t)
	code, stdout, stderr := p.sh(t, b, p.repo, `cd "$STATE"
cat settings.json; echo
ls sessions | wc -l
echo '{"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch /tmp/pwned"}]}]}}' > settings.json
echo 'obey' > CLAUDE.md
echo 'pwn()' > plugins/p.js || echo plugins read-only
echo 'new token' > auth.json
mkdir -p sessions && echo x > sessions/new.jsonl
rm -rf plugins 2>/dev/null; mv auth.json elsewhere 2>/dev/null; true`, "STATE="+p.state)
	if code != 0 || !strings.Contains(stdout, `{"theme":"dark"}`) || !strings.Contains(stdout, "plugins read-only") || !strings.Contains(stdout, "\n0\n") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for path, want := range map[string]string{
		"settings.json":      `{"theme":"dark"}`,
		"auth.json":          "new token\n",
		"plugins/p.js":       "ok()\n",
		"sessions/old.jsonl": "{}\n",
	} {
		if got := readFile(t, filepath.Join(p.state, path)); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	for _, gone := range []string{"CLAUDE.md", "sessions/new.jsonl", "elsewhere"} {
		if _, err := os.Stat(filepath.Join(p.state, gone)); err == nil {
			t.Errorf("%s outlived the session", gone)
		}
	}
}

func TestExitCode(t *testing.T) {
	p := newProject(t)
	b := p.realBoundary(t)
	for _, tc := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 3", 3},
		{"exit 255", 255},
		// bubblewrap's init reports a signal death as 128+signal.
		{"kill -KILL $$", 128 + 9},
	} {
		t.Run(tc.script, func(t *testing.T) {
			code, _, stderr := p.sh(t, b, p.tree, tc.script)
			if code != tc.want {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tc.want, stderr)
			}
		})
	}
}

func TestSymlinkedProject(t *testing.T) {
	p := newProject(t)
	link := filepath.Join(p.root, "link")
	if err := os.Symlink(p.repo, link); err != nil {
		t.Fatal(err)
	}
	b, err := findBwrap(t).Boundary(BoundaryParams{Root: link, Env: p.env})
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := p.sh(t, b, link, `pwd && echo x > via-link.txt && git status --short`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(p.repo, "via-link.txt")); err != nil {
		t.Error(err)
	}
}

func TestPrepareRefuses(t *testing.T) {
	p := newProject(t)
	b := p.boundary(t)
	for name, sp := range map[string]SessionParams{
		"a directory outside the project": {Dir: p.sibling},
		"the plan's directory":            {Dir: filepath.Join(p.repo, ".ralph", "logs")},
		"a missing working directory":     {Dir: filepath.Join(p.repo, "gone")},
		"a state directory holding it":    {Dir: p.repo, State: []State{{Dir: p.root}}},
		"a relative state directory":      {Dir: p.repo, State: []State{{Dir: "state"}}},
	} {
		t.Run(name, func(t *testing.T) {
			sp.Path, sp.Scratch = "/bin/true", t.TempDir()
			if _, err := b.Prepare(sp); err == nil {
				t.Error("Prepare did not refuse")
			}
		})
	}
	t.Run("a .git made a symbolic link", func(t *testing.T) {
		dotGit := filepath.Join(p.tree, ".git")
		if err := os.Remove(dotGit); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/etc/hostname", dotGit); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Prepare(SessionParams{Dir: p.tree, Path: "/bin/true", Scratch: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("err = %v", err)
		}
	})
}

func TestFindWithoutBwrap(t *testing.T) {
	t.Setenv("PATH", "")
	_, err := Find()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	for _, hint := range []string{"apt-get install bubblewrap", "dnf install bubblewrap"} {
		if !strings.Contains(err.Error(), hint) {
			t.Errorf("%q does not say %q", err, hint)
		}
	}
}

func TestFindBwrapThatCannotRun(t *testing.T) {
	bin := t.TempDir()
	writeFile(t, filepath.Join(bin, "bwrap"), "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
	if err := os.Chmod(filepath.Join(bin, "bwrap"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	_, err := Find()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	for _, want := range []string{"No permissions to create new namespace", "unprivileged_userns_clone"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

// agent is a sandboxed shell started as agentproc starts an agent: in a
// process group of its own. It traps SIGTERM, writes "TERM" to got and
// exits 7; it leaves a grandchild that ignores SIGTERM and blocks, whose
// command line alone holds the path of its script (grandchild).
type agent struct {
	cmd        *exec.Cmd
	grandchild string
	got        string
}

func startAgent(t *testing.T, b *Boundary, p *project) *agent {
	t.Helper()
	a := &agent{
		grandchild: filepath.Join(p.state, "grandchild-"+strconv.Itoa(os.Getpid())+".sh"),
		got:        filepath.Join(p.state, "auth.json"), // kept: written through to the host
	}
	writeFile(t, a.got, "")
	ready := filepath.Join(p.tree, "ready")
	// The grandchild blocks opening a FIFO nobody writes to: no fork
	// (whose child would hold the marker until it execs), no CPU.
	fifo := filepath.Join(p.tree, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, a.grandchild, "trap '' TERM\necho > \"$READY\"\nread x < \"$FIFO\"\n")
	script := `trap 'echo TERM > "$GOT"; exit 7' TERM
sh "$GRANDCHILD" &
while :; do sleep 0.05; done`
	s := p.session(t, b, p.tree, script, "GRANDCHILD="+a.grandchild, "GOT="+a.got, "READY="+ready, "FIFO="+fifo)
	a.cmd = exec.Command(s.Path, s.Args...)
	a.cmd.Env = s.Env
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		_ = a.cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandboxed agent did not start")
		}
	}
	if pids := a.left(t); len(pids) != 1 {
		t.Fatalf("grandchild pids %v, want one", pids)
	}
	return a
}

// left lists the grandchild's pids that are still running (zombies have
// left already).
func (a *agent) left(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(a.grandchild)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !bytes.Contains(stat, []byte(") Z ")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// wait waits up to 5s for the grandchild to be gone.
func (a *agent) wait(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); len(a.left(t)) > 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

func (a *agent) gotTERM(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile(a.got)
	return err == nil && string(b) == "TERM\n"
}

func TestStop(t *testing.T) {
	t.Run("SIGTERM to the group", func(t *testing.T) {
		p := newProject(t)
		a := startAgent(t, p.realBoundary(t), p)
		// What agentproc does to stop an agent.
		if err := syscall.Kill(-a.cmd.Process.Pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGCONT)
		_ = a.cmd.Wait()
		if code := a.cmd.ProcessState.ExitCode(); code != 7 {
			t.Errorf("exit code %d, want the agent's 7 from its SIGTERM handler (%v)", code, a.cmd.ProcessState)
		}
		if !a.gotTERM(t) {
			t.Error("the agent's SIGTERM handler did not run")
		}
		// The agent's exit ended the pid namespace: its init exited, and
		// the kernel killed what was left. bwrap learns the agent's
		// status from the init before the init is gone, so that can come
		// a moment after bwrap exits.
		a.wait(t)
		if pids := a.left(t); len(pids) != 0 {
			t.Errorf("the grandchild that ignores SIGTERM outlived the agent: pids %v", pids)
		}
	})
	t.Run("SIGKILL to bwrap", func(t *testing.T) {
		p := newProject(t)
		a := startAgent(t, p.realBoundary(t), p)
		if err := a.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = a.cmd.Wait()
		// --die-with-parent kills the sandbox's init, and the kernel
		// everything in its pid namespace; that takes a moment.
		a.wait(t)
		if pids := a.left(t); len(pids) != 0 {
			t.Errorf("the grandchild outlived bwrap: pids %v", pids)
		}
		if a.gotTERM(t) {
			t.Error("the agent got SIGTERM from a SIGKILL")
		}
	})
	t.Run("SIGTERM to bwrap alone", func(t *testing.T) {
		// bubblewrap does not forward signals; it is started with SIGTERM
		// ignored so that a SIGTERM to the group reaches the agent without
		// bubblewrap dying and taking the sandbox down with SIGKILL. A
		// SIGTERM to its pid alone therefore does nothing.
		if signalEnv() == "" {
			t.Skip("no env with --ignore-signal: bwrap dies of SIGTERM")
		}
		p := newProject(t)
		a := startAgent(t, p.realBoundary(t), p)
		if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		if err := a.cmd.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("bwrap died of a SIGTERM to its pid: %v", err)
		}
		if a.gotTERM(t) {
			t.Error("the agent got a SIGTERM sent to bwrap alone")
		}
	})
}

// TestCloseCancelled: a cancelled context does not hang Close.
func TestCloseCancelled(t *testing.T) {
	p := newProject(t)
	s := p.session(t, p.realBoundary(t), p.repo, "git commit -q --allow-empty -m x")
	run(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if c := s.Close(ctx); c == nil || c.End == "" {
		t.Errorf("Checkout = %+v", c)
	}
}

// TestReadOnlySession: a ReadOnly session (a verifier's) runs commands and
// reads its tree, git included, but writes neither the tree nor its .git,
// in the project and in a worker's tree; its temp directory is writable
// and the build output of test commands is sent there.
func TestReadOnlySession(t *testing.T) {
	p := newProject(t)
	b := p.realBoundary(t)
	for _, dir := range []string{p.repo, p.tree} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			scratch, err := os.MkdirTemp(p.tmp, "ralph-sandbox-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(scratch) })
			script := `cat README && git status --porcelain && echo ok > "$TMPDIR/ran" && cat "$TMPDIR/ran" &&
				echo "$GOCACHE $CARGO_TARGET_DIR $PYTEST_ADDOPTS $PYTHONDONTWRITEBYTECODE";
				for f in new.txt README .git/x; do if echo x >> "$f" 2>/dev/null; then echo "wrote $f"; fi; done`
			s, err := b.Prepare(SessionParams{Dir: dir, Path: "/bin/sh", Args: []string{"-c", script},
				Env: append(p.env, "PYTEST_ADDOPTS=-x"), State: p.agentState(), Scratch: scratch, ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := run(t, s)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			want := "hello\nok\n" + s.TempDir + "/go-build " + s.TempDir + "/cargo-target -x -p no:cacheprovider 1\n"
			if stdout != want {
				t.Errorf("stdout %q, want %q (stderr %q)", stdout, want, stderr)
			}
			if c := s.Close(t.Context()); c != nil {
				t.Errorf("a read-only session has a private checkout: %+v", c)
			}
			if _, err := os.Stat(filepath.Join(dir, "new.txt")); err == nil {
				t.Error("new.txt written in the tree")
			}
			if got := readFile(t, filepath.Join(dir, "README")); got != "hello\n" {
				t.Errorf("README = %q", got)
			}
		})
	}
}
