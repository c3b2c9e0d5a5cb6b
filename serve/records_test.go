package serve_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/serve"
)

// TestRuns: /api/runs lists the run records newest first, each as
// `ralph runs --json` has it, a dead holder's run as died; /api/plan's
// last_run is the newest, and a run that ends changes the plan's version.
func TestRuns(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	ended, err := f.store.BeginRun(ctx, loop.RunRecord{Kind: loop.RunKindBuild, Holder: loop.ThisProcess()})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.EndRun(ctx, ended, loop.RunEnd{Outcome: loop.OutcomeTestGateFailed, ExitCode: 3, Done: 1, Remaining: 4, CostUSD: 0.75, Agents: 2}); err != nil {
		t.Fatal(err)
	}
	// A run whose holder is gone: a pid that cannot be alive.
	if _, err := f.store.BeginRun(ctx, loop.RunRecord{Kind: loop.RunKindPlan, Holder: loop.Holder{Host: loop.HostID(), PID: 1 << 30, Start: 1}}); err != nil {
		t.Fatal(err)
	}
	_, hs := f.server(t, nil)

	resp, body := get(t, hs.URL+"/api/runs")
	var runs struct{ Runs []loop.RunLine }
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &runs) != nil || len(runs.Runs) != 2 {
		t.Fatalf("/api/runs: %d %s", resp.StatusCode, body)
	}
	died, gate := runs.Runs[0], runs.Runs[1]
	if died.Kind != "plan" || died.Outcome != "died" || died.ExitCode != nil || died.EndedAt != "" {
		t.Errorf("the dead holder's run: %+v", died)
	}
	if gate.Kind != "build" || gate.Outcome != "test_gate_failed" || gate.ExitCode == nil || *gate.ExitCode != 3 ||
		gate.Done != 1 || gate.Remaining != 4 || gate.CostUSD != 0.75 || gate.Agents != 2 || gate.EndedAt == "" || gate.Holder == "" {
		t.Errorf("the ended run: %+v", gate)
	}
	if resp, body := get(t, hs.URL+"/api/runs?n=1"); resp.StatusCode != http.StatusOK || strings.Count(body, `"id"`) != 1 {
		t.Errorf("/api/runs?n=1: %d %s", resp.StatusCode, body)
	}
	if resp, _ := get(t, hs.URL+"/api/runs?n=x"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("/api/runs?n=x: %d, want 400", resp.StatusCode)
	}

	var plan struct {
		Version string        `json:"version"`
		LastRun *loop.RunLine `json:"last_run"`
	}
	_, body = get(t, hs.URL+"/api/plan")
	if err := json.Unmarshal([]byte(body), &plan); err != nil || plan.LastRun == nil || plan.LastRun.ID != died.ID {
		t.Fatalf("/api/plan's last_run: %s", body)
	}
	before := plan.Version
	if _, err := f.store.BeginRun(ctx, loop.RunRecord{Kind: loop.RunKindBuild, Holder: loop.ThisProcess()}); err != nil {
		t.Fatal(err)
	}
	_, body = get(t, hs.URL+"/api/plan")
	if err := json.Unmarshal([]byte(body), &plan); err != nil || plan.LastRun.Outcome != "running" || plan.Version == before {
		t.Errorf("after a run began: last_run %+v, version %s (was %s)", plan.LastRun, plan.Version, before)
	}
}

// silentStore is a plan on a server that does not answer: every call
// waits for its context.
type silentStore struct{ *dag.Store }

func (silentStore) wait(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

func (s silentStore) EachTask(ctx context.Context, _ dag.ListParams, _ func(loop.Task) error) error {
	return s.wait(ctx)
}
func (s silentStore) Get(ctx context.Context, _ string) (loop.Task, error) {
	return loop.Task{}, s.wait(ctx)
}
func (s silentStore) Logs(ctx context.Context, _ string) ([]loop.LogEntry, error) {
	return nil, s.wait(ctx)
}
func (s silentStore) Receipts(ctx context.Context, _ int) ([]loop.Receipt, error) {
	return nil, s.wait(ctx)
}

// TestUnreachableStore: with the plan's server silent, every API request
// is answered within a second, 503, saying the store is unreachable; the
// page itself is served.
func TestUnreachableStore(t *testing.T) {
	f := newFixture(t)
	_, hs := f.server(t, func(c *serve.Config) { c.Store, c.DBPath = silentStore{f.ro}, "" })
	for _, path := range []string{"/api/plan", "/api/runs", "/api/receipts", "/api/task/api", "/api/run"} {
		start := time.Now()
		resp, body := get(t, hs.URL+path)
		took := time.Since(start)
		var e struct {
			Error       string `json:"error"`
			Unreachable bool   `json:"unreachable"`
		}
		if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil || !e.Unreachable ||
			!strings.Contains(e.Error, "the plan's store is unreachable") {
			t.Errorf("%s: %d %s; want 503 saying the store is unreachable", path, resp.StatusCode, body)
		}
		if took > time.Second {
			t.Errorf("%s answered after %v", path, took)
		}
	}
	if resp, _ := get(t, hs.URL+"/"); resp.StatusCode != http.StatusOK {
		t.Errorf("the page: %d", resp.StatusCode)
	}
}
