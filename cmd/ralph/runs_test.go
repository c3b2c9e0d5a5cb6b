package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/notify"
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
	first := p.wantLastRun(1, true, runJSON{Kind: "build", Outcome: "complete", ExitCode: intp(0), Done: 2, CostUSD: 0.25, Agents: 2, AgentNames: onClaude})
	if out := p.ok("status"); !strings.HasPrefix(out, "last run: build complete (exit 0) · done 2, failed 0, remaining 0 · $0.2500 over 2 agent sessions · ended ") {
		t.Errorf("status does not lead with the build:\n%s", out)
	}

	// 2. A build the test gate stops before any agent: exit 3.
	p.ok("task", "add", "Third")
	if code, _, errs := p.ralph("build", "--claude", agent, "--test-cmd", "false"); code != 3 {
		t.Fatalf("build with a failing gate: exit %d, want 3; stderr %q", code, errs)
	}
	p.wantLastRun(2, true, runJSON{Kind: "build", Outcome: "test_gate_failed", ExitCode: intp(3), Done: 2, Remaining: 1, AgentNames: onNone})
	if runs, _ := p.runs(); !cmp.Equal(runs[1], first) {
		t.Errorf("the first run changed: %+v, was %+v", runs[1], first)
	}

	// 3. A build stopped by SIGTERM while its agent works: cancelled,
	// exit 130, the stopped session counted.
	if code, _ := signalBuildMidAgent(t, p, syscall.SIGTERM); code != exitInterrupted {
		t.Fatalf("the build stopped by SIGTERM exited %d, want %d", code, exitInterrupted)
	}
	p.wantLastRun(3, true, runJSON{Kind: "build", Outcome: "cancelled", ExitCode: intp(exitInterrupted), Done: 2, Remaining: 1, Agents: 1, AgentNames: onClaude})

	// 4. A build killed with kill -9 while its agent works: died, no exit
	// code, no end.
	code, pid := signalBuildMidAgent(t, p, syscall.SIGKILL)
	if code != -1 {
		t.Fatalf("the killed build exited %d", code)
	}
	if k := p.wantLastRun(4, false, runJSON{Kind: "build", Outcome: "died", AgentNames: onNone}); k.PID != pid {
		t.Errorf("the killed build's run has pid %d; want %d", k.PID, pid)
	}
	if out := p.ok("status"); !strings.HasPrefix(out, "last run: build died (no exit code: its process died)") {
		t.Errorf("status does not lead with the death:\n%s", out)
	}
	if out := p.ok("runs", "-n", "1"); !strings.Contains(out, "OUTCOME") || !strings.Contains(out, " died ") || strings.Contains(out, "complete") {
		t.Errorf("runs -n 1:\n%s", out)
	}
}

// wantLastRun checks that `ralph runs --json` lists n runs, the newest
// want (apart from its id, times and process, which must be there; ended
// says whether it has an end), and that status's last_run is the same; it
// returns the newest.
func (p *runsProject) wantLastRun(n int, ended bool, want runJSON) runJSON {
	p.t.Helper()
	runs, last := p.runs()
	if len(runs) != n {
		p.t.Fatalf("%d runs, want %d: %+v", len(runs), n, runs)
	}
	got := runs[0]
	if diff := cmp.Diff(&got, last); diff != "" {
		p.t.Errorf("status's last_run is not the newest run (-runs +status):\n%s", diff)
	}
	if got.StartedAt == "" || (got.EndedAt != "") != ended || got.PID <= 0 || got.Host == "" || got.Holder == "" {
		p.t.Errorf("run %d: started %q, ended %q, pid %d, host %q, holder %q; want an end: %v", n, got.StartedAt, got.EndedAt, got.PID, got.Host, got.Holder, ended)
	}
	if n > 1 && got.ID <= runs[1].ID {
		p.t.Errorf("run ids %d, then %d: want increasing", runs[1].ID, got.ID)
	}
	// The record names the ralph that ran it, as `ralph version` does.
	var v versionInfo
	if err := json.Unmarshal([]byte(p.ok("version", "--json")), &v); err != nil {
		p.t.Fatal(err)
	}
	if got.Version != v.brief() || !strings.Contains(got.Version, v.Go) {
		p.t.Errorf("run %d: version %q, want %q (ralph version --json: %+v)", n, got.Version, v.brief(), v)
	}
	stable := got
	stable.ID, stable.StartedAt, stable.EndedAt, stable.Host, stable.PID, stable.Holder, stable.Version = 0, "", "", "", 0, "", ""
	if diff := cmp.Diff(want, stable); diff != "" {
		p.t.Errorf("run %d (-want +got):\n%s", n, diff)
	}
	return got
}

