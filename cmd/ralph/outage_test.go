package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
)

// TestOutageAnnounced: the plan's PostgreSQL server goes away while the
// agent works (the connection refused, as a stopped server's is). The
// build says so on stderr while the outage lasts — not a silent stall —
// says when the server answers again, and finishes its task: exit 0.
func TestOutageAnnounced(t *testing.T) {
	proxy, url := pgtest.NewProxy(t, pgtest.URL(t))
	p := &runsProject{t: t, bin: ralphBinary(t), dir: t.TempDir(),
		env:  append(os.Environ(), "RALPH_AGENT_ID=", "RALPH_HOLDER=", "RALPH_DIR=", "RALPH_DB=", "RALPH_PLAN="),
		args: []string{"--db", url, "--plan", fmt.Sprintf("outage-%d", harnessPlans.Add(1))}}
	p.ok("init")
	p.ok("task", "add", "Survive an outage")

	dir := t.TempDir()
	started, resume := filepath.Join(dir, "started"), filepath.Join(dir, "resume")
	if err := mkfifo(started); err != nil {
		t.Fatal(err)
	}
	agent, _ := fakeAgentPath(t, agentStep{
		Sh:   fmt.Sprintf("echo > %s; while [ ! -e %s ]; do sleep 0.05; done", shQuote(started), shQuote(resume)),
		Text: done,
	})
	cmd := exec.Command(p.bin, append(append([]string{}, p.args...), "build", "--claude", agent, "--lease", "6s")...)
	cmd.Dir, cmd.Env = p.dir, p.env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string, 100000)
	var all strings.Builder
	var mu sync.Mutex
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			all.WriteString(sc.Text() + "\n")
			mu.Unlock()
			lines <- sc.Text()
		}
	}()
	waitLine := func(what string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("ralph ended before saying %q; stdout:\n%s", what, stdout.String())
				}
				if strings.Contains(l, what) {
					return
				}
			case <-timeout:
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("ralph did not say %q within 30 s; stderr:\n%s", what, all.String())
			}
		}
	}

	if _, err := os.ReadFile(started); err != nil { // until the agent works
		t.Fatal(err)
	}
	proxy.Down()
	waitLine("ralph: the plan's server does not answer since ")
	// The outage lasts a lease renewal more (every 2 s), not the lease.
	time.Sleep(2 * time.Second)
	proxy.Heal()
	waitLine("ralph: the plan's server answers again (it did not for ")
	if err := os.WriteFile(resume, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	err = cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	if err != nil || !strings.Contains(stdout.String(), "complete") {
		t.Fatalf("build: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), all.String())
	}
	if n := strings.Count(all.String(), "does not answer since"); n != 1 {
		t.Errorf("the outage was announced %d times, want once:\n%s", n, all.String())
	}
}
