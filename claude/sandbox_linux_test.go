package claude

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/claude/claudetest"
	"github.com/ralph-dev/ralph/loop"
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

// BenchmarkRunOverheadSandboxed is BenchmarkRunOverhead inside ralph's
// sandbox, in a git repository of 1,000 files: ralph's own time around the
// session (the session's scratch, the private git copy and the state
// directory's copy made and removed, the broker-less start, the reap)
// against the agent's, from ralph's start of bubblewrap to the agent's
// exit (bubblewrap's own start, ~10 ms, is in the agent's share: it is
// the sandbox, not ralph's bookkeeping). The same session unsandboxed is
// reported beside it (plain-ms/op).
func BenchmarkRunOverheadSandboxed(b *testing.B) {
	sb, err := sandbox.Find()
	if err != nil {
		if os.Getenv("CI") != "" {
			b.Fatal(err)
		}
		b.Skip(err)
	}
	path := claudetest.Binary(b)
	api := claudetest.NewAPI(b, func(r claudetest.Request) claudetest.Reply {
		if r.ToolResults() == 0 {
			return claudetest.Bash("echo hello > out.txt && git status --porcelain")
		}
		return claudetest.Text("<task-done>t-1</task-done>")
	})
	dir, err := filepath.EvalSymlinks(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	home := b.TempDir()
	env := append(os.Environ(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	for i := range 1000 {
		name := filepath.Join(dir, fmt.Sprintf("d%02d", i%50), fmt.Sprintf("f%04d.txt", i))
		os.MkdirAll(filepath.Dir(name), 0o755)
		if err := os.WriteFile(name, []byte(name), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "files"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	box, err := sb.Boundary(sandbox.BoundaryParams{Root: dir, Env: env})
	if err != nil {
		b.Fatal(err)
	}
	var marks map[string]time.Time
	sandboxed := &Runner{Path: path, Grace: 2 * time.Second, Sandbox: box}
	sandboxed.trace = func(stage string) { marks[stage] = time.Now() }
	plain := &Runner{Path: path, Grace: 2 * time.Second}
	request := func() loop.RunRequest {
		req := e2eRequest(b, api)
		req.Dir = dir
		req.SystemPrompt = "You are a careful engineer."
		req.Env = append(req.Env, "HOME="+home, "GIT_CONFIG_NOSYSTEM=1")
		return req
	}
	var agent, own, plainRun time.Duration
	runs := 0
	for b.Loop() {
		t0 := time.Now()
		if res, err := plain.Run(b.Context(), request()); err != nil || res.Class != loop.ClassSuccess {
			b.Fatalf("plain run: %v %s", err, Describe(res))
		}
		plainRun += time.Since(t0)
		marks = map[string]time.Time{}
		res, err := sandboxed.Run(b.Context(), request())
		if err != nil || res.Class != loop.ClassSuccess {
			b.Fatalf("sandboxed run: %v %s", err, Describe(res))
		}
		agent += marks["exited"].Sub(marks["spawn"])
		own += marks["spawn"].Sub(marks["enter"]) + marks["return"].Sub(marks["exited"])
		runs++
	}
	b.ReportMetric(float64(agent.Milliseconds())/float64(runs), "agent-ms/op")
	b.ReportMetric(float64(own.Microseconds())/float64(runs), "ralph-µs/op")
	b.ReportMetric(100*float64(own)/float64(agent), "overhead-%")
	b.ReportMetric(float64(plainRun.Milliseconds())/float64(runs), "plain-ms/op")
}
