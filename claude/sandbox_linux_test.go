package claude

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ralph-dev/ralph/sandbox"
)

func init() {
	// An agent that commits, then rewinds its HEAD past where it began
	// (`git reset --hard HEAD~1`), as issue 20's agent did.
	extraFakeModes["git-reset"] = func() int {
		for _, args := range [][]string{{"commit", "-q", "--allow-empty", "-m", "agent"}, {"reset", "-q", "--hard", "HEAD~2"}} {
			if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
				os.Stderr.Write(out)
				return 3
			}
		}
		out(fakeInit)
		out(fakeResult("rewound"))
		return 0
	}
}

// TestRunSandboxedCheckout: a sandboxed Claude Code session reports how
// its private checkout moved (RunResult.Checkout), and the repository's
// branch stays where it was.
func TestRunSandboxedCheckout(t *testing.T) {
	sb, err := sandbox.Find()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	git("commit", "-q", "--allow-empty", "-m", "one")
	git("commit", "-q", "--allow-empty", "-m", "two")
	head := git("rev-parse", "HEAD")
	box, err := sb.Boundary(sandbox.BoundaryParams{Root: dir, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	r := testRunner(t)
	r.Sandbox = box
	req := fakeRequest(t, "git-reset")
	req.Dir = dir
	for _, kv := range env {
		if strings.HasPrefix(kv, "HOME=") || strings.HasPrefix(kv, "GIT_") {
			req.Env = append(req.Env, kv)
		}
	}
	res, err := r.Run(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Class != "success" {
		t.Fatalf("class %s: %s", res.Class, res.Stderr)
	}
	c := res.Checkout
	if c == nil || c.Start != head || c.End == "" || c.End == head || c.Descends {
		t.Errorf("Checkout = %+v, want a move from %s to its grandparent, not descending", c, head)
	}
	if got := git("rev-parse", "main"); got != head {
		t.Errorf("main moved to %s", got)
	}
}
