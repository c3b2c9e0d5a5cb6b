package main

import (
	"net"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/telemetry/otlptest"
)

// otelProject is a ralph init project whose agent is the stand-in, playing
// steps, with env on top (the OTEL_* variables).
func otelProject(t *testing.T, env []string, steps ...agentStep) *e2e {
	t.Helper()
	agent, _ := fakeAgentPath(t, steps...)
	// The test's own environment must not send traces anywhere else.
	env = append([]string{"RALPH_CLAUDE=" + agent, "OTEL_EXPORTER_OTLP_ENDPOINT=", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=",
		"OTEL_SDK_DISABLED=", "OTEL_TRACES_EXPORTER=", "OTEL_EXPORTER_OTLP_PROTOCOL=", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=", "OTEL_SERVICE_NAME="}, env...)
	return newProject(t, env)
}

// spanTree indexes received spans by id.
type spanTree struct {
	spans []otlptest.Span
	byID  map[string]otlptest.Span
}

func newSpanTree(spans []otlptest.Span) spanTree {
	st := spanTree{spans: spans, byID: map[string]otlptest.Span{}}
	for _, s := range spans {
		st.byID[s.SpanID] = s
	}
	return st
}

func (st spanTree) named(name string) []otlptest.Span {
	var out []otlptest.Span
	for _, s := range st.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// children are the names of s's children, in the order they started.
func (st spanTree) children(s otlptest.Span) []string {
	var kids []otlptest.Span
	for _, c := range st.spans {
		if c.ParentID == s.SpanID {
			kids = append(kids, c)
		}
	}
	sort.SliceStable(kids, func(i, j int) bool { return kids[i].Start.Before(kids[j].Start) })
	var names []string
	for _, k := range kids {
		names = append(names, k.Name)
	}
	return names
}

// pick is attrs restricted to keys.
func pick(attrs map[string]any, keys ...string) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if v, ok := attrs[k]; ok {
			out[k] = v
		}
	}
	return out
}

// TestOtelBuild runs `ralph build --otel --verify --test-cmd` with the
// stand-in agent against an in-test OTLP/HTTP receiver: one trace, the run
// span over two iterations in dependency order, each with its agent,
// verify and gate spans and the receipts' figures.
func TestOtelBuild(t *testing.T) {
	recv := otlptest.NewHTTP(t)
	work := agentStep{Sh: "echo {task} >> order.txt", Text: "Done.\n<task-done>{task}</task-done>", Cost: 0.25}
	check := agentStep{Text: "Checked.\n<verify-pass/>", Cost: 0.0625}
	e := otelProject(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.Endpoint}, work, check, work, check)
	e.ok("task", "add", "Build it")  // t-1
	e.ok("task", "add", "Design it") // t-2
	e.ok("task", "dep", "add", "t-1", "t-2")

	r := e.run("build", "--otel", "--verify", "--test-cmd", "test ! -e order.txt || test -s order.txt")
	if r.code != 0 {
		t.Fatalf("build --otel: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "OpenTelemetry") {
		t.Errorf("stderr warns about traces: %s", r.stderr)
	}
	st := newSpanTree(recv.Spans())
	runs := st.named("ralph.run")
	if len(runs) != 1 {
		t.Fatalf("%d run spans, want 1: %+v", len(runs), st.spans)
	}
	run := runs[0]
	if run.ParentID != "" {
		t.Errorf("the run span has a parent %s", run.ParentID)
	}
	for _, s := range st.spans {
		if s.TraceID != run.TraceID {
			t.Errorf("span %s in trace %s, want the run's %s", s.Name, s.TraceID, run.TraceID)
		}
	}
	if got := pick(run.Attrs, "ralph.mode", "ralph.outcome", "ralph.exit_code", "ralph.workers", "ralph.iterations"); !cmp.Equal(got, map[string]any{
		"ralph.mode": "build", "ralph.outcome": "complete", "ralph.exit_code": int64(0), "ralph.workers": int64(0), "ralph.iterations": int64(2)}) {
		t.Errorf("run span attributes %v", got)
	}
	if s, _ := run.Attrs["ralph.session"].(string); !strings.HasPrefix(s, "session-") {
		t.Errorf("run span's ralph.session %q", s)
	}
	if got := pick(run.Resource, "service.name"); !cmp.Equal(got, map[string]any{"service.name": "ralph"}) {
		t.Errorf("resource %v", run.Resource)
	}
	if v, _ := run.Resource["service.version"].(string); v == "" {
		t.Errorf("resource without service.version: %v", run.Resource)
	}
	if diff := cmp.Diff([]string{"ralph.iteration", "ralph.iteration"}, st.children(run)); diff != "" {
		t.Errorf("the run's children (-want +got):\n%s", diff)
	}

	type iter struct {
		Attrs    map[string]any
		Children []string
		Agent    map[string]any
		Verify   map[string]any
	}
	var got []iter
	for _, it := range st.named("ralph.iteration") {
		if it.ParentID != run.SpanID {
			t.Errorf("iteration %v is not a child of the run", it.Attrs)
		}
		g := iter{Attrs: pick(it.Attrs, "ralph.iteration", "ralph.task.id", "ralph.task.title", "ralph.status"), Children: st.children(it)}
		for _, c := range st.spans {
			if c.ParentID != it.SpanID {
				continue
			}
			switch c.Name {
			case "ralph.agent":
				g.Agent = pick(c.Attrs, "ralph.task.id", "ralph.mode", "ralph.cost_usd", "ralph.exit_reason", "ralph.agent", "ralph.turns")
				if _, ok := c.Attrs["gen_ai.request.model"].(string); !ok {
					t.Errorf("agent span without gen_ai.request.model: %v", c.Attrs)
				}
				for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} {
					if _, ok := c.Attrs[k].(int64); !ok {
						t.Errorf("agent span without %s: %v", k, c.Attrs)
					}
				}
			case "ralph.verify":
				g.Verify = pick(c.Attrs, "ralph.task.id", "ralph.mode", "ralph.verdict", "ralph.cost_usd")
			}
		}
		got = append(got, g)
	}
	agent := func(id string) map[string]any {
		return map[string]any{"ralph.task.id": id, "ralph.mode": "build", "ralph.cost_usd": 0.25, "ralph.exit_reason": "success", "ralph.agent": "claude", "ralph.turns": int64(2)}
	}
	verify := func(id string) map[string]any {
		return map[string]any{"ralph.task.id": id, "ralph.mode": "verify", "ralph.verdict": "pass", "ralph.cost_usd": 0.0625}
	}
	want := []iter{
		{Attrs: map[string]any{"ralph.iteration": int64(1), "ralph.task.id": "t-2", "ralph.task.title": "Design it", "ralph.status": "done"},
			Children: []string{"ralph.agent", "ralph.gate", "ralph.verify"}, Agent: agent("t-2"), Verify: verify("t-2")},
		{Attrs: map[string]any{"ralph.iteration": int64(2), "ralph.task.id": "t-1", "ralph.task.title": "Build it", "ralph.status": "done"},
			Children: []string{"ralph.agent", "ralph.gate", "ralph.verify"}, Agent: agent("t-1"), Verify: verify("t-1")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("iterations (-want +got):\n%s", diff)
	}
	for _, s := range st.spans {
		if s.Status == "error" {
			t.Errorf("span %s has status error: %s", s.Name, s.StatusMessage)
		}
		if s.End.Before(s.Start) {
			t.Errorf("span %s ends before it starts", s.Name)
		}
	}
}

// TestOtelEnvOnly: the endpoint variable alone turns traces on, here over
// gRPC; OTEL_SDK_DISABLED=true turns them off whatever else says so.
func TestOtelEnvOnly(t *testing.T) {
	step := agentStep{Text: "<task-done>{task}</task-done>"}
	t.Run("grpc, no flag", func(t *testing.T) {
		recv := otlptest.NewGRPC(t)
		e := otelProject(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.Endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"}, step)
		e.ok("task", "add", "Ship it")
		e.ok("build")
		var names []string
		for _, s := range recv.Spans() {
			names = append(names, s.Name)
		}
		if diff := cmp.Diff([]string{"ralph.agent", "ralph.iteration", "ralph.run"}, names); diff != "" {
			t.Errorf("spans (-want +got):\n%s", diff)
		}
	})
	t.Run("SDK disabled", func(t *testing.T) {
		recv := otlptest.NewHTTP(t)
		e := otelProject(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.Endpoint, "OTEL_SDK_DISABLED=true"}, step)
		e.ok("task", "add", "Ship it")
		e.ok("build", "--otel")
		if n := recv.Requests(); n != 0 {
			t.Errorf("%d export requests with OTEL_SDK_DISABLED=true, want none", n)
		}
	})
}

// TestOtelDeadCollector: a collector that accepts connections and never
// answers changes neither the exit code nor the output, and ralph still
// exits, after at most the shutdown's bound.
func TestOtelDeadCollector(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	// The task fails: a run whose exit code is not 0.
	steps := []agentStep{{Text: "Cannot.\n<task-failed>{task}</task-failed>"}}
	without := otelProject(t, nil, steps...)
	with := otelProject(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + lis.Addr().String()}, steps...)
	for _, e := range []*e2e{without, with} {
		e.ok("task", "add", "Ship it")
	}
	want := without.run("build")
	began := time.Now()
	got := with.run("build", "--otel")
	took := time.Since(began)
	if got.code != want.code || want.code == 0 {
		t.Errorf("exit %d with a dead collector, %d without (want the same, not 0)\nstderr:\n%s", got.code, want.code, got.stderr)
	}
	if n := strings.Count(got.stderr, "OpenTelemetry"); n != 1 {
		t.Errorf("stderr has %d warnings about traces, want 1:\n%s", n, got.stderr)
	}
	// Generous for a loaded machine: the shutdown waits 5 s at most.
	if took > time.Minute {
		t.Errorf("ralph took %v to exit with a dead collector", took)
	}
}

