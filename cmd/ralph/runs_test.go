package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
)

// TestRunsRecorded: through the binary, each way a build ends leaves a run
// record that `ralph runs --json` and `ralph status --json` tell
// truthfully: a build that completes, one the test gate stops on the
// starting tree (exit 3), and one killed with kill -9 while its agent
// works, which shows as ended by its holder's death.
func TestRunsRecorded(t *testing.T) { testRunsRecorded(t, "") }

// TestRunsRecordedOnPostgres is TestRunsRecorded with the plan on
// PostgreSQL.
func TestRunsRecordedOnPostgres(t *testing.T) { testRunsRecorded(t, pgtest.URL(t)) }

// runsProject is a project run through the ralph binary.
type runsProject struct {
	t    *testing.T
	bin  string
	dir  string
	env  []string
	args []string // --db URL --plan NAME, on PostgreSQL
}

func (p *runsProject) ralph(args ...string) (int, string, string) {
	p.t.Helper()
	return runBinary(p.t, p.bin, p.dir, p.env, append(append([]string{}, p.args...), args...)...)
}

func (p *runsProject) ok(args ...string) string {
	p.t.Helper()
	code, out, errs := p.ralph(args...)
	if code != 0 {
		p.t.Fatalf("ralph %s: exit %d, stderr %q", strings.Join(args, " "), code, errs)
	}
	return out
}

// runs is `ralph runs --json` and `ralph status --json`'s last_run.
func (p *runsProject) runs() ([]runJSON, *runJSON) {
	p.t.Helper()
	var runs []runJSON
	if err := json.Unmarshal([]byte(p.ok("runs", "--json")), &runs); err != nil {
		p.t.Fatal(err)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(p.ok("status", "--json")), &st); err != nil {
		p.t.Fatal(err)
	}
	return runs, st.LastRun
}

