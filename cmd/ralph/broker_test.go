package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/broker"
	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/loop"
)

// brokerPlans runs f with the plan in SQLite, then on PostgreSQL (when a
// server is at hand: see pgtest).
func brokerPlans(t *testing.T, f func(t *testing.T)) {
	t.Run("sqlite", f)
	t.Run("postgres", func(t *testing.T) {
		harnessServer = pgtest.URL(t)
		t.Cleanup(func() { harnessServer = "" })
		f(t)
	})
}

// serveBroker serves h's plan, as plan (Store and Agent filled in: the
// agent of h's RALPH_AGENT_ID), on a broker that admits this process, and
// points h's task commands at it through RALPH_SOCKET.
func serveBroker(t *testing.T, h *harness, plan loop.PlanAccess) {
	t.Helper()
	st := h.store()
	t.Cleanup(func() { st.Close() })
	plan.Store, plan.Agent = st, h.env["RALPH_AGENT_ID"]
	srv, err := broker.Listen("", plan)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Admit(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(t.Context()) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	h.env[broker.EnvSocket] = srv.Path()
}

// peekPlan is the PlanAccess of a peek-mode session.
func peekPlan() loop.PlanAccess {
	return loop.PlanAccess{Holder: loop.ThisProcess(), Mode: loop.ModeBuild, ClaimMode: loop.ClaimAgent, Lease: loop.DefaultLease}
}

// TestTaskThroughBroker: every command the broker serves prints the same
// and exits the same through the broker as directly, and leaves the plan
// the same — reads, claims, completions, failures, additions,
// dependencies, notes and their errors alike.
func TestTaskThroughBroker(t *testing.T) {
	brokerPlans(t, func(t *testing.T) {
		base := initHarness(t)
		base.add("Design it")                                // t-1
		base.add("Build it", "--blocked-by", "t-1")          // t-2
		base.add("Held by another agent", "--priority", "3") // t-3
		base.add("The loop's", "--priority", "3")            // t-4
		base.add("Spare", "--priority", "4", "-d", "a description\non two lines")
		holder := loop.ThisProcess()
		setup := func(h *harness) {
			st := h.store()
			defer st.Close()
			for _, c := range []loop.ClaimParams{
				{TaskID: "t-3", Agent: "agent-b", Holder: holder, Mode: loop.ClaimAgent},
				{TaskID: "t-4", Agent: "agent-a", Holder: holder, Mode: loop.ClaimLoop},
			} {
				if _, err := st.Claim(t.Context(), c); err != nil {
					t.Fatal(err)
				}
			}
			h.env["RALPH_AGENT_ID"] = "agent-a"
			h.env["RALPH_HOLDER"] = holder.String()
		}
		direct, brokered := base.clone(t), base.clone(t)
		setup(direct)
		setup(brokered)
		serveBroker(t, brokered, peekPlan())

		for _, cmd := range [][]string{
			{"task", "peek"},
			{"task", "peek", "--json"},
			{"task", "peek", "-n", "1"},
			{"task", "list"},
			{"task", "list", "--json"},
			{"task", "list", "--status", "in_progress"},
			{"task", "list", "--limit", "2", "--json"},
			{"task", "show", "t-5"},
			{"task", "show", "t-3", "--json"},
			{"task", "show", "nope"},
			{"task", "plan-status"},
			{"task", "plan-status", "--json"},
			{"task", "claim", "t-2"},
			{"task", "claim", "t-3"},
			{"task", "claim", "nope"},
			{"task", "claim"},
			{"task", "done", "t-2"},
			{"task", "done", "t-1", "--summary", "designed"},
			{"task", "peek"},
			{"task", "done", "t-3"},
			{"task", "fail", "t-3", "--reason", "not mine"},
			{"task", "done", "t-4"},
			{"task", "fail", "t-4", "--reason", "the loop's"},
			{"task", "add", "Follow-up", "-d", "found on the way", "--priority", "1", "--blocked-by", "t-2"},
			{"task", "add", "Named", "--id", "x-1", "--parent", "t-5"},
			{"task", "add", "Named again", "--id", "x-1"},
			{"task", "add", "In a feature", "--feature", "nope"},
			{"task", "add", "Under a missing parent", "--parent", "nope"},
			{"task", "dep", "add", "t-6", "t-5"},
			{"task", "dep", "add", "t-5", "t-6"},
			{"task", "dep", "add", "t-6", "nope"},
			{"task", "note", "t-2", "tried the obvious way first"},
			{"task", "note", "nope", "lost"},
			{"task", "note", "t-2", "  "},
			{"task", "claim"},
			{"task", "fail", "t-2", "--reason", "could not build it"},
			{"task", "claim"},
			{"task", "show", "t-2", "--json"},
			{"task", "list"},
			{"task", "plan-status"},
			{"task", "claim"}, // nothing ready: exit 2
		} {
			want, got := direct.run(cmd...), brokered.run(cmd...)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(result{})); diff != "" {
				t.Errorf("ralph %s (-direct +broker):\n%s", strings.Join(cmd, " "), diff)
			}
		}
		if diff := cmp.Diff(direct.dump(), brokered.dump()); diff != "" {
			t.Errorf("the plans differ (-direct +broker):\n%s", diff)
		}
	})
}

