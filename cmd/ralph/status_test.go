package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
)

// record stores receipts in the project's database, as a run would.
func (h *harness) record(receipts ...loop.Receipt) {
	h.t.Helper()
	st, err := dag.OpenExisting(h.t.Context(), filepath.Join(h.dir, ".ralph", "progress.db"), dag.Options{Now: func() time.Time { return h.clock }})
	if err != nil {
		h.t.Fatal(err)
	}
	defer st.Close()
	for _, r := range receipts {
		if err := st.RecordReceipt(h.t.Context(), r); err != nil {
			h.t.Fatal(err)
		}
	}
}

// statusProject is a project with a done task, a claimed one (claimed at
// t0, looked at five minutes later), an open one, and three receipts.
func statusProject(t *testing.T) *harness {
	t.Helper()
	h := initHarness(t)
	h.chain(1)
	h.add("Login form")
	h.add("Logout")
	h.ok("task", "claim", "t-1", "--agent", "agent-00000001")
	h.ok("task", "done", "t-1")
	// An agent's claim inside a session of a loop running on machine-b.
	h.env["RALPH_HOLDER"] = "4242:777@machine-b"
	h.ok("task", "claim", "t-2", "--agent", "agent-0000000a")
	delete(h.env, "RALPH_HOLDER")
	s := "session-20260102-030000"
	h.record(
		loop.Receipt{Session: s, Iteration: 1, Mode: "build", TaskID: "t-1", Model: "claude-sonnet-4-5", InputTokens: 1200, OutputTokens: 80,
			CostUSD: 0.25, StartedAt: t0.Add(-time.Hour), Duration: 90 * time.Second, Turns: 7, ExitReason: "success"},
		loop.Receipt{Session: s, Iteration: 1, Mode: "verify", TaskID: "t-1", Model: "claude-sonnet-4-5",
			CostUSD: 0.05, StartedAt: t0.Add(-58 * time.Minute), Duration: 20 * time.Second, Turns: 2, ExitReason: "success", Verdict: "pass"},
		loop.Receipt{Session: s, Iteration: 2, Mode: "build", TaskID: "t-2", Model: "claude-opus-4-1",
			CostUSD: 1, StartedAt: t0.Add(-50 * time.Minute), Duration: 3 * time.Minute, Turns: 12, ExitReason: "crashed"},
	)
	h.clock = t0.Add(5 * time.Minute)
	return h
}