// TestOtelWorkers runs `ralph build --workers 2 --otel`: one run span, every
// iteration of w1 and w2 its child, each landing its work (an integrate
// span), and each worker's end an event on the run.
func TestOtelWorkers(t *testing.T) {
	needTools(t, "git", "go")
	recv := otlptest.NewHTTP(t)
	e := otelProject(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.Endpoint},
		agentStep{Sh: "echo {task} > {task}.txt", Text: "<task-done>{task}</task-done>"})
	commitProject(t, e.dir)
	e.ok("task", "add", "Left")
	e.ok("task", "add", "Right")
	e.ok("task", "add", "Both", "--blocked-by", "t-1", "--blocked-by", "t-2")

	r := e.run("build", "--workers", "2", "--otel")
	if r.code != 0 {
		t.Fatalf("build --workers 2 --otel: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	st := newSpanTree(recv.Spans())
	runs := st.named("ralph.run")
	if len(runs) != 1 {
		t.Fatalf("%d run spans, want 1", len(runs))
	}
	run := runs[0]
	if got := pick(run.Attrs, "ralph.workers", "ralph.outcome", "ralph.iterations"); !cmp.Equal(got, map[string]any{
		"ralph.workers": int64(2), "ralph.outcome": "complete", "ralph.iterations": int64(3)}) {
		t.Errorf("run span attributes %v", got)
	}
	var tasks, workers []string
	for _, it := range st.named("ralph.iteration") {
		if it.ParentID != run.SpanID {
			t.Errorf("iteration of %v is not a child of the run span", it.Attrs["ralph.worker"])
		}
		w, _ := it.Attrs["ralph.worker"].(string)
		id, _ := it.Attrs["ralph.task.id"].(string)
		tasks, workers = append(tasks, id), append(workers, w)
		if diff := cmp.Diff([]string{"ralph.agent", "ralph.integrate"}, st.children(it)); diff != "" {
			t.Errorf("children of %s's iteration (-want +got):\n%s", id, diff)
		}
	}
	sort.Strings(tasks)
	if diff := cmp.Diff([]string{"t-1", "t-2", "t-3"}, tasks); diff != "" {
		t.Errorf("iterations' tasks (-want +got):\n%s", diff)
	}
	for _, w := range workers {
		if w != "w1" && w != "w2" {
			t.Errorf("an iteration of worker %q", w)
		}
	}
	var ended []string
	for _, ev := range run.Events {
		if ev.Name == "ralph.worker_end" {
			ended = append(ended, ev.Attrs["ralph.worker"].(string))
		}
	}
	slices.Sort(ended)
	if diff := cmp.Diff([]string{"w1", "w2"}, ended); diff != "" {
		t.Errorf("worker ends on the run span (-want +got):\n%s", diff)
	}
}