// TestTaskBrokerRefuses: what the broker will not do for its agent fails
// (exit 1) saying why, and changes nothing.
func TestTaskBrokerRefuses(t *testing.T) {
	h := initHarness(t)
	h.add("Mine")   // t-1
	h.add("Theirs") // t-2
	st := h.store()
	holder := loop.ThisProcess()
	for _, c := range []loop.ClaimParams{
		{TaskID: "t-1", Agent: "agent-a", Holder: holder, Mode: loop.ClaimAgent},
		{TaskID: "t-2", Agent: "agent-b", Holder: holder, Mode: loop.ClaimAgent},
	} {
		if _, err := st.Claim(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	h.env["RALPH_AGENT_ID"], h.env["RALPH_HOLDER"] = "agent-a", holder.String()
	serveBroker(t, h, peekPlan())
	before := h.dump()
	for _, tc := range []struct {
		cmd  []string
		env  map[string]string
		says string
	}{
		// An agent's --force means nothing (ARCHITECTURE.md §2.3): refused as
		// a move of another's task, through the broker as directly.
		{cmd: []string{"task", "done", "t-2", "--force"}, says: "task t-2 is held by agent-b, not agent-a"},
		{cmd: []string{"task", "done", "t-2", "--force"}, env: map[string]string{"RALPH_AGENT_ID": ""}, says: "ralph: refused: --force is for people"},
		{cmd: []string{"task", "done", "t-2"}, env: map[string]string{"RALPH_AGENT_ID": ""}, says: "cannot act as a person (user-tester)"},
		{cmd: []string{"task", "done", "t-2", "--agent", "agent-b"}, says: "this session's agent is agent-a; it cannot act as agent-b"},
		{cmd: []string{"task", "fail", "t-2", "--agent", "agent-b", "--reason", "x"}, says: "it cannot act as agent-b"},
		{cmd: []string{"task", "done", "t-2"}, says: "task t-2 is held by agent-b, not agent-a"},
		{cmd: []string{"task", "claim", "t-2"}, says: "task t-2 is in progress: it is claimed already"},
		{cmd: []string{"task", "claim", "--agent", "agent-b"}, says: "it cannot claim as agent-b"},
		{cmd: []string{"task", "note", "t-2", "hi", "--agent", "agent-b"}, says: "it cannot act as agent-b"},
		{cmd: []string{"task", "reset", "t-2"}, says: "'ralph task reset' is not served to a sandboxed agent"},
		{cmd: []string{"task", "release"}, says: "'ralph task release' is not served"},
		{cmd: []string{"task", "block", "t-2"}, says: "is not served"},
		{cmd: []string{"task", "unblock", "t-2"}, says: "is not served"},
		{cmd: []string{"task", "dep", "rm", "t-2", "t-1"}, says: "is not served"},
		{cmd: []string{"task", "import", "-"}, says: "is not served"},
		{cmd: []string{"task", "export"}, says: "is not served"},
	} {
		saved := map[string]string{}
		for k, v := range tc.env {
			saved[k], h.env[k] = h.env[k], v
		}
		r := h.run(tc.cmd...)
		for k, v := range saved {
			h.env[k] = v
		}
		if r.code != 1 || !strings.Contains(r.stderr, tc.says) || r.stdout != "" {
			t.Errorf("ralph %s: exit %d, stdout %q, stderr %q; want exit 1 saying %q", strings.Join(tc.cmd, " "), r.code, r.stdout, r.stderr, tc.says)
		}
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("a refused command changed the plan (-before +after):\n%s", diff)
	}
}

// TestTaskBrokerVerifier: the verifier's session reads through its broker
// and writes nothing.
func TestTaskBrokerVerifier(t *testing.T) {
	h := initHarness(t)
	h.add("First")
	h.env["RALPH_AGENT_ID"] = "agent-v"
	plan := peekPlan()
	plan.ReadOnly = true
	serveBroker(t, h, plan)
	if got := h.ok("task", "plan-status"); got != "open=1 active=0 done=0 failed=0 blocked=0 total=1\n" {
		t.Errorf("plan-status: %q", got)
	}
	for _, cmd := range [][]string{
		{"task", "add", "More"}, {"task", "claim"}, {"task", "done", "t-1"}, {"task", "fail", "t-1", "--reason", "x"},
		{"task", "note", "t-1", "x"}, {"task", "dep", "add", "t-1", "t-1"},
	} {
		r := h.run(cmd...)
		if r.code != 1 || !strings.Contains(r.stderr, "ralph: refused: the verifier's session only reads the plan") {
			t.Errorf("ralph %s: exit %d, stderr %q", strings.Join(cmd, " "), r.code, r.stderr)
		}
	}
}

// TestTaskBrokerUnreachable: with a RALPH_SOCKET no broker answers on,
// read commands read the plan read-only and write commands fail saying
// why; neither falls back to writing the plan.
func TestTaskBrokerUnreachable(t *testing.T) {
	h := initHarness(t)
	h.add("First")
	h.env["RALPH_AGENT_ID"] = "agent-a"
	h.env[broker.EnvSocket] = "/nonexistent/ralph/s"
	if got := h.ok("task", "list"); !strings.Contains(got, "First") {
		t.Errorf("list read read-only: %q", got)
	}
	if got := h.ok("task", "plan-status"); got != "open=1 active=0 done=0 failed=0 blocked=0 total=1\n" {
		t.Errorf("plan-status read read-only: %q", got)
	}
	before := h.dump()
	for _, cmd := range [][]string{{"task", "add", "More"}, {"task", "claim"}, {"task", "note", "t-1", "x"}} {
		r := h.run(cmd...)
		want := "ralph: '" + "ralph " + strings.Join(cmd[:2], " ") + "' cannot change the plan: no broker answers at /nonexistent/ralph/s"
		if r.code != 1 || !strings.HasPrefix(r.stderr, want) || !strings.Contains(r.stderr, "the plan is read-only") {
			t.Errorf("ralph %s: exit %d, stderr %q; want it to begin %q", strings.Join(cmd, " "), r.code, r.stderr, want)
		}
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("the plan changed (-before +after):\n%s", diff)
	}
}

// TestSessionEndWithSocket: `ralph hook session-end` does nothing in a
// sandboxed session, even with its loop gone.
func TestSessionEndWithSocket(t *testing.T) {
	h := initHarness(t)
	h.add("First")
	gone := loop.Holder{Host: loop.HostID(), PID: 1 << 22, Start: 1}
	h.env["RALPH_AGENT_ID"], h.env["RALPH_HOLDER"] = "agent-a", gone.String()
	st := h.store()
	if _, err := st.Claim(t.Context(), loop.ClaimParams{TaskID: "t-1", Agent: "agent-a", Mode: loop.ClaimAgent}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	before := h.dump()
	h.env[broker.EnvSocket] = "/nonexistent/ralph/s"
	if r := h.run("hook", "session-end"); r.code != 0 || r.stdout != "" || r.stderr != "" {
		t.Errorf("hook session-end: %+v", r)
	}
	if diff := cmp.Diff(before, h.dump()); diff != "" {
		t.Errorf("the hook changed the plan (-before +after):\n%s", diff)
	}
	delete(h.env, broker.EnvSocket)
	if got := h.ok("hook", "session-end"); got != "t-1\n" {
		t.Errorf("hook session-end without a socket released %q, want t-1", got)
	}
}

// BenchmarkTaskThroughBroker measures whole `ralph task` processes
// through a session's broker (RALPH_SOCKET, the broker serving from this
// process, which holds the plan open as the loop does) against the same
// commands run directly on the SQLite plan, on a plan of 1,000 tasks:
// peek, and a claim followed by its done (two processes an iteration).
// `ralph --version` is the baseline of a process that does nothing.
func BenchmarkTaskThroughBroker(b *testing.B) {
	bin := ralphBinary(b)
	dir := b.TempDir()
	env := append(os.Environ(), "RALPH_AGENT_ID=agent-bench", "RALPH_HOLDER=", "RALPH_DIR=", "RALPH_DB=", "RALPH_PLAN=", "RALPH_SOCKET=")
	ralph := func(b *testing.B, env []string, args ...string) string {
		cmd := exec.Command(bin, append([]string{"--dir", dir}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("ralph %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	ralph(b, env, "init")
	var plan strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&plan, `{"id":"t-%d","title":"Task %d","priority":%d,"status":"pending"}`+"\n", i+1, i+1, i%5)
	}
	imp := exec.Command(bin, "--dir", dir, "task", "import", "-")
	imp.Env, imp.Stdin = env, strings.NewReader(plan.String())
	if out, err := imp.CombinedOutput(); err != nil {
		b.Fatalf("import: %v\n%s", err, out)
	}
	st, err := dag.OpenExisting(b.Context(), filepath.Join(dir, ".ralph", "progress.db"), dag.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	pa := peekPlan()
	pa.Store, pa.Agent = st, "agent-bench"
	srv, err := broker.Listen("", pa)
	if err != nil {
		b.Fatal(err)
	}
	if err := srv.Admit(os.Getpid()); err != nil {
		b.Fatal(err)
	}
	go srv.Serve(b.Context())
	defer srv.Close()
	viaBroker := append(env[:len(env):len(env)], "RALPH_SOCKET="+srv.Path())
	holder := "RALPH_HOLDER=" + loop.ThisProcess().String()
	for _, way := range []struct {
		name string
		env  []string
	}{{"direct", append(env[:len(env):len(env)], holder)}, {"broker", append(viaBroker, holder)}} {
		b.Run("peek/"+way.name, func(b *testing.B) {
			for b.Loop() {
				ralph(b, way.env, "task", "peek", "-n", "10")
			}
		})
		b.Run("claim+done/"+way.name, func(b *testing.B) {
			for b.Loop() {
				id := strings.TrimSpace(ralph(b, way.env, "task", "claim"))
				ralph(b, way.env, "task", "done", id)
			}
		})
	}
	b.Run("version", func(b *testing.B) {
		for b.Loop() {
			ralph(b, env, "--version")
		}
	})
}