func TestStatusText(t *testing.T) {
	h := statusProject(t)
	want := `plan: open=1 active=1 done=1 failed=0 blocked=0 total=3

active (1):
  t-2  Login form  agent-0000000a  claimed 5m ago, lease 10m left  pid 4242 on machine-b

last iterations (3 of 3):
  STARTED               SESSION                  ITER  MODE    TASK  MODEL              TURNS  DURATION  COST     ENDED
  2026-01-02T02:04:05Z  session-20260102-030000  1     build   t-1   claude-sonnet-4-5  7      1m30s     $0.2500  success
  2026-01-02T02:06:05Z  session-20260102-030000  1     verify  t-1   claude-sonnet-4-5  2      20s       $0.0500  success (verify pass)
  2026-01-02T02:14:05Z  session-20260102-030000  2     build   t-2   claude-opus-4-1    12     3m0s      $1.0000  crashed

cost so far: $1.3000 over 3 agent sessions
`
	if diff := cmp.Diff(want, h.ok("status")); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

// Receipts of other agents show an AGENT column, estimated costs with ~,
// and costs nobody knows as unknown, and the total says how much of it is
// estimated.
func TestStatusOtherAgents(t *testing.T) {
	h := initHarness(t)
	s := "session-20260102-030000"
	h.record(
		loop.Receipt{Session: s, Iteration: 1, Mode: "build", TaskID: "t-1", Model: "claude-sonnet-4-5", Agent: "claude",
			CostUSD: 0.25, StartedAt: t0, Duration: 90 * time.Second, Turns: 7, ExitReason: "success"},
		loop.Receipt{Session: s, Iteration: 1, Mode: "verify", TaskID: "t-1", Model: "gpt-5.5", Agent: "codex",
			CostUSD: 0.0125, CostSource: loop.CostEstimated, StartedAt: t0.Add(2 * time.Minute), Duration: 20 * time.Second, Turns: 1,
			ExitReason: "success", Verdict: "pass"},
		loop.Receipt{Session: s, Iteration: 2, Mode: "build", TaskID: "t-2", Model: "local/qwen", Agent: "opencode",
			CostSource: loop.CostUnknown, StartedAt: t0.Add(3 * time.Minute), Duration: time.Minute, Turns: 3, ExitReason: "success"},
	)
	out := h.ok("status")
	want := `last iterations (3 of 3):
  STARTED               SESSION                  ITER  MODE    TASK  AGENT     MODEL              TURNS  DURATION  COST      ENDED
  2026-01-02T03:04:05Z  session-20260102-030000  1     build   t-1   claude    claude-sonnet-4-5  7      1m30s     $0.2500   success
  2026-01-02T03:06:05Z  session-20260102-030000  1     verify  t-1   codex     gpt-5.5            1      20s       ~$0.0125  success (verify pass)
  2026-01-02T03:07:05Z  session-20260102-030000  2     build   t-2   opencode  local/qwen         3      1m0s      unknown   success

cost so far: $0.2625 over 3 agent sessions ($0.0125 of it estimated from tokens (~ in the table); 1 session of unknown cost)
`
	_, got, _ := strings.Cut(out, "last iterations")
	if diff := cmp.Diff(want, "last iterations"+got); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	var js statusJSON
	if err := json.Unmarshal([]byte(h.ok("status", "--json")), &js); err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, r := range js.Receipts {
		sources = append(sources, r.Agent+":"+r.CostSource)
	}
	if diff := cmp.Diff([]string{"opencode:unknown", "codex:estimated", "claude:reported"}, sources); diff != "" {
		t.Errorf("status --json agents and cost sources (-want +got):\n%s", diff)
	}
}

func TestStatusJSON(t *testing.T) {
	h := statusProject(t)
	var got map[string]any
	if err := json.Unmarshal([]byte(h.ok("status", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"counts": map[string]any{"open": 1.0, "active": 1.0, "done": 1.0, "failed": 0.0, "blocked": 0.0, "total": 3.0},
		"active": []any{map[string]any{
			"id": "t-2", "title": "Login form", "claimed_by": "agent-0000000a",
			"claimed_at": "2026-01-02T03:04:05Z", "lease_expires_at": "2026-01-02T03:19:05Z",
			"lease_age_seconds": 300.0, "lease_left_seconds": 600.0,
			"holder": "4242:777@machine-b", "holder_host": "machine-b", "holder_alive": "unknown",
			"claim_mode": "agent", "generation": 1.0,
		}},
		"sessions":       3.0,
		"total_cost_usd": 1.3,
	}
	receipts, _ := got["receipts"].([]any)
	delete(got, "receipts")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status --json (-want +got):\n%s", diff)
	}
	// Newest first, every receipt field under its key.
	if len(receipts) != 3 {
		t.Fatalf("%d receipts, want 3", len(receipts))
	}
	wantFirst := map[string]any{
		"session": "session-20260102-030000", "iteration": 2.0, "mode": "build", "task_id": "t-2", "model": "claude-opus-4-1",
		"input_tokens": 0.0, "output_tokens": 0.0, "cache_read_tokens": 0.0, "cache_write_tokens": 0.0,
		"cost_usd": 1.0, "started_at": "2026-01-02T02:14:05Z", "duration_seconds": 180.0, "turns": 12.0,
		"exit_reason": "crashed", "verdict": "", "agent": "", "cost_source": "reported", "result": "",
	}
	if diff := cmp.Diff(wantFirst, receipts[0]); diff != "" {
		t.Errorf("newest receipt (-want +got):\n%s", diff)
	}
}

func TestStatusEmptyProject(t *testing.T) {
	h := initHarness(t)
	want := "plan: open=0 active=0 done=0 failed=0 blocked=0 total=0\n\nactive: none\n\nlast iterations: none yet\n\ncost so far: $0.0000 over 0 agent sessions\n"
	if diff := cmp.Diff(want, h.ok("status")); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	wantJSON := `{
  "counts": {
    "open": 0,
    "active": 0,
    "done": 0,
    "failed": 0,
    "blocked": 0,
    "total": 0
  },
  "active": [],
  "receipts": [],
  "sessions": 0,
  "total_cost_usd": 0
}
`
	if diff := cmp.Diff(wantJSON, h.ok("status", "--json")); diff != "" {
		t.Errorf("status --json (-want +got):\n%s", diff)
	}
}

func TestStatusErrors(t *testing.T) {
	h := newHarness(t)
	if r := h.run("status"); r.code != 1 || !strings.Contains(r.stderr, "run 'ralph init'") {
		t.Errorf("status without a project: exit %d, stderr %q", r.code, r.stderr)
	}
	h = initHarness(t)
	if r := h.run("status", "extra"); r.code != 1 || !strings.Contains(r.stderr, "ralph status --help") {
		t.Errorf("status with an argument: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestStatusAfterBuild: a real run's receipts and cost show in status.
func TestStatusAfterBuild(t *testing.T) {
	h := initHarness(t)
	h.chain(2)
	agent, _ := fakeAgentPath(t, agentStep{Text: done, Cost: 0.125})
	if r := h.build(t.Context(), agent); r.code != 0 {
		t.Fatalf("build: exit %d, stderr %q", r.code, r.stderr)
	}
	var got statusJSON
	if err := json.Unmarshal([]byte(h.ok("status", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	if got.Sessions != 2 || got.TotalCostUSD != 0.25 || got.Counts.Done != 2 || len(got.Active) != 0 {
		t.Errorf("status after the run: %+v", got)
	}
	var tasks []string
	for _, r := range got.Receipts {
		tasks = append(tasks, r.TaskID+"/"+r.ExitReason)
	}
	if diff := cmp.Diff([]string{"t-2/success", "t-1/success"}, tasks); diff != "" {
		t.Errorf("receipts, newest first (-want +got):\n%s", diff)
	}
}

// TestStatusNamesGateFailures: an iteration whose session succeeded but
// whose test gate failed is shown as such, in the table ("success; tests
// failed") and in --json (result), not as a success.
func TestStatusNamesGateFailures(t *testing.T) {
	h := initHarness(t)
	h.chain(1)
	agent, _ := fakeAgentPath(t, agentStep{Text: done, Cost: 0.125})
	// Passes on the starting tree (the baseline), fails once, then passes.
	counter := filepath.Join(t.TempDir(), "runs")
	gate := fmt.Sprintf(`n=$(cat %[1]s 2>/dev/null || echo 0); echo $((n+1)) > %[1]s; [ "$n" -ne 1 ]`, counter)
	if r := h.build(t.Context(), agent, "--test-cmd", gate); r.code != 0 {
		t.Fatalf("build: exit %d, stderr %q", r.code, r.stderr)
	}
	var got statusJSON
	if err := json.Unmarshal([]byte(h.ok("status", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, r := range got.Receipts {
		results = append(results, fmt.Sprintf("%d %s %s", r.Iteration, r.ExitReason, r.Result))
	}
	if diff := cmp.Diff([]string{"2 success done", "1 success tests_failed"}, results); diff != "" {
		t.Errorf("receipts, newest first (-want +got):\n%s", diff)
	}
	out := h.ok("status")
	if !strings.Contains(out, "success; tests failed\n") || strings.Count(out, "success\n") != 1 {
		t.Errorf("status does not name the failed gate:\n%s", out)
	}
}

// TestBuildStatusHelpGolden keeps the help of build and status in
// testdata (go test -update rewrites it).
func TestBuildStatusHelpGolden(t *testing.T) {
	h := newHarness(t)
	for _, cmd := range []string{"build", "status"} {
		r := h.run(cmd, "--help")
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("%s --help: exit %d, stderr %q", cmd, r.code, r.stderr)
		}
		golden(t, "help-"+cmd+".golden", r.stdout)
	}
}