func intp(n int) *int { return &n }

// The agent_names of a run whose sessions ran on Claude Code, and of one
// with none.
var onClaude, onNone = []string{"claude"}, []string{}

// signalBuildMidAgent starts a build whose agent says it started (through
// a FIFO, so the test waits for nothing else) and then sleeps, sends the
// build sig, and returns its exit code (-1: killed) and pid. An agent that
// outlives it is killed at the end of the test.
func signalBuildMidAgent(t *testing.T, p *runsProject, sig syscall.Signal) (code, pid int) {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "started")
	if err := mkfifo(fifo); err != nil {
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
		t.Cleanup(func() { sendSignal(apid, syscall.SIGKILL) })
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	return cmd.ProcessState.ExitCode(), cmd.Process.Pid
}

// TestRunsEveryEnding: the other ways a build ends — complete with
// failures, blocked behind a failed task, the test gate, agent trouble,
// the cost budget, a usage limit it does not wait for, one it waits out —
// each leave a run that says so, with the exit code the build exited with, on a plan of
// their own; and each is told to a --notify webhook on loopback (run_end,
// and task_failed, blocked and usage_limit_wait when they happen), to a
// command target alike, while a dead target changes nothing.
func TestRunsEveryEnding(t *testing.T) { testRunsEveryEnding(t, "") }

// TestRunsEveryEndingOnPostgres is TestRunsEveryEnding with the plans on
// PostgreSQL.
func TestRunsEveryEndingOnPostgres(t *testing.T) { testRunsEveryEnding(t, pgtest.URL(t)) }

func testRunsEveryEnding(t *testing.T, db string) {
	failed := "Cannot. <task-failed>{task}</task-failed>"
	cases := []struct {
		name    string
		steps   []agentStep
		args    []string
		blocked bool // the second task waits for the first
		want    runJSON
		events  []string // what the webhook hears, in order
	}{
		{"complete with failures", []agentStep{{Text: failed, Cost: 0.01}}, nil, false,
			runJSON{Outcome: "complete_with_failures", ExitCode: intp(8), Failed: 2, CostUSD: 0.02, Agents: 2, AgentNames: onClaude},
			[]string{"task_failed t-1", "task_failed t-2", "run_end complete_with_failures 8"}},
		{"blocked", []agentStep{{Text: failed, Cost: 0.01}}, nil, true,
			runJSON{Outcome: "blocked", ExitCode: intp(6), Failed: 1, Remaining: 1, CostUSD: 0.01, Agents: 1, AgentNames: onClaude},
			[]string{"task_failed t-1", "blocked blocked", "run_end blocked 6"}},
		{"test gate", []agentStep{{Text: done}}, []string{"--test-cmd", "false"}, false,
			runJSON{Outcome: "test_gate_failed", ExitCode: intp(3), Remaining: 2, AgentNames: onNone},
			[]string{"run_end test_gate_failed 3"}},
		{"agent trouble", []agentStep{{Crash: true}}, []string{"--max-retries", "0"}, false,
			runJSON{Outcome: "agent_failed", ExitCode: intp(4), Remaining: 2, Agents: 1, AgentNames: onClaude},
			[]string{"run_end agent_failed 4"}},
		{"cost budget", []agentStep{{Text: done, Cost: 0.5}}, []string{"--max-cost", "0.4"}, false,
			runJSON{Outcome: "budget_exhausted", ExitCode: intp(9), Done: 1, Remaining: 1, CostUSD: 0.5, Agents: 1, AgentNames: onClaude},
			[]string{"run_end budget_exhausted 9"}},
		{"usage limit", []agentStep{{UsageLimit: time.Now().Add(3 * time.Hour).Unix()}}, []string{"--max-wait", "0"}, false,
			runJSON{Outcome: "usage_limit", ExitCode: intp(10), Remaining: 2, Agents: 1, AgentNames: onClaude},
			[]string{"run_end usage_limit 10"}},
		{"usage limit waited out", []agentStep{{UsageLimit: time.Now().Add(-time.Hour).Unix()}, {Text: done}}, []string{"--max-wait", "1m"}, false,
			runJSON{Outcome: "complete", ExitCode: intp(0), Done: 2, Agents: 3, AgentNames: onClaude},
			[]string{"usage_limit_wait", "run_end complete 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &runsProject{t: t, bin: ralphBinary(t), dir: t.TempDir(),
				env: append(os.Environ(), "RALPH_AGENT_ID=", "RALPH_HOLDER=", "RALPH_DIR=", "RALPH_DB=", "RALPH_PLAN=", "RALPH_NOTIFY=")}
			if db != "" {
				p.args = []string{"--db", db, "--plan", fmt.Sprintf("endings-%d", harnessPlans.Add(1))}
			}
			p.ok("init")
			p.ok("task", "add", "First")
			if tc.blocked {
				p.ok("task", "add", "Second", "--blocked-by", "t-1")
			} else {
				p.ok("task", "add", "Second")
			}
			hook := newWebhook(t)
			cmdOut := filepath.Join(t.TempDir(), "events.ndjson")
			agent, _ := fakeAgentPath(t, tc.steps...)
			args := append([]string{"build", "--claude", agent, "--notify", hook.url, "--notify", "cat >> " + shQuote(cmdOut) + "; echo >> " + shQuote(cmdOut),
				"--notify", deadURL(t)}, tc.args...)
			code, _, errs := p.ralph(args...)
			if code != *tc.want.ExitCode {
				t.Fatalf("build: exit %d, want %d; stderr %q", code, *tc.want.ExitCode, errs)
			}
			want := tc.want
			want.Kind = "build"
			p.wantLastRun(1, true, want)

			heard := hook.events()
			if diff := cmp.Diff(tc.events, summarize(heard)); diff != "" {
				t.Errorf("the webhook heard (-want +got):\n%s", diff)
			}
			if end := heard[len(heard)-1]; end.Done != want.Done || end.Failed != want.Failed || end.Remaining != want.Remaining ||
				end.Project != p.dir || end.Kind != "build" || !strings.HasPrefix(end.Text, "ralph build in "+p.dir+" ended: "+want.Outcome) {
				t.Errorf("run_end: %+v; want the run's counts, project and a line that says how it ended", end)
			}
			b, err := os.ReadFile(cmdOut)
			if err != nil {
				t.Fatal(err)
			}
			var byCommand []notify.Event
			for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				var e notify.Event
				if err := json.Unmarshal([]byte(line), &e); err != nil {
					t.Fatalf("the command got %q: %v", line, err)
				}
				byCommand = append(byCommand, e)
			}
			if diff := cmp.Diff(heard, byCommand); diff != "" {
				t.Errorf("the command target did not get what the webhook did (-webhook +command):\n%s", diff)
			}
			if !strings.Contains(errs, "ralph: warning: notify: run_end to http://127.0.0.1:") {
				t.Errorf("the dead target is not said: stderr %q", errs)
			}
		})
	}
}

