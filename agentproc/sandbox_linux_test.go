package agentproc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/sandbox"
)

// boxProject is a git repository with a plan directory, a home with an
// agent's state directory, and its Boundary in the real bubblewrap.
type boxProject struct {
	root, home, state string
	env               []string
	box               *sandbox.Boundary
}

func newBoxProject(t *testing.T) *boxProject {
	t.Helper()
	sb := sandboxOrSkip(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on PATH")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := &boxProject{root: filepath.Join(dir, "proj"), home: filepath.Join(dir, "home")}
	p.state = filepath.Join(p.home, ".agent")
	for _, d := range []string{filepath.Join(p.root, ".ralph"), p.state} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p.env = append(os.Environ(), "HOME="+p.home, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "first"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = p.root, p.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if p.box, err = sb.Boundary(sandbox.BoundaryParams{Root: p.root, Env: p.env}); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunSandboxed: a sandboxed agent writes its tree, its temp directory
// and its state's login, nothing else; its commits stay in its private
// checkout, whose moves Exit.Checkout reports; its scratch is gone when
// Run returns.
func TestRunSandboxed(t *testing.T) {
	p := newBoxProject(t)
	if err := os.WriteFile(filepath.Join(p.state, "auth.json"), []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var evs events
	spec := shSpec(t, `set -e
echo work > work.txt
git add work.txt && git commit -q -m work
echo "$TMPDIR" > tmpdir.txt && touch "$TMPDIR/x"
echo new > "$HOME/.agent/auth.json"
echo '{"hooks":1}' > "$HOME/.agent/settings.json"
if echo x > .ralph/plan; then exit 9; fi
if echo x > "$HOME/escape"; then exit 9; fi
echo result`, &evs)
	spec.Dir, spec.Env, spec.Sandbox = p.root, p.env, p.box
	spec.State = []sandbox.State{{Dir: p.state, Keep: []string{"auth.json"}}}
	exit, err := Run(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if exit.ExitCode != 0 {
		t.Fatalf("exit %d: %s", exit.ExitCode, exit.Stderr)
	}
	if c := exit.Checkout; c == nil || c.Start == "" || c.End == c.Start || !c.Descends {
		t.Errorf("Checkout = %+v, want the agent's commit on top of the start", c)
	}
	cmd := exec.Command("git", "log", "--format=%s")
	cmd.Dir, cmd.Env = p.root, p.env
	if out, _ := cmd.Output(); string(out) != "first\n" {
		t.Errorf("the repository's log: %q", out)
	}
	tmpdir, _ := os.ReadFile(filepath.Join(p.root, "tmpdir.txt"))
	scratch := filepath.Dir(strings.TrimSpace(string(tmpdir)))
	if !strings.HasPrefix(filepath.Base(scratch), "ralph-sandbox-") {
		t.Errorf("TMPDIR %s is not in the run's scratch", tmpdir)
	}
	if _, err := os.Stat(scratch); !os.IsNotExist(err) {
		t.Errorf("the scratch %s outlived Run: %v", scratch, err)
	}
	if b, _ := os.ReadFile(filepath.Join(p.state, "auth.json")); string(b) != "new\n" {
		t.Errorf("the login = %q, want the agent's refresh", b)
	}
	if _, err := os.Stat(filepath.Join(p.state, "settings.json")); err == nil {
		t.Error("the agent's settings outlived the session")
	}
}

// TestRunSandboxRefused: a working directory the Boundary does not cover
// starts nothing.
func TestRunSandboxRefused(t *testing.T) {
	p := newBoxProject(t)
	var evs events
	spec := shSpec(t, "echo result", &evs)
	spec.Sandbox = p.box // spec.Dir is a temp directory outside the project
	if _, err := Run(t.Context(), spec); err == nil || !strings.Contains(err.Error(), "sandbox") {
		t.Errorf("err = %v", err)
	}
}

func TestCommands(t *testing.T) {
	t.Run("host", func(t *testing.T) {
		c := &Commands{}
		out, err := c.RunCommand(t.Context(), loop.CommandRequest{Command: "echo out; echo err >&2; echo $EXTRA; exit 3", Dir: t.TempDir(), Env: []string{"EXTRA=extra"}})
		if err == nil || err.Error() != "exit status 3" {
			t.Errorf("err = %v, want exit status 3", err)
		}
		if out != "out\nerr\nextra" {
			t.Errorf("output = %q", out)
		}
		if out, err := c.RunCommand(t.Context(), loop.CommandRequest{Command: "true"}); err != nil || out != "" {
			t.Errorf("true: %q, %v", out, err)
		}
	})
	t.Run("cancel stops what it started", func(t *testing.T) {
		dir := t.TempDir()
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		// A child that leaves the process group and outlives its shell
		// would write late.txt; the reap stops it.
		_, err := (&Commands{Grace: 200 * time.Millisecond}).RunCommand(ctx, loop.CommandRequest{
			Command: "setsid sh -c 'sleep 2; echo late > late.txt' & sleep 30", Dir: dir})
		if err == nil {
			t.Fatal("a cancelled command succeeded")
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("RunCommand returned %v after the start", d)
		}
		time.Sleep(2500 * time.Millisecond)
		if _, err := os.Stat(filepath.Join(dir, "late.txt")); err == nil {
			t.Error("the command's detached child outlived the cancel")
		}
	})
	t.Run("sandboxed", func(t *testing.T) {
		p := newBoxProject(t)
		c := &Commands{Sandbox: p.box}
		out, err := c.RunCommand(t.Context(), loop.CommandRequest{Command: "echo built > out.txt && git status --short", Dir: p.root})
		if err != nil || !strings.Contains(out, "?? out.txt") {
			t.Errorf("in the tree: %q, %v", out, err)
		}
		out, err = c.RunCommand(t.Context(), loop.CommandRequest{Command: "echo x > " + filepath.Join(p.home, "escape"), Dir: p.root})
		if err == nil || !strings.Contains(out, "Read-only file system") {
			t.Errorf("outside the tree: %q, %v", out, err)
		}
		if _, err := os.Stat(filepath.Join(p.home, "escape")); err == nil {
			t.Error("the sandboxed command wrote outside its tree")
		}
	})
	t.Run("sandboxed without the API keys", func(t *testing.T) {
		// The agent writes the tests the gate runs: a test that prints
		// the environment hands the agent what it was not given.
		keys := []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "CODEX_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "RALPH_DB"}
		for _, k := range keys {
			t.Setenv(k, "secret-"+k)
		}
		p := newBoxProject(t)
		const leak = `env | grep '^[A-Z_]*=secret-' | sort; echo end`
		for _, tc := range []struct {
			name      string
			c         *Commands
			useAPIKey bool
			want      []string
		}{
			{"sandboxed", &Commands{Sandbox: p.box}, false, nil},
			{"sandboxed, --use-api-key", &Commands{Sandbox: p.box}, true, keys[:6]},
			{"on the host", &Commands{}, false, keys},
		} {
			out, err := tc.c.RunCommand(t.Context(), loop.CommandRequest{Command: leak, Dir: p.root, UseAPIKey: tc.useAPIKey})
			if err != nil {
				t.Fatalf("%s: %v: %s", tc.name, err, out)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if k, _, ok := strings.Cut(line, "="); ok {
					got = append(got, k)
				}
			}
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				t.Errorf("%s: the command saw %q, want %q", tc.name, got, want)
			}
		}
	})
}
