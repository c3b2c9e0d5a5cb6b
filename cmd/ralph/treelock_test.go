//go:build unix

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// treeAgent writes a stand-in for Claude Code, a shell script: a work
// session writes <task>.txt into the tree and reports the task done;
// for task a it first writes a line into the FIFO started and waits for
// one from the FIFO proceed, so that the test decides how long it works.
// A verifier's session (--tools=…) passes.
func treeAgent(t *testing.T, started, proceed string) string {
	t.Helper()
	agent := filepath.Join(t.TempDir(), "agent.sh")
	script := `#!/bin/sh
cat >/dev/null
for a in "$@"; do
	case "$a" in --tools=*)
		printf '{"type":"system","subtype":"init","session_id":"v-%s","model":"stand-in"}\n' "$RALPH_TASK_ID"
		printf '{"type":"result","subtype":"success","is_error":false,"result":"<verify-pass/>","session_id":"v-%s","num_turns":1,"total_cost_usd":0}\n' "$RALPH_TASK_ID"
		exit 0
	esac
done
echo "$RALPH_TASK_ID" > "$RALPH_TASK_ID.txt"
if [ "$RALPH_TASK_ID" = a ]; then
	echo started > ` + shQuote(started) + `
	read line < ` + shQuote(proceed) + `
fi
printf '{"type":"system","subtype":"init","session_id":"s-%s","model":"stand-in"}\n' "$RALPH_TASK_ID"
printf '{"type":"result","subtype":"success","is_error":false,"result":"Done. <task-done>%s</task-done>","session_id":"s-%s","num_turns":1,"total_cost_usd":0}\n' "$RALPH_TASK_ID" "$RALPH_TASK_ID"
`
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return agent
}

// TestOneWritingBuildPerTree runs two `ralph build --verify` in one tree
// (issue 22): while the first one's agent works, the second — and a
// plain build — exit 1 at once, before any agent, naming the first by
// pid and start; the first then finishes all its work, and once it has
// ended the tree is free again.
func TestOneWritingBuildPerTree(t *testing.T) {
	bin := ralphBinary(t)
	dir := t.TempDir()
	fifos := t.TempDir()
	started, proceed := filepath.Join(fifos, "started"), filepath.Join(fifos, "proceed")
	for _, f := range []string{started, proceed} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	}
	agent := treeAgent(t, started, proceed)
	env := append(os.Environ(), "RALPH_AGENT_ID=", "RALPH_HOLDER=", "RALPH_DIR=")
	ralph := func(args ...string) (int, string, string) { return runBinary(t, bin, dir, env, args...) }
	if code, _, errs := ralph("init"); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	gitInit(t, dir)
	plan := filepath.Join(t.TempDir(), "plan.jsonl")
	if err := os.WriteFile(plan, []byte(`{"id":"a","title":"Task a"}`+"\n"+`{"id":"b","title":"Task b"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := ralph("task", "import", plan); code != 0 {
		t.Fatalf("import: %s", errs)
	}

	first := exec.CommandContext(t.Context(), bin, "build", "--verify", "--claude", agent)
	first.Dir, first.Env = dir, env
	var out, errb bytes.Buffer
	first.Stdout, first.Stderr = &out, &errb
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	running := make(chan error, 1)
	go func() {
		_, err := os.ReadFile(started) // returns when the agent of task a wrote its line
		running <- err
	}()
	select {
	case err := <-running:
		if err != nil {
			t.Fatal(err)
		}
	case err := <-exited:
		// Let the reader go: nobody else opens the FIFO.
		if f, ferr := os.OpenFile(started, os.O_RDWR, 0); ferr == nil {
			f.Close()
		}
		t.Fatalf("the first build ended before its agent ran: %v\nstderr: %s\nstdout: %s", err, errb.String(), out.String())
	}

	pid := fmt.Sprintf("pid %d", first.Process.Pid)
	for _, args := range [][]string{{"build", "--verify"}, {"build"}, {"build", "--commit", "--once"}} {
		code, stdout, stderr := ralph(append(args, "--claude", agent)...)
		if code != 1 || !strings.Contains(stderr, pid) || !strings.Contains(stderr, "started ") || !strings.Contains(stderr, "verifies or commits") {
			t.Errorf("ralph %s beside a verifying build: exit %d\nstderr: %s\nstdout: %s\nwant exit 1 naming %s and its start", strings.Join(args, " "), code, stderr, stdout, pid)
		}
		if strings.Contains(stdout, "session log") {
			t.Errorf("ralph %s: a refused build wrote a session log:\n%s", strings.Join(args, " "), stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "b.txt")); err == nil {
		t.Errorf("task b was worked while the first build held the tree")
	}

	if err := os.WriteFile(proceed, []byte("go\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("first build: %v\nstderr: %s\nstdout: %s", err, errb.String(), out.String())
	}
	for _, f := range []string{"a.txt", "b.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the first build's work: %v", err)
		}
	}
	if _, stdout, _ := ralph("task", "plan-status"); stdout != "open=0 active=0 done=2 failed=0 blocked=0 total=2\n" {
		t.Errorf("plan-status: %s", stdout)
	}
	// Free again.
	if code, stdout, stderr := ralph("build", "--verify", "--claude", agent); code != 0 {
		t.Errorf("a verifying build after the first ended: exit %d\nstderr: %s\nstdout: %s", code, stderr, stdout)
	}
}
