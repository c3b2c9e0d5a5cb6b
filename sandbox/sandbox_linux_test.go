package sandbox

import (
	"bytes"
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

// project is a layout like a parallel build's: a repository with a plan
// in .ralph/, a worktree of it where the agent works, a sibling project,
// a home with the agent's state directory, and a temp directory.
type project struct {
	root     string // parent of everything below
	repo     string // the main checkout, $RALPH_DIR
	worktree string // `git worktree add`, $RALPH_WORKTREE
	sibling  string // another project
	home     string
	state    string // the agent's state directory, inside home
	tmp      string
	env      []string
}

func newProject(t *testing.T) *project {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := &project{
		root:     root,
		repo:     filepath.Join(root, "repo"),
		worktree: filepath.Join(root, "wt"),
		sibling:  filepath.Join(root, "sibling"),
		home:     filepath.Join(root, "home"),
		tmp:      filepath.Join(root, "tmp"),
	}
	p.state = filepath.Join(p.home, ".agent")
	for _, d := range []string{p.repo, filepath.Join(p.repo, ".ralph"), p.sibling, p.state, p.tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p.env = append(os.Environ(),
		"HOME="+p.home, "TMPDIR="+p.tmp, "RALPH_DIR="+p.repo, "RALPH_WORKTREE="+p.worktree,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	git(t, p.env, p.repo, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(p.repo, "README"), "hello\n")
	git(t, p.env, p.repo, "add", "README")
	git(t, p.env, p.repo, "commit", "-q", "-m", "first")
	git(t, p.env, p.repo, "worktree", "add", "-q", "-b", "task", p.worktree)
	return p
}

func git(t *testing.T, env []string, dir string, args ...string) string {
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

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// policy is what agentproc gives an agent working in dir: its state
// directory plus Dirs.
func (p *project) policy(dir string) Policy {
	return Policy{Dir: dir, Writable: append([]string{p.state}, Dirs(dir, p.env)...)}
}

// run runs name with args in the sandbox and returns its exit code and
// standard error.
func run(t *testing.T, s *Sandbox, pol Policy, env []string, name string, args ...string) (int, string) {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	newPath, newArgs, cleanup, err := s.Command(pol, path, args)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	cmd := exec.Command(newPath, newArgs...)
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

func TestWritable(t *testing.T) {
	s := findBwrap(t)
	p := newProject(t)
	pol := p.policy(p.worktree)
	for _, tc := range []struct {
		name string
		path string
	}{
		{"worktree", filepath.Join(p.worktree, "new.txt")},
		{"plan directory", filepath.Join(p.repo, ".ralph", "log.txt")},
		{"common git directory", filepath.Join(p.repo, ".git", "sandbox-test")},
		{"worktree's git directory", filepath.Join(p.repo, ".git", "worktrees", "wt", "sandbox-test")},
		{"TMPDIR", filepath.Join(p.tmp, "scratch")},
		{"state directory", filepath.Join(p.state, "session.json")},
		{"dev/null", "/dev/null"},
		{"dev/shm (private)", "/dev/shm/sandbox-test"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := run(t, s, pol, p.env, "sh", "-c", `echo written > "$1"`, "sh", tc.path)
			if code != 0 {
				t.Fatalf("writing %s: exit %d: %s", tc.path, code, stderr)
			}
		})
	}
	if _, err := os.Stat("/dev/shm/sandbox-test"); err == nil {
		t.Error("/dev/shm/sandbox-test written in the sandbox is on the host's /dev/shm")
	}

	// A commit in the worktree writes objects and refs to the main
	// repository's .git and the index and HEAD log to the worktree's git
	// directory.
	code, stderr := run(t, s, pol, p.env, "sh", "-c", "git add new.txt && git commit -q -m sandboxed")
	if code != 0 {
		t.Fatalf("git commit in the sandbox: exit %d: %s", code, stderr)
	}
	if got := git(t, p.env, p.repo, "log", "-1", "--format=%s", "task"); got != "sandboxed" {
		t.Errorf("the commit made in the sandbox is not on branch task: %q", got)
	}
}

func TestReadOnly(t *testing.T) {
	s := findBwrap(t)
	p := newProject(t)
	pol := p.policy(p.worktree)
	rnd := "ralph-sandbox-test-" + strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		name string
		path string
	}{
		{"home", filepath.Join(p.home, "x")},
		{"parent of the project", filepath.Join(p.root, "x")},
		{"sibling project", filepath.Join(p.sibling, "x")},
		{"main checkout from its worktree", filepath.Join(p.repo, "x")},
		{"etc", filepath.Join("/etc", rnd)},
		{"/tmp when TMPDIR is elsewhere", filepath.Join("/tmp", rnd)},
		{"root", filepath.Join("/", rnd)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stderr := run(t, s, pol, p.env, "sh", "-c", `echo written > "$1"`, "sh", tc.path)
			if code == 0 {
				os.Remove(tc.path)
				t.Fatalf("wrote %s", tc.path)
			}
			if !strings.Contains(stderr, "Read-only file system") {
				t.Errorf("stderr = %q, want Read-only file system", stderr)
			}
			if _, err := os.Lstat(tc.path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s exists after the sandboxed write failed (%v)", tc.path, err)
			}
		})
	}
	t.Run("remount", func(t *testing.T) {
		// As root, bubblewrap keeps every capability unless told: the
		// agent could then remount / read-write.
		target := filepath.Join("/etc", rnd)
		code, stderr := run(t, s, pol, p.env, "sh", "-c", `mount -o remount,rw / && echo x > "$1"`, "sh", target)
		if code == 0 {
			os.Remove(target)
			t.Fatalf("remounted / read-write and wrote %s", target)
		}
		if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists (%v); stderr %s", target, err, stderr)
		}
	})
}

func TestExitCode(t *testing.T) {
	s := findBwrap(t)
	p := newProject(t)
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
			code, stderr := run(t, s, p.policy(p.worktree), p.env, "sh", "-c", tc.script)
			if code != tc.want {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tc.want, stderr)
			}
		})
	}
}

