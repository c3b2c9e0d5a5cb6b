package broker_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ralph-dev/ralph/broker"
	"github.com/ralph-dev/ralph/dag"
	"github.com/ralph-dev/ralph/dag/postgres"
	"github.com/ralph-dev/ralph/dag/postgres/pgtest"
	"github.com/ralph-dev/ralph/loop"
	"github.com/ralph-dev/ralph/loop/looptest"
)

// store is what the tests need of a plan: every interface the broker
// serves.
type store interface {
	loop.TaskStore
	loop.TaskAdder
	loop.TaskLister
	loop.TaskNoter
}

// stores are the three plans the broker is tested against.
var stores = []struct {
	name string
	open func(t *testing.T) store
}{
	{"mem", func(t *testing.T) store { return looptest.NewMemStore(nil) }},
	{"sqlite", func(t *testing.T) store {
		st, err := dag.Open(t.Context(), filepath.Join(t.TempDir(), "progress.db"), dag.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
	{"postgres", func(t *testing.T) store {
		st, err := postgres.Open(t.Context(), postgres.Config{URL: pgtest.URL(t), Plan: "broker", Create: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
}

// eachStore runs f against every store.
func eachStore(t *testing.T, f func(t *testing.T, st store)) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) { f(t, s.open(t)) })
	}
}

// peek is the PlanAccess of a peek-mode session of agent.
func peek(st loop.TaskStore, agent string) loop.PlanAccess {
	return loop.PlanAccess{Store: st, Agent: agent, Holder: loop.ThisProcess(), Mode: loop.ModeBuild,
		ClaimMode: loop.ClaimAgent, Lease: time.Minute}
}

// serve starts a broker for plan that admits this test process, and
// returns a client connected to it.
func serve(t *testing.T, plan loop.PlanAccess) (*broker.Server, *broker.Client) {
	t.Helper()
	srv := start(t, plan)
	if err := srv.Admit(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	return srv, dial(t, srv.Path())
}

// start starts a broker for plan, closed when the test ends.
func start(t testing.TB, plan loop.PlanAccess) *broker.Server {
	t.Helper()
	srv, err := broker.Listen("", plan)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(t.Context()) }()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv
}

func dial(t testing.TB, path string) *broker.Client {
	t.Helper()
	c, err := broker.Dial(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func add(t *testing.T, st loop.TaskAdder, title string, blockers ...string) string {
	t.Helper()
	task, err := st.AddTask(t.Context(), loop.NewTask{Title: title, Priority: 2, BlockedBy: blockers})
	if err != nil {
		t.Fatal(err)
	}
	return task.ID
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantErr checks that err wraps want and says says.
func wantErr(t *testing.T, what string, err, want error, says string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want one wrapping %v", what, err, want)
		return
	}
	if !strings.Contains(err.Error(), says) {
		t.Errorf("%s: error %q does not say %q", what, err, says)
	}
}

// wantRefusal fails t unless err is a *broker.RefusalError for refusal of
// agent's session, as the client's errors.As finds it.
func wantRefusal(t *testing.T, err error, refusal broker.Refusal, agent string) {
	t.Helper()
	var re *broker.RefusalError
	if !errors.As(err, &re) || *re != (broker.RefusalError{Refusal: refusal, Agent: agent}) {
		t.Errorf("error %v: errors.As finds %+v, want a *broker.RefusalError %s of %s", err, re, refusal, agent)
	}
}

// TestReads: what the broker reads is what the store gives, message and
// all.
func TestReads(t *testing.T) {
	eachStore(t, func(t *testing.T, st store) {
		ctx := t.Context()
		a := add(t, st, "First")
		b := add(t, st, "Second", a)
		must(t, st.Note(ctx, loop.MoveParams{TaskID: a, Message: "a person's note", By: loop.Actor{Person: "user-x"}}))
		_, c := serve(t, peek(st, "agent-a"))

		for _, id := range []string{a, b} {
			want, err := st.Get(ctx, id)
			must(t, err)
			got, err := c.Get(ctx, id)
			must(t, err)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("get %s (-store +broker):\n%s", id, diff)
			}
			wantLogs, err := st.Logs(ctx, id)
			must(t, err)
			gotLogs, err := c.Logs(ctx, id)
			must(t, err)
			if diff := cmp.Diff(wantLogs, gotLogs); diff != "" {
				t.Errorf("logs %s (-store +broker):\n%s", id, diff)
			}
		}
		_, werr := st.Get(ctx, "nope")
		_, gerr := c.Get(ctx, "nope")
		wantErr(t, "get of a missing task", gerr, loop.ErrNotFound, werr.Error())
		if gerr.Error() != werr.Error() {
			t.Errorf("get of a missing task: %q through the broker, %q from the store", gerr, werr)
		}
		_, gerr = c.Logs(ctx, "nope")
		wantErr(t, "logs of a missing task", gerr, loop.ErrNotFound, "nope")

		wantReady, err := st.Ready(ctx, loop.Scope{}, 10)
		must(t, err)
		gotReady, err := c.Ready(ctx, loop.Scope{}, 10)
		must(t, err)
		if diff := cmp.Diff(wantReady, gotReady); diff != "" {
			t.Errorf("ready (-store +broker):\n%s", diff)
		}
		wantCounts, err := st.Counts(ctx, loop.Scope{})
		must(t, err)
		gotCounts, err := c.Counts(ctx, loop.Scope{})
		must(t, err)
		if gotCounts != wantCounts {
			t.Errorf("counts %+v through the broker, %+v from the store", gotCounts, wantCounts)
		}

		var shape loop.ListShape
		var listed []loop.Task
		must(t, c.ListTasks(ctx, loop.ListQuery{Shape: func(s loop.ListShape) error { shape = s; return nil }},
			func(t loop.Task) error { listed = append(listed, t); return nil }))
		var want []loop.Task
		var wantShape loop.ListShape
		must(t, st.ListTasks(ctx, loop.ListQuery{Shape: func(s loop.ListShape) error { wantShape = s; return nil }},
			func(t loop.Task) error { want = append(want, t); return nil }))
		if diff := cmp.Diff(want, listed); diff != "" {
			t.Errorf("list (-store +broker):\n%s", diff)
		}
		if shape != wantShape || shape.Tasks != 2 {
			t.Errorf("list shape %+v through the broker, %+v from the store", shape, wantShape)
		}
		// A callback's error ends the listing and the connection.
		stopErr := errors.New("enough")
		if err := c.ListTasks(ctx, loop.ListQuery{}, func(loop.Task) error { return stopErr }); !errors.Is(err, stopErr) {
			t.Errorf("list stopped by its callback: %v, want %v", err, stopErr)
		}
		if _, err := c.Get(ctx, a); err == nil {
			t.Error("the connection of a listing cut short still serves")
		}
	})
}

// TestPeekModeAgent: the agent of a peek-mode session claims, completes,
// fails, adds tasks and dependencies and notes, each as itself, its
// claims held by its loop.
func TestPeekModeAgent(t *testing.T) {
	eachStore(t, func(t *testing.T, st store) {
		ctx := t.Context()
		a := add(t, st, "First")
		b := add(t, st, "Second")
		plan := peek(st, "agent-a")
		_, c := serve(t, plan)

		got, err := c.Claim(ctx, loop.ClaimParams{TaskID: a, Agent: "agent-a", Lease: time.Hour})
		must(t, err)
		if got.ID != a || got.ClaimedBy != "agent-a" || got.Holder != plan.Holder || got.ClaimMode != loop.ClaimAgent {
			t.Errorf("claim: %s by %s, holder %v, mode %q; want %s by agent-a, held by the loop %v, mode agent",
				got.ID, got.ClaimedBy, got.Holder, got.ClaimMode, a, plan.Holder)
		}
		must(t, c.Complete(ctx, loop.MoveParams{TaskID: a, Message: "did it", By: loop.Actor{Agent: "agent-a"}}))
		// An id-less claim takes the next ready task.
		got, err = c.Claim(ctx, loop.ClaimParams{Agent: "agent-a"})
		must(t, err)
		if got.ID != b || got.LeaseExpiresAt.Sub(got.ClaimedAt) != plan.Lease {
			t.Errorf("claim without an id: %s with a lease of %v; want %s with the run's lease %v", got.ID,
				got.LeaseExpiresAt.Sub(got.ClaimedAt), b, plan.Lease)
		}
		must(t, c.Fail(ctx, loop.MoveParams{TaskID: b, Message: "could not", By: loop.Actor{Agent: "agent-a"}}))
		_, err = c.Claim(ctx, loop.ClaimParams{Agent: "agent-a"})
		wantErr(t, "claim with nothing ready", err, loop.ErrNoReadyTask, "")

		n, err := c.AddTask(ctx, loop.NewTask{Title: "Follow-up", Description: "found on the way", Priority: 1})
		must(t, err)
		m, err := c.AddTask(ctx, loop.NewTask{ID: "x-2", Title: "After it", Priority: 2, BlockedBy: []string{n.ID}})
		must(t, err)
		d, err := c.AddTask(ctx, loop.NewTask{Title: "Later", Priority: 2})
		must(t, err)
		must(t, c.AddDependency(ctx, d.ID, m.ID))
		if err := c.AddDependency(ctx, n.ID, d.ID); err == nil {
			t.Error("a dependency that closes a cycle was added")
		}
		if _, err := c.AddTask(ctx, loop.NewTask{ID: "x-2", Title: "Again", Priority: 2}); err == nil {
			t.Error("a duplicate id was added")
		}
		cur, err := st.Get(ctx, d.ID)
		must(t, err)
		if !slices.Equal(cur.BlockedBy, []string{m.ID}) || m.ID != "x-2" || n.Priority != 1 || n.Description != "found on the way" {
			t.Errorf("added tasks: %+v %+v %+v", n, m, cur)
		}

		// A check the agent writes is marked as its own, whatever the
		// request claims (DESIGN §14); a CheckBy without a check is none.
		k, err := c.AddTask(ctx, loop.NewTask{Title: "Checked", Priority: 2, Check: "go test ./...", CheckBy: ""})
		must(t, err)
		k2, err := c.AddTask(ctx, loop.NewTask{Title: "Checked too", Priority: 2, Check: "make", CheckBy: "agent-z"})
		must(t, err)
		u, err := c.AddTask(ctx, loop.NewTask{Title: "Unchecked", Priority: 2, CheckBy: "agent-a"})
		must(t, err)
		for _, w := range []struct{ id, check, by string }{{k.ID, "go test ./...", "agent-a"}, {k2.ID, "make", "agent-a"}, {u.ID, "", ""}} {
			cur, err := st.Get(ctx, w.id)
			must(t, err)
			if cur.Check != w.check || cur.CheckBy != w.by {
				t.Errorf("task %s added through the broker: check %q by %q, want %q by %q", w.id, cur.Check, cur.CheckBy, w.check, w.by)
			}
		}

		must(t, c.Note(ctx, loop.MoveParams{TaskID: b, Message: "tried twice", By: loop.Actor{Agent: "agent-a"}}))
		logs, err := st.Logs(ctx, b)
		must(t, err)
		last := logs[len(logs)-1]
		if last.Kind != loop.LogNote || last.Message != "tried twice" || last.Actor != "agent-a" {
			t.Errorf("note: last log entry %+v, want a note by agent-a", last)
		}
		err = c.Note(ctx, loop.MoveParams{TaskID: "nope", Message: "x", By: loop.Actor{Agent: "agent-a"}})
		wantErr(t, "note on a missing task", err, loop.ErrNotFound, "nope")

		want := map[string]loop.Status{a: loop.StatusDone, b: loop.StatusFailed}
		for id, s := range want {
			cur, err := st.Get(ctx, id)
			must(t, err)
			if cur.Status != s {
				t.Errorf("task %s is %s, want %s", id, cur.Status, s)
			}
		}
	})
}

// TestRefusals: every move the broker must not make for its agent.
func TestRefusals(t *testing.T) {
	eachStore(t, func(t *testing.T, st store) {
		ctx := t.Context()
		mine := add(t, st, "Mine")
		theirs := add(t, st, "Theirs")
		loops := add(t, st, "The loop's")
		free := add(t, st, "Free")
		_, err := st.Claim(ctx, loop.ClaimParams{TaskID: mine, Agent: "agent-a", Holder: loop.ThisProcess(), Mode: loop.ClaimAgent})
		must(t, err)
		_, err = st.Claim(ctx, loop.ClaimParams{TaskID: theirs, Agent: "agent-b", Holder: loop.ThisProcess(), Mode: loop.ClaimAgent})
		must(t, err)
		_, err = st.Claim(ctx, loop.ClaimParams{TaskID: loops, Agent: "agent-a", Holder: loop.ThisProcess(), Mode: loop.ClaimLoop})
		must(t, err)
		_, c := serve(t, peek(st, "agent-a"))
		as := func(a loop.Actor, id string) loop.MoveParams { return loop.MoveParams{TaskID: id, Message: "m", By: a} }
		me := loop.Actor{Agent: "agent-a"}

		for _, tc := range []struct {
			name string
			call func() error
			want error
			says string
		}{
			{"done of another agent's task", func() error { return c.Complete(ctx, as(me, theirs)) }, loop.ErrNotHolder, "agent-b"},
			{"fail of another agent's task", func() error { return c.Fail(ctx, as(me, theirs)) }, loop.ErrNotHolder, "agent-b"},
			{"done --force", func() error { return c.Complete(ctx, as(loop.Actor{Person: "user-x", Force: true}, theirs)) }, broker.ErrRefused, "Actor.Force is for people; agent agent-a"},
			{"done --force as the agent", func() error { return c.Complete(ctx, as(loop.Actor{Agent: "agent-a", Force: true}, theirs)) }, broker.ErrRefused, "Actor.Force is for people; agent agent-a"},
			{"done as a person", func() error { return c.Complete(ctx, as(loop.Actor{Person: "user-x"}, mine)) }, broker.ErrRefused, "person"},
			{"fail as a person", func() error { return c.Fail(ctx, as(loop.Actor{}, mine)) }, broker.ErrRefused, "person"},
			{"done --agent other", func() error { return c.Complete(ctx, as(loop.Actor{Agent: "agent-b"}, theirs)) }, broker.ErrRefused, "agent-b"},
			{"done as the loop", func() error { return c.Complete(ctx, as(loop.Actor{Agent: "agent-a", Loop: true}, loops)) }, broker.ErrRefused, "loop"},
			{"done of the loop's claim", func() error { return c.Complete(ctx, as(me, loops)) }, loop.ErrLoopClaim, "<task-done>" + loops + "</task-done>"},
			{"fail of the loop's claim", func() error { return c.Fail(ctx, as(me, loops)) }, loop.ErrLoopClaim, "<task-failed>" + loops + "</task-failed>"},
			{"note as a person", func() error { return c.Note(ctx, as(loop.Actor{Person: "user-x"}, free)) }, broker.ErrRefused, "person"},
			{"note as another agent", func() error { return c.Note(ctx, as(loop.Actor{Agent: "agent-b"}, free)) }, broker.ErrRefused, "agent-b"},
			{"claim of a task another agent holds", func() error {
				_, err := c.Claim(ctx, loop.ClaimParams{TaskID: theirs, Agent: "agent-a"})
				return err
			}, loop.ErrNotReady, theirs},
			{"claim --agent other", func() error {
				_, err := c.Claim(ctx, loop.ClaimParams{TaskID: free, Agent: "agent-b"})
				return err
			}, broker.ErrRefused, "agent-b"},
			{"claim as a person", func() error {
				_, err := c.Claim(ctx, loop.ClaimParams{TaskID: free, Agent: "user-x"})
				return err
			}, broker.ErrRefused, "user-x"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := tc.call()
				wantErr(t, tc.name, err, tc.want, tc.says)
				if strings.Contains(tc.name, "--force") {
					wantRefusal(t, err, broker.RefusedForce, "agent-a")
				}
			})
		}
		// Nothing moved.
		for id, want := range map[string]string{mine: "agent-a", theirs: "agent-b", loops: "agent-a", free: ""} {
			cur, err := st.Get(ctx, id)
			must(t, err)
			if cur.ClaimedBy != want {
				t.Errorf("task %s is held by %q, want %q", id, cur.ClaimedBy, want)
			}
			logs, err := st.Logs(ctx, id)
			must(t, err)
			for _, l := range logs {
				if l.Kind == loop.LogNote {
					t.Errorf("task %s got a note: %+v", id, l)
				}
			}
		}
	})
}

// TestSessionKinds: what each kind of session may do — a verifier reads
// only, a loop-claim session claims nothing, a plan session adds.
func TestSessionKinds(t *testing.T) {
	eachStore(t, func(t *testing.T, st store) {
		ctx := t.Context()
		a := add(t, st, "First")
		b := add(t, st, "Second")
		_, err := st.Claim(ctx, loop.ClaimParams{TaskID: a, Agent: "agent-a", Holder: loop.ThisProcess(), Mode: loop.ClaimLoop})
		must(t, err)
		me := loop.Actor{Agent: "agent-a"}

		t.Run("verifier", func(t *testing.T) {
			plan := peek(st, "agent-a")
			plan.ClaimMode, plan.TaskID, plan.ReadOnly = loop.ClaimLoop, a, true
			_, c := serve(t, plan)
			if _, err := c.Get(ctx, a); err != nil {
				t.Errorf("get: %v", err)
			}
			if _, err := c.Counts(ctx, loop.Scope{}); err != nil {
				t.Errorf("counts: %v", err)
			}
			if err := c.ListTasks(ctx, loop.ListQuery{}, func(loop.Task) error { return nil }); err != nil {
				t.Errorf("list: %v", err)
			}
			for name, call := range map[string]func() error{
				"claim":   func() error { _, err := c.Claim(ctx, loop.ClaimParams{TaskID: b, Agent: "agent-a"}); return err },
				"done":    func() error { return c.Complete(ctx, loop.MoveParams{TaskID: a, By: me}) },
				"fail":    func() error { return c.Fail(ctx, loop.MoveParams{TaskID: a, Message: "m", By: me}) },
				"add":     func() error { _, err := c.AddTask(ctx, loop.NewTask{Title: "x", Priority: 2}); return err },
				"dep add": func() error { return c.AddDependency(ctx, b, a) },
				"note":    func() error { return c.Note(ctx, loop.MoveParams{TaskID: a, Message: "m", By: me}) },
			} {
				wantErr(t, name, call(), broker.ErrRefused, "verifier")
			}
		})
		t.Run("loop claim", func(t *testing.T) {
			plan := peek(st, "agent-a")
			plan.ClaimMode, plan.TaskID = loop.ClaimLoop, a
			_, c := serve(t, plan)
			_, err := c.Claim(ctx, loop.ClaimParams{TaskID: b, Agent: "agent-a"})
			wantErr(t, "claim", err, broker.ErrRefused, "the ralph loop claimed task "+a+" for you")
			wantErr(t, "done", c.Complete(ctx, loop.MoveParams{TaskID: a, By: me}), loop.ErrLoopClaim, "<task-done>")
			if _, err := c.AddTask(ctx, loop.NewTask{Title: "Follow-up", Priority: 2}); err != nil {
				t.Errorf("a follow-up task: %v", err)
			}
		})
		t.Run("plan", func(t *testing.T) {
			plan := peek(st, "agent-p")
			plan.Mode, plan.ClaimMode = loop.ModePlan, loop.ClaimLoop
			_, c := serve(t, plan)
			_, err := c.Claim(ctx, loop.ClaimParams{Agent: "agent-p"})
			wantErr(t, "claim", err, broker.ErrRefused, "peek mode only")
			wantRefusal(t, err, broker.RefusedClaim, "agent-p")
			n, err := c.AddTask(ctx, loop.NewTask{Title: "Planned", Priority: 2})
			must(t, err)
			must(t, c.AddDependency(ctx, n.ID, b))
		})
	})
}

// bare is a plan that is a loop.TaskStore and nothing more.
type bare struct{ loop.TaskStore }

// TestUnsupported: a store without the optional interfaces answers
// ErrUnsupported, and the rest still works.
func TestUnsupported(t *testing.T) {
	ms := looptest.NewMemStore(nil)
	a := add(t, ms, "First")
	_, c := serve(t, peek(bare{ms}, "agent-a"))
	ctx := t.Context()
	_, err := c.AddTask(ctx, loop.NewTask{Title: "x", Priority: 2})
	wantErr(t, "add", err, broker.ErrUnsupported, "adding tasks")
	wantErr(t, "dep add", c.AddDependency(ctx, a, a), broker.ErrUnsupported, "dependencies")
	wantErr(t, "note", c.Note(ctx, loop.MoveParams{TaskID: a, By: loop.Actor{Agent: "agent-a"}}), broker.ErrUnsupported, "notes")
	wantErr(t, "list", c.ListTasks(ctx, loop.ListQuery{}, func(loop.Task) error { return nil }), broker.ErrUnsupported, "listing")
	if _, err := c.Claim(ctx, loop.ClaimParams{TaskID: a, Agent: "agent-a"}); err != nil {
		t.Errorf("claim: %v", err)
	}
}

// TestConcurrentSessions: agents of several sessions claim and complete
// at once, each through its own broker, on one plan: every task is done
// once, by one agent, and no agent's move lands on another's task.
func TestConcurrentSessions(t *testing.T) {
	eachStore(t, func(t *testing.T, st store) {
		const agents, tasks = 4, 24
		for i := range tasks {
			add(t, st, fmt.Sprintf("Task %d", i))
		}
		var mu sync.Mutex
		doneBy := map[string]string{}
		var wg sync.WaitGroup
		for i := range agents {
			agent := fmt.Sprintf("agent-%d", i)
			_, c := serve(t, peek(st, agent))
			wg.Go(func() {
				ctx := t.Context()
				for {
					task, err := c.Claim(ctx, loop.ClaimParams{Agent: agent})
					if errors.Is(err, loop.ErrNoReadyTask) {
						return
					}
					if err != nil {
						t.Errorf("%s: claim: %v", agent, err)
						return
					}
					if err := c.Complete(ctx, loop.MoveParams{TaskID: task.ID, By: loop.Actor{Agent: agent}}); err != nil {
						t.Errorf("%s: done %s: %v", agent, task.ID, err)
						return
					}
					mu.Lock()
					if other, ok := doneBy[task.ID]; ok {
						t.Errorf("task %s done by %s and by %s", task.ID, other, agent)
					}
					doneBy[task.ID] = agent
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		counts, err := st.Counts(t.Context(), loop.Scope{})
		must(t, err)
		if counts.Done != tasks || len(doneBy) != tasks {
			t.Errorf("%d tasks done (%d seen), want %d", counts.Done, len(doneBy), tasks)
		}
	})
}

// TestServeEnds: a cancelled context stops serving — open connections
// are closed, Serve returns nil — and Close removes the socket and its
// directory.
func TestServeEnds(t *testing.T) {
	ms := looptest.NewMemStore(nil)
	add(t, ms, "First")
	srv, err := broker.Listen("", peek(ms, "agent-a"))
	must(t, err)
	must(t, srv.Admit(os.Getpid()))
	fi, err := os.Stat(srv.Dir())
	must(t, err)
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("the socket's directory has mode %v, want 0700", fi.Mode().Perm())
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	c := dial(t, srv.Path())
	if _, err := c.Counts(t.Context(), loop.Scope{}); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after its context was cancelled")
	}
	if _, err := c.Counts(t.Context(), loop.Scope{}); err == nil {
		t.Error("a connection still served after the context was cancelled")
	}
	must(t, srv.Close())
	if _, err := os.Lstat(srv.Dir()); !os.IsNotExist(err) {
		t.Errorf("the socket's directory is still there after Close: %v", err)
	}
	if _, err := broker.Dial(t.Context(), srv.Path()); !errors.Is(err, broker.ErrUnreachable) {
		t.Errorf("dial after close: %v, want ErrUnreachable", err)
	}
}

// TestShortSocketPath: a temp directory too long for sun_path puts the
// socket under /tmp.
func TestShortSocketPath(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 90))
	must(t, os.MkdirAll(long, 0o755))
	t.Setenv("TMPDIR", long)
	srv, err := broker.Listen("", peek(looptest.NewMemStore(nil), "agent-a"))
	must(t, err)
	defer srv.Close()
	if len(srv.Path()) > 100 || !strings.HasPrefix(srv.Path(), "/tmp/") {
		t.Errorf("socket path %s (%d bytes)", srv.Path(), len(srv.Path()))
	}
}

// TestBadRequests: a request over MaxRequest, or one that is not JSON,
// is refused and ends the connection.
func TestBadRequests(t *testing.T) {
	srv, _ := serve(t, peek(looptest.NewMemStore(nil), "agent-a"))
	for name, req := range map[string]string{
		"too long": `{"op":"get","id":"` + strings.Repeat("x", broker.MaxRequest) + "\"}\n",
		"not json": "hello\n",
		"unknown":  `{"op":"release"}` + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("unix", srv.Path())
			must(t, err)
			defer conn.Close()
			go conn.Write([]byte(req))
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			line, err := bufio.NewReader(conn).ReadString('\n')
			must(t, err)
			if !strings.Contains(line, `"refused"`) {
				t.Errorf("answer %s, want a refusal", line)
			}
		})
	}
}
