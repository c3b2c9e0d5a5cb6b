package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// shAgent writes a stand-in agent, a shell script that speaks Claude Code's
// stream-json: it appends $RALPH_TASK_ID to runs (one line per session),
// then reports the task done. It costs a shell's start-up, so that
// hundreds of sessions stay cheap.
func shAgent(t *testing.T, runs string) string {
	t.Helper()
	agent := filepath.Join(t.TempDir(), "agent.sh")
	script := `#!/bin/sh
cat >/dev/null
echo "$RALPH_TASK_ID" >> ` + shQuote(runs) + `
printf '{"type":"system","subtype":"init","session_id":"s-%s","model":"stand-in"}\n' "$RALPH_TASK_ID"
printf '{"type":"result","subtype":"success","is_error":false,"result":"Done. <task-done>%s</task-done>","session_id":"s-%s","num_turns":1,"total_cost_usd":0}\n' "$RALPH_TASK_ID" "$RALPH_TASK_ID"
`
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return agent
}

// TestLoopsShareOnePlan runs 8 `ralph build` processes on one project of 200
// tasks: 25 chains of 8 and a last task that waits for every chain. Towards
// the end, and for the last task, most loops find nothing ready while others
// work: they wait (ARCHITECTURE.md §3.1) instead of exiting 6. Every task is
// worked exactly once, and every loop exits 0.
func TestLoopsShareOnePlan(t *testing.T) {
	if testing.Short() {
		t.Skip("8 processes, 200 agent sessions")
	}
	bin := ralphBinary(t)
	dir := t.TempDir()
	runs := filepath.Join(t.TempDir(), "runs.txt")
	agent := shAgent(t, runs)
	env := append(os.Environ(), "RALPH_AGENT_ID=", "RALPH_HOLDER=", "RALPH_DIR=")
	ralph := func(args ...string) (int, string, string) { return runBinary(t, bin, dir, env, args...) }
	if code, _, errs := ralph("init"); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	var plan bytes.Buffer
	var tails []string
	enc := json.NewEncoder(&plan)
	for c := range 25 {
		for k := range 8 {
			id := fmt.Sprintf("c%02d-%d", c, k)
			task := map[string]any{"id": id, "title": "Task " + id}
			if k > 0 {
				task["blocked_by"] = []string{fmt.Sprintf("c%02d-%d", c, k-1)}
			}
			if err := enc.Encode(task); err != nil {
				t.Fatal(err)
			}
		}
		tails = append(tails, fmt.Sprintf("c%02d-7", c))
	}
	if err := enc.Encode(map[string]any{"id": "last", "title": "The last", "blocked_by": tails}); err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(t.TempDir(), "plan.jsonl")
	if err := os.WriteFile(planFile, plan.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := ralph("task", "import", planFile); code != 0 {
		t.Fatalf("import: %s", errs)
	}

	const loops = 8
	type exit struct {
		code           int
		stdout, stderr string
	}
	exits := make([]exit, loops)
	var wg sync.WaitGroup
	for i := range loops {
		wg.Go(func() {
			code, out, errs := ralph("build", "--max-iterations", "1000", "--claude", agent)
			exits[i] = exit{code, out, errs}
		})
	}
	wg.Wait()
	for i, e := range exits {
		if e.code != 0 {
			t.Errorf("loop %d: exit %d\nstderr: %s\nstdout tail: %s", i, e.code, e.stderr, tail(e.stdout, 1500))
		}
	}
	data, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	worked := strings.Fields(string(data))
	sort.Strings(worked)
	var want []string
	for c := range 25 {
		for k := range 8 {
			want = append(want, fmt.Sprintf("c%02d-%d", c, k))
		}
	}
	want = append(want, "last")
	sort.Strings(want)
	if diff := cmp.Diff(want, worked); diff != "" {
		t.Errorf("sessions per task: each task exactly once (-want +got):\n%s", diff)
	}
	if _, out, _ := ralph("task", "plan-status"); out != "open=0 active=0 done=201 failed=0 blocked=0 total=201\n" {
		t.Errorf("plan-status: %s", out)
	}
	waited := 0
	for _, e := range exits {
		if strings.Contains(e.stdout, "held by other agents") {
			waited++
		}
	}
	if waited == 0 {
		t.Errorf("no loop said it waited for other agents")
	}
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// runBinary runs the ralph binary bin in dir with env and returns its exit
// code, stdout and stderr.
func runBinary(t *testing.T, bin, dir string, env []string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Dir, cmd.Env = dir, env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), out.String(), errb.String()
	}
	if err != nil {
		t.Error(err)
	}
	return 0, out.String(), errb.String()
}