func TestSymlinkedProject(t *testing.T) {
	s := findBwrap(t)
	p := newProject(t)
	link := filepath.Join(p.root, "link")
	if err := os.Symlink(p.worktree, link); err != nil {
		t.Fatal(err)
	}
	code, stderr := run(t, s, p.policy(link), p.env, "sh", "-c", `pwd && echo x > via-link.txt`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(p.worktree, "via-link.txt")); err != nil {
		t.Error(err)
	}
}

func TestMissingWorkingDirectory(t *testing.T) {
	s := &Sandbox{Path: "/nonexistent/bwrap"}
	_, _, _, err := s.Command(Policy{Dir: filepath.Join(t.TempDir(), "gone")}, "/bin/true", nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want os.ErrNotExist", err)
	}
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

// agent is a sandboxed shell started as agentproc starts an agent: in a
// process group of its own. It traps SIGTERM, writes "TERM" to got and
// exits 7; it leaves a grandchild that ignores SIGTERM and blocks, whose
// command line alone holds the path of its script (grandchild).
type agent struct {
	cmd        *exec.Cmd
	grandchild string
	got        string
}

func startAgent(t *testing.T, s *Sandbox, p *project) *agent {
	t.Helper()
	a := &agent{
		grandchild: filepath.Join(p.tmp, "grandchild-"+strconv.Itoa(os.Getpid())+".sh"),
		got:        filepath.Join(p.tmp, "got"),
	}
	ready := filepath.Join(p.tmp, "ready")
	// The grandchild blocks opening a FIFO nobody writes to: no fork
	// (whose child would hold the marker until it execs), no CPU.
	fifo := filepath.Join(p.tmp, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, a.grandchild, "trap '' TERM\necho > \"$READY\"\nread x < \"$FIFO\"\n")
	script := `trap 'echo TERM > "$GOT"; exit 7' TERM
sh "$GRANDCHILD" &
while :; do sleep 0.05; done`
	path, args, cleanup, err := s.Command(p.policy(p.worktree), "/bin/sh", []string{"-c", script})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	a.cmd = exec.Command(path, args...)
	a.cmd.Env = append(p.env, "GRANDCHILD="+a.grandchild, "GOT="+a.got, "READY="+ready, "FIFO="+fifo)
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

func TestStop(t *testing.T) {
	s := findBwrap(t)
	t.Run("SIGTERM to the group", func(t *testing.T) {
		p := newProject(t)
		a := startAgent(t, s, p)
		// What agentproc does to stop an agent.
		if err := syscall.Kill(-a.cmd.Process.Pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGCONT)
		_ = a.cmd.Wait()
		if code := a.cmd.ProcessState.ExitCode(); code != 7 {
			t.Errorf("exit code %d, want the agent's 7 from its SIGTERM handler (%v)", code, a.cmd.ProcessState)
		}
		if b, err := os.ReadFile(a.got); err != nil || string(b) != "TERM\n" {
			t.Errorf("the agent's SIGTERM handler did not run: %q, %v", b, err)
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
		a := startAgent(t, s, p)
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
		if _, err := os.Stat(a.got); err == nil {
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
		a := startAgent(t, s, p)
		if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		if err := a.cmd.Process.Signal(syscall.Signal(0)); err != nil {
			t.Errorf("bwrap died of a SIGTERM to its pid: %v", err)
		}
		if _, err := os.Stat(a.got); err == nil {
			t.Error("the agent got a SIGTERM sent to bwrap alone")
		}
	})
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