func testRunsRecorded(t *testing.T, db string) {
	p := &runsProject{t: t, bin: ralphBinary(t), dir: t.TempDir(),
		env: append(os.Environ(), "RALPH_AGENT_ID=", "RALPH_HOLDER=", "RALPH_DIR=", "RALPH_DB=", "RALPH_PLAN=")}
	if db != "" {
		p.args = []string{"--db", db, "--plan", fmt.Sprintf("runs-%d", harnessPlans.Add(1))}
	}
	p.ok("init")
	// No run yet: status has no last_run, runs lists none.
	if runs, last := p.runs(); len(runs) != 0 || last != nil {
		t.Fatalf("before any run: runs %+v, last_run %+v", runs, last)
	}
	if out := p.ok("status"); strings.HasPrefix(out, "last run") {
		t.Errorf("status before any run leads with a run:\n%s", out)
	}
	p.ok("task", "add", "First")
	p.ok("task", "add", "Second")

	// 1. A build that completes.
	agent, _ := fakeAgentPath(t, agentStep{Text: done, Cost: 0.125})
	if code, _, errs := p.ralph("build", "--claude", agent); code != 0 {
		t.Fatalf("build: exit %d, stderr %q", code, errs)
	}
	runs, last := p.runs()
	if len(runs) != 1 {
		t.Fatalf("after one build: %d runs: %+v", len(runs), runs)
	}
	r := runs[0]
	if r.Kind != "build" || r.Outcome != "complete" || r.ExitCode == nil || *r.ExitCode != 0 ||
		r.Done != 2 || r.Failed != 0 || r.Remaining != 0 || r.CostUSD != 0.25 || r.Agents != 2 ||
		r.StartedAt == "" || r.EndedAt == "" || r.PID <= 0 || r.Host == "" || r.IntegrationTip != "" {
		t.Errorf("the completed build's run: %+v", r)
	}
	if diff := cmp.Diff(&r, last); diff != "" {
		t.Errorf("status's last_run (-want +got):\n%s", diff)
	}
	if out := p.ok("status"); !strings.HasPrefix(out, "last run: build complete (exit 0) · done 2, failed 0, remaining 0 · $0.2500 over 2 agent sessions · ended ") {
		t.Errorf("status does not lead with the build:\n%s", out)
	}

	// 2. A build the test gate stops before any agent: exit 3.
	p.ok("task", "add", "Third")
	if code, _, errs := p.ralph("build", "--claude", agent, "--test-cmd", "false"); code != 3 {
		t.Fatalf("build with a failing gate: exit %d, want 3; stderr %q", code, errs)
	}
	runs, last = p.runs()
	if len(runs) != 2 || !cmp.Equal(runs[1], r) {
		t.Fatalf("after two builds: %+v; want the new one, then the first unchanged", runs)
	}
	g := runs[0]
	if g.ID <= r.ID || g.Outcome != "test_gate_failed" || g.ExitCode == nil || *g.ExitCode != 3 ||
		g.Done != 2 || g.Remaining != 1 || g.Agents != 0 || g.CostUSD != 0 || g.EndedAt == "" {
		t.Errorf("the gate-stopped build's run: %+v", g)
	}
	if diff := cmp.Diff(&g, last); diff != "" {
		t.Errorf("status's last_run (-want +got):\n%s", diff)
	}

	// 3. A build stopped by SIGTERM while its agent works: cancelled,
	// exit 130.
	if code, _ := signalBuildMidAgent(t, p, syscall.SIGTERM); code != exitInterrupted {
		t.Fatalf("the build stopped by SIGTERM exited %d, want %d", code, exitInterrupted)
	}
	runs, _ = p.runs()
	if c := runs[0]; len(runs) != 3 || c.Outcome != "cancelled" || c.ExitCode == nil || *c.ExitCode != exitInterrupted ||
		c.EndedAt == "" || c.Done != 2 || c.Remaining != 1 {
		t.Errorf("after SIGTERM: %+v; want the newest cancelled, exit 130, ended, 1 task remaining", runs)
	}

	// 4. A build killed with kill -9 while its agent works.
	code, pid := signalBuildMidAgent(t, p, syscall.SIGKILL)
	if code != -1 {
		t.Fatalf("the killed build exited %d", code)
	}
	runs, last = p.runs()
	if len(runs) != 4 {
		t.Fatalf("after the killed build: %d runs: %+v", len(runs), runs)
	}
	k := runs[0]
	if k.Outcome != "died" || k.ExitCode != nil || k.EndedAt != "" || k.PID != pid || k.StartedAt == "" {
		t.Errorf("the killed build's run: %+v; want died, no exit code, no end, pid %d", k, pid)
	}
	if diff := cmp.Diff(&k, last); diff != "" {
		t.Errorf("status's last_run (-want +got):\n%s", diff)
	}
	if out := p.ok("status"); !strings.HasPrefix(out, "last run: build died (no exit code: its process died)") {
		t.Errorf("status does not lead with the death:\n%s", out)
	}
	if out := p.ok("runs", "-n", "1"); !strings.Contains(out, "OUTCOME") || !strings.Contains(out, " died ") || strings.Contains(out, "complete") {
		t.Errorf("runs -n 1:\n%s", out)
	}
}

// signalBuildMidAgent starts a build whose agent says it started (through
// a FIFO, so the test waits for nothing else) and then sleeps, sends the
// build sig, and returns its exit code (-1: killed) and pid. An agent that
// outlives it is killed at the end of the test.
func signalBuildMidAgent(t *testing.T, p *runsProject, sig syscall.Signal) (code, pid int) {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "started")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(dir, "claude")
	script := "#!/bin/sh\ncat >/dev/null\necho $$ > " + shQuote(fifo) + "\nexec sleep 60\n"
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(p.bin, append(append([]string{}, p.args...), "build", "--claude", agent)...)
	cmd.Dir, cmd.Env = p.dir, p.env
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started, err := os.ReadFile(fifo) // until the agent wrote its pid
	if err != nil {
		t.Fatal(err)
	}
	if apid, err := strconv.Atoi(strings.TrimSpace(string(started))); err == nil {
		t.Cleanup(func() { _ = syscall.Kill(apid, syscall.SIGKILL) })
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	return cmd.ProcessState.ExitCode(), cmd.Process.Pid
}