// webhook is a loopback receiver of --notify's POSTs.
type webhook struct {
	url string
	mu  sync.Mutex
	got []notify.Event
}

func newWebhook(t *testing.T) *webhook {
	h := &webhook{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e notify.Event
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
			t.Errorf("a POST that is no event: %v", err)
		}
		h.mu.Lock()
		h.got = append(h.got, e)
		h.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL + "/hook"
	return h
}

func (h *webhook) events() []notify.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]notify.Event(nil), h.got...)
}

// summarize is each event's name, then its task or outcome and exit code.
func summarize(events []notify.Event) []string {
	var out []string
	for _, e := range events {
		s := e.Event
		switch {
		case e.Task != nil:
			s += " " + e.Task.ID
		case e.ExitCode != nil:
			s += fmt.Sprintf(" %s %d", e.Outcome, *e.ExitCode)
		case e.Outcome != "":
			s += " " + e.Outcome
		}
		out = append(out, s)
	}
	return out
}

// deadURL is a loopback URL nothing listens on.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	return "http://" + ln.Addr().String() + "/hook"
}

// TestRunsRecordIntegrationTip: a --workers build's run records where it
// left the integration branch.
func TestRunsRecordIntegrationTip(t *testing.T) {
	p := newLandProject(t, "")
	agent, _ := fakeAgentPath(t, work)
	if code, out := p.build(agent); code != 0 {
		t.Fatalf("build: exit %d\n%s", code, out)
	}
	var runs []runJSON
	if err := json.Unmarshal([]byte(p.ok("runs", "--json")), &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Outcome != "complete" || runs[0].Done != 3 {
		t.Fatalf("runs: %+v; want one complete build of 3 tasks", runs)
	}
	if tip := p.git("rev-parse", "ralph/integration"); runs[0].IntegrationTip != tip {
		t.Errorf("the run's integration tip is %q; want the branch's, %s", runs[0].IntegrationTip, tip)
	}
}
