package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// buildRalph builds the ralph binary into a temporary directory.
func buildRalph(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the black-box test builds ralph and needs the go tool on PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "ralph")
	cmd := exec.CommandContext(t.Context(), goBin, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestBinary drives the built binary as a user would: init, add, dep add,
// peek, claim, done, plan-status, checking stdout, stderr and exit codes.
func TestBinary(t *testing.T) {
	bin := buildRalph(t)
	dir := t.TempDir()
	type call struct {
		args   []string
		code   int
		stdout string // "*" accepts any output, checked separately
	}
	runBin := func(c call) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), bin, c.args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "RALPH_AGENT_ID=agent-0123abcd")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || (c.stdout != "*" && out.String() != c.stdout) {
			t.Fatalf("ralph %s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q",
				strings.Join(c.args, " "), code, out.String(), errb.String(), c.code, c.stdout)
		}
		return out.String()
	}

	if v := runBin(call{args: []string{"--version"}, stdout: "*"}); !strings.HasPrefix(v, "ralph version ") {
		t.Errorf("--version printed %q", v)
	}
	runBin(call{args: []string{"task", "list"}, code: 1, stdout: ""})
	runBin(call{args: []string{"init"}, stdout: "*"})
	runBin(call{args: []string{"task", "add", "Set up the schema", "-d", "users table", "--priority", "1"}, stdout: "t-1\n"})
	runBin(call{args: []string{"task", "add", "Login form"}, stdout: "t-2\n"})
	runBin(call{args: []string{"--dir", dir, "task", "dep", "add", "t-2", "t-1"}, stdout: ""})
	runBin(call{args: []string{"task", "dep", "add", "t-1", "t-2"}, code: 1, stdout: ""})

	peek := runBin(call{args: []string{"task", "peek"}, stdout: "*"})
	if !strings.Contains(peek, "## t-1: Set up the schema") || strings.Contains(peek, "t-2") {
		t.Errorf("peek before the first claim:\n%s", peek)
	}
	runBin(call{args: []string{"task", "claim"}, stdout: "t-1\n"})
	runBin(call{args: []string{"task", "peek"}, stdout: ""}) // t-2 still waits
	runBin(call{args: []string{"task", "claim"}, code: 2, stdout: ""})
	runBin(call{args: []string{"task", "done", "t-1", "--summary", "schema in place"}, stdout: ""})
	peek = runBin(call{args: []string{"task", "peek", "-n", "10"}, stdout: "*"})
	if !strings.Contains(peek, "## t-2: Login form") || !strings.Contains(peek, "t-1: schema in place") {
		t.Errorf("peek after t-1 is done:\n%s", peek)
	}
	runBin(call{args: []string{"task", "plan-status"}, stdout: "open=1 active=0 done=1 failed=0 blocked=0 total=2\n"})
	runBin(call{args: []string{"task", "claim", "t-2"}, stdout: "t-2\n"})
	runBin(call{args: []string{"task", "plan-status"}, stdout: "open=0 active=1 done=1 failed=0 blocked=0 total=2\n"})
	// The SessionEnd hook's command, as Claude Code runs it at the end of
	// every session: outside a ralph run, and while the loop that holds the
	// claim lives, it changes nothing; once that loop is gone, it releases
	// the agent's claims.
	hook := func(holder string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "sh", "-c", sessionEndHook)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "RALPH_AGENT_ID=agent-0123abcd", "RALPH_BIN="+bin, "RALPH_HOLDER="+holder)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("SessionEnd hook: %v, output %q", err, out)
		}
		return string(out)
	}
	if out := hook(""); out != "" {
		t.Errorf("hook outside a ralph run printed %q", out)
	}
	if out := hook(loop.ThisProcess().String()); out != "" {
		t.Errorf("hook with the loop alive printed %q", out)
	}
	runBin(call{args: []string{"task", "plan-status"}, stdout: "open=0 active=1 done=1 failed=0 blocked=0 total=2\n"})
	if out := hook(looptest.DeadHolder(t).String()); out != "t-2\n" {
		t.Errorf("hook after the loop died printed %q, want the released t-2", out)
	}
	runBin(call{args: []string{"task", "claim"}, stdout: "t-2\n"})
	runBin(call{args: []string{"task", "done", "t-2"}, stdout: ""})
	runBin(call{args: []string{"task", "plan-status"}, stdout: "open=0 active=0 done=2 failed=0 blocked=0 total=2\n"})
	runBin(call{args: []string{"task", "peek"}, stdout: ""})

	if diff := cmp.Diff("{\n  \"claimable\": [],\n  \"active\": []\n}\n", runBin(call{args: []string{"task", "peek", "--json"}, stdout: "*"})); diff != "" {
		t.Errorf("peek --json (-want +got):\n%s", diff)
	}
}
